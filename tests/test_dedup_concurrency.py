"""DedupCache under thread concurrency: single flight, failures, timeouts, exact stats.

Ordering is arranged with Events, Barriers and Conditions, never with sleeps. Thread
waits carry a generous timeout only so that a bug fails the test instead of hanging it.
"""

from __future__ import annotations

import functools
import threading

import pytest

from conftest import run_threads
from loopfuse.dedup import (
    DedupCache,
    RequestKey,
    SingleFlightReentryError,
    SingleFlightTimeoutError,
    singleflight,
)
from loopfuse.errors import LoopfuseError

GUARD = 30.0  # seconds; only reached when something is broken


class WaiterCount:
    """Counts threads blocked in a single-flight wait (patched in as the wait event)."""

    def __init__(self) -> None:
        self.blocked = 0
        self.changed = threading.Condition()

    def event_type(self) -> type[threading.Event]:
        counter = self

        class CountingEvent(threading.Event):
            def wait(self, timeout: float | None = None) -> bool:
                with counter.changed:
                    counter.blocked += 1
                    counter.changed.notify_all()
                try:
                    return super().wait(timeout)
                finally:
                    with counter.changed:
                        counter.blocked -= 1

        return CountingEvent

    def wait_for(self, blocked: int) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: self.blocked >= blocked, GUARD)


@pytest.fixture
def waiters(monkeypatch: pytest.MonkeyPatch) -> WaiterCount:
    count = WaiterCount()
    monkeypatch.setattr(singleflight, "WaitEvent", count.event_type())
    return count


KEY = RequestKey.from_str("the question")

# -- threads ----------------------------------------------------------------------------------


def test_concurrent_callers_run_the_factory_once(waiters: WaiterCount) -> None:
    n = 8
    cache: DedupCache[str] = DedupCache(capacity=16)
    calls: list[int] = []

    def factory() -> str:
        calls.append(1)
        waiters.wait_for(n - 1)  # every other caller is waiting for this computation
        return "answer"

    results, errors = run_threads(n, lambda _: cache.get_or_compute(KEY, factory))
    assert errors == []
    assert results == ["answer"] * n
    assert len(calls) == 1
    s = cache.stats
    assert (s.total_requests, s.cache_hits, s.cache_misses) == (n, n - 1, 1)
    assert cache.get(KEY) == "answer"


def test_a_failing_factory_caches_nothing_and_a_waiter_computes_next(
    waiters: WaiterCount,
) -> None:
    n = 6
    cache: DedupCache[str] = DedupCache(capacity=16)
    calls: list[int] = []
    calls_lock = threading.Lock()

    def factory() -> str:
        with calls_lock:
            calls.append(1)
            attempt = len(calls)
        if attempt == 1:
            waiters.wait_for(n - 1)
            raise RuntimeError("upstream 500")
        return f"answer {attempt}"

    results, errors = run_threads(n, lambda _: cache.get_or_compute(KEY, factory))
    assert [str(e) for e in errors] == ["upstream 500"]
    assert len(calls) == 2  # the failure, then exactly one waiter's retry
    assert sorted(r for r in results if r is not None) == ["answer 2"] * (n - 1)
    s = cache.stats
    assert (s.total_requests, s.cache_hits, s.cache_misses) == (n, n - 2, 2)


def test_failure_without_waiters_caches_nothing() -> None:
    cache: DedupCache[str] = DedupCache(capacity=4)

    def boom() -> str:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        cache.get_or_compute(KEY, boom)
    assert KEY not in cache
    assert cache.get_or_compute(KEY, lambda: "ok") == "ok"


def test_waiter_times_out_while_the_factory_goes_on() -> None:
    cache: DedupCache[str] = DedupCache(capacity=4, wait_timeout=GUARD)
    started, release = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        assert release.wait(GUARD)
        return "late answer"

    leader = threading.Thread(target=lambda: cache.get_or_compute(KEY, slow))
    leader.start()
    assert started.wait(GUARD)
    with pytest.raises(SingleFlightTimeoutError) as error:
        cache.get_or_compute(KEY, lambda: "never", timeout=0)
    assert isinstance(error.value, TimeoutError)
    assert isinstance(error.value, LoopfuseError)
    release.set()
    leader.join(GUARD)
    assert cache.get(KEY) == "late answer"
    s = cache.stats
    assert (s.total_requests, s.cache_hits, s.cache_misses) == (3, 1, 2)


