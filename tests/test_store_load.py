"""The Redis stores under ordinary load: more callers at once than the client has connections.

redis-py's default pool raises "Too many connections" past its size instead of waiting;
read as Redis down, that made a healthy store fail open and open its circuit (1,000
tasks on one key ran the factory ~1,000 times; 1,000 checks with ``max_repeats=5``
allowed ~900). A store now lets at most its pool's size of operations hold a connection
at once and makes the others wait their turn, up to ``pool_timeout``: back-pressure,
counted in ``pool_waits`` / ``pool_timeouts``, never a failure of Redis, never the circuit.

Every count below is exact, against a real ``redis-server``: the factory runs once, the
breaker allows exactly ``max_repeats`` of N checks of one request, and each check sees
its own count (1, 2, ..., up to the session's ``max_samples_per_session``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import THREAD_GUARD, fast_and_full
from loopfuse import DedupCache, LoopBreaker, RequestKey
from loopfuse.breaker import DEFAULT_MAX_SAMPLES_PER_SESSION
from loopfuse.stores import StoreUnavailableError
from loopfuse.stores.redis import DEFAULT_MAX_CONNECTIONS, AsyncRedisStore, RedisStore
from store_helpers import RedisServer, redis_or_skip, running_server, unique_prefix

redis = redis_or_skip()

KEY = RequestKey.from_str("What is Rust?")
MAX_REPEATS = 5
WINDOW = 600.0  # the server's clock: longer than any run here
# The subject is the pool, not the socket timeout: a loaded test machine that pauses this
# process for longer than the default 0.25 s must not pass for a stalled Redis here.
TIMEOUT = 2.0


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with running_server() as server:
        yield server


def expected_repeats(checks: int) -> list[int]:
    """What ``checks`` checks of one request in one session see, sorted: 1, 2, ... up to
    the session's cap of samples, then the cap (the oldest sample goes for the newest)."""
    cap = DEFAULT_MAX_SAMPLES_PER_SESSION
    return list(range(1, min(checks, cap) + 1)) + [cap] * max(0, checks - cap)


def assert_healthy(store: Any) -> None:
    """Redis answered every operation: no failure, the circuit never opened, no caller
    gave up waiting for a connection; but callers did wait (the load exceeded the pool)."""
    assert store.failure_count == 0, store.last_error
    assert store.circuit.opened == 0
    assert store.pool_timeouts == 0
    assert store.pool_waits > 0


# -- asyncio: N tasks, one AsyncRedisStore.from_url (a pool of DEFAULT_MAX_CONNECTIONS) ------


@pytest.mark.parametrize("tasks", fast_and_full(250, 1000))
def test_tasks_beyond_the_pool_compute_once(server: RedisServer, tasks: int) -> None:
    assert tasks > DEFAULT_MAX_CONNECTIONS

    async def scenario() -> None:
        store = AsyncRedisStore.from_url(server.url, timeout=TIMEOUT, key_prefix=unique_prefix())
        cache: DedupCache[str] = DedupCache(store=store)
        calls = 0

        async def ask() -> str:
            nonlocal calls
            calls += 1
            await asyncio.sleep(0.05)  # the paid call
            return "answer"

        answers = await asyncio.gather(*(cache.aget_or_compute(KEY, ask) for _ in range(tasks)))
        assert answers == ["answer"] * tasks
        assert calls == 1
        assert (cache.stats.cache_hits, cache.stats.cache_misses) == (tasks - 1, 1)
        assert_healthy(store)
        await store.client.aclose()

    asyncio.run(scenario())


@pytest.mark.parametrize("tasks", fast_and_full(250, 1000))
def test_tasks_beyond_the_pool_are_each_counted(server: RedisServer, tasks: int) -> None:
    async def scenario() -> None:
        store = AsyncRedisStore.from_url(server.url, timeout=TIMEOUT, key_prefix=unique_prefix())
        breaker = LoopBreaker(window=WINDOW, max_repeats=MAX_REPEATS, store=store)
        decisions = await asyncio.gather(*(breaker.acheck("s", 42) for _ in range(tasks)))
        assert sum(d.allowed for d in decisions) == MAX_REPEATS
        assert sorted(d.repeats for d in decisions) == expected_repeats(tasks)
        assert all(d.error is None for d in decisions)
        assert breaker.internal_errors == 0
        assert_healthy(store)
        # another session, checked meanwhile by nobody, is counted from 1
        assert (await breaker.acheck("t", 42)).repeats == 1
        await store.client.aclose()

    asyncio.run(scenario())


# -- threads: N threads, one RedisStore.from_url ---------------------------------------------


