"""DedupCache: TTL, eviction order, replacement, stats, collisions, configuration."""

from __future__ import annotations

import math
from typing import Any

import pytest

from conftest import FakeClock
from loopfuse.dedup import CachedResponse, DedupCache, DedupStats, RequestKey
from loopfuse.errors import ConfigError, InvalidInputError


def k(text: str) -> RequestKey:
    return RequestKey.from_str(text)


def make(capacity: int = 4, ttl: float = 60.0) -> tuple[DedupCache[Any], FakeClock]:
    clock = FakeClock()
    return DedupCache(capacity=capacity, default_ttl=ttl, clock=clock), clock


def stats_tuple(cache: DedupCache[Any]) -> tuple[int, int, int, int, int]:
    s = cache.stats
    return (s.total_requests, s.cache_hits, s.cache_misses, s.evictions, s.collisions)


# -- basics ---------------------------------------------------------------------------------


def test_insert_then_get() -> None:
    cache, _ = make()
    cache.insert(k("q"), "answer")
    assert cache.get(k("q")) == "answer"
    assert cache.get(k("other")) is None
    assert stats_tuple(cache) == (2, 1, 1, 0, 0)
    assert len(cache) == 1


@pytest.mark.parametrize(
    "value", [{"choices": [{"message": "hi"}]}, b"raw bytes", 42, ("a", 1), ["list"], 0.5]
)
def test_values_are_generic(value: object) -> None:
    cache, _ = make()
    cache.insert(k("q"), value)
    assert cache.get(k("q")) is value


def test_a_cached_none_is_told_apart_by_peek_and_contains() -> None:
    cache, _ = make()
    cache.insert(k("q"), None)
    assert cache.get(k("q")) is None
    assert k("q") in cache
    assert k("other") not in cache
    entry = cache.peek(k("q"))
    assert entry is not None
    assert entry.value is None
    calls: list[int] = []
    assert cache.get_or_compute(k("q"), lambda: calls.append(1)) is None
    assert calls == []


def test_with_capacity_uses_a_60_second_ttl() -> None:
    cache: DedupCache[str] = DedupCache.with_capacity(128)
    assert cache.capacity == 128
    assert cache.default_ttl == 60.0


# -- TTL ------------------------------------------------------------------------------------


def test_entry_expires_exactly_at_its_ttl() -> None:
    cache, clock = make(ttl=10.0)
    cache.insert(k("q"), "a")
    clock.advance(9.999)
    assert cache.get(k("q")) == "a"
    clock.advance(0.001)
    assert cache.get(k("q")) is None
    assert len(cache) == 0  # removed when read
    assert stats_tuple(cache) == (2, 1, 1, 1, 0)


def test_insert_with_ttl_overrides_the_default() -> None:
    cache, clock = make(ttl=60.0)
    cache.insert_with_ttl(k("short"), "s", 1.0)
    cache.insert_with_ttl(k("forever"), "f", math.inf)
    cache.insert(k("default"), "d")
    clock.advance(1.0)
    assert cache.get(k("short")) is None
    assert cache.get(k("default")) == "d"
    clock.advance(10**9)
    assert cache.get(k("default")) is None
    assert cache.get(k("forever")) == "f"


def test_evict_expired_removes_and_counts() -> None:
    cache, clock = make(capacity=10, ttl=5.0)
    for i in range(3):
        cache.insert(k(f"q{i}"), i)
    cache.insert_with_ttl(k("long"), "l", 100.0)
    clock.advance(5.0)
    assert cache.evict_expired() == 3
    assert len(cache) == 1
    assert cache.evict_expired() == 0
    assert cache.stats.evictions == 3
    assert cache.stats.total_requests == 0


def test_expired_entries_count_in_len_until_removed() -> None:
    cache, clock = make(ttl=1.0)
    cache.insert(k("q"), "a")
    clock.advance(2.0)
    assert len(cache) == 1
    assert cache.peek(k("q")) is None  # not served, but peek removes nothing
    assert len(cache) == 1


