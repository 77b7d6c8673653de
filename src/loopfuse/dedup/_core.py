"""The state behind a :class:`~loopfuse.dedup.DedupCache`: entries, orders, counters.

Every method here expects the caller to hold :attr:`CacheCore.lock`. The public class in
:mod:`loopfuse.dedup.cache` and the single-flight functions in
:mod:`loopfuse.dedup.singleflight` take the lock and call in.
"""

from __future__ import annotations

import math
import operator
import threading
from collections.abc import Callable
from numbers import Real
from typing import Final, Generic, SupportsIndex, TypeVar

from cachetools import Cache, LRUCache

from loopfuse.dedup._expiry import ExpiryIndex
from loopfuse.dedup.entries import DedupStats
from loopfuse.dedup.keys import RequestKey
from loopfuse.errors import ConfigError, InvalidInputError

__all__ = ["MISSING", "CacheCore", "check_key", "seconds"]

V = TypeVar("V")

MISSING: Final = object()
"""What :meth:`CacheCore.lookup` returns when nothing may be served (``None`` is a value)."""


def seconds(value: object, name: str, *, allow_zero: bool = False) -> float:
    """``value`` as a float number of seconds, or :class:`ConfigError`.

    >>> seconds(2, "ttl"), seconds(float("inf"), "ttl")
    (2.0, inf)
    >>> seconds(True, "ttl")
    Traceback (most recent call last):
        ...
    loopfuse.errors.ConfigError: ttl must be a number of seconds, got True
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ConfigError(f"{name} must be a number of seconds, got {value!r}")
    try:
        result = float(value)
    except (OverflowError, ValueError):
        raise ConfigError(f"{name} must be a number of seconds, got {value!r}") from None
    if math.isnan(result) or result < 0 or (result == 0 and not allow_zero):
        raise ConfigError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return result


def check_key(key: object) -> RequestKey:
    """``key`` if it is a :class:`RequestKey`, else :class:`InvalidInputError`."""
    if not isinstance(key, RequestKey):
        raise InvalidInputError(f"a cache key must be a RequestKey, not {type(key).__name__}")
    return key


def _capacity(value: object) -> int:
    # operator.index accepts int-like types (numpy integers) but not floats or strings.
    if isinstance(value, SupportsIndex) and not isinstance(value, bool):
        size = operator.index(value)
        if size >= 1:
            return size
    raise ConfigError(f"capacity must be an int >= 1, got {value!r}")


class Entry(Generic[V]):
    """One stored value, with the digest of the key it was stored under."""

    __slots__ = ("created_at", "digest", "hit_count", "ttl", "value")

    def __init__(self, value: V, digest: bytes | None, created_at: float, ttl: float) -> None:
        self.value = value
        self.digest = digest
        self.created_at = created_at
        self.ttl = ttl
        self.hit_count = 0


class CacheCore(Generic[V]):
    """Entries in LRU order (a :class:`cachetools.LRUCache` keyed by the 64-bit value),
    their expiry order, and the counters; all guarded by ``lock``."""

    __slots__ = (
        "capacity",
        "clock",
        "collisions",
        "default_ttl",
        "evictions",
        "expiry",
        "hits",
        "lock",
        "misses",
        "store",
        "wait_timeout",
    )

    def __init__(
        self,
        capacity: object,
        default_ttl: object,
        clock: Callable[[], float],
        wait_timeout: object,
    ) -> None:
        self.capacity = _capacity(capacity)
        self.default_ttl = seconds(default_ttl, "default_ttl")
        self.wait_timeout = seconds(wait_timeout, "wait_timeout")
        if not callable(clock):
            raise ConfigError(f"clock must be a callable returning seconds, got {clock!r}")
        self.clock = clock
        self.lock = threading.Lock()
        # Never full when written to: insert() makes room first, so that expired entries
        # go before the LRU one and every eviction is counted.
        self.store: LRUCache[int, Entry[V]] = LRUCache(maxsize=self.capacity)
        self.expiry: ExpiryIndex[int] = ExpiryIndex()
        self.reset_stats()

    def reset_stats(self) -> None:
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.collisions = 0

    def snapshot(self) -> DedupStats:
        return DedupStats(
            total_requests=self.hits + self.misses,
            cache_hits=self.hits,
            cache_misses=self.misses,
            evictions=self.evictions,
            collisions=self.collisions,
        )

    def now(self) -> float:
        """The clock's reading, checked: a NaN or a string would corrupt the orders."""
        now = self.clock()
        if type(now) is float and now - now == 0.0:  # the common case, fast: finite float
            return now
        if isinstance(now, bool) or not isinstance(now, Real) or not math.isfinite(now):
            raise ConfigError(f"clock must return a finite number of seconds, got {now!r}")
        return float(now)

    def count(self, *, hit: bool) -> None:
        if hit:
            self.hits += 1
        else:
            self.misses += 1

    def entry(self, value: int) -> Entry[V] | None:
        """The entry stored under ``value``; does not refresh the LRU order."""
        store = self.store
        return Cache.__getitem__(store, value) if value in store else None

    @staticmethod
    def servable(entry: Entry[V], key: RequestKey, now: float) -> bool:
        digest = key.digest
        return now < entry.created_at + entry.ttl and (digest is None or digest == entry.digest)

    def lookup(self, key: RequestKey, now: float) -> object:
        """The value to serve for ``key``, or :data:`MISSING`.

        Removes an expired entry (an eviction) and counts a digest mismatch (a
        collision); a served entry becomes the most recently used and counts a hit on
        itself. The request itself is counted by the caller.
        """
        entry = self.entry(key.value)
        if entry is None:
            return MISSING
        if now >= entry.created_at + entry.ttl:
            del self.store[key.value]
            self.expiry.discard(key.value, entry.ttl)
            self.evictions += 1
            return MISSING
        if key.digest is not None and key.digest != entry.digest:
            self.collisions += 1
            return MISSING
        self.store[key.value]  # refreshes the LRU order
        entry.hit_count += 1
        return entry.value

    def insert(self, key: RequestKey, value: V, ttl: float, now: float) -> None:
        """Store ``value``: replace an existing entry, or make room and add one."""
        store = self.store
        old = self.entry(key.value)
        if old is not None:
            self.expiry.discard(key.value, old.ttl)
        elif len(store) >= self.capacity:
            self.evict_expired(now)
            if len(store) >= self.capacity:
                victim, entry = store.popitem()  # the least recently used
                self.expiry.discard(victim, entry.ttl)
                self.evictions += 1
        store[key.value] = Entry(value, key.digest, now, ttl)
        self.expiry.add(key.value, ttl, now + ttl)

    def evict_expired(self, now: float) -> int:
        expired = self.expiry.pop_expired(now)
        store = self.store
        for value in expired:
            del store[value]
        self.evictions += len(expired)
        return len(expired)

    def clear(self) -> None:
        self.store.clear()
        self.expiry.clear()
        self.reset_stats()
