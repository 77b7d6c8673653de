"""Concurrency: 8 threads (and many asyncio tasks) hammering one LoopBreaker and one
DedupCache give exactly the counts a serial run gives, compute each key once per
expiry, and never deadlock, whether a factory returns, raises, blocks past the
documented timeout, or its task is cancelled.

The GIL switch interval is cut to 10 µs while these tests run, so threads are
preempted hundreds of times more often than usual and interleave inside every
operation. Ordering is arranged with barriers and events, never with sleeps; the one
real wait is a single-flight timeout, which is real time by design. ``GUARD`` bounds
every join so that a deadlock fails the test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import random
import sys
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from loopfuse import DedupCache, LoopBreaker, LoopDecision, RequestKey
from loopfuse.dedup import (
    DEFAULT_WAIT_TIMEOUT,
    SingleFlightTimeoutError,
    singleflight,
)

THREADS = 8
GUARD = 30.0  # seconds; only reached when something is broken
SHORT = 0.05  # a real single-flight timeout, in seconds


@pytest.fixture(autouse=True)
def frequent_preemption() -> Iterator[None]:
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def run_threads(target: Callable[[int], Any], n: int = THREADS) -> list[Any]:
    """Run ``target(i)`` in ``n`` threads; return results (or the exception each raised)."""
    results: list[Any] = [None] * n

    def body(i: int) -> None:
        try:
            results[i] = target(i)
        except BaseException as error:  # handed back for the test to inspect
            results[i] = error

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(GUARD)
        assert not thread.is_alive(), "deadlock: a thread did not finish"
    return results


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# --- LoopBreaker ----------------------------------------------------------------------


def test_breaker_counts_under_8_threads_equal_a_serial_model() -> None:
    sessions = [f"session-{i}" for i in range(5)]
    pairs = [(s, fp) for s in sessions for fp in range(7)]
    plans = [random.Random(t).choices(pairs, k=1500) for t in range(THREADS)]
    params: dict[str, Any] = {
        "window": 30,
        "max_repeats": 40,
        "max_samples_per_session": 100_000,  # nothing dropped: the model is exact
        "clock": FakeClock(),
    }
    breaker = LoopBreaker(**params)
    start = threading.Barrier(THREADS)

    def work(t: int) -> list[tuple[str, int, LoopDecision]]:
        start.wait(GUARD)
        return [(s, fp, breaker.check(s, fp)) for s, fp in plans[t]]

    results = run_threads(work)
    totals = Counter(pair for plan in plans for pair in plan)
    seen: dict[tuple[str, int], list[LoopDecision]] = defaultdict(list)
    for result in results:
        assert isinstance(result, list), result
        for s, fp, decision in result:
            seen[(s, fp)].append(decision)
    for pair, count in totals.items():
        # Each check of one (session, intent) saw its own count: 1..n, each exactly once.
        assert sorted(d.repeats for d in seen[pair]) == list(range(1, count + 1))
        assert sum(d.allowed for d in seen[pair]) == min(count, 40)
    serial = LoopBreaker(**params)
    for plan in plans:
        for s, fp in plan:
            serial.check(s, fp)
    for s, fp in pairs:
        assert breaker.check(s, fp).repeats == serial.check(s, fp).repeats == totals[(s, fp)] + 1
    assert breaker.tracked_sessions == serial.tracked_sessions == len(sessions)


def test_breaker_check_request_and_internal_errors_are_counted_exactly() -> None:
    bodies: list[object] = [
        f'{{"model":"m","messages":[{{"role":"user","content":"q{i}"}}]}}'.encode()
        for i in range(4)
    ]
    broken = {"messages": [{"role": "user", "content": object()}]}  # cannot be fingerprinted
    for fail_closed in (False, True):
        breaker = LoopBreaker(
            max_repeats=1000,
            max_samples_per_session=100_000,
            fail_closed=fail_closed,
            clock=FakeClock(),
        )
        start = threading.Barrier(THREADS)
        per_thread = 300

        def work(
            t: int,
            breaker: LoopBreaker = breaker,
            start: threading.Barrier = start,
            fail_closed: bool = fail_closed,
            per_thread: int = per_thread,
        ) -> int:
            rng = random.Random(t)
            start.wait(GUARD)
            failures = 0
            for _ in range(per_thread):
                body = broken if rng.random() < 0.1 else rng.choice(bodies)
                decision = breaker.check_request(f"s{rng.randrange(3)}", body, "/v1/chat")
                if decision.error is not None:
                    failures += 1
                    assert decision.allowed is not fail_closed
                else:
                    assert decision.allowed
            return failures

        results = run_threads(work)
        assert all(isinstance(r, int) for r in results), results
        assert breaker.internal_errors == sum(results) > 0
        recorded = sum(
            breaker.check_request(f"s{s}", body, "/v1/chat").repeats - 1
            for s in range(3)
            for body in bodies
        )
        assert recorded == THREADS * per_thread - sum(results)


def test_breaker_never_holds_more_than_max_sessions_under_threads() -> None:
    breaker = LoopBreaker(max_sessions=50, clock=FakeClock())
    start = threading.Barrier(THREADS + 1)
    done = threading.Event()
    observed: list[int] = []

    def watch() -> None:
        start.wait(GUARD)
        while not done.is_set():
            observed.append(breaker.tracked_sessions)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()

    def work(t: int) -> None:
        start.wait(GUARD)
        for i in range(2000):
            breaker.check(f"thread-{t}-fresh-{i}", i)

    try:
        assert run_threads(work) == [None] * THREADS
    finally:
        done.set()
        watcher.join(GUARD)
    assert observed
    assert max(observed) <= 50
    assert breaker.tracked_sessions == 50


# --- DedupCache: insert and get -------------------------------------------------------


def test_cache_stats_under_8_threads_equal_a_serial_model() -> None:
    clock = FakeClock()
    cache: DedupCache[str] = DedupCache(capacity=1000, clock=clock)
    keys = [RequestKey.from_str(f"question {i}") for i in range(400)]
    absent = [RequestKey.from_str(f"never asked {i}") for i in range(100)]
    start = threading.Barrier(THREADS)

    def insert_own_share(t: int) -> None:
        start.wait(GUARD)
        for key in keys[t::THREADS]:
            cache.insert(key, f"answer {key.value}")

    assert run_threads(insert_own_share) == [None] * THREADS
    assert len(cache) == len(keys)

    reads = [random.Random(t).choices(keys + absent, k=3000) for t in range(THREADS)]

    def read(t: int) -> int:
        start.wait(GUARD)
        served = 0
        for key in reads[t]:
            value = cache.get(key)
            if value is not None:
                assert value == f"answer {key.value}"
                served += 1
        return served

    served = run_threads(read)
    asked = Counter(key.value for plan in reads for key in plan)
    expected_hits = sum(n for value, n in asked.items() if value in {k.value for k in keys})
    stats = cache.stats
    assert sum(served) == stats.cache_hits == expected_hits
    assert stats.total_requests == THREADS * 3000
    assert stats.cache_misses == THREADS * 3000 - expected_hits
    assert stats.evictions == 0
    for key in keys:  # every served read counted on its own entry
        entry = cache.peek(key)
        assert entry is not None
        assert entry.hit_count == asked[key.value]

    # Fill past capacity from 8 threads: exactly the overflow is evicted.
    fresh = [RequestKey.from_str(f"fresh {i}") for i in range(4000)]

    def overflow(t: int) -> None:
        start.wait(GUARD)
        for key in fresh[t::THREADS]:
            cache.insert(key, "x")

    assert run_threads(overflow) == [None] * THREADS
    assert len(cache) == cache.capacity
    assert cache.stats.evictions == len(keys) + len(fresh) - cache.capacity


# --- DedupCache: single flight with threads -------------------------------------------


def test_get_or_compute_runs_each_factory_once_per_key_and_expiry() -> None:
    clock = FakeClock()
    ttl = 10.0
    cache: DedupCache[tuple[str, int]] = DedupCache(capacity=1000, default_ttl=ttl, clock=clock)
    names = [f"q{i}" for i in range(30)]
    keys = {name: RequestKey.from_str(name) for name in names}
    phases = 4
    runs: Counter[tuple[str, int]] = Counter()
    runs_lock = threading.Lock()
    phase = [0]

    def advance() -> None:  # run by the last thread to reach the barrier
        phase[0] += 1
        clock.now = phase[0] * ttl  # every entry of the last phase has just expired

    barrier = threading.Barrier(THREADS, action=advance)

    def factory_for(name: str) -> Callable[[], tuple[str, int]]:
        def factory() -> tuple[str, int]:
            with runs_lock:
                runs[(name, phase[0])] += 1
            sum(range(3000))  # some work, so that other threads arrive meanwhile
            return (name, phase[0])

        return factory

    calls_per_phase = 5

    def work(t: int) -> int:
        rng = random.Random(t)
        done = 0
        barrier.wait(GUARD)  # phase 1 starts
        for _ in range(phases):
            plan = ["q0"] + rng.sample(names, len(names)) * calls_per_phase  # q0: all at once
            for name in plan:
                value = cache.get_or_compute(keys[name], factory_for(name), timeout=GUARD)
                assert value == (name, phase[0])
                done += 1
            barrier.wait(GUARD)
        return done

    waited = Counter[str]()

    class CountingEvent(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waited["waits"] += 1
            return super().wait(timeout)

    original = singleflight.WaitEvent
    singleflight.WaitEvent = CountingEvent
    try:
        results = run_threads(work)
    finally:
        singleflight.WaitEvent = original
    assert all(isinstance(r, int) for r in results), results
    assert runs == Counter({(name, p): 1 for name in names for p in range(1, phases + 1)})
    total = sum(results)
    stats = cache.stats
    assert stats.total_requests == total
    assert stats.cache_misses == len(names) * phases  # one per computation
    assert stats.cache_hits == total - len(names) * phases
    assert stats.evictions == len(names) * (phases - 1)  # each expired entry, once
    assert waited["waits"] > 0  # threads really did wait on each other's computations


class Boom(Exception):
    pass


class Abort(BaseException):
    """Not an Exception: stands for KeyboardInterrupt or SystemExit inside a factory."""


@pytest.mark.parametrize("error", [Boom, Abort])
def test_a_factory_that_raises_caches_nothing_and_deadlocks_nobody(
    error: type[BaseException],
) -> None:
    cache: DedupCache[str] = DedupCache(capacity=8, clock=FakeClock())
    key = RequestKey.from_str("flaky question")
    failures = 3
    counter = itertools.count()
    counter_lock = threading.Lock()
    raised_in: dict[int, int] = {}

    def work(t: int) -> object:
        def factory() -> str:
            with counter_lock:
                n = next(counter)
            if n < failures:
                raised_in[n] = t
                raise error(n)
            sum(range(3000))
            return "answer"

        start.wait(GUARD)
        return cache.get_or_compute(key, factory, timeout=GUARD)

    start = threading.Barrier(THREADS)
    results = run_threads(work)
    errors = [r for r in results if isinstance(r, error)]
    assert len(errors) == failures
    assert results.count("answer") == THREADS - failures
    for exc in errors:  # each failure went to the thread whose factory raised it
        assert results[raised_in[exc.args[0]]] is exc
    assert next(counter) == failures + 1  # three failures, then exactly one success
    stats = cache.stats
    assert stats.cache_misses == failures + 1
    assert stats.cache_hits == THREADS - failures - 1
    assert cache.get(key) == "answer"


def test_a_factory_blocking_past_the_timeout_releases_its_waiters() -> None:
    assert DedupCache().wait_timeout == DEFAULT_WAIT_TIMEOUT == 300.0  # the documented default
    cache: DedupCache[str] = DedupCache(capacity=8, clock=FakeClock())
    key, other = RequestKey.from_str("slow"), RequestKey.from_str("other")
    started, release = threading.Event(), threading.Event()
    second_factory_runs = []

    def slow() -> str:
        started.set()
        assert release.wait(GUARD)
        return "late answer"

    leader = threading.Thread(target=lambda: cache.get_or_compute(key, slow), daemon=True)
    leader.start()
    assert started.wait(GUARD)

    def wait_briefly(t: int) -> object:
        if t == 0:  # a different key is not held up by the blocked factory
            return cache.get_or_compute(other, lambda: "other answer", timeout=0)

        def second_factory() -> str:
            second_factory_runs.append(t)
            return "dup"

        return cache.get_or_compute(key, second_factory, timeout=0 if t == 1 else SHORT)

    results = run_threads(wait_briefly)
    assert results[0] == "other answer"
    assert all(isinstance(r, SingleFlightTimeoutError) for r in results[1:]), results
    assert all(isinstance(r, TimeoutError) for r in results[1:])
    assert second_factory_runs == []  # nobody started a second computation meanwhile
    release.set()
    leader.join(GUARD)
    assert not leader.is_alive()
    assert cache.get(key) == "late answer"  # the blocked factory cached its value in the end
    stats = cache.stats
    assert stats.cache_misses == 1 + 1 + (THREADS - 1)  # other, slow, the timed-out waiters
    assert stats.cache_hits == 1


# --- DedupCache: single flight with asyncio -------------------------------------------


def test_aget_or_compute_runs_each_factory_once_per_key_and_expiry() -> None:
    clock = FakeClock()
    ttl = 10.0
    names = [f"q{i}" for i in range(20)]
    keys = {name: RequestKey.from_str(name) for name in names}
    tasks_per_phase = 64
    phases = 3
    runs: Counter[tuple[str, int]] = Counter()

    async def main() -> DedupCache[tuple[str, int]]:
        cache: DedupCache[tuple[str, int]] = DedupCache(capacity=100, default_ttl=ttl, clock=clock)
        for phase in range(phases):
            clock.now = phase * ttl

            def factory_for(name: str, phase: int = phase) -> Callable[[], Any]:
                async def factory() -> tuple[str, int]:
                    runs[(name, phase)] += 1
                    for _ in range(3):
                        await asyncio.sleep(0)  # a yield to the loop, not a wait
                    return (name, phase)

                return factory

            async def task(t: int, phase: int = phase) -> None:
                rng = random.Random(t * 100 + phase)
                for name in rng.sample(names, 8):
                    value = await cache.aget_or_compute(keys[name], factory_for(name))
                    assert value == (name, phase)

            await asyncio.wait_for(
                asyncio.gather(*(task(t) for t in range(tasks_per_phase))), GUARD
            )
        return cache

    cache = asyncio.run(main())
    assert runs == Counter({(name, p): 1 for name in names for p in range(phases)})
    stats = cache.stats
    total = tasks_per_phase * 8 * phases
    assert stats.total_requests == total
    assert stats.cache_misses == len(names) * phases
    assert stats.cache_hits == total - len(names) * phases
    assert stats.evictions == len(names) * (phases - 1)


def test_cancelling_the_computing_task_hands_over_to_a_waiter() -> None:
    key = RequestKey.from_str("question")
    calls: list[str] = []

    async def main() -> None:
        cache: DedupCache[str] = DedupCache(capacity=8, clock=FakeClock())
        started, never = asyncio.Event(), asyncio.Event()

        async def hang() -> str:
            calls.append("hang")
            started.set()
            await never.wait()
            return "never"

        async def quick() -> str:
            calls.append("quick")
            return "answer"

        leader = asyncio.create_task(cache.aget_or_compute(key, hang))
        await asyncio.wait_for(started.wait(), GUARD)
        waiters = [asyncio.create_task(cache.aget_or_compute(key, quick)) for _ in range(7)]
        cancelled_waiter = asyncio.create_task(cache.aget_or_compute(key, quick))
        for _ in range(3):
            await asyncio.sleep(0)  # let every waiter reach the flight
        cancelled_waiter.cancel()
        leader.cancel()
        results = await asyncio.wait_for(asyncio.gather(*waiters), GUARD)
        assert results == ["answer"] * 7
        for task in (leader, cancelled_waiter):
            with pytest.raises(asyncio.CancelledError):
                await task
        stats = cache.stats
        assert stats.cache_misses == 3  # the cancelled leader, the cancelled waiter, the new leader
        assert stats.cache_hits == 6
        assert await cache.aget_or_compute(key, quick) == "answer"  # cached now

    asyncio.run(main())
    assert calls == ["hang", "quick"]  # one takeover, not one per waiter


def test_async_waiters_time_out_and_a_failing_factory_deadlocks_nobody() -> None:
    async def main() -> None:
        cache: DedupCache[str] = DedupCache(capacity=8, clock=FakeClock())
        key = RequestKey.from_str("slow")
        started, release = asyncio.Event(), asyncio.Event()

        async def slow() -> str:
            started.set()
            await release.wait()
            return "late answer"

        async def unused() -> str:
            raise AssertionError("a waiter started a second computation")

        leader = asyncio.create_task(cache.aget_or_compute(key, slow))
        await asyncio.wait_for(started.wait(), GUARD)
        results = await asyncio.gather(
            *(cache.aget_or_compute(key, unused, timeout=SHORT) for _ in range(5)),
            return_exceptions=True,
        )
        assert all(isinstance(r, SingleFlightTimeoutError) for r in results), results
        release.set()
        assert await asyncio.wait_for(leader, GUARD) == "late answer"

        flaky = RequestKey.from_str("flaky")
        attempts = itertools.count()

        async def fails_twice() -> str:
            n = next(attempts)
            await asyncio.sleep(0)
            if n < 2:
                raise Boom(n)
            return "answer"

        outcomes = await asyncio.wait_for(
            asyncio.gather(
                *(cache.aget_or_compute(flaky, fails_twice) for _ in range(6)),
                return_exceptions=True,
            ),
            GUARD,
        )
        assert sum(isinstance(o, Boom) for o in outcomes) == 2
        assert outcomes.count("answer") == 4
        assert next(attempts) == 3

    asyncio.run(main())


def test_threads_and_event_loops_sharing_one_cache_do_not_deadlock() -> None:
    cache: DedupCache[str] = DedupCache(capacity=64, clock=FakeClock())
    keys = [RequestKey.from_str(f"shared {i}") for i in range(6)]
    runs: Counter[int] = Counter()
    lock = threading.Lock()
    start = threading.Barrier(THREADS)

    def compute(i: int) -> str:
        with lock:
            runs[i] += 1
        sum(range(3000))
        return f"answer {i}"

    def work(t: int) -> list[str]:
        start.wait(GUARD)
        if t % 2:  # a plain thread
            return [
                cache.get_or_compute(k, functools.partial(compute, i)) for i, k in enumerate(keys)
            ]

        async def loop_main() -> list[str]:  # a thread running its own event loop
            async def afactory(i: int) -> str:
                await asyncio.sleep(0)
                return compute(i)

            async def one(i: int, key: RequestKey) -> str:
                return await cache.aget_or_compute(key, lambda: afactory(i))

            batches = await asyncio.gather(
                *(one(i, k) for _ in range(4) for i, k in enumerate(keys))
            )
            return list(batches[: len(keys)])

        return asyncio.run(loop_main())

    results = run_threads(work)
    expected = [f"answer {i}" for i in range(len(keys))]
    assert all(r == expected for r in results), results
    # Threads coalesce with threads and tasks with tasks of their own loop (documented):
    # at most one computation for the threads plus one per event loop.
    loops = THREADS // 2
    assert all(1 <= runs[i] <= 1 + loops for i in range(len(keys))), runs
