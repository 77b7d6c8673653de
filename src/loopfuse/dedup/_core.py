"""The state behind a :class:`~loopfuse.dedup.DedupCache`: its store, settings, counters.

The entries live in a :class:`~loopfuse.stores.CacheStore`: by default a
:class:`~loopfuse.stores.memory.MemoryCacheStore` of ``capacity`` entries (*local*), or a
shared one such as :class:`~loopfuse.stores.redis.RedisStore` or
:class:`~loopfuse.stores.redis.AsyncRedisStore`. With the local store, callers hold
:attr:`CacheCore.io` (which is :attr:`CacheCore.lock`, the store's own lock) around every
store call, so that a lookup and the single-flight bookkeeping that follows it are one
step; a shared store is atomic by itself and no lock is held over its I/O (``io`` is a
no-op; the counters then have a lock of their own). :attr:`CacheCore.access` reaches a
shared store from sync and async code (:class:`~loopfuse.stores.drive.StoreAccess`): the
sync paths below on an async-only store raise :class:`~loopfuse.errors.ConfigError`.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable
from typing import Final, Generic, TypeVar, cast

from loopfuse._clock import read_clock
from loopfuse.dedup.entries import DedupStats
from loopfuse.dedup.keys import RequestKey
from loopfuse.dedup.settings import TIMEOUT, TTL, CacheSettings
from loopfuse.errors import ConfigError, InvalidInputError
from loopfuse.stores import MISS, AsyncCacheStore, CacheStore, StoredEntry
from loopfuse.stores.drive import StoreAccess
from loopfuse.stores.memory import MemoryCacheStore

__all__ = ["MISSING", "CacheCore", "check_key", "remaining"]

V = TypeVar("V")

MISSING: Final = MISS
"""What :meth:`CacheCore.lookup` returns when nothing may be served (``None`` is a value)."""


def remaining(deadline: float | None) -> float | None:
    """Seconds left until ``deadline`` (:meth:`CacheCore.deadline`), at least 0; ``None``:
    no deadline."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def check_key(key: object) -> RequestKey:
    """``key`` if it is a :class:`RequestKey`, else :class:`InvalidInputError`."""
    if not isinstance(key, RequestKey):
        raise InvalidInputError(f"a cache key must be a RequestKey, not {type(key).__name__}")
    return key


class CacheCore(Generic[V]):
    """A cache's store, its settings and its hit/miss counters."""

    __slots__ = (
        "access",
        "clock",
        "hits",
        "io",
        "local",
        "lock",
        "misses",
        "settings",
        "stats_lock",
        "store",
    )

    def __init__(
        self, settings: CacheSettings, clock: Callable[[], float], store: object = None
    ) -> None:
        self.settings = settings
        if not callable(clock):
            raise ConfigError(f"clock must be a callable returning seconds, got {clock!r}")
        self.clock = clock
        if store is None:
            store = MemoryCacheStore(settings.capacity)
        elif not isinstance(store, CacheStore | AsyncCacheStore):
            raise ConfigError(
                f"store must be a loopfuse.stores.CacheStore or AsyncCacheStore, got {store!r}"
            )
        self.store: CacheStore | AsyncCacheStore = store
        self.access = StoreAccess(
            store, "get", "DedupCache", local=isinstance(store, MemoryCacheStore)
        )
        self.local: MemoryCacheStore | None = None
        if isinstance(store, MemoryCacheStore):
            # One lock for the entries, the single-flight tables and the counters: the
            # store's, held across each lookup and the bookkeeping that follows it.
            self.local = store
            self.lock = store.lock
            self.io: contextlib.AbstractContextManager[object] = self.lock
            self.stats_lock: threading.Lock | None = None  # counted under self.lock
        else:
            self.lock = threading.Lock()
            self.io = contextlib.nullcontext()  # a shared store: no lock held over its I/O
            self.stats_lock = threading.Lock()
        self.reset_stats()

    def reset_stats(self) -> None:
        self.hits = 0
        self.misses = 0

    def snapshot(self) -> DedupStats:
        with self.stats_lock or contextlib.nullcontext():
            hits, misses = self.hits, self.misses
        return DedupStats(
            total_requests=hits + misses,
            cache_hits=hits,
            cache_misses=misses,
            evictions=self.store.evictions,
            collisions=self.store.collisions,
        )

    def ttl(self, ttl: object) -> float:
        """A call's ``ttl`` in seconds, checked (``None``: the default TTL)."""
        return self.settings.default_ttl if ttl is None else cast(float, TTL.check(ttl, "ttl"))

    def deadline(self, timeout: object) -> float | None:
        """When a waiter given ``timeout`` (``None``: the cache's ``wait_timeout``; checked)
        gives up, on ``time.monotonic`` (real time, not the cache's clock); ``None``:
        never."""
        wait = (
            self.settings.wait_timeout
            if timeout is None
            else cast(float, TIMEOUT.check(timeout, "timeout"))
        )
        return None if math.isinf(wait) else time.monotonic() + wait

    def now(self) -> float:
        """The clock's reading, checked (see :func:`~loopfuse._clock.read_clock`)."""
        return read_clock(self.clock)

    def count(self, *, hit: bool) -> None:
        lock = self.stats_lock
        if lock is None:  # the local store: the caller holds self.lock
            if hit:
                self.hits += 1
            else:
                self.misses += 1
            return
        with lock:
            if hit:
                self.hits += 1
            else:
                self.misses += 1

    def lookup(self, key: RequestKey, now: float) -> object:
        """The value to serve for ``key``, or :data:`MISSING` (see the store's ``get``).
        The request itself is counted by the caller."""
        local = self.local
        if local is not None:
            return local.get_locked(key.value, key.digest, now)
        return self.shared("get").get(key.value, key.digest, now)

    def peek(self, key: RequestKey, now: float) -> StoredEntry | None:
        local = self.local
        if local is not None:
            return local.peek_locked(key.value, key.digest, now)
        return self.shared("peek").peek(key.value, key.digest, now)

    def insert(self, key: RequestKey, value: V, ttl: float, now: float) -> None:
        """Store ``value``: replace an existing entry, or make room and add one."""
        local = self.local
        if local is not None:
            local.set_locked(key.value, key.digest, value, ttl, now)
        else:
            self.shared("insert").set(key.value, key.digest, value, ttl, now)

    def evict_expired(self, now: float) -> int:
        local = self.local
        return 0 if local is None else local.evict_expired_locked(now)

    def size(self) -> int:
        local = self.local
        return 0 if local is None else len(local)

    def clear(self) -> None:
        local = self.local
        if local is not None:
            local.clear_locked()
        else:
            self.shared("clear").clear()
        self.forget_stats()

    def forget_stats(self) -> None:
        """Reset the hit and miss counts (after a clear)."""
        with self.stats_lock or contextlib.nullcontext():
            self.reset_stats()

    def shared(self, method: str) -> CacheStore:
        """The shared store, for the sync ``DedupCache.method``; a
        :class:`~loopfuse.errors.ConfigError` when it is async-only."""
        return cast(CacheStore, self.access.sync(method))
