"""What does loopfuse's plugin cost OpenCode per tool call? The real OpenCode, timed.

Usage::

    python benchmarks/bench_opencode.py [--runs 3] [--calls 20]

OpenCode runs hooks in-process (a plugin), so a call costs the agent what the plugin
does: start a process, write the event to it, wait for its answer; twice per call
(before and after). This runs the pinned OpenCode (``.ci/agent-clis``, headless,
offline, against the fake model of tests/agent_model.py) on ``--calls`` different shell
calls, and times the calls in the model's clock: from the request that asked for the
first call to the one that carried the last answer, divided by the calls. Three set-ups
are timed, each ``--runs`` times, interleaved: no plugin; loopfuse's plugin running a
no-op Python that reads its event (what any hook written in Python costs at least); and
loopfuse's plugin running ``loopfuse hook --agent opencode`` (as ``loopfuse init``
installs it, state in a temporary folder).

Printed: the median milliseconds per call of each set-up, and what the plugin adds over
no plugin. Figures move with the machine's load: compare the numbers of one run.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from agent_model import Reply
from loopfuse.harness.opencode import CLI
from opencode_cli import OPENCODE, OpenCodeModel, prepared, run_opencode, user_folder


class TimedModel(OpenCodeModel):
    """The fake model, noting when each of the agent's turns was asked for."""

    def play(self, path: str, body: Any, shell_tool: str) -> Reply | None:
        reply = super().play(path, body, shell_tool)
        if reply is not None:
            self.times = [*getattr(self, "times", []), time.monotonic()]
        return reply


def per_call(root: Path, command: str | None, calls: int) -> float:
    """Seconds per call of one run with the plugin running ``command`` (no plugin: None)."""
    home = prepared(root)
    if command is not None:
        plugin = user_folder(home) / "plugins" / "loopfuse.js"
        plugin.parent.mkdir(parents=True)
        plugin.write_text(CLI.installer.render(command), encoding="utf-8")
    script = lambda turn: Reply((f"true {turn}",)) if turn < calls else Reply()  # noqa: E731
    with TimedModel(script) as model:
        run = run_opencode(home, model)
    if run.returncode != 0 or len(model.times) != calls + 1:
        raise SystemExit(f"the run failed: {run.stderr[-2000:]}")
    return (model.times[-1] - model.times[0]) / calls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args(argv)
    if not OPENCODE.exists():
        raise SystemExit("OpenCode is not installed: npm ci --prefix .ci/agent-clis")
    installed = Path(sys.executable).parent / "loopfuse"
    hook = [str(installed)] if installed.exists() else [sys.executable, "-m", "loopfuse"]
    noop = [sys.executable, "-c", "import sys; sys.stdin.buffer.read()"]
    setups = {
        "no plugin": None,
        "plugin, no-op Python": shlex.join(noop),
        "plugin, loopfuse hook": shlex.join([*hook, "hook", "--agent", "opencode"]),
    }
    times: dict[str, list[float]] = {name: [] for name in setups}
    with tempfile.TemporaryDirectory() as folder:
        for run in range(args.runs):
            for index, (name, command) in enumerate(setups.items()):
                root = Path(folder) / f"{run}-{index}"
                times[name].append(per_call(root, command, args.calls))
    base = statistics.median(times["no plugin"])
    print(f"OpenCode, ms per tool call, median of {args.runs} runs of {args.calls} calls")
    for name, values in times.items():
        median = statistics.median(values)
        extra = "" if name == "no plugin" else f"  (+{(median - base) * 1000:.1f})"
        print(f"{name:24} {median * 1000:7.1f}{extra}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