def test_cached_response_snapshot() -> None:
    cache, clock = make(ttl=30.0)
    created = clock.now
    cache.insert(k("q"), "a")
    cache.get(k("q"))
    cache.get(k("q"))
    entry = cache.peek(k("q"))
    assert entry == CachedResponse("a", created_at=created, ttl=30.0, hit_count=2)
    assert entry.expires_at == created + 30.0
    assert not entry.is_expired(created + 29.0)
    assert entry.is_expired(created + 30.0)
    assert cache.stats.total_requests == 2  # peek counts nothing


# -- replacement and eviction order ---------------------------------------------------------


def test_replacing_a_key_refreshes_it_without_evicting() -> None:
    cache, clock = make(capacity=2, ttl=10.0)
    cache.insert(k("a"), 1)
    cache.insert(k("b"), 2)
    cache.get(k("a"))
    clock.advance(8.0)
    cache.insert(k("a"), 11)  # full cache, existing key
    assert len(cache) == 2
    assert cache.stats.evictions == 0
    entry = cache.peek(k("a"))
    assert entry is not None
    assert (entry.value, entry.created_at, entry.hit_count) == (11, clock.now, 0)
    clock.advance(5.0)  # past a's first life, within its second
    assert cache.get(k("a")) == 11
    assert cache.get(k("b")) is None


def test_full_cache_evicts_the_least_recently_used() -> None:
    cache, _ = make(capacity=3)
    for name in "abc":
        cache.insert(k(name), name)
    cache.get(k("a"))  # b is now the least recently used
    cache.insert(k("d"), "d")
    assert k("b") not in cache
    assert all(k(name) in cache for name in "acd")
    assert cache.stats.evictions == 1


def test_full_cache_evicts_expired_entries_first() -> None:
    cache, clock = make(capacity=3, ttl=100.0)
    cache.insert(k("old"), 1)  # least recently used, but alive
    cache.insert_with_ttl(k("x"), 2, 5.0)
    cache.insert_with_ttl(k("y"), 3, 5.0)  # most recently used, but expiring
    clock.advance(5.0)
    cache.insert(k("new"), 4)
    assert k("old") in cache  # an LRU entry survives while expired ones go
    assert k("x") not in cache
    assert k("y") not in cache
    assert len(cache) == 2  # every expired entry went, not just one
    assert cache.stats.evictions == 2


def test_expired_entries_of_any_ttl_go_before_the_lru() -> None:
    cache, clock = make(capacity=3, ttl=1000.0)
    cache.insert(k("lru"), 0)
    cache.insert_with_ttl(k("t7"), 1, 7.0)
    cache.insert_with_ttl(k("t3"), 2, 3.0)
    clock.advance(4.0)  # only t3 has expired
    cache.insert(k("n1"), 3)
    assert [name for name in ("lru", "t7", "t3", "n1") if k(name) in cache] == ["lru", "t7", "n1"]
    cache.insert(k("n2"), 4)  # nothing expired now: the LRU goes
    assert k("lru") not in cache
    assert cache.stats.evictions == 2


def test_get_of_an_unserved_key_does_not_refresh_lru() -> None:
    cache, _ = make(capacity=2)
    cache.insert(RequestKey.from_messages([("u", "x\x01y\x00z")]), "a")
    cache.insert(k("b"), "b")
    # Same 64-bit value, other content: not served, so "a" stays least recently used.
    assert cache.get(RequestKey.from_messages([("u", "x"), ("y", "z")])) is None
    cache.insert(k("c"), "c")
    assert len(cache) == 2
    assert k("b") in cache
    assert RequestKey.from_messages([("u", "x\x01y\x00z")]) not in cache


def test_capacity_one() -> None:
    cache, _ = make(capacity=1)
    cache.insert(k("a"), 1)
    cache.insert(k("b"), 2)
    assert (cache.get(k("a")), cache.get(k("b")), len(cache)) == (None, 2, 1)


# -- stats ----------------------------------------------------------------------------------


def test_stats_start_empty_and_hit_rate_is_zero() -> None:
    cache, _ = make()
    assert cache.stats == DedupStats(0, 0, 0, 0, 0)
    assert cache.stats.hit_rate == 0.0
    assert cache.stats.summary() == "requests=0 hits=0 misses=0 evictions=0 hit_rate=0.0%"


