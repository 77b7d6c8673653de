"""What does loopfuse's plugin cost OpenCode per tool call? The real OpenCode, timed.

Usage::

    python benchmarks/bench_opencode.py [--runs 3] [--calls 20]

OpenCode runs hooks in-process (a plugin), so a call costs the agent what the plugin
does: start a process, write the event to it, wait for its answer; twice per call
(before and after). This runs the pinned OpenCode (``.ci/agent-clis``, headless,
offline, against the fake model of tests/agent_model.py) on ``--calls`` different shell
calls, with loopfuse's plugin (as ``loopfuse init`` writes it, state in a temporary
folder) running either ``loopfuse hook --agent opencode`` or a no-op Python that reads
its event (what any hook written in Python costs at least), and without a plugin.

Two figures, each the median over ``--runs`` runs of each set-up, interleaved:

- **in the plugin**: how long OpenCode waited for each hook, from the plugin's spawn to
  the answer read (the plugin's ``ask``, timed by a copy of the plugin that records it),
  before and after a call; their sum is what a call costs the agent;
- **per call, in the model's clock**: from the request that asked for the first call to
  the one that carried the last answer, divided by the calls: OpenCode's own work too,
  so the difference between set-ups is the plugin's cost, blurred by the machine's load.

Figures move with the machine's load: compare the numbers of one run.
"""

from __future__ import annotations

import argparse
import json
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

# The plugin's ask(), wrapped: each answer's wait appended to $LOOPFUSE_BENCH_TIMES.
TIMED = """
import { appendFileSync } from "node:fs"
function ask(event) {
  const started = performance.now()
  return untimedAsk(event).then((answer) => {
    const line = { event: event.hook_event_name, ms: performance.now() - started }
    appendFileSync(process.env.LOOPFUSE_BENCH_TIMES, JSON.stringify(line) + "\\n")
    return answer
  })
}
"""


class TimedModel(OpenCodeModel):
    """The fake model, noting when each of the agent's turns was asked for."""

    def play(self, path: str, body: Any, shell_tool: str) -> Reply | None:
        reply = super().play(path, body, shell_tool)
        if reply is not None:
            self.times = [*getattr(self, "times", []), time.monotonic()]
        return reply


def timed_plugin(command: str) -> str:
    """loopfuse's plugin for ``command``, its ``ask`` timed."""
    plugin = CLI.installer.render(command)
    assert plugin.count("function ask(event) {") == 1
    return plugin.replace("function ask(event) {", "function untimedAsk(event) {") + TIMED


def one_run(root: Path, command: str | None, calls: int) -> tuple[float, dict[str, list[float]]]:
    """Seconds per call of one run with the plugin running ``command`` (no plugin: None),
    and the plugin's waits, by event."""
    home = prepared(root)
    times = root / "times.jsonl"
    if command is not None:
        plugin = user_folder(home) / "plugins" / "loopfuse.js"
        plugin.parent.mkdir(parents=True)
        plugin.write_text(timed_plugin(command), encoding="utf-8")
    script = lambda turn: Reply((f"true {turn}",)) if turn < calls else Reply()  # noqa: E731
    with TimedModel(script) as model:
        run = run_opencode(home, model, extra={"LOOPFUSE_BENCH_TIMES": str(times)})
    if run.returncode != 0 or len(model.times) != calls + 1:
        raise SystemExit(f"the run failed: {run.stderr[-2000:]}")
    waits: dict[str, list[float]] = {}
    if times.exists():
        for line in times.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            waits.setdefault(record["event"], []).append(record["ms"])
    return (model.times[-1] - model.times[0]) / calls, waits


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
    per_call: dict[str, list[float]] = {name: [] for name in setups}
    waits: dict[str, dict[str, list[float]]] = {name: {} for name in setups}
    with tempfile.TemporaryDirectory() as folder:
        for run in range(args.runs):
            for index, (name, command) in enumerate(setups.items()):
                seconds, found = one_run(Path(folder) / f"{run}-{index}", command, args.calls)
                per_call[name].append(seconds)
                for event, values in found.items():
                    waits[name].setdefault(event, []).extend(values)
    print(f"OpenCode, median of {args.runs} runs of {args.calls} calls; milliseconds")
    print("set-up                   in the plugin: before  after   a call   per call (model)")
    base = statistics.median(per_call["no plugin"])
    for name in setups:
        found = waits[name]
        before = statistics.median(found.get("tool.execute.before", [0.0]))
        after = statistics.median(found.get("tool.execute.after", [0.0]))
        median = statistics.median(per_call[name])
        extra = "" if name == "no plugin" else f" (+{(median - base) * 1000:.1f})"
        print(
            f"{name:24} {before:20.1f} {after:6.1f} {before + after:8.1f}"
            f"   {median * 1000:7.1f}{extra}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
