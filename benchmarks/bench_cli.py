"""Is ``loopfuse scan`` linear in a run's length? Times, ratios and peak memory.

Usage::

    python benchmarks/bench_cli.py [--turns 200,2000,20000] [--log-mb 100] [--keep DIR]

Writes deterministic inputs (``bench_scan.build_turns``: a coding agent's turns,
shell commands, file views and test output, every 25th turn a repeat, the last
quarter a loop in progress) and scans them:

- one trajectory per ``--turns`` value, each scanned in this process, best of a few
  interleaved rounds; the ratio of each run to the one ten times shorter is the number
  to read (linear: about 10x);
- a JSON Lines proxy log of about ``--log-mb`` MB (20,000 requests of about 5 KB: the
  requests of several agent sessions, each line the session's next request, and one
  client re-sending one request), scanned by the real command in a child process, for
  its wall time and peak memory (``ru_maxrss``) next to the file's size; it must find
  the re-sent request (exit status 1), else the benchmark fails (exit status 1).

Figures move with the machine's load: compare ratios taken in one run. The inputs are
deleted at the end unless ``--keep`` names a folder for them. ``--turns 20,200 --log-mb 1``
is a smoke run (its figures noise).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scan import build_turns, openai_body
from loopfuse.cli.config import Settings
from loopfuse.cli.decisions import scan_source
from loopfuse.cli.readers import read_path
from loopfuse.detector import answers


def write_trajectory(folder: Path, turns: int) -> Path:
    body = json.loads(openai_body(build_turns(turns, loop_tail=turns // 4)))
    path = folder / f"run-{turns}.json"
    path.write_text(json.dumps({"outcome": "failed", **body}), encoding="utf-8")
    return path


def write_log(folder: Path, megabytes: int) -> tuple[Path, int]:
    """About ``megabytes`` MB of proxy log: 8 agent sessions growing turn by turn (each
    line the session's whole next request, cut back to a short history so that a line
    stays near 5 KB) and one client re-sending one request between them."""
    path = folder / "proxy.jsonl"
    turns = build_turns(400, seed=11)
    storm = {"model": "gpt-4o", "temperature": 0, "messages": [{"role": "user", "content": "x"}]}
    lines = 0
    with path.open("w", encoding="utf-8") as out:
        size, step = 0, 0
        while size < megabytes * 1_000_000:
            session = step % 9
            if session == 8:
                body: dict[str, Any] = storm
            else:
                upto = step // 9 % 40 + 1
                history = turns[session * 40 : session * 40 + upto][-3:]
                body = json.loads(openai_body(history))
            line = json.dumps({"session": f"s{session}", "time": step * 0.5, "body": body})
            out.write(line + "\n")
            size += len(line) + 1
            step += 1
            lines += 1
    return path, lines


def cold_caches() -> None:
    """Forget the answers the detector keeps between requests (normal forms, error
    verdicts): a round must not reuse what an earlier round of the same file left there,
    which only a short file fits entirely and would make it look cheaper per turn."""
    answers._NORMAL_FORMS.clear()
    answers._ERROR_WINDOWS.clear()
    answers._FRAMEWORK_ERRORS.clear()


def scan_seconds(path: Path, rounds: int) -> tuple[float, int]:
    best, requests = float("inf"), 0
    settings = Settings()
    for _ in range(rounds):
        cold_caches()
        start = time.perf_counter()
        result, _ = scan_source(read_path(path), settings)
        best = min(best, time.perf_counter() - start)
        requests = result.requests
    return best, requests


def command(path: Path) -> tuple[float, int, int, str]:
    """Wall seconds, exit status, peak memory (bytes) and stderr of ``loopfuse scan PATH``."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "loopfuse", "scan", str(path), "--no-progress"],
        capture_output=True,
        check=False,
    )
    wall = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, done.returncode, peak_kib * 1024, done.stderr.decode("utf-8", "replace")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--turns", default="200,2000,20000", help="trajectory lengths, comma-separated"
    )
    parser.add_argument(
        "--log-mb", type=int, default=100, help="size of the proxy log in MB (0: no log)"
    )
    parser.add_argument("--keep", type=Path, help="write the inputs here and keep them")
    args = parser.parse_args(argv)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        return measure(args, args.keep)
    # Without --keep the inputs (about --log-mb MB and more) go when the run ends.
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as temporary:
        return measure(args, Path(temporary))


def measure(args: argparse.Namespace, folder: Path) -> int:
    """Write the inputs into ``folder``, scan them and print the figures."""
    sizes = [int(n) for n in args.turns.split(",")]
    print(f"inputs in {folder}; {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.1f}")
    print("| trajectory | size | requests | scan | per turn | vs 10x shorter |")
    print("|---|---|---|---|---|---|")
    previous: tuple[int, float] | None = None
    for turns in sizes:
        path = write_trajectory(folder, turns)
        seconds, requests = scan_seconds(path, rounds=3 if turns <= 2000 else 1)
        ratio = ""
        if previous is not None:
            ratio = f"{seconds / previous[1]:.1f}x for {turns / previous[0]:.0f}x the turns"
        mb = path.stat().st_size / 1e6
        per_turn = seconds / turns * 1e6
        print(f"| {turns:,} turns | {mb:.1f} MB | {requests:,} | {seconds:.2f} s |"
              f" {per_turn:.0f} us | {ratio} |")  # fmt: skip
        previous = (turns, seconds)
    if args.log_mb:
        log, lines = write_log(folder, args.log_mb)
        wall, status, peak, stderr = command(log)
        size = log.stat().st_size
        print(
            f"\nJSON Lines log: {size / 1e6:.0f} MB, {lines:,} requests: `loopfuse scan` "
            f"{wall:.1f} s wall (exit {status}), peak memory {peak / 1e6:.0f} MB "
            f"({peak / size:.1f}x the file)"
        )
        # The log holds one client re-sending one request: a loop, exit status 1. Any
        # other status (or a traceback) means the figures above timed a failure.
        if status != 1 or "Traceback" in stderr:
            print(f"`loopfuse scan` of the log did not find its loop:\n{stderr}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
