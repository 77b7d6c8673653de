"""Single flight: concurrent callers of one key run one computation and share its value.

Threads and asyncio tasks each have their own table of computations in progress: a
thread cannot await an asyncio future, and a task must not block its event loop on a
thread's event. Within one table, computations are keyed by the key's 64-bit value *and*
digest, so two contents that collide on the value never share a computation.

Rules, for both:

- the first caller that misses computes; callers that arrive meanwhile wait and are
  handed the same value (each a hit in the stats, since none of them paid);
- a computation that fails (raises, or its task is cancelled) caches nothing; its
  caller gets the exception; the waiters wake and the first one back computes;
- a waiter waits at most ``timeout`` seconds of real time (``time.monotonic``, not the
  cache's clock, which may be a test's fake) and then raises
  :class:`~loopfuse.dedup.SingleFlightTimeoutError`; the computation goes on and caches
  its value when it ends. A factory that hangs for good therefore blocks nobody for good
  but its own caller (Python cannot interrupt a thread);
- a factory that asks for the key it is computing (same thread, or same task) raises
  :class:`~loopfuse.dedup.SingleFlightReentryError` at once instead of deadlocking.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar, cast

from loopfuse.dedup._core import MISSING, CacheCore, remaining
from loopfuse.dedup.errors import SingleFlightReentryError, SingleFlightTimeoutError
from loopfuse.dedup.keys import RequestKey

__all__ = ["FlightTables", "acompute", "compute"]

V = TypeVar("V")

# The event thread waiters block on; a module name so tests can count the waiters.
WaitEvent = threading.Event


class _Flight(Generic[V]):
    """One computation in progress: who runs it, and how its waiters learn the result."""

    __slots__ = ("done", "ok", "owner", "value")

    def __init__(self, owner: object, done: Any) -> None:
        self.owner = owner
        self.done = done  # a WaitEvent for threads, an asyncio.Future[None] for tasks
        self.ok = False
        self.value: V | None = None


class FlightTables(Generic[V]):
    """The computations in progress of one cache (guarded by the cache's lock)."""

    __slots__ = ("tasks", "threads")

    def __init__(self) -> None:
        self.threads: dict[tuple[int, bytes | None], _Flight[V]] = {}
        self.tasks: dict[tuple[object, int, bytes | None], _Flight[V]] = {}


def compute(
    core: CacheCore[V],
    flights: FlightTables[V],
    key: RequestKey,
    factory: Callable[[], V],
    ttl: float,
    timeout: object,
) -> V:
    """The cached value of ``key``, or ``factory()`` run once for concurrent threads."""
    deadline = core.deadline(timeout)
    flight_key = (key.value, key.digest)
    me = threading.get_ident()
    while True:
        with core.lock:
            value = core.lookup(key, core.now())
            if value is not MISSING:
                core.count(hit=True)
                return cast(V, value)
            flight = flights.threads.get(flight_key)
            leading = flight is None
            if flight is None:
                flight = flights.threads[flight_key] = _Flight(me, WaitEvent())
            elif flight.owner == me:
                core.count(hit=False)
                raise SingleFlightReentryError(f"the factory for {key!r} asked for its own key")
        if leading:
            return _lead(core, flights, key, flight_key, flight, factory, ttl)
        if not flight.done.wait(remaining(deadline)):
            with core.lock:
                core.count(hit=False)
            raise SingleFlightTimeoutError(f"timed out waiting for the value of {key!r}")
        if flight.ok:
            with core.lock:
                core.count(hit=True)
            return cast(V, flight.value)
        # The computing caller failed: go round again; the first waiter back computes.


def _lead(
    core: CacheCore[V],
    flights: FlightTables[V],
    key: RequestKey,
    flight_key: tuple[int, bytes | None],
    flight: _Flight[V],
    factory: Callable[[], V],
    ttl: float,
) -> V:
    ok = False
    try:
        value = factory()
        with core.lock:
            core.insert(key, value, ttl, core.now())
        flight.value = value
        ok = True
        return value
    finally:
        with core.lock:
            del flights.threads[flight_key]
            core.count(hit=False)
        flight.ok = ok
        flight.done.set()  # after ok/value: Event.set orders them before the waiters' reads


async def acompute(
    core: CacheCore[V],
    flights: FlightTables[V],
    key: RequestKey,
    factory: Callable[[], Awaitable[V]],
    ttl: float,
    timeout: object,
) -> V:
    """The cached value of ``key``, or ``await factory()`` once for concurrent tasks."""
    deadline = core.deadline(timeout)
    loop = asyncio.get_running_loop()
    flight_key = (loop, key.value, key.digest)
    me = asyncio.current_task()
    while True:
        with core.lock:
            value = core.lookup(key, core.now())
            if value is not MISSING:
                core.count(hit=True)
                return cast(V, value)
            flight = flights.tasks.get(flight_key)
            leading = flight is None
            if flight is None:
                flight = flights.tasks[flight_key] = _Flight(me, loop.create_future())
            elif me is not None and flight.owner is me:
                core.count(hit=False)
                raise SingleFlightReentryError(f"the factory for {key!r} asked for its own key")
        if leading:
            return await _alead(core, flights, key, flight_key, flight, factory, ttl)
        try:
            # shield: a waiter that times out or is cancelled leaves the computation alone.
            await asyncio.wait_for(asyncio.shield(flight.done), remaining(deadline))
        except TimeoutError:
            with core.lock:
                core.count(hit=False)
            raise SingleFlightTimeoutError(f"timed out waiting for the value of {key!r}") from None
        except BaseException:  # cancelled while waiting
            with core.lock:
                core.count(hit=False)
            raise
        if flight.ok:
            with core.lock:
                core.count(hit=True)
            return cast(V, flight.value)


async def _alead(
    core: CacheCore[V],
    flights: FlightTables[V],
    key: RequestKey,
    flight_key: tuple[object, int, bytes | None],
    flight: _Flight[V],
    factory: Callable[[], Awaitable[V]],
    ttl: float,
) -> V:
    ok = False
    try:
        value = await factory()
        with core.lock:
            core.insert(key, value, ttl, core.now())
        flight.value = value
        ok = True
        return value
    finally:
        # Also on cancellation: the waiters wake, see the failure and one computes.
        with core.lock:
            del flights.tasks[flight_key]
            core.count(hit=False)
        flight.ok = ok
        if not flight.done.done():
            flight.done.set_result(None)
