"""Where the guards keep their state: the store seam.

A guard decides; a store remembers. The state of :class:`~loopfuse.LoopBreaker` (each
session's window of fingerprints) and of :class:`~loopfuse.DedupCache` (answers by key,
and who is computing which) sits behind two small protocols, so that several worker
processes or hosts can share it:

- :class:`BreakerStore`: ``record`` one request and count its repeats in one atomic step;
  ``reset``; ``tracked_sessions``.
- :class:`CacheStore`: ``get``, ``peek``, ``set`` and ``clear`` answers; ``acquire`` and
  ``release`` the single-flight lock of a key.

Every operation that reads or writes times takes ``now`` explicitly: the store keeps no
clock of its own for windows and TTLs (a store may decide to use a shared clock instead,
as :class:`~loopfuse.stores.redis.RedisStore` does by default, and says so).

Implementations:

- :mod:`loopfuse.stores.memory`: one process, no I/O; the guards' semantics exactly.
- :mod:`loopfuse.stores.redis`: shared by processes and hosts through Redis (the optional
  ``loopfuse[redis]`` extra), sync and asyncio, one round trip per guard step.

A guard's logic is written once for both kinds of store: :mod:`loopfuse.stores.drive`
runs it from sync and from asyncio code.

Failure policy (for stores with a backend): a store never lets its client library's
exceptions out. When the backend is down, slow or erroring, the operation *fails open*:
``record`` returns ``0`` (nothing was counted: let the request go), ``get``/``peek`` miss,
``set``/``release``/``reset``/``clear`` do nothing, ``acquire`` grants the lock (compute
without single flight). A store built with ``fail_closed=True`` raises
:class:`StoreUnavailableError` instead. After repeated failures its circuit
(:mod:`loopfuse.stores.circuit`) stops calling the backend for a cool-down, so that a
stalled backend costs one timeout per cool-down, not one per call. Neither load (more
callers than connections: they wait their turn, bounded) nor junk that another client
wrote under one key (a miss, or a fresh window, for that key only) is a failure of the
backend: neither opens the circuit.

:class:`AsyncBreakerStore` and :class:`AsyncCacheStore` are the same operations, awaited.
The guards take a store of either kind: their ``a``-prefixed methods (``acheck``,
``aget_or_compute``, ...) await an async store and never block the event loop.

>>> from loopfuse.stores.memory import MemoryBreakerStore
>>> store: BreakerStore = MemoryBreakerStore()
>>> [store.record("s", 42, now=0.0, window=30.0, max_samples=256) for _ in range(3)]
[1, 2, 3]
>>> store.record("s", 42, now=30.0, window=30.0, max_samples=256)  # a window later
1
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol, final, runtime_checkable

from loopfuse.errors import LoopfuseError

__all__ = [
    "MISS",
    "AsyncBreakerStore",
    "AsyncCacheStore",
    "BreakerStore",
    "CacheStore",
    "StoreUnavailableError",
    "StoredEntry",
]


@final
class _Miss:
    """The type of :data:`MISS`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISS"

    def __bool__(self) -> bool:
        return False


MISS: Final = _Miss()
"""What :meth:`CacheStore.get` returns when nothing may be served (``None`` is a value)."""


class StoreUnavailableError(LoopfuseError):
    """A store built with ``fail_closed=True`` could not reach its backend.

    The message names the operation and the backend's error; the backend's own
    exception is not chained, so no client-library exception type reaches the caller.

    >>> issubclass(StoreUnavailableError, LoopfuseError)
    True
    """


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """A snapshot of one cached answer (what :meth:`CacheStore.peek` returns).

    ``created_at`` is on the clock of the ``now`` the caller passes (so that
    ``created_at + ttl`` compares with it); ``hit_count`` counts the reads served this
    value, where the store keeps that count (the in-memory store does; Redis says 0).

    >>> StoredEntry("answer", created_at=5.0, ttl=60.0, hit_count=1).created_at
    5.0
    """

    value: object
    created_at: float
    ttl: float
    hit_count: int = 0


@runtime_checkable
class BreakerStore(Protocol):
    """The windows of :class:`~loopfuse.LoopBreaker`: per session, timed fingerprints.

    A sample recorded at ``t`` is live while ``now - t < window``.
    """

    def record(
        self, session_id: str, fingerprint: int, now: float, window: float, max_samples: int
    ) -> int:
        """Record one request and return how many live samples of ``session_id`` have
        ``fingerprint``, this one included (so ``>= 1``).

        Atomic: dropping the samples that are no longer live at ``now``, dropping the
        oldest samples while the session holds ``max_samples`` or more, adding this one
        and counting happen as one step, so that concurrent callers (threads, processes)
        each see a count that includes every request recorded before theirs and none
        after. Returns ``0`` only when a store with a backend failed open: nothing was
        recorded.
        """
        ...

    def reset(self, session_id: str | None = None) -> None:
        """Forget one session's samples, or every session's when ``session_id`` is None.

        One session: atomic. Every session: not atomic against concurrent ``record``
        calls in a shared store (a session recorded meanwhile may survive).
        """
        ...

    def tracked_sessions(self, now: float, window: float) -> int:
        """How many sessions have a live sample at ``now``. Diagnostic, not atomic; may
        scan every session in a shared store."""
        ...


