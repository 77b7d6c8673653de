"""What does loopfuse's extension cost pi per tool call? The real pi, timed end to end.

Usage::

    python benchmarks/bench_pi_extension.py [--rounds 5] [--calls 20]

pi runs its extensions in its own process (docs/agents.md, "pi"): loopfuse's starts
``loopfuse hook --agent pi`` before each tool call and after it, and waits for its
answer. What that costs the agent is timed here with the real pi (``.ci/agent-clis``),
headless against the tests' fake model on loopback (tests/pi_e2e.py), on a run of
``--calls`` different quick calls (``echo N``), with each of:

- no extension (the baseline);
- the extension running ``/bin/true`` (the cost of a process start and the JSON
  round trip alone);
- the extension running a no-op Python (``python -c pass``);
- the extension running ``loopfuse hook --agent pi`` (the installed console script
  beside this Python, as ``loopfuse init`` writes it), with its state in a fresh folder.

Printed: the median run time of each over ``--rounds`` rounds (interleaved), wall and CPU
(pi's and every process it started), and what each adds per tool call over the baseline
(a call's two hooks; the prompt's one hook spread over the calls). Wall figures move with
the machine's load (compare one run's); CPU figures much less.
"""

from __future__ import annotations

import argparse
import json
import resource
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from agent_clis import Home, executable
from agent_model import commands_then_answer
from loopfuse.harness.pi import CLI
from pi_e2e import PiModel, agent_dir, run_pi


def loopfuse() -> list[str]:
    installed = Path(sys.executable).parent / "loopfuse"
    return [str(installed)] if installed.exists() else [sys.executable, "-m", "loopfuse"]


def timed_run(root: Path, command: list[str] | None, calls: int) -> tuple[float, float]:
    """Seconds of one pi run of ``calls`` calls, with the extension running ``command``:
    its wall time, and the CPU time of pi and every process it started (user + system:
    what the machine's load does not change)."""
    home = Home(root).make()
    if command is not None:
        folder = agent_dir(home) / "extensions"
        folder.mkdir(parents=True)
        text = CLI.installer.install("", shlex.join(command), lambda _: True)
        (folder / "loopfuse.ts").write_text(text, encoding="utf-8")
    with PiModel(commands_then_answer(*(f"echo {i}" for i in range(calls)))) as model:
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        run = run_pi(home, model)
        seconds = time.perf_counter() - start
        now = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != 0 or len(model.turns) != calls + 1:
        raise SystemExit(f"pi failed: {run.stderr[-2000:]}")
    return seconds, (now.ru_utime - used.ru_utime) + (now.ru_stime - used.ru_stime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args(argv)
    if executable("pi") is None:
        raise SystemExit("pi is not installed: npm ci --prefix .ci/agent-clis")
    variants: dict[str, list[str] | None] = {
        "no extension": None,
        "/bin/true": ["/bin/true"],
        "python -c pass": [sys.executable, "-c", "pass"],
        "loopfuse hook": [*loopfuse(), "hook", "--agent", "pi"],
    }
    wall: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory() as folder:
        for r in range(args.rounds):
            for name, command in variants.items():
                root = Path(folder) / f"{r}-{name.replace('/', '_').replace(' ', '_')}"
                seconds, used = timed_run(root, command, args.calls)
                wall[name].append(seconds)
                cpu[name].append(used)
    medians = {name: (statistics.median(wall[name]), statistics.median(cpu[name])) for name in wall}
    base_wall, base_cpu = medians["no extension"]
    print(f"pi, {args.calls} tool calls a run, median of {args.rounds} runs")
    print("extension runs        run: wall (s) [CPU]   per call over no extension: wall (ms) [CPU]")
    for name, (seconds, used) in medians.items():
        extra = (seconds - base_wall) / args.calls * 1000
        extra_cpu = (used - base_cpu) / args.calls * 1000
        print(f"{name:20} {seconds:8.2f} [{used:6.2f}]   {extra:8.1f} [{extra_cpu:6.1f}]")
    print(json.dumps(medians))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