def test_summary_format() -> None:
    cache, _ = make()
    cache.insert(k("q"), "a")
    for _ in range(2):
        cache.get(k("q"))
    cache.get(k("nope"))
    assert cache.stats.hit_rate == pytest.approx(2 / 3)
    assert cache.stats.summary() == "requests=3 hits=2 misses=1 evictions=0 hit_rate=66.7%"


def test_clear_removes_entries_and_resets_stats() -> None:
    cache, _ = make(capacity=1)
    cache.insert(k("a"), 1)
    cache.insert(k("b"), 2)
    cache.get(k("b"))
    cache.get(k("a"))
    assert stats_tuple(cache) == (2, 1, 1, 1, 0)
    cache.clear()
    assert len(cache) == 0
    assert cache.get(k("b")) is None
    assert stats_tuple(cache) == (1, 0, 1, 0, 0)
    cache.insert(k("a"), 1)
    assert cache.get(k("a")) == 1


def test_stats_is_a_snapshot() -> None:
    cache, _ = make()
    before = cache.stats
    cache.get(k("q"))
    assert before.total_requests == 0
    assert cache.stats.total_requests == 1
    with pytest.raises(AttributeError):
        before.cache_hits = 5  # type: ignore[misc]


# -- collision protection -------------------------------------------------------------------


def test_constructed_collision_is_never_served() -> None:
    cache, _ = make()
    a = RequestKey.from_messages([("u", "x\x01y\x00z")])
    b = RequestKey.from_messages([("u", "x"), ("y", "z")])
    assert a == b
    cache.insert(a, "answer for a")
    assert cache.get(b) is None
    assert cache.get(a) == "answer for a"
    assert stats_tuple(cache) == (2, 1, 1, 0, 1)
    assert b not in cache
    assert cache.peek(b) is None


def test_colliding_content_replaces_the_slot_when_inserted() -> None:
    cache, _ = make()
    a = RequestKey.from_messages([("u", "x\x01y\x00z")])
    b = RequestKey.from_messages([("u", "x"), ("y", "z")])
    cache.insert(a, "A")
    assert cache.get_or_compute(b, lambda: "B") == "B"
    assert cache.get(b) == "B"
    assert cache.get(a) is None
    assert len(cache) == 1
    assert cache.stats.collisions == 2


def test_forged_digest_is_a_collision() -> None:
    cache, _ = make()
    real = k("question")
    forged = RequestKey(real.value, bytes(32))
    cache.insert(real, "answer")
    assert cache.get(forged) is None
    assert cache.stats.collisions == 1


def test_bare_keys() -> None:
    cache, _ = make()
    real = k("question")
    cache.insert(real, "answer")
    bare = RequestKey(real.value)
    assert cache.get(bare) == "answer"  # a bare probe trusts the value
    cache.insert(RequestKey(77), "stored bare")
    assert cache.get(RequestKey(77)) == "stored bare"
    # An entry stored under a bare key cannot be proven to match content.
    content_77 = RequestKey(77, bytes(range(32)))
    assert cache.get(content_77) is None
    assert cache.stats.collisions == 1


# -- configuration and bad input -------------------------------------------------------------


@pytest.mark.parametrize("capacity", [0, -1, 1.5, "10", None, True, [3]])
def test_bad_capacity(capacity: object) -> None:
    with pytest.raises(ConfigError, match="capacity"):
        DedupCache(capacity=capacity)  # type: ignore[arg-type]


@pytest.mark.parametrize("ttl", [0, -1, -0.5, math.nan, "60", None, True, 10**400, [1]])
def test_bad_default_ttl(ttl: object) -> None:
    with pytest.raises(ConfigError, match="default_ttl"):
        DedupCache(capacity=4, default_ttl=ttl)  # type: ignore[arg-type]


@pytest.mark.parametrize("ttl", [0, -1, math.nan, "5", None, False])
def test_bad_ttl_per_entry(ttl: object) -> None:
    cache, _ = make()
    with pytest.raises(ConfigError, match="ttl"):
        cache.insert_with_ttl(k("q"), "a", ttl)  # type: ignore[arg-type]
    if ttl is not None:  # get_or_compute(ttl=None) means the default TTL
        with pytest.raises(ConfigError, match="ttl"):
            cache.get_or_compute(k("q"), lambda: "a", ttl=ttl)  # type: ignore[arg-type]
    assert len(cache) == 0