@pytest.mark.parametrize("threads", fast_and_full(120, 200))
def test_threads_beyond_the_pool_compute_once_and_are_each_counted(
    server: RedisServer, threads: int
) -> None:
    assert threads > DEFAULT_MAX_CONNECTIONS
    store = RedisStore.from_url(server.url, timeout=TIMEOUT, key_prefix=unique_prefix())
    cache: DedupCache[str] = DedupCache(store=store)
    breaker = LoopBreaker(window=WINDOW, max_repeats=MAX_REPEATS, store=store)
    calls: list[int] = []
    start = threading.Barrier(threads)
    answers: list[str] = []
    repeats: list[int] = []
    allowed: list[bool] = []

    def ask() -> str:
        calls.append(1)
        time.sleep(0.05)  # the paid call
        return "answer"

    def worker() -> None:
        start.wait(THREAD_GUARD)
        answers.append(cache.get_or_compute(KEY, ask))
        decision = breaker.check("s", 42)
        repeats.append(decision.repeats)
        allowed.append(decision.allowed)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(THREAD_GUARD)
    assert answers == ["answer"] * threads
    assert len(calls) == 1
    assert sum(allowed) == MAX_REPEATS
    assert sorted(repeats) == expected_repeats(threads)
    assert breaker.internal_errors == 0
    assert_healthy(store)
    store.client.close()


# -- a wait that runs out: back-pressure, counted apart, never the circuit -------------------


def test_a_task_that_finds_no_connection_in_time_fails_open_without_opening_the_circuit(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        # One connection, no wait: the second of two simultaneous checks finds it taken.
        store = AsyncRedisStore.from_url(
            server.url, key_prefix=unique_prefix(), max_connections=1, pool_timeout=0.0,
            failure_threshold=1,
        )  # fmt: skip
        breaker = LoopBreaker(window=WINDOW, max_repeats=MAX_REPEATS, store=store)
        first, second = await asyncio.gather(breaker.acheck("s", 1), breaker.acheck("s", 1))
        assert (first.allowed, first.repeats, first.error) == (True, 1, None)
        assert (second.allowed, second.repeats) == (True, 0)  # failed open: not counted
        assert second.error is not None
        assert "no connection" in second.error
        assert (store.pool_waits, store.pool_timeouts) == (1, 1)
        assert store.failure_count == 0  # Redis did not fail
        assert store.circuit.state == "closed"
        assert store.circuit.opened == 0
        assert (await breaker.acheck("s", 1)).repeats == 2  # and it counts on
        await store.client.aclose()

    with caplog.at_level(logging.WARNING, logger="loopfuse"):
        asyncio.run(scenario())
    [warning] = [r.getMessage() for r in caplog.records]
    assert "record found no free connection (ConnectionWaitTimeout: " in warning
    assert "failing open" in warning
    assert "(1 without a free connection)" in warning


def test_a_thread_that_finds_no_connection_in_time_fails_by_the_policy(
    server: RedisServer,
) -> None:
    class SlowRedis(redis.Redis):  # type: ignore[misc]
        """Holds each command until the test lets it go (a slow answer, on a real server)."""

        go = threading.Event()
        sent = threading.Event()

        def execute_command(self, *args: Any, **options: Any) -> Any:
            SlowRedis.sent.set()
            SlowRedis.go.wait(THREAD_GUARD)
            return super().execute_command(*args, **options)

    client = SlowRedis(port=server.port, max_connections=1)
    open_store = RedisStore(client, unique_prefix(), pool_timeout=0.01, failure_threshold=1)
    closed_store = RedisStore(
        client, open_store.key_prefix, pool_timeout=0.01, failure_threshold=1, fail_closed=True
    )
    holder = threading.Thread(target=lambda: open_store.set(1, None, "v", 60.0, 0.0))
    holder.start()
    assert SlowRedis.sent.wait(THREAD_GUARD)
    # the only connection is out: open, the store answers its fallback; closed, it raises
    assert open_store.record("s", 1, 0.0, WINDOW, 256) == 0
    assert open_store.last_error is not None
    assert "no connection" in open_store.last_error
    SlowRedis.go.set()
    holder.join(THREAD_GUARD)
    assert (open_store.pool_waits, open_store.pool_timeouts, open_store.failure_count) == (1, 1, 0)
    assert open_store.circuit.opened == 0
    SlowRedis.go.clear()
    SlowRedis.sent.clear()
    holder = threading.Thread(target=lambda: closed_store.set(1, None, "v", 60.0, 0.0))
    holder.start()
    assert SlowRedis.sent.wait(THREAD_GUARD)
    # each store has its own gate; this one's only operation is out
    with pytest.raises(StoreUnavailableError, match="no connection"):
        closed_store.get(1, None, 0.0)
    SlowRedis.go.set()
    holder.join(THREAD_GUARD)
    assert closed_store.circuit.opened == 0
    assert closed_store.get(1, None, 0.0) == "v"
    client.close()


def test_a_pool_emptied_by_other_code_is_back_pressure_too(server: RedisServer) -> None:
    # The client's pool is shared with code outside the store, which holds its only
    # connection: redis-py raises "Too many connections" at once. Not Redis failing.
    client = server.client(max_connections=1)
    store = RedisStore(client, unique_prefix(), failure_threshold=1)
    taken = client.connection_pool.get_connection()
    try:
        client.connection_pool.get_connection()
    except redis.ConnectionError as full:
        if type(full).__name__ != "MaxConnectionsError":  # a type of its own: recent redis-py
            pytest.skip(f"this redis-py says a pool is full with a plain {full!r}")
    assert store.record("s", 1, 0.0, WINDOW, 256) == 0
    assert (store.pool_timeouts, store.failure_count, store.circuit.opened) == (1, 0, 0)
    client.connection_pool.release(taken)
    assert store.record("s", 1, 0.0, WINDOW, 256) == 1
    client.close()
