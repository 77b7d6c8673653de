"""DedupCache and its expiry index against straightforward models of the semantics."""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FakeClock
from loopfuse.dedup import CachedResponse, DedupCache, RequestKey
from loopfuse.stores._expiry import ExpiryIndex


def k(text: str) -> RequestKey:
    return RequestKey.from_str(text)


# -- the cache against a straightforward model -----------------------------------------------


@dataclass
class ModelEntry:
    value: int
    digest: bytes | None
    created: float
    ttl: float
    hits: int = 0


@dataclass
class Model:
    """The documented semantics, written the slow and obvious way."""

    capacity: int
    entries: OrderedDict[int, ModelEntry] = field(default_factory=OrderedDict)  # LRU first
    stats: list[int] = field(default_factory=lambda: [0, 0, 0, 0])  # hits misses evict coll

    def insert(self, key: RequestKey, value: int, ttl: float, now: float) -> None:
        if key.value in self.entries:
            del self.entries[key.value]
        elif len(self.entries) >= self.capacity:
            expired = [v for v, e in self.entries.items() if now >= e.created + e.ttl]
            for v in expired:
                del self.entries[v]
            self.stats[2] += len(expired)
            if len(self.entries) >= self.capacity:
                self.entries.popitem(last=False)
                self.stats[2] += 1
        self.entries[key.value] = ModelEntry(value, key.digest, now, ttl)

    def get(self, key: RequestKey, now: float) -> int | None:
        entry = self.entries.get(key.value)
        if entry is not None and now >= entry.created + entry.ttl:
            del self.entries[key.value]
            self.stats[2] += 1
            entry = None
        elif entry is not None and key.digest is not None and key.digest != entry.digest:
            self.stats[3] += 1
            entry = None
        if entry is None:
            self.stats[1] += 1
            return None
        self.entries.move_to_end(key.value)
        entry.hits += 1
        self.stats[0] += 1
        return entry.value

    def evict_expired(self, now: float) -> int:
        expired = [v for v, e in self.entries.items() if now >= e.created + e.ttl]
        for v in expired:
            del self.entries[v]
        self.stats[2] += len(expired)
        return len(expired)


KEYS = [k(f"key {i}") for i in range(6)] + [
    RequestKey.from_messages([("u", "x\x01y\x00z")]),
    RequestKey.from_messages([("u", "x"), ("y", "z")]),
    RequestKey(123),
]
operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("insert"),
            st.integers(0, len(KEYS) - 1),
            st.sampled_from([1.0, 2.5, 4.0, 10.0, math.inf]),
        ),
        st.tuples(st.just("get"), st.integers(0, len(KEYS) - 1), st.just(0.0)),
        st.tuples(st.just("tick"), st.just(0), st.sampled_from([0.0, 0.5, 1.0, 2.5, 4.0])),
        st.tuples(st.just("evict"), st.just(0), st.just(0.0)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(capacity=st.integers(1, 5), ops=operations)
def test_cache_matches_the_model(capacity: int, ops: list[tuple[str, int, float]]) -> None:
    clock = FakeClock(0.0)
    cache: DedupCache[int] = DedupCache(capacity=capacity, default_ttl=3.0, clock=clock)
    model = Model(capacity)
    for step, (op, index, number) in enumerate(ops):
        key = KEYS[index]
        if op == "insert":
            cache.insert_with_ttl(key, step, number)
            model.insert(key, step, number, clock.now)
        elif op == "get":
            assert cache.get(key) == model.get(key, clock.now)
        elif op == "tick":
            clock.advance(number)
        else:
            assert cache.evict_expired() == model.evict_expired(clock.now)
        assert len(cache) == len(model.entries)
        s = cache.stats
        assert [s.cache_hits, s.cache_misses, s.evictions, s.collisions] == model.stats
        assert s.total_requests == s.cache_hits + s.cache_misses
    for value, entry in model.entries.items():
        probe = RequestKey(value, entry.digest) if entry.digest else RequestKey(value)
        snapshot = cache.peek(probe)
        if clock.now < entry.created + entry.ttl:
            assert snapshot == CachedResponse(entry.value, entry.created, entry.ttl, entry.hits)
        else:
            assert snapshot is None


# -- the expiry index on its own -------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("add"), st.integers(0, 9), st.sampled_from([1.0, 2.0, 3.5, 7.0])),
            st.tuples(st.just("discard"), st.integers(0, 9), st.just(0.0)),
            st.tuples(st.just("tick"), st.just(0), st.sampled_from([0.0, 0.5, 1.0, 3.0])),
            st.tuples(st.just("pop"), st.just(0), st.just(0.0)),
        ),
        max_size=80,
    )
)
def test_expiry_index_matches_brute_force(ops: list[tuple[str, int, float]]) -> None:
    index: ExpiryIndex[int] = ExpiryIndex()
    live: dict[int, tuple[float, float]] = {}  # key -> (ttl, expires_at)
    now = 0.0
    for op, key, number in ops:
        if op == "add" and key not in live:
            index.add(key, number, now + number)
            live[key] = (number, now + number)
        elif op == "discard" and key in live:
            index.discard(key, live.pop(key)[0])
        elif op == "tick":
            now += number
        elif op == "pop":
            expected = sorted((at, k) for k, (_, at) in live.items() if at <= now)
            popped = index.pop_expired(now)
            assert sorted(popped) == sorted(k for _, k in expected)
            assert [live[k][1] for k in popped] == sorted(live[k][1] for k in popped)
            for k in popped:
                del live[k]
        assert len(index) == len(live)


def test_expiry_index_rebuilds_its_heap_when_groups_churn() -> None:
    index: ExpiryIndex[str] = ExpiryIndex()
    for round_ in range(50):  # each round empties and recreates a group
        index.add("k", 5.0, float(round_) + 5.0)
        index.discard("k", 5.0)
    assert len(index._heap) <= 2 * 1 + 8  # bounded: stale entries were dropped, not 50
    index.add("a", 5.0, 10.0)
    index.add("b", 1.0, 3.0)
    assert index.pop_expired(4.0) == ["b"]
    assert index.pop_expired(10.0) == ["a"]
    assert len(index) == 0


def test_a_clock_that_goes_back_breaks_nothing() -> None:
    clock = FakeClock(100.0)
    cache: DedupCache[str] = DedupCache(capacity=2, default_ttl=10.0, clock=clock)
    cache.insert(k("a"), "a")
    clock.now = 50.0
    cache.insert(k("b"), "b")  # expires at 60, "a" at 110
    clock.now = 70.0
    assert cache.get(k("b")) is None  # expired, even though added out of order
    assert cache.get(k("a")) == "a"
    cache.insert(k("c"), "c")
    cache.insert(k("d"), "d")  # full: something goes, nothing breaks
    assert len(cache) == 2
    assert cache.get(k("d")) == "d"
