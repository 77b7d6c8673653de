"""Events: every decision a guard or an integration takes, handed to a callback you give.

One small API for the breaker, the cache, the integrations' ``Guard`` and every
integration: pass ``on_event=callback`` and ``callback`` receives a :class:`GuardEvent`
(frozen) each time something worth counting happens. loopfuse does no I/O for it: route
events to your logs, metrics or traces (:mod:`loopfuse.integrations.otel` turns them into
OpenTelemetry signals).

A callback that raises never breaks the request it reports on: the error is caught,
counted (``EventSink.errors``) and logged once on the ``loopfuse`` logger.

>>> seen = []
>>> sink = EventSink(seen.append)
>>> sink.emit(GuardEvent("loop_refused", "detector", kind="repeat", count=4))
>>> seen[0].action, seen[0].guard, seen[0].count
('loop_refused', 'detector', 4)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal, get_args

from loopfuse.errors import ConfigError

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
"""

ACTIONS: Final = frozenset(get_args(EventAction))
"""Every :data:`EventAction`."""


@dataclass(frozen=True, slots=True)
class GuardEvent:
    """One decision, as data: what happened, which guard, and what it was about.

    ``guard`` is ``"breaker"``, ``"detector"``, ``"cache"`` or ``"guard"`` (the check as a
    whole: failures, junk inputs). ``session`` is the breaker session the request was
    counted in (``None`` when it was not counted). ``kind`` is the refusal code or loop
    kind (``"repeated_request"``, ``"repeat"``, ``"cycle"``, ``"stagnation"``,
    ``"guard_failed"``, ...), ``count`` how often the loop went round, ``tool_names`` the
    tools of the looping batch, ``reason`` a sentence (the message for the model, the
    error, or why the cache was bypassed), ``integration`` where it happened
    (``"httpx"``, ``"langchain"``, ``"litellm"``, ``"openai_agents"``, or ``None`` for a
    guard used directly) and ``signature`` the loop's signature or request fingerprint.

    >>> event = GuardEvent("cache_hit", "cache", integration="httpx")
    >>> event.action, event.kind, event.tool_names
    ('cache_hit', None, ())
    >>> event.count = 2
    Traceback (most recent call last):
        ...
    dataclasses.FrozenInstanceError: cannot assign to field 'count'
    """

    action: EventAction
    guard: str
    session: str | None = None
    kind: str | None = None
    count: int = 0
    tool_names: tuple[str, ...] = ()
    reason: str | None = None
    integration: str | None = None
    signature: str | None = None


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
    >>> callback(GuardEvent("loop_refused", "breaker", session="run-1", count=6))
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
