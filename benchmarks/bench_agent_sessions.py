"""What does reading a CLI's transcript add to ``loopfuse scan``? Ratios to a request body.

Usage::

    python benchmarks/bench_agent_sessions.py [--turns 2000,20000]

For each ``--turns`` value, the same run (``bench_scan.build_turns``: shell commands,
file views and edits, every 25th turn a repeat, the last quarter a loop) is written
four ways: an Anthropic request body (the baseline: what ``scan`` read before) and the
transcripts Claude Code, Codex and Gemini CLI keep (``tests/agent_transcripts.py``, in
the formats they write: Claude's one line per content block, Codex's events and usage
lines, Gemini's records written again under the same id). Each is read and scanned in
this process (``scan_file(read_path(...))``), best of a few interleaved rounds; the
ratio to the baseline is the number to read (the transcripts hold more lines than the
body holds messages, so above 1x), and it must not grow with the run's length.
``--turns 20,200`` is a smoke run (its figures noise).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from agent_transcripts import Turn, claude_session, codex_session, gemini_session, write_lines
from bench_scan import anthropic_body, build_turns
from loopfuse.cli.config import Settings
from loopfuse.cli.decisions import scan_file
from loopfuse.cli.readers import read_path
from loopfuse.detector import answers


def shell_turns(turns: int) -> list[Turn]:
    """``build_turns`` as shell calls (an edit's arguments as its command line)."""
    out = []
    for _, args, _, result in build_turns(turns, loop_tail=turns // 4):
        command = args.get("command") or json.dumps(args)
        out.append(Turn(command, result, failed=result == "no such dir"))
    return out


def write_inputs(folder: Path, turns: int) -> dict[str, Path]:
    run = shell_turns(turns)
    baseline = folder / f"body-{turns}.json"
    steps = [("Bash", {"command": t.command}, "", t.answer) for t in run]
    baseline.write_bytes(anthropic_body(steps))
    return {
        "request body (baseline)": baseline,
        "Claude Code": write_lines(folder / f"claude-{turns}.jsonl", claude_session("s", run)),
        "Codex": write_lines(folder / f"rollout-{turns}.jsonl", codex_session("t", run)),
        "Gemini CLI": write_lines(folder / f"session-{turns}.jsonl", gemini_session("g", run)),
    }


def best_seconds(jobs: list[Callable[[], int]], rounds: int) -> tuple[list[float], list[int]]:
    """Best time of each job, in interleaved rounds (drift in load hits all alike)."""
    best = [float("inf")] * len(jobs)
    counts = [0] * len(jobs)
    for _ in range(rounds):
        for index, job in enumerate(jobs):
            for cache in (answers._NORMAL_FORMS, answers._ERROR_WINDOWS, answers._FRAMEWORK_ERRORS):
                cache.clear()  # each round reads the answers cold, as a first scan does
            start = time.perf_counter()
            counts[index] = job()
            best[index] = min(best[index], time.perf_counter() - start)
    return best, counts


def requests_of(path: Path) -> Callable[[], int]:
    settings = Settings()

    def job() -> int:
        results, _ = scan_file(read_path(path), settings)
        return sum(result.requests for result in results)

    return job


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--turns", default="2000,20000", help="run lengths, comma-separated (default 2000,20000)"
    )
    args = parser.parse_args(argv)
    # The inputs (tens of MB at 20,000 turns) go when the run ends, even on an error.
    with tempfile.TemporaryDirectory(prefix="bench-agent-sessions-") as folder:
        return measure([int(n) for n in args.turns.split(",")], Path(folder))


def measure(sizes: list[int], folder: Path) -> int:
    """Write each size's inputs into ``folder``, scan them and print the table."""
    print(f"{os.cpu_count()} CPUs; load {os.getloadavg()[0]:.1f}")
    print("| turns | input | size | requests | scan | vs the request body |")
    print("|---|---|---|---|---|---|")
    for turns in sizes:
        inputs = write_inputs(folder, turns)
        seconds, counts = best_seconds(
            [requests_of(path) for path in inputs.values()], rounds=3 if turns <= 2000 else 1
        )
        for (name, path), took, count in zip(inputs.items(), seconds, counts, strict=True):
            mb = path.stat().st_size / 1e6
            print(
                f"| {turns:,} | {name} | {mb:.1f} MB | {count:,} | {took:.2f} s |"
                f" {took / seconds[0]:.2f}x |"
            )
        for path in inputs.values():
            path.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
