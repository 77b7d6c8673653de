"""Single flight across processes, for a :class:`~loopfuse.dedup.DedupCache` on a shared store.

In one process, :mod:`loopfuse.dedup.singleflight` hands the value from the computing
thread to its waiters in memory. Across processes the store is the meeting point:

- a caller that misses takes the key's lock (:meth:`~loopfuse.stores.CacheStore.acquire`,
  one ``SET NX PX`` in Redis), looks once more (the value may have landed between its
  miss and its lock), computes, stores the value and releases the lock;
- a caller that finds the lock taken polls the store until the value appears; if the
  lock goes without a value (its holder failed or died), the first caller back takes
  it and computes; after ``timeout`` seconds of real time it gives up with
  :class:`~loopfuse.dedup.SingleFlightTimeoutError`;
- the lock lives ``wait_timeout`` seconds (:data:`DEFAULT_LOCK_TTL` when that is 0 or
  infinite), so a holder that died blocks nobody for longer; a factory that runs longer
  than that may be run a second time by another process;
- a factory that asks for its own key raises
  :class:`~loopfuse.dedup.SingleFlightReentryError` at once (per thread, per task);
- if the store fails open (Redis down), ``acquire`` grants the lock and reads miss:
  every caller computes, as it would without a cache. A computed value the store
  cannot keep (its codec refuses it, or the store fails closed) is still returned to
  its caller, with a warning on the ``loopfuse`` logger.

Stats, as in one process: the computing caller counts a miss, a caller served a value
(from the store, or after waiting) a hit. The store's calls are sync: in
:func:`acompute` each one blocks the event loop for one round trip (bounded by the
client's ``socket_timeout``); waiting is ``asyncio.sleep``.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar, cast

from loopfuse.dedup._core import MISSING, CacheCore
from loopfuse.dedup.errors import SingleFlightReentryError, SingleFlightTimeoutError
from loopfuse.dedup.keys import RequestKey
from loopfuse.dedup.singleflight import _deadline, _remaining
from loopfuse.errors import InvalidInputError
from loopfuse.stores import StoreUnavailableError

__all__ = ["DEFAULT_LOCK_TTL", "acompute", "compute"]

V = TypeVar("V")

logger = logging.getLogger("loopfuse")

DEFAULT_LOCK_TTL: Final = 300.0
"""Seconds a computation's lock lives when the wait timeout does not say (0 or inf)."""

_FIRST_POLL: Final = 0.005
_LAST_POLL: Final = 0.1

_computing: contextvars.ContextVar[frozenset[tuple[int, bytes | None]]] = contextvars.ContextVar(
    "loopfuse_dedup_computing", default=frozenset()
)


def _lock_ttl(core: CacheCore[V]) -> float:
    wait = core.wait_timeout
    return wait if 0 < wait < math.inf else DEFAULT_LOCK_TTL


def _probe(core: CacheCore[V], key: RequestKey) -> object:
    return core.lookup(key, core.now())


def _store(core: CacheCore[V], key: RequestKey, value: V, ttl: float) -> None:
    # The caller paid for this value: it gets it even when it cannot be cached.
    try:
        core.insert(key, value, ttl, core.now())
    except (InvalidInputError, StoreUnavailableError) as exc:
        logger.warning("loopfuse: DedupCache could not store the value of %r: %s", key, exc)


def compute(
    core: CacheCore[V],
    key: RequestKey,
    factory: Callable[[], V],
    ttl: float,
    timeout: object,
) -> V:
    """The stored value of ``key``, or ``factory()`` run once across processes."""
    deadline = _deadline(core, timeout)
    flight = (key.value, key.digest)
    if flight in _computing.get():
        core.count(hit=False)
        raise SingleFlightReentryError(f"the factory for {key!r} asked for its own key")
    pause = _FIRST_POLL
    while True:
        value = _probe(core, key)
        if value is not MISSING:
            core.count(hit=True)
            return cast(V, value)
        token = core.store.acquire(key.value, key.digest, _lock_ttl(core))
        if token is not None:
            return _lead(core, key, flight, token, factory, ttl)
        left = _remaining(deadline)
        if left is not None and left <= 0:
            core.count(hit=False)
            raise SingleFlightTimeoutError(f"timed out waiting for the value of {key!r}")
        time.sleep(pause if left is None else min(pause, left))
        pause = min(pause * 2, _LAST_POLL)


def _lead(
    core: CacheCore[V],
    key: RequestKey,
    flight: tuple[int, bytes | None],
    token: str,
    factory: Callable[[], V],
    ttl: float,
) -> V:
    mark = _computing.set(_computing.get() | {flight})
    try:
        value = _probe(core, key)  # stored between our miss and our lock?
        if value is not MISSING:
            core.count(hit=True)
            return cast(V, value)
        core.count(hit=False)
        result = factory()
        _store(core, key, result, ttl)
        return result
    finally:
        _computing.reset(mark)
        core.store.release(key.value, key.digest, token)


async def acompute(
    core: CacheCore[V],
    key: RequestKey,
    factory: Callable[[], Awaitable[V]],
    ttl: float,
    timeout: object,
) -> V:
    """The stored value of ``key``, or ``await factory()`` once across processes."""
    deadline = _deadline(core, timeout)
    flight = (key.value, key.digest)
    if flight in _computing.get():
        core.count(hit=False)
        raise SingleFlightReentryError(f"the factory for {key!r} asked for its own key")
    pause = _FIRST_POLL
    while True:
        value = _probe(core, key)
        if value is not MISSING:
            core.count(hit=True)
            return cast(V, value)
        token = core.store.acquire(key.value, key.digest, _lock_ttl(core))
        if token is not None:
            return await _alead(core, key, flight, token, factory, ttl)
        left = _remaining(deadline)
        if left is not None and left <= 0:
            core.count(hit=False)
            raise SingleFlightTimeoutError(f"timed out waiting for the value of {key!r}")
        try:
            await asyncio.sleep(pause if left is None else min(pause, left))
        except BaseException:  # cancelled while waiting
            core.count(hit=False)
            raise
        pause = min(pause * 2, _LAST_POLL)


async def _alead(
    core: CacheCore[V],
    key: RequestKey,
    flight: tuple[int, bytes | None],
    token: str,
    factory: Callable[[], Awaitable[V]],
    ttl: float,
) -> V:
    mark = _computing.set(_computing.get() | {flight})
    try:
        value = _probe(core, key)
        if value is not MISSING:
            core.count(hit=True)
            return cast(V, value)
        core.count(hit=False)
        result = await factory()
        _store(core, key, result, ttl)
        return result
    finally:
        _computing.reset(mark)
        core.store.release(key.value, key.digest, token)
