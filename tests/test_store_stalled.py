"""A stalled ``redis-server`` (SIGSTOP), then resumed (SIGCONT): what the guards pay.

Wall time is the subject here (a real server, real timeouts), so the bounds are generous
multiples of the client timeout, never exact timings: without the circuit, each guarded
request waits a full timeout (20 checks: 20 timeouts); with it, a stalled store costs
``failure_threshold`` timeouts and then fails at once. asyncio code must not notice the
stall at all: a ticker task measures how late the event loop runs it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest

from conftest import THREAD_GUARD
from loopfuse import DedupCache, LoopBreaker, RequestKey
from loopfuse.stores.redis import AsyncRedisStore, RedisStore
from store_helpers import RedisServer, redis_or_skip, running_server, unique_prefix

redis_or_skip()

T = TypeVar("T")

TIMEOUT = 0.25
COOLDOWN = 0.5


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with running_server() as server:
        yield server


def timed(call: Callable[[], T]) -> tuple[T, float]:
    start = time.monotonic()
    result = call()
    return result, time.monotonic() - start


async def with_loop_lag(work: Awaitable[T]) -> tuple[T, float]:
    """``work``'s result, and the longest the event loop kept a 10 ms ticker waiting
    beyond its 10 ms while ``work`` ran."""
    lag = 0.0
    running = True

    async def ticker() -> None:
        nonlocal lag
        while running:
            start = time.monotonic()
            await asyncio.sleep(0.01)
            lag = max(lag, time.monotonic() - start - 0.01)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)  # the ticker is running before the work starts
    try:
        result = await work
    finally:
        running = False
        await task  # its last tick measures the end of the work too
    return result, lag


# -- sync ---------------------------------------------------------------------------------


@pytest.mark.parametrize("threshold", [1, 3])
def test_a_stalled_redis_costs_threshold_timeouts_not_one_per_check(
    server: RedisServer, threshold: int
) -> None:
    prefix = unique_prefix()
    store = RedisStore.from_url(
        server.url, timeout=TIMEOUT, key_prefix=prefix, failure_threshold=threshold,
        cooldown=COOLDOWN,
    )  # fmt: skip
    breaker = LoopBreaker(max_repeats=3, store=store)
    assert breaker.check("s", 1).repeats == 1
    with server.paused():
        decisions, elapsed = timed(lambda: [breaker.check("s", 1) for _ in range(20)])
    assert all(d.allowed and d.repeats == 0 for d in decisions)
    assert store.circuit.short_circuited == 20 - threshold
    # Without the circuit: 20 timeouts (5 s). With it: `threshold` of them.
    assert elapsed < (threshold + 2) * TIMEOUT, elapsed
    assert breaker.internal_errors == 20
    # Resumed: after the cool-down, one probe closes the circuit, and the window shared
    # with other processes counts again (another store stands for another process).
    time.sleep(COOLDOWN)
    other = LoopBreaker(max_repeats=3, store=RedisStore.from_url(server.url, key_prefix=prefix))
    assert breaker.check("s", 1).repeats >= 2  # a timed-out record may have landed late
    assert store.circuit.state == "closed"
    repeats = other.check("s", 1).repeats
    assert breaker.check("s", 1).repeats == repeats + 1
    assert not breaker.check("s", 1).allowed


@pytest.mark.parametrize("kind", ["sync store, threads", "async store, tasks"])
def test_callers_queued_for_a_connection_fail_at_once_once_the_circuit_opens(
    server: RedisServer, kind: str
) -> None:
    # 20 callers, 2 connections: the two that hold them wait out the stall and open the
    # circuit; the 18 queued behind them then fail at once, instead of each taking its
    # turn to wait a timeout (10 rounds of 2: 10 timeouts).
    options: dict[str, Any] = {
        "timeout": TIMEOUT, "key_prefix": unique_prefix(), "max_connections": 2,
        "failure_threshold": 1, "cooldown": 60.0,
    }  # fmt: skip
    callers = 20
    if kind.startswith("sync"):
        store: Any = RedisStore.from_url(server.url, **options)
        breaker = LoopBreaker(max_repeats=3, store=store)
        assert breaker.check("s", 1).repeats == 1
        start = threading.Barrier(callers)
        decisions: list[Any] = []

        def caller() -> None:
            start.wait(THREAD_GUARD)
            decisions.append(breaker.check("s", 1))

        threads = [threading.Thread(target=caller) for _ in range(callers)]
        with server.paused():
            started = time.monotonic()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(THREAD_GUARD)
            elapsed = time.monotonic() - started
    else:

        async def scenario() -> tuple[list[Any], float]:
            nonlocal store
            store = AsyncRedisStore.from_url(server.url, **options)
            breaker = LoopBreaker(max_repeats=3, store=store)
            assert (await breaker.acheck("s", 1)).repeats == 1
            with server.paused():
                started = time.monotonic()
                many = await asyncio.gather(*(breaker.acheck("s", 1) for _ in range(callers)))
                return many, time.monotonic() - started

        decisions, elapsed = asyncio.run(scenario())
    assert len(decisions) == callers
    assert all(d.allowed and d.repeats == 0 for d in decisions)
    assert store.failure_count - store.circuit.short_circuited == 2  # reached Redis
    assert store.circuit.short_circuited == callers - 2
    assert store.pool_timeouts == 0
    assert elapsed < 4 * TIMEOUT, elapsed


# -- asyncio ------------------------------------------------------------------------------


def test_blocking_calls_on_the_loop_would_show_as_lag(server: RedisServer) -> None:
    # The control: the ticker does see a blocking store call on the event loop.
    store = RedisStore.from_url(server.url, timeout=TIMEOUT, key_prefix=unique_prefix())

    async def blocking() -> int:
        return store.record("s", 1, 0.0, 30.0, 256)

    with server.paused():
        repeats, lag = asyncio.run(with_loop_lag(blocking()))
    assert repeats == 0
    assert lag >= 0.8 * TIMEOUT


@pytest.mark.parametrize("kind", ["async store", "sync store (worker thread)"])
def test_asyncio_checks_on_a_stalled_redis_never_stall_the_loop(
    server: RedisServer, kind: str
) -> None:
    prefix = unique_prefix()
    options: dict[str, Any] = {"timeout": TIMEOUT, "key_prefix": prefix, "cooldown": COOLDOWN}
    store_type = AsyncRedisStore if kind == "async store" else RedisStore

    async def scenario() -> None:
        store = store_type.from_url(server.url, **options)
        breaker = LoopBreaker(max_repeats=3, store=store)
        assert (await breaker.acheck("s", 1)).repeats == 1
        with server.paused():
            many = asyncio.gather(*(breaker.acheck("s", 1) for _ in range(10)))
            decisions, lag = await with_loop_lag(many)
            assert all(d.allowed and d.repeats == 0 for d in decisions)
            assert store.circuit.state == "open"
            after, lag_after = await with_loop_lag(breaker.acheck("s", 1))
            assert after.error is not None
            assert "circuit open" in after.error
        assert max(lag, lag_after) < TIMEOUT / 2, (lag, lag_after)
        await asyncio.sleep(COOLDOWN)
        assert (await breaker.acheck("s", 1)).repeats >= 2  # counting again
        assert store.circuit.state == "closed"
        if isinstance(store, AsyncRedisStore):
            await store.client.aclose()

    asyncio.run(scenario())


def test_aget_or_compute_on_a_stalled_redis_never_stalls_the_loop(server: RedisServer) -> None:
    async def scenario() -> None:
        store = AsyncRedisStore.from_url(
            server.url, timeout=TIMEOUT, key_prefix=unique_prefix(), cooldown=COOLDOWN
        )
        cache: DedupCache[str] = DedupCache(store=store)
        calls: list[int] = []

        async def ask() -> str:
            calls.append(1)
            return "computed"

        keys = [RequestKey.from_str(f"question {n}") for n in range(5)]
        with server.paused():
            work = asyncio.gather(*(cache.aget_or_compute(key, ask) for key in keys))
            answers, lag = await with_loop_lag(work)
        assert answers == ["computed"] * 5
        assert len(calls) == 5  # every caller computes: as without a cache
        assert lag < TIMEOUT / 2, lag
        await asyncio.sleep(COOLDOWN)
        assert await cache.aget_or_compute(keys[0], ask) == "computed"  # the probe: a miss
        assert await cache.aget_or_compute(keys[0], ask) == "computed"  # served from Redis
        assert len(calls) == 6
        assert store.circuit.state == "closed"
        await store.client.aclose()

    asyncio.run(scenario())


# -- through an integration ---------------------------------------------------------------


def test_an_async_transport_on_a_stalled_redis_never_stalls_the_loop(server: RedisServer) -> None:
    httpx = pytest.importorskip("httpx")
    from loopfuse.integrations.httpx import AsyncGuardTransport

    answered: list[int] = []

    async def upstream(request: Any) -> Any:
        answered.append(1)
        return httpx.Response(200, json={"choices": [{"message": {"content": "ok"}}]})

    async def scenario() -> None:
        store = AsyncRedisStore.from_url(
            server.url, timeout=TIMEOUT, key_prefix=unique_prefix(), cooldown=COOLDOWN
        )
        transport = AsyncGuardTransport(
            httpx.MockTransport(upstream), breaker=LoopBreaker(max_repeats=2, store=store)
        )
        body = {"model": "m", "messages": [{"role": "user", "content": "status?"}]}
        headers = {"x-session-id": "s"}
        async with httpx.AsyncClient(transport=transport, base_url="http://llm") as http:
            first = await http.post("/v1/chat/completions", json=body, headers=headers)
            assert first.status_code == 200
            with server.paused():
                calls = [
                    http.post("/v1/chat/completions", json=body, headers=headers) for _ in range(8)
                ]
                responses, lag = await with_loop_lag(asyncio.gather(*calls))
            # The store could not count: every request went through (fail open) ...
            assert [r.status_code for r in responses] == [200] * 8
            # ... and the other tasks of the loop never waited for the stalled server.
            assert lag < TIMEOUT / 2, lag
            await asyncio.sleep(COOLDOWN)
            again = [
                await http.post("/v1/chat/completions", json=body, headers=headers)
                for _ in range(3)
            ]
            # Counting again: the second request after the stall is the third in the window.
            assert [r.status_code for r in again] == [200, 400, 400]
        await store.client.aclose()

    asyncio.run(scenario())
    assert len(answered) == 1 + 8 + 1


def test_a_sync_check_on_an_async_store_is_a_configuration_error(server: RedisServer) -> None:
    from loopfuse import Guard, RequestContext
    from loopfuse.errors import ConfigError

    store = AsyncRedisStore.from_url(server.url, timeout=TIMEOUT, key_prefix=unique_prefix())
    guard = Guard(breaker=LoopBreaker(store=store))
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    # Not a request failure to swallow and forward unchecked: a programming error.
    with pytest.raises(ConfigError, match="acheck"):
        guard.check(body, RequestContext(session_id="s"))
    assert guard.internal_errors == 0

    async def asynchronously() -> str:
        decision = await guard.acheck(body, RequestContext(session_id="s"))
        await store.client.aclose()
        return decision.action

    assert asyncio.run(asynchronously()) == "forward"
