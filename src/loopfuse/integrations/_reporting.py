"""``Reporter``: how the guard counts what it met and emits its events.

Kept apart from the decisions themselves so that the guard reads as the decision it is.
Events are only built when there is a callback to receive them.
"""

from __future__ import annotations

import threading
from typing import Final

from loopfuse.events import EventAction, EventCallback, EventSink, GuardEvent
from loopfuse.integrations._decision import GuardDecision, Loop
from loopfuse.integrations._prepared import Prepared

__all__ = ["Reporter"]

_CACHE_ACTIONS: Final[dict[str, EventAction]] = {
    "hit": "cache_hit",
    "miss": "cache_miss",
    "bypass": "cache_bypass",
}


class Reporter:
    """The guard's event sink and its count of junk inputs.

    >>> seen = []
    >>> reporter = Reporter(seen.append)
    >>> reporter.fallbacks(["user is a int, not a non-empty string"], "httpx")
    >>> reporter.input_fallbacks, seen[0].action, seen[0].integration
    (1, 'input_fallback', 'httpx')
    """

    __slots__ = ("_lock", "events", "input_fallbacks")

    def __init__(self, on_event: EventCallback | None) -> None:
        self.events = EventSink(on_event)
        self.input_fallbacks = 0
        self._lock = threading.Lock()

    def fallbacks(self, reasons: list[str] | tuple[str, ...], integration: str | None) -> None:
        """Count junk inputs that got their fallback, one event each."""
        if not reasons:
            return
        with self._lock:
            self.input_fallbacks += len(reasons)
        if self.events.enabled:
            for reason in reasons:
                event = GuardEvent(
                    "input_fallback", "guard", reason=reason, integration=integration
                )
                self.events.emit(event)

    def about(
        self,
        action: EventAction,
        guard: str,
        prepared: Prepared,
        loop: Loop | None = None,
        *,
        kind: str | None = None,
        reason: str | None = None,
    ) -> None:
        """An event about a prepared request (and the loop found in it, if any)."""
        if not self.events.enabled:
            return
        if loop is not None:
            kind, reason = loop.code, loop.message
        event = GuardEvent(
            action,
            guard,
            prepared.session,
            kind,
            0 if loop is None else loop.count,
            () if loop is None else loop.tool_names,
            reason,
            prepared.integration,
            None if loop is None else loop.signature,
        )
        self.events.emit(event)

    def failed(self, closed: bool, error: str, integration: str | None) -> None:
        """A check that failed internally, and was let through (or refused)."""
        if self.events.enabled:
            action: EventAction = "fail_closed" if closed else "fail_open"
            event = GuardEvent(
                action, "guard", kind="guard_failed", reason=error, integration=integration
            )
            self.events.emit(event)

    def cache(self, decision: GuardDecision, outcome: str) -> None:
        """The cache's part in a request: ``"hit"``, ``"miss"`` or ``"bypass"``."""
        action = _CACHE_ACTIONS.get(outcome)
        if action is not None and self.events.enabled:
            reason = decision.cache_reason if action == "cache_bypass" else None
            event = GuardEvent(
                action, "cache", decision.session, reason=reason, integration=decision.integration
            )
            self.events.emit(event)
