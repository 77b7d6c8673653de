"""Cost of fingerprinting and of LoopBreaker checks, as ratios to ``json.loads``.

Run: ``python benchmarks/bench_intent.py [--rounds 15]`` (``--rounds 1``: a smoke run, its
figures noise). Every figure is measured in this run on this machine, round-robin (see
``timing.py``); the baseline is ``json.loads`` of the same ~47 KB agent request (system
prompt, 20 tool turns, 15 tools).

Targets: with orjson (the ``fast`` extra) every per-request figure -- ``fingerprint``,
``LoopBreaker.check_request``, ``scan`` -- within 1.3x json.loads (issue 12; ``RequestKey.
from_request`` is in bench_dedup.py), <= 3.0x without orjson (issue 2);
``LoopBreaker.check`` flat (within 1.5x) from 1 to 100,000 live sessions.

Each row names its JSON backend and whether the C accelerator (``intent._speedups``: the
canonical writer and the nesting check, built by a normal install wherever a compiler
exists) ran: ``+C`` with it, ``py`` with the pure-Python twins that an install without a
compiler uses.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable

from bodies import agent_request_bytes
from loopfuse import LoopBreaker, intent, scan
from loopfuse.intent import _json, _native
from timing import add_rounds, interleaved, report


def with_backend(name: str, c: bool, fn: Callable[[], object]) -> Callable[[], object]:
    def run() -> object:
        _json._set_backend(name)
        _native.set_c_extension(c)
        return fn()

    return run


def intent_costs(body: bytes, rounds: int) -> None:
    path = "/v1/chat/completions"
    breaker = LoopBreaker(window=30, max_repeats=10**9, clock=lambda: 0.0)
    candidates: dict[str, Callable[[], object]] = {
        "json.loads (baseline)": lambda: json.loads(body)
    }
    backends = ["json", "orjson"] if _json._orjson is not None else ["json"]
    extension = [True, False] if _native._BUILT is not None else [False]
    for name in backends:
        for c in extension:
            tag = f"[{name} {'+C' if c else 'py'}]"
            candidates[f"intent.parse {tag}"] = with_backend(name, c, lambda: intent.parse(body))
            candidates[f"intent.extract_intent {tag}"] = with_backend(
                name, c, lambda: intent.extract_intent(body)
            )
            candidates[f"intent.fingerprint {tag}"] = with_backend(
                name, c, lambda: intent.fingerprint(body, path)
            )
            candidates[f"LoopBreaker.check_request {tag}"] = with_backend(
                name, c, lambda: breaker.check_request("s", body, path)
            )
            candidates[f"loopfuse.scan {tag}"] = with_backend(name, c, lambda: scan(body))
    original = intent.json_backend()
    try:
        results = interleaved(candidates, rounds=rounds)
    finally:
        _json._set_backend(original)
        _native.set_c_extension(_native._BUILT is not None)
    report(results, "json.loads (baseline)")


def session_costs(rounds: int) -> None:
    """``check`` with N live sessions, each check on a random one of them (fake clock)."""
    candidates: dict[str, Callable[[], object]] = {}
    for sessions in (1, 100, 10_000, 100_000):
        breaker = LoopBreaker(window=3600, max_repeats=5, max_sessions=sessions, clock=lambda: 0.0)
        names = [f"session-{i}" for i in range(sessions)]
        for i, name in enumerate(names):
            breaker.check(name, i)
        order = [random.Random(sessions).randrange(sessions) for _ in range(4096)]
        position = [0]

        def one(breaker: LoopBreaker = breaker, names: list[str] = names,
                order: list[int] = order, position: list[int] = position) -> None:  # fmt: skip
            i = order[position[0] & 4095]
            position[0] += 1
            breaker.check(names[i], i & 3)

        candidates[f"LoopBreaker.check, {sessions:,} live sessions"] = one
    results = interleaved(candidates, number=2000, rounds=min(rounds, 9))
    report(results, "LoopBreaker.check, 1 live sessions")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_rounds(parser)
    rounds = parser.parse_args(argv).rounds
    body = agent_request_bytes()
    print(
        f"body: {len(body):,} bytes; orjson installed: {_json._orjson is not None}; "
        f"C extension built: {_native._BUILT is not None}"
    )
    intent_costs(body, rounds)
    print()
    session_costs(rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
