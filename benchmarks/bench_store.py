"""Benchmark of the Redis store: round trips per guard step, and checks per second.

Run: ``python benchmarks/bench_store.py [--seconds 3] [--rounds 15]`` (starts its own
``redis-server`` on a free loopback port; or pass ``--url redis://host:port/0`` to use a
running one: it writes under a fresh key prefix and deletes nothing else). Needs
``redis-server`` and the ``redis`` package. ``--seconds 0.1 --rounds 1`` is a smoke run
(its figures noise). Prints:

- round trips per step (must be 1): counted on the client (every command sent) and on
  the server (``INFO commandstats``: one ``EVALSHA`` per breaker check, and the
  server's time per check);
- seconds per call, as ratios to ``json.loads`` of the ~50 KB agent request of
  ``bodies.py`` measured in the same run (``timing.py``), with the in-memory store and
  the guards (``LoopBreaker.check``) on either store, and on a Redis store whose circuit
  is open (Redis failing: the check fails open without calling it);
- checks per second against local Redis: one process, then 4 processes at once;
- load beyond the pool: 1,000 concurrent ``acheck`` of one request on
  ``AsyncRedisStore.from_url`` (its 10 connections): seconds for all, how many allowed
  (must be ``max_repeats``), failures (must be 0), waits for a connection.

Not a test: nothing here fails on a slow machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import multiprocessing
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from multiprocessing.synchronize import Event
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from bodies import agent_request_bytes
from loopfuse import DedupCache, LoopBreaker, RequestKey
from loopfuse.stores import MISS
from loopfuse.stores.memory import MemoryBreakerStore, MemoryCacheStore
from loopfuse.stores.redis import AsyncRedisStore, RedisStore
from timing import add_rounds, interleaved, report

DIGEST = bytes(range(32))
NO_RETRY = Retry(NoBackoff(), 0)
SESSIONS = 1000


class CountingRedis(redis.Redis):  # type: ignore[misc]
    """Counts every command the client sends (each one a round trip outside pipelines)."""

    commands = 0

    def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        CountingRedis.commands += 1
        return super().execute_command(*args, **kwargs)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server not found (Debian: apt-get install redis-server), or pass --url")
    port = free_port()
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    server = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    probe = redis.Redis.from_url(url)
    for _ in range(500):
        try:
            probe.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.01)
    probe.close()
    return server, url


def round_trips(url: str, prefix: str) -> None:
    client = CountingRedis.from_url(url)
    store = RedisStore(client, prefix)
    store.record("warm", 1, 0.0, 30.0, 256)  # loads each script once per server
    store.release(0, None, "warm")
    store.acquire(0, None, 1.0)
    breaker = LoopBreaker(window=30.0, max_repeats=10**9, store=store)
    cache: DedupCache[str] = DedupCache(store=store)
    key = RequestKey.from_str("What is Rust?")
    cache.insert(key, "A systems programming language.")
    steps: dict[str, Callable[[], object]] = {
        "LoopBreaker.check": lambda: breaker.check("guard", 42),
        "DedupCache.get (hit)": lambda: cache.get(key),
        "DedupCache.get_or_compute (hit)": lambda: cache.get_or_compute(key, lambda: "x"),
        "breaker check (record)": lambda: store.record("s", 1, 0.0, 30.0, 256),
        "cache get (miss)": lambda: store.get(2, DIGEST, 0.0),
        "cache set": lambda: store.set(1, DIGEST, "answer", 60.0, 0.0),
        "cache get (hit)": lambda: store.get(1, DIGEST, 0.0),
        "single-flight acquire": lambda: store.acquire(1, DIGEST, 30.0),
        "single-flight release": lambda: store.release(1, DIGEST, "token"),
    }
    print("round trips per step (client-side count of commands sent):")
    assert breaker.check("guard", 42).error is None
    for name, step in steps.items():
        before = CountingRedis.commands
        for _ in range(100):
            step()
        print(f"  {name:<34} {(CountingRedis.commands - before) / 100:.2f}")
    open_breaker = open_circuit_breaker(prefix, CountingRedis(port=free_port(), retry=NO_RETRY))
    before = CountingRedis.commands
    for _ in range(100):
        open_breaker.check("guard", 42)
    print(
        f"  {'LoopBreaker.check, circuit open':<34} {(CountingRedis.commands - before) / 100:.2f}"
    )
    stats = client.info("commandstats")["cmdstat_evalsha"]
    before, before_usec = stats["calls"], stats["usec"]
    for i in range(1000):
        store.record(f"s{i}", 1, 0.0, 30.0, 256)
    stats = client.info("commandstats")["cmdstat_evalsha"]
    calls, usec = stats["calls"] - before, stats["usec"] - before_usec
    print(f"  server-side: {calls} EVALSHA for 1000 breaker checks, {usec / calls:.1f} us each")
    client.close()


def unreachable_store(prefix: str, client: Any = None, **options: Any) -> RedisStore:
    """A store on a port nothing listens on: every call fails at once (refused; the
    client does not retry, as ``RedisStore.from_url``'s does not)."""
    if client is None:
        client = redis.Redis(port=free_port(), retry=NO_RETRY)
    return RedisStore(client, prefix, log_interval=3600.0, **options)


def open_circuit_breaker(prefix: str, client: Any = None) -> LoopBreaker:
    """A breaker whose store's circuit is open (and stays open for the whole run)."""
    store = unreachable_store(prefix, client, cooldown=3600.0)
    breaker = LoopBreaker(window=30.0, max_repeats=10**9, store=store)
    while store.circuit.state != "open":
        breaker.check("warm", 1)
    return breaker


def per_call(url: str, prefix: str, rounds: int) -> None:
    body = agent_request_bytes()
    store = RedisStore(redis.Redis.from_url(url), prefix)
    memory_breaker = MemoryBreakerStore()
    memory_cache = MemoryCacheStore()
    shared_breaker = LoopBreaker(window=30.0, max_repeats=10**9, store=store)
    local_breaker = LoopBreaker(window=30.0, max_repeats=10**9)
    open_breaker = open_circuit_breaker(prefix)
    down_store = unreachable_store(prefix, failure_threshold=0)
    down_breaker = LoopBreaker(window=30.0, max_repeats=10**9, store=down_store)
    store.set(1, DIGEST, "a cached answer", 3600.0, 0.0)
    memory_cache.set(1, DIGEST, "a cached answer", 3600.0, 0.0)
    counter = iter(range(10**9))

    def session() -> str:
        return f"session-{next(counter) % SESSIONS}"

    now = time.time
    candidates: dict[str, Callable[[], object]] = {
        "json.loads of the 50 KB body (baseline)": lambda: json.loads(body),
        "memory store: breaker record": lambda: memory_breaker.record(
            session(), 42, now(), 30.0, 256
        ),
        "memory store: cache get (hit)": lambda: memory_cache.get(1, DIGEST, now()),
        "LoopBreaker.check, default store": lambda: local_breaker.check(session(), 42),
        "LoopBreaker.check, Redis store": lambda: shared_breaker.check(session(), 42),
        "LoopBreaker.check, Redis store, circuit open": lambda: open_breaker.check(session(), 42),
        "LoopBreaker.check, Redis refusing, no circuit": lambda: down_breaker.check(session(), 42),
        "Redis store: breaker record": lambda: store.record(session(), 42, now(), 30.0, 256),
        "Redis store: cache get (hit)": lambda: store.get(1, DIGEST, now()),
        "Redis store: cache set": lambda: store.set(2, DIGEST, "answer", 60.0, now()),
    }
    print(f"seconds per call, best of {rounds} interleaved rounds:")
    report(
        interleaved(candidates, number=200, rounds=rounds),
        "json.loads of the 50 KB body (baseline)",
    )
    assert store.get(1, DIGEST, now()) is not MISS
    assert open_breaker.store.circuit.state == "open"  # type: ignore[union-attr]
    assert down_store.circuit.opened == 0
    store.client.close()


def hammer(url: str, prefix: str, worker: int, seconds: float, go: Event, out: Any) -> None:
    breaker = LoopBreaker(
        window=30.0, max_repeats=5, store=RedisStore.from_url(url, key_prefix=prefix)
    )
    breaker.check("warm", 1)
    go.wait()
    checks, deadline = 0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        breaker.check(f"w{worker}-s{checks % SESSIONS}", 42)
        checks += 1
    assert breaker.internal_errors == 0
    out.put(checks)


def throughput(url: str, prefix: str, processes: int, seconds: float) -> float:
    context = multiprocessing.get_context("spawn")
    go, out = context.Event(), context.Queue()
    workers = [
        context.Process(target=hammer, args=(url, prefix, i, seconds, go, out))
        for i in range(processes)
    ]
    for process in workers:
        process.start()
    time.sleep(1.0)  # let every worker connect and load the script before the start
    go.set()
    total = sum(out.get(timeout=seconds + 60) for _ in workers)
    for process in workers:
        process.join()
    return total / seconds


def load(url: str, prefix: str, tasks: int = 1000, max_repeats: int = 5) -> None:
    """``tasks`` concurrent checks of one request from one event loop, on more tasks than
    the store's pool has connections: each waits its turn for one."""

    async def run() -> None:
        store = AsyncRedisStore.from_url(url, key_prefix=f"{prefix}load:{uuid.uuid4().hex}:")
        breaker = LoopBreaker(window=600.0, max_repeats=max_repeats, store=store)
        await breaker.acheck("warm", 1)
        start = time.perf_counter()
        decisions = await asyncio.gather(*(breaker.acheck("s", 42) for _ in range(tasks)))
        elapsed = time.perf_counter() - start
        allowed = sum(d.allowed for d in decisions)
        print(
            f"  {tasks} tasks on {store.max_connections} connections: {elapsed:.2f} s, "
            f"{allowed} allowed (max_repeats={max_repeats}), {store.failure_count} failures, "
            f"{store.pool_waits} waits, {store.pool_timeouts} waits that ran out"
        )
        await store.client.aclose()

    asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running Redis (default: start redis-server)")
    parser.add_argument("--seconds", type=float, default=3.0, help="per throughput run")
    add_rounds(parser)
    options = parser.parse_args()
    server, url = (None, options.url) if options.url else start_server()
    logging.getLogger("loopfuse").setLevel(logging.ERROR)  # the failures below are on purpose
    prefix = f"bench:{uuid.uuid4().hex[:8]}:"
    try:
        info = redis.Redis.from_url(url).info("server")
        print(f"python {sys.version.split()[0]}, redis-py {redis.__version__}, ", end="")
        print(f"redis-server {info['redis_version']}, {url}")
        round_trips(url, prefix)
        per_call(url, prefix, options.rounds)
        print("LoopBreaker.check per second on the Redis store (1000 sessions per process):")
        for processes in (1, 4):
            rate = throughput(url, prefix, processes, options.seconds)
            print(f"  {processes} process(es): {rate:10,.0f} checks/s")
        print("concurrent LoopBreaker.acheck, one event loop, one request:")
        load(url, prefix)
    finally:
        if server is not None:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
