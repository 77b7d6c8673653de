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
(from the store, or after waiting) a hit.

The logic is written once, as a plan (:func:`_plan`) that yields its store calls, its
pauses and the factory call; :func:`compute` runs it with plain calls and
``time.sleep``, :func:`acompute` awaits each one, so an asyncio task never blocks its
event loop on the store (an async store is awaited, a sync one runs in a worker thread:
see :class:`~loopfuse.stores.drive.StoreAccess`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import math
import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Final, NamedTuple, TypeVar, cast

from loopfuse.dedup._core import MISSING, CacheCore, remaining
from loopfuse.dedup.errors import SingleFlightReentryError, SingleFlightTimeoutError
from loopfuse.dedup.keys import RequestKey
from loopfuse.errors import InvalidInputError
from loopfuse.stores import StoreUnavailableError
from loopfuse.stores.drive import adrive, drive

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
    wait = core.settings.wait_timeout
    return wait if 0 < wait < math.inf else DEFAULT_LOCK_TTL


class StoreCall(NamedTuple):
    """``store.<method>(*args)``."""

    method: str
    args: tuple[object, ...]


class Pause(NamedTuple):
    """Wait ``seconds`` before polling the store again."""

    seconds: float


COMPUTE: Final = "compute"
"""Run the caller's factory; the plan receives its value."""

Step = StoreCall | Pause | str


def _plan(
    core: CacheCore[V], key: RequestKey, ttl: float, deadline: float | None
) -> Generator[Step, Any, V]:
    """The stored value of ``key``, or the factory's, computed once across processes."""
    flight = (key.value, key.digest)
    if flight in _computing.get():
        core.count(hit=False)
        raise SingleFlightReentryError(f"the factory for {key!r} asked for its own key")
    lock_ttl = _lock_ttl(core)
    pause = _FIRST_POLL
    while True:
        value = yield StoreCall("get", (key.value, key.digest, core.now()))
        if value is not MISSING:
            core.count(hit=True)
            return cast(V, value)
        token = yield StoreCall("acquire", (key.value, key.digest, lock_ttl))
        if token is not None:
            break
        left = remaining(deadline)
        if left is not None and left <= 0:
            core.count(hit=False)
            raise SingleFlightTimeoutError(f"timed out waiting for the value of {key!r}")
        try:
            yield Pause(pause if left is None else min(pause, left))
        except BaseException:  # cancelled (or interrupted) while waiting
            core.count(hit=False)
            raise
        pause = min(pause * 2, _LAST_POLL)
    release = StoreCall("release", (key.value, key.digest, token))
    mark = _computing.set(_computing.get() | {flight})
    try:
        result = yield from _lead(core, key, ttl)
    except GeneratorExit:  # abandoned by its driver: the lock expires by its TTL
        _computing.reset(mark)
        raise
    except BaseException:
        _computing.reset(mark)
        yield release
        raise
    _computing.reset(mark)
    yield release
    return result


def _lead(core: CacheCore[V], key: RequestKey, ttl: float) -> Generator[Step, Any, V]:
    value = yield StoreCall("get", (key.value, key.digest, core.now()))  # stored meanwhile?
    if value is not MISSING:
        core.count(hit=True)
        return cast(V, value)
    core.count(hit=False)
    result: V = yield COMPUTE
    try:
        yield StoreCall("set", (key.value, key.digest, result, ttl, core.now()))
    except (InvalidInputError, StoreUnavailableError) as exc:
        # The caller paid for this value: it gets it even when it cannot be cached.
        logger.warning("loopfuse: DedupCache could not store the value of %r: %s", key, exc)
    return result


def compute(
    core: CacheCore[V],
    key: RequestKey,
    factory: Callable[[], V],
    ttl: float,
    timeout: object,
) -> V:
    """The stored value of ``key``, or ``factory()`` run once across processes."""
    store = core.shared("get_or_compute")
    plan = _plan(core, key, ttl, core.deadline(timeout))

    def perform(step: Step) -> Any:
        if isinstance(step, StoreCall):
            return getattr(store, step.method)(*step.args)
        if isinstance(step, Pause):
            return time.sleep(step.seconds)
        return factory()

    return drive(plan, perform)


async def acompute(
    core: CacheCore[V],
    key: RequestKey,
    factory: Callable[[], Awaitable[V]],
    ttl: float,
    timeout: object,
) -> V:
    """The stored value of ``key``, or ``await factory()`` once across processes."""
    access = core.access
    plan = _plan(core, key, ttl, core.deadline(timeout))

    async def perform(step: Step) -> Any:
        if isinstance(step, StoreCall):
            return await access.call(step.method, *step.args)
        if isinstance(step, Pause):
            return await asyncio.sleep(step.seconds)
        return await factory()

    return await adrive(plan, perform)
