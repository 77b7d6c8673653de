"""One logic, two drivers: plans that yield their I/O, run from sync or from asyncio code.

A *plan* is a generator that decides and yields the operations it needs (a Redis
command, a store call, a pause, the caller's factory) and receives each one's result,
or its exception thrown back in at the ``yield``. It does no I/O itself, so the same
plan runs under :func:`drive` (each operation performed by a plain call) and under
:func:`adrive` (each one awaited): the logic is written once, the drivers are a few
lines. This is the shape of tenacity's and httpx's sync/async cores.

:class:`StoreAccess` is how a guard reaches its store from either side.

>>> def plan():
...     total = yield 1
...     total += yield 2
...     return total
>>> drive(plan(), lambda n: n * 10)
30
>>> import asyncio
>>> async def times_ten(n: int) -> int:
...     return n * 10
>>> asyncio.run(adrive(plan(), times_ten))
30
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

from loopfuse.errors import ConfigError

__all__ = ["StoreAccess", "adrive", "drive"]

S = TypeVar("S")
T = TypeVar("T")


def drive(plan: Generator[S, Any, T], perform: Callable[[S], Any]) -> T:
    """Run ``plan`` to its end, performing each operation it yields with ``perform``.

    An exception from ``perform`` (any ``BaseException``) is thrown into the plan at its
    ``yield``, so that its ``try``/``finally`` blocks run, and leaves the driver only if
    the plan lets it out.
    """
    reply: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = plan.send(reply) if error is None else plan.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        finally:
            error = None  # no reference cycle through the traceback
        try:
            reply = perform(step)
        except BaseException as exc:
            reply, error = None, exc


async def adrive(plan: Generator[S, Any, T], perform: Callable[[S], Awaitable[Any]]) -> T:
    """:func:`drive` for asyncio: each operation is awaited. A cancellation is thrown
    into the plan like any exception, so its ``finally`` blocks run."""
    reply: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = plan.send(reply) if error is None else plan.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        finally:
            error = None
        try:
            reply = await perform(step)
        except BaseException as exc:
            reply, error = None, exc


class StoreAccess:
    """How a guard calls its store: from sync code, and from asyncio code without ever
    blocking the event loop.

    - an async store (``async def`` operations, like
      :class:`~loopfuse.stores.redis.AsyncRedisStore`): awaited from async code; sync
      code gets a :class:`~loopfuse.errors.ConfigError` naming the async method to use;
    - a store that does no I/O (``local``, the in-memory stores): called directly from
      both sides, no thread, no await;
    - a sync store with I/O (:class:`~loopfuse.stores.redis.RedisStore`): called directly
      from sync code; from async code in a worker thread (``asyncio.to_thread``), so the
      loop keeps running while it waits.
    """

    __slots__ = ("is_async", "local", "owner", "store")

    def __init__(self, store: object, probe: str, owner: str, *, local: bool) -> None:
        self.store = store
        self.owner = owner
        self.local = local
        self.is_async = inspect.iscoroutinefunction(getattr(store, probe, None))

    def sync(self, method: str) -> Any:
        """The store, for sync code calling ``owner.method``; a
        :class:`~loopfuse.errors.ConfigError` when it is async-only (never a coroutine
        left un-awaited, never a hang)."""
        if self.is_async:
            raise ConfigError(
                f"{self.owner}.{method}() cannot use an async store ({self.store!r}): "
                f"await {self.owner}.a{method}() instead, or pass a sync store"
            )
        return self.store

    async def call(self, method: str, *args: Any) -> Any:
        """``store.method(*args)``, from async code, without blocking the event loop."""
        operation = getattr(self.store, method)
        if self.is_async:
            return await operation(*args)
        if self.local:
            return operation(*args)
        return await asyncio.to_thread(operation, *args)
