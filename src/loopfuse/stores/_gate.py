"""Waiting for a connection: a store's operations take turns on its client's pool.

redis-py's default pool raises "Too many connections" when every connection is out,
instead of waiting for one. Under ordinary load (more guard steps at once than the pool
has connections: 1,000 asyncio tasks, 200 threads) that is back-pressure, not an outage,
but a store that reads it as Redis failing fails open (a second computation, a request
not counted) and opens its circuit. A :class:`ConnectionGate` lets at most ``limit``
operations of one store hold a connection at once (the pool's size: each operation
holds one connection at a time); the others wait their turn, up to ``timeout`` seconds,
then raise :class:`ConnectionWaitTimeout`, which the store's trap
(:mod:`loopfuse.stores._trap`) answers by its policy and counts apart: not a failure of
Redis, never a reason to open the circuit.

It counts :attr:`~ConnectionGate.waits`: operations that found every slot taken. Without
a ``limit`` (a client without a single ``connection_pool``, such as a cluster client) it
never waits.

>>> gate = ConnectionGate(limit=1, timeout=0.0)
>>> with gate.hold():
...     with gate.hold():
...         pass
Traceback (most recent call last):
    ...
loopfuse.stores._gate.ConnectionWaitTimeout: no connection of the pool (1) came free within 0s
>>> gate.waits
1
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Final, cast

from loopfuse.fields import Seconds

__all__ = ["DEFAULT_POOL_TIMEOUT", "ConnectionGate", "ConnectionWaitTimeout", "pool_size"]

DEFAULT_POOL_TIMEOUT: Final = 5.0
"""Seconds an operation waits for a free connection before it fails by the policy."""


class ConnectionWaitTimeout(Exception):
    """No connection came free within the wait: back-pressure, not Redis failing."""


def pool_size(client: object) -> int | None:
    """How many connections ``client``'s pool holds at most (``max_connections``), or
    ``None`` when it does not say (no single pool)."""
    size = getattr(getattr(client, "connection_pool", None), "max_connections", None)
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        return None
    return size


def check_pool_timeout(value: object) -> float:
    """A checked wait: a finite number of seconds >= 0 (0: never wait)."""
    return cast(float, Seconds(zero=True).check(value, "pool_timeout"))


# A child process starts with no operation in flight: the slots that the parent's
# threads held at the fork are free again (redis-py likewise resets its pools).
_GATES: weakref.WeakSet[ConnectionGate] = weakref.WeakSet()


def _after_fork() -> None:
    for gate in list(_GATES):
        gate.reset()


os.register_at_fork(after_in_child=_after_fork)


class ConnectionGate:
    """At most ``limit`` operations at once; the others wait up to ``timeout`` seconds.

    :meth:`hold` serves threads, :meth:`ahold` the tasks of one event loop (an asyncio
    store belongs to one loop, as its client's connections do).
    """

    __slots__ = ("__weakref__", "_async_slots", "_lock", "_slots", "limit", "timeout", "waits")

    def __init__(self, limit: int | None, timeout: float) -> None:
        self.limit = limit
        self.timeout = check_pool_timeout(timeout)
        self.waits = 0
        self._lock = threading.Lock()
        self._slots: threading.Semaphore | None = None
        self._async_slots: asyncio.Semaphore | None = None
        self.reset()
        _GATES.add(self)

    def reset(self) -> None:
        """Every slot free (a new process: see ``_after_fork``)."""
        if self.limit is not None:
            self._slots = threading.Semaphore(self.limit)
            self._async_slots = asyncio.Semaphore(self.limit)

    def _timed_out(self) -> ConnectionWaitTimeout:
        return ConnectionWaitTimeout(
            f"no connection of the pool ({self.limit}) came free within {self.timeout:g}s"
        )

    @contextmanager
    def hold(self) -> Iterator[None]:
        """A slot for the calling thread while the block runs."""
        slots = self._slots
        if slots is None:
            yield
            return
        if not slots.acquire(blocking=False):
            with self._lock:
                self.waits += 1
            if not slots.acquire(timeout=self.timeout):
                raise self._timed_out()
        try:
            yield
        finally:
            slots.release()

    @asynccontextmanager
    async def ahold(self) -> AsyncIterator[None]:
        """A slot for the calling task while the block runs."""
        slots = self._async_slots
        if slots is None:
            yield
            return
        if slots.locked():
            with self._lock:
                self.waits += 1
            try:
                async with asyncio.timeout(self.timeout):
                    await slots.acquire()
            except TimeoutError:
                raise self._timed_out() from None
        else:
            await slots.acquire()  # free: returns at once
        try:
            yield
        finally:
            slots.release()

    def __repr__(self) -> str:
        return f"ConnectionGate(limit={self.limit}, timeout={self.timeout:g})"
