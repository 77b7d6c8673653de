"""Benchmark of loopfuse.dedup: key building and cache inserts, as ratios to json.loads.

Run: ``python benchmarks/bench_dedup.py [--rounds 15]`` (``--rounds 1``: a smoke run,
its figures noise). Uses the deterministic ~50 KB agent request of ``bodies.py`` (system
prompt, 15 tools, 20 tool turns, OpenAI Chat), measures ``json.loads`` of it as the
baseline in the same run, round-robin with the candidates (``timing.py``), and prints
every other figure as a multiple of that baseline. Targets, from
issue 4: ``RequestKey.from_str`` of a 50 KB string <= 0.6x, ``RequestKey.from_request``
of the body <= 1.5x (with orjson), and an insert at capacity 100,000 <= 1.5x an insert
at capacity 100. Not a test: nothing here fails on a slow machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable

from bodies import agent_request_bytes
from loopfuse import intent
from loopfuse.dedup import DedupCache, RequestKey, fnv
from timing import add_rounds, interleaved, report


def insert_times(capacities: tuple[int, ...], rounds: int, batch: int = 10_000) -> list[float]:
    """Seconds per insert of a new key into a full cache (each insert evicts the LRU one),
    best of ``rounds``, for each capacity. The caches take turns round by round, so a
    noisy neighbour on the machine slows them alike."""
    caches: list[DedupCache[str]] = []
    keys: list[list[RequestKey]] = []
    for capacity in capacities:
        cache: DedupCache[str] = DedupCache(capacity=capacity, default_ttl=3600.0)
        fresh = [RequestKey.from_str(f"{capacity} {i}") for i in range(capacity + batch * rounds)]
        for key in fresh[:capacity]:
            cache.insert(key, "answer")
        caches.append(cache)
        keys.append(fresh[capacity:])
    best = [float("inf")] * len(capacities)
    for r in range(rounds):
        for i, cache in enumerate(caches):
            chunk = keys[i][r * batch : (r + 1) * batch]
            start = time.perf_counter()
            for key in chunk:
                cache.insert(key, "answer")
            best[i] = min(best[i], (time.perf_counter() - start) / batch)
    assert [len(cache) for cache in caches] == list(capacities)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_rounds(parser)
    rounds = parser.parse_args(argv).rounds
    body = agent_request_bytes()
    text = body.decode()
    print(
        f"python {sys.version.split()[0]}, FNV backend: {fnv.backend()}, "
        f"JSON backend: {intent.json_backend()}"
    )
    print(f"request: {len(body):,} bytes, {len(json.loads(body)['messages'])} messages")
    pairs = [(m["role"], m["content"] or "") for m in json.loads(body)["messages"]]
    candidates: dict[str, Callable[[], object]] = {
        "json.loads (baseline)": lambda: json.loads(body),
        "RequestKey.from_str, 50 KB string (<= 0.60x)": lambda: RequestKey.from_str(text),
        "RequestKey.from_messages, same conversation": lambda: RequestKey.from_messages(pairs),
        "RequestKey.from_request, body (<= 1.50x)": lambda: RequestKey.from_request(body),
        "intent.fingerprint, body (reference)": lambda: intent.fingerprint(body),
    }
    if fnv.c_extension_available():
        candidates["FNV-1a 64, C extension, 50 KB"] = lambda: fnv.fnv1a64(body)
    report(interleaved(candidates, number=50, rounds=rounds), "json.loads (baseline)")
    slow = interleaved(
        {
            "json.loads (baseline)": lambda: json.loads(body),
            "FNV-1a 64, pure Python, 50 KB": lambda: fnv.fnv1a64_py(body),
        },
        number=1,
        rounds=min(rounds, 5),
    )
    report(slow, "json.loads (baseline)")

    small, large = insert_times((100, 100_000), rounds=rounds)
    print(f"insert into a full cache, capacity 100:     {small * 1e9:8.0f} ns")
    print(
        f"insert into a full cache, capacity 100,000: {large * 1e9:8.0f} ns  "
        f"{large / small:5.2f}x of capacity 100  (target <= 1.50x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
