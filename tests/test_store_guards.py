"""The guards on a store: ``LoopBreaker(store=...)`` and ``DedupCache(store=...)``.

The default (in-memory) store is covered by the guards' own tests, unchanged; here the
same behaviour is required of a Redis store, plus what only a shared store can do:
fail, and share state between threads that do not share memory.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import pytest

from conftest import FakeClock
from loopfuse import DedupCache, LoopBreaker, LoopBroken, RequestKey
from loopfuse.dedup import SingleFlightReentryError, SingleFlightTimeoutError
from loopfuse.errors import ConfigError
from loopfuse.stores.memory import MemoryBreakerStore, MemoryCacheStore
from loopfuse.stores.redis import AsyncRedisStore, RedisStore
from store_helpers import RedisServer, redis_or_skip, running_server, unique_prefix

KEY = RequestKey.from_str("What is Rust?")


def test_default_stores_are_in_memory() -> None:
    assert isinstance(LoopBreaker().store, MemoryBreakerStore)
    assert isinstance(DedupCache[str]().store, MemoryCacheStore)


@pytest.mark.parametrize("store", [object(), "redis://localhost", MemoryCacheStore()])
def test_a_breaker_refuses_what_is_not_a_breaker_store(store: object) -> None:
    with pytest.raises(ConfigError, match="BreakerStore"):
        LoopBreaker(store=store)  # type: ignore[arg-type]


@pytest.mark.parametrize("store", [object(), MemoryBreakerStore()])
def test_a_cache_refuses_what_is_not_a_cache_store(store: object) -> None:
    with pytest.raises(ConfigError, match="CacheStore"):
        DedupCache(store=store)  # type: ignore[arg-type]


# -- on a real Redis ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    redis_or_skip()
    with running_server() as server:
        yield server


@pytest.fixture
def store(server: RedisServer) -> Iterator[RedisStore]:
    client = server.client()
    yield RedisStore(client, unique_prefix(), time_source="caller")
    client.close()


def test_sync_methods_on_an_async_store_raise_config_error_naming_the_async_one(
    server: RedisServer,
) -> None:
    import redis.asyncio

    astore = AsyncRedisStore(redis.asyncio.Redis(port=server.port))
    breaker = LoopBreaker(store=astore)
    cache: DedupCache[str] = DedupCache(store=astore)
    calls = {
        "acheck": lambda: breaker.check("s", 1),
        "acheck_request": lambda: breaker.check_request("s", b'{"input": "x"}'),
        "areset": lambda: breaker.reset(),
        "atracked_sessions": lambda: breaker.tracked_sessions,
        "aget": lambda: cache.get(KEY),
        "ainsert": lambda: cache.insert(KEY, "v"),
        "apeek": lambda: KEY in cache,
        "aclear": lambda: cache.clear(),
        "aget_or_compute": lambda: cache.get_or_compute(KEY, lambda: "v"),
        "aget_or_compute_request": lambda: cache.get_or_compute_request(b"{}", lambda: "v"),
    }
    for name, call in calls.items():
        with pytest.raises(ConfigError, match=rf"await (LoopBreaker|DedupCache)\.{name}\(\)"):
            call()
    # a configuration error, not a guard failure let through
    assert breaker.internal_errors == cache.internal_errors == 0
    assert astore.failure_count == 0


def test_breaker_on_redis_decides_like_the_default(store: RedisStore, clock: FakeClock) -> None:
    shared = LoopBreaker(window=30, max_repeats=2, clock=clock, store=store)
    local = LoopBreaker(window=30, max_repeats=2, clock=clock)
    script = [("s1", 1), ("s1", 1), ("s1", 1), ("s2", 1), ("s1", 2), ("s1", 1)]
    for step, (session, fp) in enumerate(script * 3):
        clock.advance(7.0 if step % 4 == 0 else 0.5)
        assert shared.check(session, fp) == local.check(session, fp), step
    assert shared.tracked_sessions == local.tracked_sessions
    shared.reset("s1")
    local.reset("s1")
    assert shared.check("s1", 1) == local.check("s1", 1)
    assert shared.internal_errors == 0


def test_breaker_fails_open_when_redis_is_down_and_closed_when_told(
    caplog: pytest.LogCaptureFixture, clock: FakeClock
) -> None:
    with running_server() as server:
        store = RedisStore.from_url(
            server.url, timeout=0.2, key_prefix=unique_prefix(), clock=clock
        )
        breaker = LoopBreaker(max_repeats=1, store=store)
        closed = LoopBreaker(max_repeats=1, store=store, fail_closed=True)
        assert breaker.enforce("s", 1).allowed
        with pytest.raises(LoopBroken):
            breaker.enforce("s", 1)
        server.stop()
        with caplog.at_level(logging.WARNING, logger="loopfuse"):
            decisions = [breaker.enforce("s", 1) for _ in range(10)]  # never raises
        assert all(d.allowed and d.repeats == 0 for d in decisions)
        assert decisions[0].error is not None
        assert "ConnectionError" in decisions[0].error
        assert "circuit open" in (decisions[-1].error or "")  # Redis no longer called
        assert breaker.internal_errors == 10
        assert len(caplog.records) == 1  # the store logs once per interval, not per request
        refused = closed.check("s", 1)
        assert not refused.allowed
        assert refused.error is not None
        body = b'{"input": "ping"}'
        assert breaker.check_request("s", body).allowed
        server.start()
        clock.advance(store.circuit.cooldown)  # the next call probes Redis
        assert breaker.check("s", 1).repeats == 1  # an empty server: flowing and counting


def test_breaker_on_a_store_that_fails_closed_refuses_without_raising() -> None:
    with running_server() as server:
        store = RedisStore.from_url(server.url, timeout=0.2, fail_closed=True)
        breaker = LoopBreaker(max_repeats=5, store=store)
        server.stop()
        decision = breaker.check("s", 1)
        assert not decision.allowed
        assert decision.error is not None
        assert "unavailable" in decision.error


def test_cache_on_redis_keeps_the_cache_api(store: RedisStore, clock: FakeClock) -> None:
    cache: DedupCache[str] = DedupCache(default_ttl=60.0, clock=clock, store=store)
    other = RequestKey.from_messages([("u", "x\x01y\x00z")])
    colliding = RequestKey.from_messages([("u", "x"), ("y", "z")])
    assert cache.get(KEY) is None
    cache.insert(KEY, "A systems programming language.")
    assert cache.get(KEY) == "A systems programming language."
    assert KEY in cache
    entry = cache.peek(KEY)
    assert entry is not None
    assert (entry.value, entry.created_at, entry.ttl) == (
        "A systems programming language.",
        clock.now,
        60.0,
    )
    cache.insert(other, "for other")
    assert cache.get(colliding) is None
    clock.advance(60.0)
    assert cache.get(KEY) is None
    cache.insert_with_ttl(KEY, "short", ttl=1.0)
    assert cache.get(KEY) == "short"
    stats = cache.stats
    assert (stats.cache_hits, stats.cache_misses, stats.collisions) == (2, 3, 1)
    assert cache.evict_expired() == 0
    assert len(cache) == 0  # a shared store does not count its entries
    cache.clear()
    assert cache.get(KEY) is None
    assert cache.stats.total_requests == 1


def test_caches_that_share_only_redis_compute_once(server: RedisServer) -> None:
    # Each thread has its own DedupCache and client, as each worker process would.
    prefix = unique_prefix()
    calls: list[int] = []
    start = threading.Barrier(6)
    results: list[str] = []

    def ask() -> str:
        calls.append(1)
        time.sleep(0.3)  # the paid call, long enough for every other caller to arrive
        return "answer"

    def worker() -> None:
        client = server.client()
        cache: DedupCache[str] = DedupCache(store=RedisStore(client, prefix))
        start.wait()
        results.append(cache.get_or_compute(KEY, ask))
        client.close()

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == ["answer"] * 6
    assert len(calls) == 1


def test_a_waiter_times_out_while_another_process_holds_the_lock(store: RedisStore) -> None:
    cache: DedupCache[str] = DedupCache(store=store)
    assert store.acquire(KEY.value, KEY.digest, 30.0) is not None  # "another process"
    with pytest.raises(SingleFlightTimeoutError):
        cache.get_or_compute(KEY, lambda: "never", timeout=0.05)
    assert cache.stats.cache_misses == 1


def test_a_factory_asking_for_its_own_key_raises(store: RedisStore) -> None:
    cache: DedupCache[str] = DedupCache(store=store)

    def ask() -> str:
        return cache.get_or_compute(KEY, lambda: "inner")

    with pytest.raises(SingleFlightReentryError):
        cache.get_or_compute(KEY, ask)
    assert cache.get_or_compute(KEY, lambda: "then") == "then"  # the lock was released


def test_a_value_the_codec_refuses_is_returned_not_cached(
    store: RedisStore, caplog: pytest.LogCaptureFixture
) -> None:
    cache: DedupCache[object] = DedupCache(store=store)
    value = object()
    with caplog.at_level(logging.WARNING, logger="loopfuse"):
        assert cache.get_or_compute(KEY, lambda: value) is value
    assert "could not store" in caplog.text
    assert cache.get(KEY) is None


def test_cache_computes_when_redis_is_down() -> None:
    with running_server() as server:
        store = RedisStore.from_url(server.url, timeout=0.2, key_prefix=unique_prefix())
        cache: DedupCache[str] = DedupCache(store=store)
        server.stop()
        assert cache.get(KEY) is None
        assert cache.get_or_compute(KEY, lambda: "computed") == "computed"
        cache.insert(KEY, "dropped")
        assert store.failure_count >= 4
