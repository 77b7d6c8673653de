"""Cost of fingerprinting and of LoopBreaker checks, as ratios to ``json.loads``.

Run: ``python benchmarks/bench_intent.py``. Every figure is measured in this run on
this machine; the baseline is ``json.loads`` of the same ~50 KB agent request.

Targets (issue 2): ``intent.fingerprint`` <= 1.0x json.loads with orjson (the ``fast``
extra), <= 3.0x without; ``LoopBreaker.check`` flat (within 1.5x) from 1 to 100,000
live sessions.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from bodies import agent_request_bytes
from loopfuse import LoopBreaker, intent
from loopfuse.intent import _json


def best_of(fn: Callable[[], object], number: int, repeat: int = 7) -> float:
    """Best mean seconds per call over ``repeat`` rounds of ``number`` calls."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def check_cost(sessions: int) -> float:
    """Seconds per ``check`` with ``sessions`` live sessions (fake clock, all live)."""
    now = [0.0]
    breaker = LoopBreaker(
        window=3600, max_repeats=5, max_sessions=sessions + 1, clock=lambda: now[0]
    )
    for i in range(sessions):
        breaker.check(f"session-{i}", i)
    names = [f"session-{i}" for i in range(sessions)]
    count = len(names)
    state = [0]

    def one() -> None:
        i = state[0] = (state[0] + 7919) % count
        breaker.check(names[i], i & 3)

    return best_of(one, 20_000, repeat=5)


def measure(backend: str, body: bytes) -> list[tuple[str, float]]:
    breaker = LoopBreaker(window=30, max_repeats=10**9, clock=lambda: 0.0)
    path = "/v1/chat/completions"
    return [
        (f"intent.parse [{backend}]", best_of(lambda: intent.parse(body), 300)),
        (f"intent.extract_intent [{backend}]", best_of(lambda: intent.extract_intent(body), 300)),
        (f"intent.fingerprint [{backend}]", best_of(lambda: intent.fingerprint(body, path), 300)),
        (
            f"LoopBreaker.check_request [{backend}]",
            best_of(lambda: breaker.check_request("s", body, path), 300),
        ),
    ]


def main() -> None:
    body = agent_request_bytes()
    print(f"body: {len(body):,} bytes, orjson available: {_json._orjson is not None}")
    base = best_of(lambda: json.loads(body), 300)
    print(f"{'json.loads (baseline)':<42} {base * 1e6:9.1f} us   1.00x")
    rows: list[tuple[str, float]] = []
    backends = ["json", "orjson"] if _json._orjson is not None else ["json"]
    original = intent.json_backend()
    for backend in backends:
        _json._set_backend(backend)
        rows.extend(measure(backend, body))
    _json._set_backend(original)
    for name, seconds in rows:
        print(f"{name:<42} {seconds * 1e6:9.1f} us {seconds / base:6.2f}x")
    print()
    print("LoopBreaker.check with N live sessions (ratio to N=1):")
    first = None
    for sessions in (1, 100, 10_000, 100_000):
        cost = check_cost(sessions)
        first = first or cost
        print(f"  N={sessions:>7,}  {cost * 1e9:8.0f} ns/check  {cost / first:5.2f}x")


if __name__ == "__main__":
    main()
