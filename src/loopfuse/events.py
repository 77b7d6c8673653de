"""Events: every decision a guard or an integration takes, handed to a callback you give.

One small API for the breaker, the cache, :class:`~loopfuse.Guard` and every
integration: pass ``on_event=callback`` and ``callback`` receives a :class:`GuardEvent`
(frozen) each time something worth counting happens, a request let through included
(``request_forwarded``), so that a refusal rate has its denominator. loopfuse does no
I/O for it: route events to your logs, metrics or traces
(:mod:`loopfuse.integrations.otel` turns them into OpenTelemetry signals).

A callback that raises never breaks the request it reports on: the error is caught,
counted (``EventSink.errors``) and logged once on the ``loopfuse`` logger.

>>> seen = []
>>> sink = EventSink(seen.append)
>>> sink.emit(GuardEvent("loop_refused", "detector", kind="repeat", count=4))
>>> seen[0].action, seen[0].guard, seen[0].count, seen[0].loop.kind
('loop_refused', 'detector', 4, 'repeat')
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal, get_args

from loopfuse.errors import ConfigError
from loopfuse.loop import HoldsLoop, Loop

__all__ = [
    "ACTIONS",
    "EventAction",
    "EventCallback",
    "EventSink",
    "GuardEvent",
    "log_events",
]

logger = logging.getLogger("loopfuse")

EventAction = Literal[
    "request_forwarded",
    "loop_noted",
    "loop_refused",
    "breaker_tripped",
    "cache_hit",
    "cache_miss",
    "cache_bypass",
    "retry_forgiven",
    "fail_open",
    "fail_closed",
    "input_fallback",
]
"""What happened:

- ``request_forwarded``: :class:`~loopfuse.Guard` found no loop and the request went on
  as it was (the denominator of a refusal rate: see below);
- ``loop_noted``: a loop was found and the request went on with a note for the model;
- ``loop_refused``: a loop was found and the request was refused;
- ``breaker_tripped``: :class:`~loopfuse.LoopBreaker` refused a request (its own event);
- ``cache_hit`` / ``cache_miss`` / ``cache_bypass``: the answer came from the cache /
  from upstream and was cached / from upstream, the cache not used (``reason`` says why);
- ``retry_forgiven``: a retry of an attempt that failed upstream was not counted again;
- ``fail_open`` / ``fail_closed``: a guard failed internally and the request was let
  through / refused (``reason`` holds the error);
- ``input_fallback``: an input was junk (a non-string end-user id, a malformed
  ``Cache-Control``, an empty namespace) and its documented fallback applied.

