"""The asyncio methods of :class:`~loopfuse.dedup.DedupCache`: none of them blocks the loop.

- the in-memory store (the default) does no I/O: each method is its sync twin, run in
  line (no thread, no await);
- an async store (:class:`~loopfuse.stores.redis.AsyncRedisStore`) is awaited;
- a sync shared store (:class:`~loopfuse.stores.redis.RedisStore`) is called in a worker
  thread (``asyncio.to_thread``).

A cache built on an async-only store serves only these methods: its sync methods raise
:class:`~loopfuse.errors.ConfigError` naming the one to await instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Generic, TypeVar, cast

from loopfuse.dedup import _shared, singleflight
from loopfuse.dedup._core import MISSING, CacheCore, check_key, seconds
from loopfuse.dedup.entries import CachedResponse
from loopfuse.dedup.keys import RequestKey
from loopfuse.events import EventAction, EventSink
from loopfuse.stores import StoredEntry

__all__ = ["AsyncDedupMethods"]

V = TypeVar("V")


class AsyncDedupMethods(Generic[V]):
    """``aget``, ``ainsert``, ``apeek``, ``aclear`` and ``aget_or_compute``."""

    __slots__ = ()

    # What DedupCache provides, declared for the type checker only: its state, and the
    # sync methods these run in line on the in-memory store.
    _core: CacheCore[V]
    _flights: singleflight.FlightTables[V]
    events: EventSink

    if TYPE_CHECKING:

        def _emit(self, action: EventAction, reason: str | None = None) -> None: ...
        def get(self, key: RequestKey) -> V | None: ...
        def peek(self, key: RequestKey) -> CachedResponse[V] | None: ...
        def clear(self) -> None: ...

    async def aget(self, key: RequestKey) -> V | None:
        """:meth:`~loopfuse.dedup.DedupCache.get`, awaited."""
        core = self._core
        if core.local is not None:
            return self.get(key)
        checked = check_key(key)
        value = await core.access.call("get", checked.value, checked.digest, core.now())
        core.count(hit=value is not MISSING)
        self._emit("cache_miss" if value is MISSING else "cache_hit")
        return None if value is MISSING else cast(V, value)

    async def ainsert(self, key: RequestKey, value: V, *, ttl: float | None = None) -> None:
        """:meth:`~loopfuse.dedup.DedupCache.insert` (or ``insert_with_ttl`` when ``ttl``
        is given), awaited."""
        core = self._core
        checked = check_key(key)
        duration = core.default_ttl if ttl is None else seconds(ttl, "ttl")
        if core.local is not None:
            with core.io:
                core.insert(checked, value, duration, core.now())
            return
        await core.access.call("set", checked.value, checked.digest, value, duration, core.now())

    async def apeek(self, key: RequestKey) -> CachedResponse[V] | None:
        """:meth:`~loopfuse.dedup.DedupCache.peek`, awaited."""
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
        """:meth:`~loopfuse.dedup.DedupCache.clear`, awaited."""
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
        """:meth:`~loopfuse.dedup.DedupCache.get_or_compute` for asyncio: ``await
        factory()`` once per key.

        Tasks of one event loop share a computation (with a shared store: every task and
        process). If the computing task is cancelled (or its factory raises), nothing is
        cached and a waiting task takes over, so waiters never hang on a task that is
        gone; a cancelled waiter leaves the others undisturbed. The event loop never
        waits for the store.

        >>> import asyncio
        >>> from loopfuse.dedup import DedupCache
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
        duration = core.default_ttl if ttl is None else seconds(ttl, "ttl")
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