@pytest.mark.parametrize("wait", [0, -1, math.nan, "5", None])
def test_bad_wait_timeout(wait: object) -> None:
    with pytest.raises(ConfigError, match="wait_timeout"):
        DedupCache(capacity=4, wait_timeout=wait)  # type: ignore[arg-type]


def test_config_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="capacity"):
        DedupCache(capacity=0)


def test_numpy_like_ints_are_accepted_and_inf_ttl_too() -> None:
    class IndexLike:
        def __index__(self) -> int:
            return 8

    cache: DedupCache[str] = DedupCache(
        capacity=IndexLike(),  # type: ignore[arg-type]
        default_ttl=math.inf,
        wait_timeout=math.inf,
    )
    assert cache.capacity == 8
    assert cache.default_ttl == math.inf


def test_clock_must_be_callable_and_sane() -> None:
    with pytest.raises(ConfigError, match="clock"):
        DedupCache(capacity=4, clock=42.0)  # type: ignore[arg-type]
    for reading in [math.nan, math.inf, "now", None]:
        cache: DedupCache[str] = DedupCache(capacity=4, clock=lambda r=reading: r)  # type: ignore[misc]
        with pytest.raises(ConfigError, match="clock"):
            cache.insert(k("q"), "a")
        with pytest.raises(ConfigError, match="clock"):
            cache.get(k("q"))
    ints: DedupCache[str] = DedupCache(capacity=4, clock=lambda: 5)
    ints.insert(k("q"), "a")
    assert ints.get(k("q")) == "a"


@pytest.mark.parametrize("key", ["q", 42, None, b"key", ("a", "b")])
def test_keys_must_be_request_keys(key: object) -> None:
    cache, _ = make()
    for call in (
        lambda: cache.insert(key, "a"),  # type: ignore[arg-type]
        lambda: cache.insert_with_ttl(key, "a", 1.0),  # type: ignore[arg-type]
        lambda: cache.get(key),  # type: ignore[arg-type]
        lambda: cache.peek(key),  # type: ignore[arg-type]
        lambda: cache.get_or_compute(key, lambda: "a"),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidInputError):
            call()
    assert key not in cache
    assert cache.stats.total_requests == 0


def test_repr() -> None:
    cache, _ = make(capacity=4, ttl=60.0)
    cache.insert(k("q"), "a")
    assert repr(cache) == "DedupCache(capacity=4, default_ttl=60.0, entries=1)"


def test_request_helper_fails_open_and_counts(caplog: pytest.LogCaptureFixture) -> None:
    cache: DedupCache[str] = DedupCache(capacity=4)
    poisoned = {"messages": [{"role": "user", "content": {1, 2}}]}  # a set: not JSON
    with caplog.at_level("WARNING", logger="loopfuse"):
        assert cache.get_or_compute_request(poisoned, lambda: "answer") == "answer"
    assert cache.internal_errors == 1
    assert len(cache) == 0
    assert any(record.name == "loopfuse" for record in caplog.records)


def test_request_helper_fail_closed_raises() -> None:
    cache: DedupCache[str] = DedupCache(capacity=4, fail_closed=True)
    with pytest.raises(InvalidInputError):
        cache.get_or_compute_request({"messages": [{"content": object()}]}, lambda: "x")


def test_request_helper_caches_and_propagates_factory_errors() -> None:
    cache: DedupCache[str] = DedupCache(capacity=4)
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    calls: list[int] = []

    def answer() -> str:
        calls.append(1)
        return "hello"

    assert cache.get_or_compute_request(body, answer, "/v1/chat/completions") == "hello"
    assert cache.get_or_compute_request(body, answer, "/v1/chat/completions") == "hello"
    assert len(calls) == 1

    def broken() -> str:
        raise RuntimeError("upstream down")

    with pytest.raises(RuntimeError, match="upstream down"):
        cache.get_or_compute_request(b'{"input": "other"}', broken)
    assert cache.internal_errors == 0
    with pytest.raises(InvalidInputError):
        cache.get_or_compute_request(body, answer, path=None)  # type: ignore[arg-type]