Every request a :class:`~loopfuse.Guard` decides ends in exactly one of
``request_forwarded``, ``loop_noted``, ``loop_refused`` and ``fail_closed``: their sum
is the number of requests decided. The others are said besides (``fail_open`` with the
``request_forwarded`` of the request it let through).
"""

ACTIONS: Final = frozenset(get_args(EventAction))
"""Every :data:`EventAction`."""


# No slots: a frozen class with slots lets an assignment to a property (``event.count``)
# through to a TypeError on CPython 3.11, where every assignment must be refused alike.
@dataclass(frozen=True, init=False)
class GuardEvent(HoldsLoop):
    """One decision, as data: what happened, which guard, and the loop it was about.

    ``guard`` is ``"breaker"``, ``"detector"``, ``"cache"`` or ``"guard"`` (the check as a
    whole: requests let through, failures, junk inputs). ``session`` is the breaker
    session the request was counted in (``None`` when it was not counted). ``loop`` is
    the :class:`~loopfuse.Loop` the event is about: the one found, or for a failure
    ``Loop("guard_failed", ...)``; ``None`` for an event about no loop (a request let
    through, a cache lookup, a junk input). Its ``kind`` (``"repeated_request"``,
    ``"repeat"``, ``"cycle"``, ``"stagnation"``, ``"guard_failed"``, ...), ``count``
    (how often the loop went round), ``tool_names`` (the tools of the looping batch) and
    ``signature`` (the loop's signature or request fingerprint) are read off it here.
    ``reason`` is a sentence (the message for the model, the error, or why the cache
    was bypassed; the loop's message when not given), ``integration`` where it happened
    (``"httpx"``, ``"langchain"``, ``"litellm"``, ``"openai_agents"``, or ``None`` for a
    guard used directly).

    An event about a loop is built from it, ``GuardEvent(action, guard, session,
    loop=loop)``; the loop's fields as keywords (``kind=``, ``count=``, ...) build it too.

    >>> event = GuardEvent("cache_hit", "cache", integration="httpx")
    >>> event.action, event.loop, event.kind, event.tool_names
    ('cache_hit', None, None, ())
    >>> found = Loop("repeat", "detector", "ls:1f", 4, ("ls",), "Loop detected: stop.")
    >>> event = GuardEvent("loop_refused", "detector", "run-1", loop=found)
    >>> event.kind, event.count, event.reason
    ('repeat', 4, 'Loop detected: stop.')
    >>> GuardEvent("loop_refused", "detector", kind="repeat", count=4).loop.count
    4
    >>> event.session = "run-2"
    Traceback (most recent call last):
        ...
    dataclasses.FrozenInstanceError: cannot assign to field 'session'
    """

    action: EventAction
    guard: str
    session: str | None
    loop: Loop | None
    reason: str | None
    integration: str | None

    def __init__(
        self,
        action: EventAction,
        guard: str,
        session: str | None = None,
        kind: str | None = None,
        count: int = 0,
        tool_names: tuple[str, ...] = (),
        reason: str | None = None,
        integration: str | None = None,
        signature: str | None = None,
        *,
        loop: Loop | None = None,
    ) -> None:
        if loop is None and (kind is not None or count or tool_names or signature):
            named = "loop" if kind is None else kind
            loop = Loop(named, guard, signature or "", count, tuple(tool_names), reason or "")
        if reason is None and loop is not None and loop.message:
            reason = loop.message
        setattr_ = object.__setattr__  # frozen: the fields are set once, here
        setattr_(self, "action", action)
        setattr_(self, "guard", guard)
        setattr_(self, "session", session)
        setattr_(self, "loop", loop)
        setattr_(self, "reason", reason)
        setattr_(self, "integration", integration)


EventCallback = Callable[[GuardEvent], object]
"""Receives each :class:`GuardEvent`; its return value is ignored."""


class EventSink:
    """Hands events to an optional callback, so that it can never break a request.

    ``callback`` is called synchronously, on the thread (or event loop) that made the
    decision: keep it quick, or hand the event to a queue. If it raises, the error is
    caught and counted in :attr:`errors`; the first one is logged (a warning on the
    ``loopfuse`` logger), the rest only counted. A callback that is not callable raises
    :class:`~loopfuse.errors.ConfigError`.

    >>> def broken(event: GuardEvent) -> None:
    ...     raise RuntimeError("metrics backend down")
    >>> sink = EventSink(broken)
    >>> sink.emit(GuardEvent("cache_miss", "cache"))
    >>> sink.emit(GuardEvent("cache_miss", "cache"))
    >>> sink.errors
    2
    >>> EventSink(None).enabled
    False
    """

    __slots__ = ("_lock", "_logged", "callback", "errors")

    def __init__(self, callback: EventCallback | None) -> None:
        if callback is not None and not callable(callback):
            raise ConfigError(f"on_event must be a callable taking a GuardEvent, not {callback!r}")
        self.callback = callback
        self.errors = 0
        """How many times the callback raised."""
        self._logged = False
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """Whether there is a callback (build events only when there is)."""
        return self.callback is not None

    def emit(self, event: GuardEvent) -> None:
        """Call the callback with ``event``; never raises."""
        callback = self.callback
        if callback is None:
            return
        try:
            callback(event)
        except Exception as exc:  # the request it reports on must go on regardless
            with self._lock:
                self.errors += 1
                first = not self._logged
                self._logged = True
            if first:
                logger.warning(
                    "loopfuse: the on_event callback raised (further errors are only counted): %r",
                    exc,
                )


def log_events(
    level: int = logging.INFO, target: logging.Logger | None = None
) -> Callable[[GuardEvent], None]:
    """A ready-made callback that logs each event as one line (``loopfuse.events`` logger).

    >>> callback = log_events()
    >>> callback(GuardEvent("loop_refused", "breaker", "run-1", "repeated_request", 6))
    """
    destination = target if target is not None else logging.getLogger("loopfuse.events")

    def log(event: GuardEvent) -> None:
        if destination.isEnabledFor(level):
            destination.log(
                level,
                "loopfuse %s guard=%s session=%s kind=%s count=%d tools=%s integration=%s",
                event.action,
                event.guard,
                event.session,
                event.kind,
                event.count,
                ",".join(event.tool_names) or "-",
                event.integration,
            )

    return log
