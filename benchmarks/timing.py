"""Timing helpers shared by the benchmarks: interleaved rounds, best of each.

A shared machine's load comes and goes; measuring every candidate once per round, in
turn, and keeping each one's best round makes ratios measured in one run comparable.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable


def interleaved(
    candidates: dict[str, Callable[[], object]], number: int = 100, rounds: int = 15
) -> dict[str, float]:
    """Best seconds per call of each candidate, measured round-robin."""
    best = dict.fromkeys(candidates, float("inf"))
    for _ in range(rounds):
        for name, fn in candidates.items():
            start = time.perf_counter()
            for _ in range(number):
                fn()
            best[name] = min(best[name], (time.perf_counter() - start) / number)
    return best


def report(results: dict[str, float], baseline: str) -> None:
    """Print each result in microseconds and as a ratio to ``baseline``."""
    base = results[baseline]
    for name, seconds in results.items():
        print(f"  {name:<44} {seconds * 1e6:10.1f} us {seconds / base:7.2f}x")


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def add_rounds(parser: argparse.ArgumentParser, default: int = 15) -> None:
    """The ``--rounds`` option of the ratio benchmarks (``--rounds 1``: a smoke run, as
    ``tests/test_benchmarks_run.py`` makes; its figures are noise)."""
    parser.add_argument(
        "--rounds",
        type=positive,
        default=default,
        help=f"interleaved rounds per figure, the best kept (default {default}; 1: a smoke run)",
    )