@runtime_checkable
class CacheStore(Protocol):
    """The answers of :class:`~loopfuse.DedupCache`, by key, and their single-flight locks.

    A key is a :class:`~loopfuse.dedup.RequestKey`'s two parts: ``key_value`` (the
    unsigned 64-bit value: one slot per value) and ``digest`` (32 bytes, or ``None`` for a
    bare key). An entry is served only to a probe whose digest is ``None`` or equal to
    the digest it was stored with; a mismatch is a miss counted in :attr:`collisions`.
    """

    @property
    def collisions(self) -> int:
        """Probes that found an entry stored for other content under the same value."""
        ...

    @property
    def evictions(self) -> int:
        """Entries this store removed because they expired or to make room (a store whose
        backend expires entries by itself counts none)."""
        ...

    def get(self, key_value: int, digest: bytes | None, now: float) -> object:
        """The value to serve at ``now``, or :data:`MISS`. One atomic read (a store may
        also refresh the entry's recency and count a hit on it)."""
        ...

    def peek(self, key_value: int, digest: bytes | None, now: float) -> StoredEntry | None:
        """What ``get`` would serve, as a snapshot, with no side effect."""
        ...

    def set(
        self, key_value: int, digest: bytes | None, value: object, ttl: float, now: float
    ) -> None:
        """Store ``value`` for ``ttl`` seconds from ``now`` (``math.inf``: no expiry, or the
        store's longest), replacing any entry under ``key_value``. One atomic write."""
        ...

    def acquire(self, key_value: int, digest: bytes | None, ttl: float) -> str | None:
        """Take the single-flight lock of the key for ``ttl`` seconds of real time.

        Returns a token when the lock was free (or its holder's time ran out), ``None``
        when another holder has it. Atomic: of concurrent callers exactly one gets a
        token. The lock's time is real time, not the ``now`` of the other operations,
        because it protects against a holder that died.
        """
        ...

    def release(self, key_value: int, digest: bytes | None, token: str) -> None:
        """Give the lock back, if ``token`` still holds it (atomic compare-and-delete: a
        holder whose time ran out cannot release its successor's lock)."""
        ...

    def clear(self) -> None:
        """Remove every entry and lock (not atomic in a shared store)."""
        ...


@runtime_checkable
class AsyncBreakerStore(Protocol):
    """:class:`BreakerStore` for asyncio: the same operations, awaited."""

    async def record(
        self, session_id: str, fingerprint: int, now: float, window: float, max_samples: int
    ) -> int:
        """See :meth:`BreakerStore.record`."""
        ...

    async def reset(self, session_id: str | None = None) -> None:
        """See :meth:`BreakerStore.reset`."""
        ...

    async def tracked_sessions(self, now: float, window: float) -> int:
        """See :meth:`BreakerStore.tracked_sessions`."""
        ...


@runtime_checkable
class AsyncCacheStore(Protocol):
    """:class:`CacheStore` for asyncio: the same operations, awaited."""

    @property
    def collisions(self) -> int:
        """See :attr:`CacheStore.collisions`."""
        ...

    @property
    def evictions(self) -> int:
        """See :attr:`CacheStore.evictions`."""
        ...

    async def get(self, key_value: int, digest: bytes | None, now: float) -> object:
        """See :meth:`CacheStore.get`."""
        ...

    async def peek(self, key_value: int, digest: bytes | None, now: float) -> StoredEntry | None:
        """See :meth:`CacheStore.peek`."""
        ...

    async def set(
        self, key_value: int, digest: bytes | None, value: object, ttl: float, now: float
    ) -> None:
        """See :meth:`CacheStore.set`."""
        ...

    async def acquire(self, key_value: int, digest: bytes | None, ttl: float) -> str | None:
        """See :meth:`CacheStore.acquire`."""
        ...

    async def release(self, key_value: int, digest: bytes | None, token: str) -> None:
        """See :meth:`CacheStore.release`."""
        ...

    async def clear(self) -> None:
        """See :meth:`CacheStore.clear`."""
        ...


def __dir__() -> list[str]:
    """What ``dir()`` shows: the public API, not the imports and helpers."""
    from loopfuse._api import public_dir

    return public_dir(globals())
