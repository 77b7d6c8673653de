"""DedupCache.aget_or_compute: single flight for asyncio tasks, cancellation, timeouts.

Ordering comes from the event loop's run order and asyncio Events, never from sleeps;
``wait_for(..., GUARD)`` only turns a hang (a bug) into a failure.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

import pytest

from conftest import run_threads
from loopfuse.dedup import (
    DedupCache,
    RequestKey,
    SingleFlightReentryError,
    SingleFlightTimeoutError,
)

GUARD = 30.0  # seconds; only reached when something is broken
KEY = RequestKey.from_str("the question")


async def gather_callers(
    cache: DedupCache[str], n: int, factory: Callable[[], Awaitable[str]], ready: asyncio.Event
) -> list[str | BaseException]:
    """Start ``n`` callers; the last sets ``ready`` once every earlier one is waiting.

    The event loop runs tasks in creation order and each runs until it suspends, so
    when the last task starts, the others are suspended in the cache: the first in its
    factory, the rest waiting for it.
    """
    started = 0

    async def caller() -> str:
        nonlocal started
        started += 1
        if started == n:
            ready.set()
        return await cache.aget_or_compute(KEY, factory)

    return await asyncio.gather(*(caller() for _ in range(n)), return_exceptions=True)


def start_waiters(
    cache: DedupCache[str], n: int, factory: Callable[[], Awaitable[str]]
) -> tuple[list[asyncio.Task[str]], asyncio.Event]:
    """Start ``n`` tasks calling the cache; the event is set once all of them wait.

    The last task sets it just before it calls in, and setting an event does not yield,
    so when the awaiting test resumes every task is suspended inside the cache.
    """
    started = 0
    all_waiting = asyncio.Event()

    async def caller() -> str:
        nonlocal started
        started += 1
        if started == n:
            all_waiting.set()
        return await cache.aget_or_compute(KEY, factory)

    return [asyncio.create_task(caller()) for _ in range(n)], all_waiting


def test_async_callers_share_one_computation() -> None:
    async def main() -> None:
        cache: DedupCache[str] = DedupCache(capacity=4)
        ready = asyncio.Event()
        calls: list[int] = []

        async def factory() -> str:
            calls.append(1)
            await ready.wait()
            return "answer"

        results = await asyncio.wait_for(gather_callers(cache, 10, factory, ready), GUARD)
        assert results == ["answer"] * 10
        assert calls == [1]
        s = cache.stats
        assert (s.total_requests, s.cache_hits, s.cache_misses) == (10, 9, 1)

    asyncio.run(main())


def test_async_failure_hands_over_to_a_waiter() -> None:
    async def main() -> None:
        cache: DedupCache[str] = DedupCache(capacity=4)
        ready = asyncio.Event()
        calls: list[int] = []

        async def factory() -> str:
            calls.append(1)
            if len(calls) == 1:
                await ready.wait()
                raise RuntimeError("upstream 500")
            return "second try"

        results = await asyncio.wait_for(gather_callers(cache, 5, factory, ready), GUARD)
        assert isinstance(results[0], RuntimeError)
        assert results[1:] == ["second try"] * 4
        assert calls == [1, 1]
        assert cache.get(KEY) == "second try"

    asyncio.run(main())


def test_cancelling_the_computing_task_does_not_strand_waiters() -> None:
    async def main() -> None:
        cache: DedupCache[str] = DedupCache(capacity=4)
        leader_started, never = asyncio.Event(), asyncio.Event()
        calls: list[int] = []

        async def factory() -> str:
            calls.append(1)
            if len(calls) == 1:
                leader_started.set()
                await never.wait()  # hangs until cancelled
            return "from a waiter"

        leader = asyncio.create_task(cache.aget_or_compute(KEY, factory))
        await leader_started.wait()
        waiters, all_waiting = start_waiters(cache, 3, factory)
        await all_waiting.wait()
        leader.cancel()
        results = await asyncio.wait_for(asyncio.gather(*waiters), GUARD)
        assert results == ["from a waiter"] * 3
        assert leader.cancelled()
        assert calls == [1, 1]
        s = cache.stats
        assert (s.total_requests, s.cache_hits, s.cache_misses) == (4, 2, 2)

    asyncio.run(main())


def test_a_cancelled_waiter_leaves_the_others_alone() -> None:
    async def main() -> None:
        cache: DedupCache[str] = DedupCache(capacity=4)
        started, release = asyncio.Event(), asyncio.Event()

        async def factory() -> str:
            started.set()
            await release.wait()
            return "answer"

        leader = asyncio.create_task(cache.aget_or_compute(KEY, factory))
        await started.wait()
        (quitter, stayer), all_waiting = start_waiters(cache, 2, factory)
        await all_waiting.wait()
        quitter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await quitter
        release.set()
        results = await asyncio.wait_for(asyncio.gather(leader, stayer), GUARD)
        assert list(results) == ["answer"] * 2

    asyncio.run(main())


def test_async_waiter_timeout() -> None:
    async def main() -> None:
        cache: DedupCache[str] = DedupCache(capacity=4)
        started, release = asyncio.Event(), asyncio.Event()

        async def factory() -> str:
            started.set()
            await release.wait()
            return "late"

        leader = asyncio.create_task(cache.aget_or_compute(KEY, factory))
        await started.wait()
        with pytest.raises(SingleFlightTimeoutError):
            await cache.aget_or_compute(KEY, factory, timeout=0)
        release.set()
        assert await asyncio.wait_for(leader, GUARD) == "late"
        assert cache.get(KEY) == "late"

    asyncio.run(main())


def test_async_reentry_raises() -> None:
    async def main() -> None:
        cache: DedupCache[str] = DedupCache(capacity=4)

        async def inner() -> str:
            return "inner"

        async def reentrant() -> str:
            return await cache.aget_or_compute(KEY, inner)

        with pytest.raises(SingleFlightReentryError):
            await asyncio.wait_for(cache.aget_or_compute(KEY, reentrant), GUARD)
        assert await cache.aget_or_compute(KEY, inner) == "inner"

    asyncio.run(main())


def test_async_hit_and_ttl() -> None:
    async def main() -> None:
        now = [0.0]
        cache: DedupCache[str] = DedupCache(capacity=4, default_ttl=10.0, clock=lambda: now[0])
        calls: list[int] = []

        async def factory() -> str:
            calls.append(1)
            return f"v{len(calls)}"

        assert await cache.aget_or_compute(KEY, factory, ttl=1.0) == "v1"
        assert await cache.aget_or_compute(KEY, factory) == "v1"
        now[0] = 1.0
        assert await cache.aget_or_compute(KEY, factory) == "v2"
        assert calls == [1, 1]

    asyncio.run(main())


def test_two_event_loops_in_two_threads() -> None:
    cache: DedupCache[str] = DedupCache(capacity=4)
    barrier = threading.Barrier(2, timeout=GUARD)

    def in_own_loop(i: int) -> str:
        async def factory() -> str:
            return f"loop {i}"

        async def main() -> str:
            barrier.wait()
            return await cache.aget_or_compute(RequestKey.from_str(f"q{i}"), factory)

        return asyncio.run(main())

    results, errors = run_threads(2, in_own_loop)
    assert errors == []
    assert results == ["loop 0", "loop 1"]
