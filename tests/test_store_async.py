"""The guards' asyncio methods, on every kind of store: the same answers as the sync ones.

``LoopBreaker.acheck`` & co. and ``DedupCache.aget`` & co. run the in-memory store in
line, await an async store and run a sync shared store in a worker thread; whichever it
is, they decide exactly as the sync methods do.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar, cast

import pytest

from conftest import FakeClock
from loopfuse import DedupCache, LoopBreaker, LoopBroken, RequestKey
from loopfuse.dedup import SingleFlightReentryError
from loopfuse.stores.redis import AsyncRedisStore, RedisStore
from store_helpers import RedisServer, redis_or_skip, running_server, unique_prefix

T = TypeVar("T")

KEY = RequestKey.from_str("What is Rust?")
SCRIPT = [("s1", 1), ("s1", 1), ("s1", 1), ("s2", 1), ("s1", 2), ("s1", 1)]
KINDS = ["memory", "async redis", "sync redis (worker thread)"]


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    redis_or_skip()
    with running_server() as server:
        yield server


def make_store(kind: str, request: pytest.FixtureRequest) -> Any:
    if kind == "memory":
        return None  # the guard's default
    server: RedisServer = request.getfixturevalue("server")
    if kind == "async redis":
        import redis.asyncio

        client = redis.asyncio.Redis(port=server.port, socket_timeout=2.0)
        return AsyncRedisStore(client, unique_prefix(), time_source="caller")
    return RedisStore(server.client(), unique_prefix(), time_source="caller")


async def closed(store: Any) -> None:
    if isinstance(store, AsyncRedisStore):
        await store.client.aclose()
    elif isinstance(store, RedisStore):
        store.client.close()


@pytest.mark.parametrize("kind", KINDS)
def test_acheck_decides_like_check(
    kind: str, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    local = LoopBreaker(window=30, max_repeats=2, clock=clock)

    async def scenario() -> None:
        store = make_store(kind, request)
        shared = LoopBreaker(window=30, max_repeats=2, clock=clock, store=store)
        for step, (session, fp) in enumerate(SCRIPT * 3):
            clock.advance(7.0 if step % 4 == 0 else 0.5)
            assert await shared.acheck(session, fp) == local.check(session, fp), step
        assert await shared.atracked_sessions() == local.tracked_sessions
        await shared.areset("s1")
        local.reset("s1")
        assert await shared.acheck("s1", 1) == local.check("s1", 1)
        body = {"model": "m", "messages": [{"role": "user", "content": "again?"}]}
        assert await shared.acheck_request("s3", body) == local.check_request("s3", body)
        assert [(await shared.aenforce("s4", 9)).repeats for _ in range(2)] == [1, 2]
        with pytest.raises(LoopBroken):
            await shared.aenforce("s4", 9)
        assert (await shared.aenforce_request("s5", b'{"input": "ping"}')).allowed
        assert (await shared.aenforce_request("s5", b'{"input": "ping"}')).allowed
        with pytest.raises(LoopBroken):
            await shared.aenforce_request("s5", b'{"input": "ping"}')
        await shared.areset()
        assert await shared.atracked_sessions() == 0
        assert shared.internal_errors == 0
        await closed(store)

    asyncio.run(scenario())


def test_acheck_request_fails_open_like_check_request() -> None:
    breaker = LoopBreaker(max_repeats=1)
    junk = {"model": "m", "messages": [{"role": "user", "content": object()}]}
    decision = asyncio.run(breaker.acheck_request("s", junk))
    assert decision.allowed
    assert decision.error is not None
    assert breaker.internal_errors == 1
    closed_breaker = LoopBreaker(max_repeats=1, fail_closed=True)
    assert not asyncio.run(closed_breaker.acheck_request("s", junk)).allowed


def finished_without_suspending(coroutine: Coroutine[Any, Any, T]) -> T:
    """The coroutine's result, required to come without it ever yielding to a loop (no
    thread hop, no I/O wait)."""
    with pytest.raises(StopIteration) as done:
        coroutine.send(None)
    return cast(T, done.value.value)


def test_async_methods_on_the_memory_store_run_the_sync_core_in_line() -> None:
    breaker = LoopBreaker(max_repeats=1)
    assert finished_without_suspending(breaker.acheck("s", 1)).allowed
    assert not finished_without_suspending(breaker.acheck_request("s", b"{}")).error
    assert finished_without_suspending(breaker.atracked_sessions()) == 1
    cache: DedupCache[str] = DedupCache()
    assert finished_without_suspending(cache.ainsert(KEY, "v")) is None
    assert finished_without_suspending(cache.aget(KEY)) == "v"
    entry = finished_without_suspending(cache.apeek(KEY))
    assert entry is not None
    assert entry.value == "v"


def test_async_methods_on_a_sync_shared_store_wait_in_a_worker_thread() -> None:
    release = threading.Event()

    class SlowClient:
        def register_script(self, lua: str) -> Any:
            def script(keys: list[str], args: list[object]) -> list[int]:
                release.wait(5.0)  # a slow Redis; were the loop blocked, nothing would set it
                return [1, 0]  # the breaker script's [repeats, repaired]

            return script

    breaker = LoopBreaker(store=RedisStore(SlowClient()))

    async def scenario() -> int:
        check = asyncio.create_task(breaker.acheck("s", 1))
        await asyncio.sleep(0.01)
        assert not check.done()  # the loop runs other tasks meanwhile
        release.set()
        return (await check).repeats

    assert asyncio.run(scenario()) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_async_cache_methods_answer_like_the_sync_ones(
    kind: str, clock: FakeClock, request: pytest.FixtureRequest
) -> None:
    async def scenario() -> None:
        store = make_store(kind, request)
        cache: DedupCache[str] = DedupCache(default_ttl=60.0, clock=clock, store=store)
        assert await cache.aget(KEY) is None
        await cache.ainsert(KEY, "A systems programming language.")
        assert await cache.aget(KEY) == "A systems programming language."
        entry = await cache.apeek(KEY)
        assert entry is not None
        assert (entry.value, entry.created_at, entry.ttl) == (
            "A systems programming language.",
            clock.now,
            60.0,
        )
        await cache.ainsert(KEY, "short", ttl=1.0)
        clock.advance(1.0)
        assert await cache.apeek(KEY) is None
        assert await cache.aget(KEY) is None
        assert cache.stats.summary().startswith("requests=3 hits=1 misses=2")
        await cache.ainsert(KEY, "again")
        await cache.aclear()
        assert await cache.aget(KEY) is None
        assert cache.stats.total_requests == 1
        await closed(store)

    asyncio.run(scenario())


@pytest.mark.parametrize("kind", KINDS[1:])
def test_tasks_on_a_shared_store_compute_once(kind: str, request: pytest.FixtureRequest) -> None:
    async def scenario() -> None:
        store = make_store(kind, request)
        cache: DedupCache[str] = DedupCache(store=store)
        calls: list[int] = []

        async def ask() -> str:
            calls.append(1)
            await asyncio.sleep(0.05)
            return "answer"

        answers = await asyncio.gather(*(cache.aget_or_compute(KEY, ask) for _ in range(5)))
        assert answers == ["answer"] * 5
        assert len(calls) == 1
        assert cache.stats.summary() == "requests=5 hits=4 misses=1 evictions=0 hit_rate=80.0%"
        await closed(store)

    asyncio.run(scenario())


def test_a_cancelled_computation_releases_the_lock_for_the_next_task(
    server: RedisServer,
) -> None:
    async def scenario() -> None:
        import redis.asyncio

        store = AsyncRedisStore(redis.asyncio.Redis(port=server.port), unique_prefix())
        cache: DedupCache[str] = DedupCache(store=store)
        started = asyncio.Event()

        async def hang() -> str:
            started.set()
            await asyncio.Event().wait()
            return "never"

        leader = asyncio.create_task(cache.aget_or_compute(KEY, hang))
        await started.wait()
        assert await store.acquire(KEY.value, KEY.digest, 30.0) is None  # held
        leader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await leader
        # released at once (not after the lock's 300 s), so the next task computes now
        assert await cache.aget_or_compute(KEY, _answer, timeout=5.0) == "answer"

        async def reenter() -> str:
            return await cache.aget_or_compute(RequestKey(7), _answer)

        with pytest.raises(SingleFlightReentryError):
            await cache.aget_or_compute(RequestKey(7), reenter)
        assert await store.acquire(7, None, 30.0) is not None  # released after the error
        await store.client.aclose()

    asyncio.run(scenario())


async def _answer() -> str:
    return "answer"