def test_a_real_timeout_elapses() -> None:
    cache: DedupCache[str] = DedupCache(capacity=4)
    started, release = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        assert release.wait(GUARD)
        return "x"

    leader = threading.Thread(target=lambda: cache.get_or_compute(KEY, slow))
    leader.start()
    assert started.wait(GUARD)
    try:
        with pytest.raises(SingleFlightTimeoutError):
            cache.get_or_compute(KEY, lambda: "never", timeout=0.05)
    finally:
        release.set()
        leader.join(GUARD)


def test_a_factory_asking_for_its_own_key_raises_instead_of_deadlocking() -> None:
    cache: DedupCache[str] = DedupCache(capacity=4)

    def reentrant() -> str:
        return cache.get_or_compute(KEY, lambda: "inner")

    with pytest.raises(SingleFlightReentryError):
        cache.get_or_compute(KEY, reentrant)
    assert KEY not in cache
    assert cache.get_or_compute(KEY, lambda: "ok") == "ok"


def test_other_keys_are_not_blocked_by_a_computation() -> None:
    cache: DedupCache[str] = DedupCache(capacity=4)
    started, release = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        assert release.wait(GUARD)
        return "slow"

    leader = threading.Thread(target=lambda: cache.get_or_compute(KEY, slow))
    leader.start()
    assert started.wait(GUARD)
    try:
        other = RequestKey.from_str("another question")
        assert cache.get_or_compute(other, lambda: "fast") == "fast"
        cache.insert(RequestKey.from_str("x"), "y")
        assert cache.get(RequestKey.from_str("x")) == "y"
    finally:
        release.set()
        leader.join(GUARD)


def test_colliding_keys_never_share_a_computation(waiters: WaiterCount) -> None:
    cache: DedupCache[str] = DedupCache(capacity=4)
    a = RequestKey.from_messages([("u", "x\x01y\x00z")])
    b = RequestKey.from_messages([("u", "x"), ("y", "z")])
    both_started = threading.Barrier(2, timeout=GUARD)

    def compute(name: str) -> str:
        both_started.wait()  # both factories run at once: neither waited for the other
        return name

    results, errors = run_threads(
        2, lambda i: cache.get_or_compute((a, b)[i], lambda: compute("ab"[i]))
    )
    assert errors == []
    assert results == ["a", "b"]


def test_stats_stay_exact_under_contention() -> None:
    threads, per_thread, capacity = 8, 400, 100
    cache: DedupCache[int] = DedupCache(capacity=capacity, default_ttl=3600.0)
    start = threading.Barrier(threads, timeout=GUARD)
    keys = [[RequestKey.from_str(f"t{t} k{i}") for i in range(per_thread)] for t in range(threads)]

    def work(t: int) -> int:
        start.wait()
        hits = 0
        for i, key in enumerate(keys[t]):
            cache.insert(key, i)
            hits += cache.get(key) is not None or 0
            hits += cache.get(keys[(t + 1) % threads][i]) is not None or 0
        return hits

    results, errors = run_threads(threads, work)
    assert errors == []
    s = cache.stats
    assert s.total_requests == 2 * threads * per_thread
    assert s.cache_hits == sum(results)
    assert s.cache_hits + s.cache_misses == s.total_requests
    # Every key is distinct and nothing expires: each insert past capacity evicts one.
    assert s.evictions == threads * per_thread - capacity
    assert len(cache) == capacity


def test_many_keys_many_threads_each_computed_once() -> None:
    threads, keys = 8, 50
    cache: DedupCache[int] = DedupCache(capacity=keys)
    calls = [0] * keys
    lock = threading.Lock()
    start = threading.Barrier(threads, timeout=GUARD)

    def factory(i: int) -> int:
        with lock:
            calls[i] += 1
        return i * i

    def work(_: int) -> list[int]:
        start.wait()
        return [
            cache.get_or_compute(RequestKey.from_str(f"k{i}"), functools.partial(factory, i))
            for i in range(keys)
        ]

    results, errors = run_threads(threads, work)
    assert errors == []
    assert all(r == [i * i for i in range(keys)] for r in results)
    assert calls == [1] * keys
    assert cache.stats.cache_misses == keys
