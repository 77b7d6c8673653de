"""``DedupCache``: never pay twice for the same answer.

A bounded, thread-safe map from :class:`~loopfuse.dedup.RequestKey` to any value, with a
time to live per entry and single-flight computation for threads and asyncio tasks.

- **Expiry.** Each entry lives ``ttl`` seconds of the injected ``clock`` (default
  :func:`time.monotonic`, which the clock must behave like: it never goes back). An
  expired entry is never served; it is removed when it is read (a miss and an
  eviction), by :meth:`DedupCache.evict_expired`, or when room is needed.
- **Eviction order.** Inserting a new key into a full cache first removes *every*
  expired entry, then, only if the cache is still full, the least recently used live
  one. Replacing an existing key never evicts anything. A read that is served a value
  makes that entry the most recently used. Every operation is O(1) (amortised; see
  :mod:`loopfuse.stores._expiry` for many distinct TTLs): LRU order is kept by
  :class:`cachetools.LRUCache`, expiry order by TTL groups.
- **Collision protection.** An entry keeps the digest of the key it was stored under. A
  probe whose key carries a digest is served only an entry with the same digest; a
  mismatch is a miss and counts in ``stats.collisions``. A bare key (``RequestKey(n)``)
  is served whatever lives under ``n``.
- **Single flight.** :meth:`DedupCache.get_or_compute` and
  :meth:`DedupCache.aget_or_compute` run the factory once for concurrent callers of one
  key; the others wait (up to a timeout) and get the same value.
- **Stores.** The entries live in a :class:`~loopfuse.stores.CacheStore`: by default a
  :class:`~loopfuse.stores.memory.MemoryCacheStore` in this process (no I/O, everything
  above); with ``store=RedisStore(...)`` (or ``AsyncRedisStore``) they are shared by
  processes and hosts, and single flight spans them (see :mod:`loopfuse.dedup._shared`
  and ``docs/stores.md``).
- **asyncio.** ``aget``, ``ainsert``, ``apeek``, ``aclear`` and ``aget_or_compute``
  never block the event loop: on the in-memory store (the default, no I/O) each is its
  sync twin, run in line; an async store (:class:`~loopfuse.stores.redis.AsyncRedisStore`)
  is awaited; a sync shared store (:class:`~loopfuse.stores.redis.RedisStore`) is called
  in a worker thread. A cache built on an async-only store serves only these: its sync
  methods raise :class:`~loopfuse.errors.ConfigError` naming the one to await instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Generic, TypeVar, Unpack, cast

from loopfuse.dedup import _shared, singleflight
from loopfuse.dedup._core import MISSING, CacheCore, check_key
from loopfuse.dedup.entries import CachedResponse, DedupStats
from loopfuse.dedup.errors import SingleFlightReentryError, SingleFlightTimeoutError
from loopfuse.dedup.keys import RequestKey
from loopfuse.dedup.settings import TTL, CacheSettings
from loopfuse.errors import InvalidInputError
from loopfuse.events import EventAction, EventCallback, EventSink, GuardEvent
from loopfuse.fields import configured
from loopfuse.stores import AsyncCacheStore, CacheStore, StoredEntry

if TYPE_CHECKING:
    from loopfuse.overrides import CacheOverrides

__all__ = ["DedupCache"]

V = TypeVar("V")

logger = logging.getLogger("loopfuse")


class DedupCache(Generic[V]):
    """A bounded, thread-safe cache of answers by :class:`~loopfuse.dedup.RequestKey`.

    Its settings are a :class:`~loopfuse.dedup.settings.CacheSettings`: ``capacity`` (an
    int >= 1) bounds the number of entries; ``default_ttl`` (seconds, > 0; ``math.inf``
    for never) is the life of an entry inserted without its own TTL; ``wait_timeout``
    bounds how long a single-flight waiter waits (see
    :data:`~loopfuse.dedup.DEFAULT_WAIT_TIMEOUT`); ``fail_closed`` raises, instead of
    answering uncached, when :meth:`get_or_compute_request` fails.
    ``DedupCache(capacity=2, default_ttl=60.0)`` changes some, ``DedupCache(settings,
    capacity=2)`` one of ``settings``. ``clock`` returns seconds and must never go back;
    ``store`` is where the entries live (default: a
    :class:`~loopfuse.stores.memory.MemoryCacheStore` of ``capacity`` entries; a shared
    store bounds entries by TTL instead, keeps its own ``evictions`` and ``collisions``,
    and may accept only some values: see its codec). Bad values raise
    :class:`~loopfuse.errors.ConfigError`. Values may be any object,
    ``None`` included (``get`` cannot tell a cached ``None`` from a miss; ``peek``,
    ``in`` and ``get_or_compute`` can). ``on_event`` is called with a
    :class:`~loopfuse.events.GuardEvent` for each lookup (``cache_hit``/``cache_miss``)
    and each request-path failure (``fail_open``); see :mod:`loopfuse.events`.

    >>> now = [0.0]
    >>> cache: DedupCache[str] = DedupCache(capacity=2, default_ttl=60.0, clock=lambda: now[0])
    >>> key = RequestKey.from_str("What is Rust?")
    >>> cache.insert(key, "A systems programming language.")
    >>> cache.get(key)
    'A systems programming language.'
    >>> now[0] = 60.0  # the TTL is up
    >>> cache.get(key) is None
    True
    >>> cache.stats.summary()
    'requests=2 hits=1 misses=1 evictions=1 hit_rate=50.0%'
    >>> DedupCache(capacity=0)
    Traceback (most recent call last):
        ...
    loopfuse.fields.SettingError: capacity must be an int >= 1, got 0
    """

    __slots__ = ("_core", "_flights", "events", "internal_errors")

    def __init__(
        self,
        settings: CacheSettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        store: CacheStore | AsyncCacheStore | None = None,
        on_event: EventCallback | None = None,
        **overrides: Unpack[CacheOverrides],
    ) -> None:
        checked = configured(
            "DedupCache", CacheSettings, settings, overrides, "capacity=1024, default_ttl=60.0"
        )
        self._core: CacheCore[V] = CacheCore(checked, clock, store)
        self._flights: singleflight.FlightTables[V] = singleflight.FlightTables()
        self.internal_errors = 0
        """Request-path calls whose key or cache failed (and ran uncached unless fail_closed)."""
        self.events = EventSink(on_event)
        """Where this cache's events go (``events.errors`` counts a raising callback)."""

    @classmethod
    def with_capacity(cls, capacity: int) -> DedupCache[V]:
        """A cache of ``capacity`` entries with the default 60 s TTL.

        >>> DedupCache.with_capacity(128).default_ttl
        60.0
        """
        return cls(capacity=capacity)

    @property
    def settings(self) -> CacheSettings:
        """The checked settings (read-only)."""
        return self._core.settings

    @property
    def capacity(self) -> int:
        """The most entries the cache holds (``settings.capacity``)."""
        return self._core.settings.capacity

    @property
    def default_ttl(self) -> float:
        """Seconds an entry inserted without its own TTL lives (``settings.default_ttl``)."""
        return self._core.settings.default_ttl

    @property
    def fail_closed(self) -> bool:
        """Whether a failure of :meth:`get_or_compute_request` is raised
        (``settings.fail_closed``) instead of answered uncached."""
        return self._core.settings.fail_closed

    @property
    def store(self) -> CacheStore | AsyncCacheStore:
        """Where the entries live."""
        return self._core.store

    @property
    def wait_timeout(self) -> float:
        """Seconds a single-flight waiter waits unless the call says otherwise
        (``settings.wait_timeout``)."""
        return self._core.settings.wait_timeout

    def insert(self, key: RequestKey, value: V) -> None:
        """Store ``value`` under ``key`` for :attr:`default_ttl` seconds.

        An existing entry for the key is replaced (fresh time, hit count 0) and nothing
        is evicted; a new key in a full cache evicts every expired entry, then, if the
        cache is still full, the least recently used one.
        """
        core = self._core
        checked = check_key(key)
        with core.io:
            core.insert(checked, value, core.settings.default_ttl, core.now())

    def insert_with_ttl(self, key: RequestKey, value: V, ttl: float) -> None:
        """Store ``value`` under ``key`` for ``ttl`` seconds (> 0; ``math.inf`` for never).

        >>> cache: DedupCache[int] = DedupCache(capacity=4, clock=lambda: 0.0)
        >>> cache.insert_with_ttl(RequestKey(1), 42, ttl=-1)
        Traceback (most recent call last):
            ...
        loopfuse.fields.SettingError: ttl must be a positive number of seconds (inf: forever), \
got -1
        """
        core = self._core
        checked = check_key(key)
        duration = cast(float, TTL.check(ttl, "ttl"))
        with core.io:
            core.insert(checked, value, duration, core.now())

    def get(self, key: RequestKey) -> V | None:
        """The value cached for ``key``, or ``None``; counts a request, a hit or a miss.

        An expired entry is removed (a miss and an eviction); an entry stored for other
        content under the same 64-bit value is not served (a miss and a collision). A
        served entry becomes the most recently used.
        """
        core = self._core
        checked = check_key(key)
        with core.io:  # the local store: lookup and count are one step, as stats promise
            value = core.lookup(checked, core.now())
            core.count(hit=value is not MISSING)
        self._emit("cache_miss" if value is MISSING else "cache_hit")
        return None if value is MISSING else cast(V, value)

    def peek(self, key: RequestKey) -> CachedResponse[V] | None:
        """A snapshot of the entry ``get`` would serve, or ``None``, with no side effect:
        no stats, no LRU refresh, no hit counted, nothing removed.

        >>> cache: DedupCache[str] = DedupCache(capacity=4, clock=lambda: 5.0)
        >>> cache.insert(RequestKey.from_str("q"), "a")
        >>> cache.peek(RequestKey.from_str("q"))
        CachedResponse(value='a', created_at=5.0, ttl=60.0, hit_count=0)
        """
        core = self._core
        checked = check_key(key)
        with core.io:
            entry = core.peek(checked, core.now())
        if entry is None:
            return None
        return CachedResponse(cast(V, entry.value), entry.created_at, entry.ttl, entry.hit_count)

    def __contains__(self, key: object) -> bool:
        """Whether ``get(key)`` would be served a value (without its side effects)."""
        return isinstance(key, RequestKey) and self.peek(key) is not None

    def evict_expired(self) -> int:
        """Remove every expired entry now; returns how many (each counts as an eviction).
        A shared store expires entries by itself: 0."""
        core = self._core
        with core.io:
            return core.evict_expired(core.now())

    def __len__(self) -> int:
        """Entries stored, including expired ones not removed yet (0 for a shared store,
        which cannot count them in O(1))."""
        return self._core.size()

    def clear(self) -> None:
        """Remove every entry and reset the stats.

        Computations in flight are not cancelled: they store their value when they end
        (and count in the fresh stats). A shared store is cleared for every process.
        """
        core = self._core
        with core.io:
            core.clear()

    @property
    def stats(self) -> DedupStats:
        """The counters, as one consistent snapshot (see :class:`DedupStats`)."""
        core = self._core
        with core.io:
            return core.snapshot()

    def __repr__(self) -> str:
        core = self._core
        settings = core.settings
        return (
            f"DedupCache(capacity={settings.capacity}, default_ttl={settings.default_ttl}, "
            f"entries={core.size()})"
        )

    def get_or_compute(
        self,
        key: RequestKey,
        factory: Callable[[], V],
        *,
        ttl: float | None = None,
        timeout: float | None = None,
    ) -> V:
        """The cached value for ``key``, or ``factory()`` run once for concurrent threads.

        The first caller that misses runs the factory and caches its value (for ``ttl``
        seconds, default :attr:`default_ttl`); callers of the same key that arrive
        meanwhile wait and get the same value (a hit each). If the factory raises,
        nothing is cached, its caller gets the exception, and one of the waiters runs
        its own factory next. A waiter gives up after ``timeout`` seconds (default
        :attr:`wait_timeout`; real time, not the cache clock; ``0`` means do not wait)
        with :class:`~loopfuse.dedup.SingleFlightTimeoutError`, while the running
        factory goes on. A factory that asks for its own key raises
        :class:`~loopfuse.dedup.SingleFlightReentryError` instead of deadlocking. See
        :mod:`loopfuse.dedup.singleflight`.

        >>> cache: DedupCache[str] = DedupCache(capacity=8)
        >>> calls = []
        >>> def ask() -> str:
        ...     calls.append(1)
        ...     return "answer"
        >>> key = RequestKey.from_str("question")
        >>> cache.get_or_compute(key, ask), cache.get_or_compute(key, ask), len(calls)
        ('answer', 'answer', 1)
        """
        checked = check_key(key)
        core = self._core
        duration = core.ttl(ttl)
        computed = False

        def tracked() -> V:
            nonlocal computed
            computed = True
            return factory()

        run = tracked if self.events.enabled else factory
        if core.local is None:
            value = _shared.compute(core, checked, run, duration, timeout)
        else:
            value = singleflight.compute(core, self._flights, checked, run, duration, timeout)
        self._emit("cache_miss" if computed else "cache_hit")
        return value

    def get_or_compute_request(
        self,
        body: object,
        factory: Callable[[], V],
        path: str = "",
        *,
        ttl: float | None = None,
        timeout: float | None = None,
    ) -> V:
        """:meth:`get_or_compute` keyed by :meth:`RequestKey.from_request(body, path)
        <loopfuse.dedup.RequestKey.from_request>`, failing open.

        If building the key or the cache itself fails (a parsed body JSON cannot express,
        a broken clock, an internal error), ``factory()`` runs uncached (or its value, if
        it already ran, is returned), one warning is logged on the ``loopfuse`` logger
        and :attr:`internal_errors` counts it; with ``fail_closed=True`` the error is
        raised instead. The factory's own errors, single-flight timeouts and reentry
        always reach the caller, and a ``path`` that is not a ``str`` raises
        :class:`~loopfuse.errors.InvalidInputError`.

        >>> cache: DedupCache[str] = DedupCache(capacity=8)
        >>> body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
        >>> cache.get_or_compute_request(body, lambda: "hello"), len(cache)
        ('hello', 1)
        >>> junk = {"model": "m", "messages": [{"role": "user", "content": object()}]}
        >>> cache.get_or_compute_request(junk, lambda: "uncached"), cache.internal_errors
        ('uncached', 1)
        """
        if not isinstance(path, str):
            raise InvalidInputError(f"path must be a str, not {type(path).__name__}")
        if self._core.local is None:
            self._core.shared("get_or_compute_request")  # async-only: the caller's bug
        produced: list[V] = []
        factory_failed = False

        def tracked() -> V:
            nonlocal factory_failed
            try:
                value = factory()
            except BaseException:
                factory_failed = True
                raise
            produced.append(value)
            return value

        try:
            key = RequestKey.from_request(body, path)
            return self.get_or_compute(key, tracked, ttl=ttl, timeout=timeout)
        except (SingleFlightTimeoutError, SingleFlightReentryError):
            raise
        except Exception as exc:
            if factory_failed or self.fail_closed:
                raise
            with self._core.lock:
                self.internal_errors += 1
            logger.warning("loopfuse: DedupCache failed, answering uncached: %r", exc)
            self._emit("fail_open", repr(exc))
            return produced[0] if produced else factory()

    # --- asyncio: never blocks the event loop (see the module docstring) ---------------

    async def aget(self, key: RequestKey) -> V | None:
        """:meth:`get`, awaited."""
        core = self._core
        if core.local is not None:
            return self.get(key)
        checked = check_key(key)
        value = await core.access.call("get", checked.value, checked.digest, core.now())
        core.count(hit=value is not MISSING)
        self._emit("cache_miss" if value is MISSING else "cache_hit")
        return None if value is MISSING else cast(V, value)

    async def ainsert(self, key: RequestKey, value: V, *, ttl: float | None = None) -> None:
        """:meth:`insert` (or :meth:`insert_with_ttl` when ``ttl`` is given), awaited."""
        core = self._core
        checked = check_key(key)
        duration = core.ttl(ttl)
        if core.local is not None:
            with core.io:
                core.insert(checked, value, duration, core.now())
            return
        await core.access.call("set", checked.value, checked.digest, value, duration, core.now())

    async def apeek(self, key: RequestKey) -> CachedResponse[V] | None:
        """:meth:`peek`, awaited."""
        core = self._core
        if core.local is not None:
            return self.peek(key)
        checked = check_key(key)
        entry: StoredEntry | None = await core.access.call(
            "peek", checked.value, checked.digest, core.now()
        )
        if entry is None:
            return None
        return CachedResponse(cast(V, entry.value), entry.created_at, entry.ttl, entry.hit_count)

    async def aclear(self) -> None:
        """:meth:`clear`, awaited."""
        core = self._core
        if core.local is not None:
            self.clear()
            return
        await core.access.call("clear")
        core.forget_stats()

    async def aget_or_compute(
        self,
        key: RequestKey,
        factory: Callable[[], Awaitable[V]],
        *,
        ttl: float | None = None,
        timeout: float | None = None,
    ) -> V:
        """:meth:`get_or_compute` for asyncio: ``await
        factory()`` once per key.

        Tasks of one event loop share a computation (with a shared store: every task and
        process). If the computing task is cancelled (or its factory raises), nothing is
        cached and a waiting task takes over, so waiters never hang on a task that is
        gone; a cancelled waiter leaves the others undisturbed. The event loop never
        waits for the store.

        >>> import asyncio
        >>> async def main() -> tuple[str, str]:
        ...     cache: DedupCache[str] = DedupCache(capacity=8)
        ...     async def ask() -> str:
        ...         await asyncio.sleep(0)
        ...         return "answer"
        ...     key = RequestKey.from_str("question")
        ...     a, b = await asyncio.gather(cache.aget_or_compute(key, ask),
        ...                                 cache.aget_or_compute(key, ask))
        ...     return a, cache.stats.summary()
        >>> asyncio.run(main())
        ('answer', 'requests=2 hits=1 misses=1 evictions=0 hit_rate=50.0%')
        """
        checked = check_key(key)
        core = self._core
        duration = core.ttl(ttl)
        computed = False

        async def tracked() -> V:
            nonlocal computed
            computed = True
            return await factory()

        run = tracked if self.events.enabled else factory
        if core.local is None:
            value = await _shared.acompute(core, checked, run, duration, timeout)
        else:
            flights = self._flights
            value = await singleflight.acompute(core, flights, checked, run, duration, timeout)
        self._emit("cache_miss" if computed else "cache_hit")
        return value

    def _emit(self, action: EventAction, reason: str | None = None) -> None:
        if self.events.enabled:
            kind = "guard_failed" if action == "fail_open" else None
            self.events.emit(GuardEvent(action, "cache", kind=kind, reason=reason))
