"""One contract for every store: the in-memory ones, Redis (sync) and Redis (asyncio).

The Redis stores run with ``time_source="caller"`` here, so that the fake clock of the
tests is their time too; ``tests/test_store_redis.py`` covers the server's clock,
failures and several processes. A differential test replays random operations on the
memory store and on each other store and requires the very same answers.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Iterator
from typing import Any

import pytest

from loopfuse.stores import MISS, AsyncBreakerStore, AsyncCacheStore, BreakerStore, CacheStore
from loopfuse.stores.memory import MemoryBreakerStore, MemoryCacheStore
from store_helpers import RedisServer, SyncOfAsync, redis_or_skip, running_server, unique_prefix

KINDS = ["memory", "redis", "redis-async"]
D1 = bytes(range(32))
D2 = bytes(range(1, 33))


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    redis_or_skip()
    with running_server() as server:
        yield server


def _stores(kind: str, request: pytest.FixtureRequest) -> Iterator[tuple[Any, Any]]:
    """(breaker store, cache store) of one kind, on fresh state."""
    if kind == "memory":
        yield MemoryBreakerStore(), MemoryCacheStore(capacity=64)
        return
    server: RedisServer = request.getfixturevalue("server")
    prefix = unique_prefix()
    if kind == "redis":
        from loopfuse.stores.redis import RedisStore

        client = server.client()
        store = RedisStore(client, prefix, time_source="caller")
        assert isinstance(store, BreakerStore)
        assert isinstance(store, CacheStore)
        yield store, store
        client.close()
        return
    import redis.asyncio

    from loopfuse.stores.redis import AsyncRedisStore

    loop = asyncio.new_event_loop()
    aclient = redis.asyncio.Redis(port=server.port, socket_timeout=2.0)
    astore = AsyncRedisStore(aclient, prefix, time_source="caller")
    assert isinstance(astore, AsyncBreakerStore)
    assert isinstance(astore, AsyncCacheStore)
    wrapped = SyncOfAsync(astore, loop)
    yield wrapped, wrapped
    loop.run_until_complete(aclient.aclose())
    loop.close()


@pytest.fixture(params=KINDS)
def breaker(request: pytest.FixtureRequest) -> Iterator[Any]:
    for pair in _stores(request.param, request):
        yield pair[0]


@pytest.fixture(params=KINDS)
def cache(request: pytest.FixtureRequest) -> Iterator[Any]:
    for pair in _stores(request.param, request):
        yield pair[1]


# -- breaker ------------------------------------------------------------------------------


def test_counts_repeats_per_fingerprint_and_session(breaker: Any) -> None:
    rec = breaker.record
    assert [rec("s", 1, 10.0, 30.0, 256) for _ in range(3)] == [1, 2, 3]
    assert rec("s", 2, 10.0, 30.0, 256) == 1
    assert rec("other", 1, 10.0, 30.0, 256) == 1
    assert rec("s", 1, 11.0, 30.0, 256) == 4


def test_sample_is_live_while_now_minus_seen_is_below_window(breaker: Any) -> None:
    assert breaker.record("s", 7, 100.0, 30.0, 256) == 1
    assert breaker.record("s", 7, 129.5, 30.0, 256) == 2
    # at 130.0 the first sample is exactly a window old: dropped; the second is live
    assert breaker.record("s", 7, 130.0, 30.0, 256) == 2
    assert breaker.record("s", 7, 1000.0, 30.0, 256) == 1


def test_boundary_is_exact_for_unround_times(breaker: Any) -> None:
    seen = 1_732_886_400.123_456_7
    window = 0.1
    edge = seen + window
    assert breaker.record("s", 5, seen, window, 256) == 1
    expected_live = (math.nextafter(edge, 0) - seen) < window
    assert breaker.record("s", 5, math.nextafter(edge, 0), window, 256) == 1 + expected_live


def test_oldest_samples_go_first_past_max_samples(breaker: Any) -> None:
    rec = breaker.record
    assert [rec("s", fp, 0.0, 60.0, 3) for fp in (1, 2, 3)] == [1, 1, 1]
    assert rec("s", 1, 0.0, 60.0, 3) == 1  # the first 1 made room for this one
    assert rec("s", 4, 0.0, 60.0, 3) == 1  # drops 2
    assert rec("s", 2, 0.0, 60.0, 3) == 1  # drops 3; the earlier 2 is already gone
    assert rec("s", 1, 0.0, 60.0, 3) == 1  # window [4, 2, 1]: the earlier 1 is dropped
    assert rec("s", 2, 0.0, 60.0, 3) == 2  # window [2, 1, 2]: drops 4, two 2s live


def test_fingerprints_and_session_ids_of_any_shape(breaker: Any) -> None:
    for fp in (0, -1, 2**64 - 1, 2**64, -(2**200), 12345678901234567890123):
        assert breaker.record("s", fp, 0.0, 30.0, 256) == 1
        assert breaker.record("s", fp, 0.0, 30.0, 256) == 2
    for session in ("", "é\U0001f600", "\ud800 lone surrogate", "x" * 100_000, "a:{b}*?[c]"):
        assert breaker.record(session, 1, 0.0, 30.0, 256) == 1
        assert breaker.record(session, 1, 0.0, 30.0, 256) == 2


def test_reset_one_session_or_all(breaker: Any) -> None:
    for session in ("a", "b", "c"):
        breaker.record(session, 1, 0.0, 30.0, 256)
    breaker.reset("a")
    assert breaker.record("a", 1, 0.0, 30.0, 256) == 1
    assert breaker.record("b", 1, 0.0, 30.0, 256) == 2
    breaker.reset("never seen")
    breaker.reset()
    assert breaker.record("b", 1, 0.0, 30.0, 256) == 1
    assert breaker.record("c", 1, 0.0, 30.0, 256) == 1


def test_tracked_sessions_counts_sessions_with_a_live_sample(breaker: Any) -> None:
    assert breaker.tracked_sessions(0.0, 30.0) == 0
    for i in range(5):
        breaker.record(f"s{i}", 1, float(i), 30.0, 256)
    assert breaker.tracked_sessions(4.0, 30.0) == 5
    assert breaker.tracked_sessions(32.0, 30.0) == 2  # s3 (seen at 3) and s4 (at 4)
    assert breaker.tracked_sessions(40.0, 30.0) == 0


# -- cache --------------------------------------------------------------------------------


def test_get_serves_what_set_stored(cache: Any) -> None:
    assert cache.get(1, D1, 0.0) is MISS
    values: list[object] = [b"\x00\xffraw", "text é", {"a": [1, 2.5, None, True]}, [], 0, None]
    for key_value, value in enumerate(values, start=10):
        cache.set(key_value, D1, value, 60.0, 0.0)
    for key_value, value in enumerate(values, start=10):
        assert cache.get(key_value, D1, 1.0) == value
    assert cache.get(15, D1, 1.0) is None  # a cached None is a value, not a miss


def test_entry_expires_at_created_plus_ttl(cache: Any) -> None:
    cache.set(1, D1, "v", 60.0, 100.0)
    assert cache.get(1, D1, 159.999) == "v"
    assert cache.get(1, D1, 160.0) is MISS
    cache.set(2, D1, "forever", math.inf, 100.0)
    assert cache.get(2, D1, 1e12) == "forever"


def test_digest_mismatch_is_a_collision_and_a_miss(cache: Any) -> None:
    cache.set(1, D1, "for D1", 60.0, 0.0)
    assert cache.get(1, D2, 0.0) is MISS
    assert cache.collisions == 1
    assert cache.get(1, None, 0.0) == "for D1"  # a bare probe is served whatever lives there
    cache.set(2, None, "bare", 60.0, 0.0)
    assert cache.get(2, D1, 0.0) is MISS  # a bare entry proves nothing to a content key
    assert cache.collisions == 2
    cache.set(1, D2, "for D2", 60.0, 0.0)  # one slot per value: replaced
    assert cache.get(1, D2, 0.0) == "for D2"
    assert cache.get(1, D1, 0.0) is MISS


def test_peek_is_a_snapshot_without_side_effects(cache: Any) -> None:
    cache.set(1, D1, "v", 60.0, 5.0)
    entry = cache.peek(1, D1, 6.0)
    assert entry is not None
    assert (entry.value, entry.created_at, entry.ttl) == ("v", 5.0, 60.0)
    assert cache.peek(1, D2, 6.0) is None
    assert cache.peek(1, D1, 65.0) is None
    assert cache.peek(404, D1, 6.0) is None
    assert cache.collisions == 0


def test_lock_is_exclusive_and_only_its_token_releases_it(cache: Any) -> None:
    token = cache.acquire(1, D1, 30.0)
    assert isinstance(token, str)
    assert token
    assert cache.acquire(1, D1, 30.0) is None
    assert cache.acquire(1, D2, 30.0) is not None  # other content, other lock
    assert cache.acquire(1, None, 30.0) is not None
    cache.release(1, D1, "not the token")
    assert cache.acquire(1, D1, 30.0) is None
    cache.release(1, D1, token)
    again = cache.acquire(1, D1, 30.0)
    assert again is not None
    assert again != token


def test_clear_removes_entries_and_locks(cache: Any) -> None:
    cache.set(1, D1, "v", 60.0, 0.0)
    assert cache.get(1, D2, 0.0) is MISS
    assert cache.acquire(1, D1, 30.0) is not None
    cache.clear()
    assert cache.get(1, D1, 0.0) is MISS
    assert cache.collisions == 0
    assert cache.acquire(1, D1, 30.0) is not None


def test_large_values_round_trip(cache: Any) -> None:
    big = "x" * 2_000_000
    cache.set(1, D1, big, 60.0, 0.0)
    assert cache.get(1, D1, 0.0) == big
    nested: object = {"k": list(range(1000)), "d": {"e": [{"f": "g"}] * 100}}
    cache.set(2, None, nested, 60.0, 0.0)
    assert cache.get(2, None, 0.0) == nested


# -- differential: every store answers like the in-memory one ------------------------------


@pytest.mark.parametrize("kind", ["redis", "redis-async"])
@pytest.mark.parametrize("seed", range(8))
def test_random_operations_answer_like_the_memory_store(
    kind: str, seed: int, request: pytest.FixtureRequest
) -> None:
    rng = random.Random(seed)
    memory_breaker, memory_cache = MemoryBreakerStore(), MemoryCacheStore(capacity=10_000)
    for other_breaker, other_cache in _stores(kind, request):
        now = 1_700_000_000.0 + rng.random()
        # One breaker has one window and one sample cap; each run picks its own.
        window, max_samples = rng.choice([1.0, 2.5, 10.0]), rng.choice([3, 256])
        for _ in range(400):
            now += rng.choice([0.0, 0.0, 0.001, 0.25, 1.0, 3.0, 1 / 3])
            op = rng.random()
            if op < 0.6:
                args = (rng.choice("abc"), rng.randrange(4), now, window, max_samples)
                assert other_breaker.record(*args) == memory_breaker.record(*args), args
            elif op < 0.65:
                session = rng.choice(["a", None])
                other_breaker.reset(session)
                memory_breaker.reset(session)
            elif op < 0.7:
                expected = memory_breaker.tracked_sessions(now, window)
                assert other_breaker.tracked_sessions(now, window) == expected
            elif op < 0.85:
                args2 = (rng.randrange(5), rng.choice([D1, D2, None]), rng.random(), 2.0, now)
                other_cache.set(*args2)
                memory_cache.set(*args2)
            else:
                probe = (rng.randrange(5), rng.choice([D1, D2, None]), now)
                assert other_cache.get(*probe) == memory_cache.get(*probe), probe
        assert other_cache.collisions == memory_cache.collisions
