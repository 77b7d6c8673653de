"""``error_storm``: nearly every recent call failing, whatever it is.

``error_storm=(errors, calls)``: at least ``errors`` of the last ``calls`` batches failed,
the newest among them (``None``: off). It catches the agent that tries variant after
variant of different things, each failing, that no other signal sees as one loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice
from typing import TYPE_CHECKING, Final

from loopfuse.detector.records import HistoryEntry
from loopfuse.detector.signals.base import AnswerSignal, Trip, ran
from loopfuse.detector.signals.wording import quoted

if TYPE_CHECKING:
    from loopfuse.detector.settings import DetectorSettings

__all__ = ["ERROR_STORM", "ErrorStorm"]


class ErrorStorm(AnswerSignal):
    """The ``error_storm`` signal (threshold: ``error_storm``)."""

    __slots__ = ()

    kind = "error_storm"
    setting = "error_storm"

    def find(self, history: Sequence[HistoryEntry], settings: DetectorSettings) -> Trip | None:
        """At least ``errors`` of the last ``calls`` batches failed, the newest among them."""
        storm = settings.error_storm
        if storm is None:
            return None
        errors, calls = storm
        newest = history[-1]
        facts = newest.facts()
        if facts is None or not facts[0]:
            return None
        recent = [newest, *islice(ran(history), calls - 1)]
        if len(recent) < calls:
            return None
        failed = 0
        for entry in recent:
            facts = entry.facts()
            failed += facts is not None and facts[0]
        if failed < errors:
            return None
        return Trip(self, failed, newest, newest.names)

    def message(self, trip: Trip, detail: str | None, settings: DetectorSettings) -> str:
        """The message for nearly every recent call failing.

        >>> from loopfuse.detector import DetectorSettings
        >>> trip = Trip(ERROR_STORM, 10, HistoryEntry("k", ("bash",), False), ("bash",))
        >>> ERROR_STORM.message(trip, None, DetectorSettings())[:56]
        'Loop detected: 10 of your last 12 tool calls failed (the'
        """
        calls = (settings.error_storm or (trip.count, trip.count))[1]
        return (
            f"Loop detected: {trip.count} of your last {calls} tool calls failed (the latest"
            f"{quoted(detail) or ' with an error'}). Trying more variants is not working: "
            "check the environment and the cause of the errors, or stop and say what is "
            "blocking you."
        )

    def signature(self, trip: Trip) -> str:
        """``error_storm``: one storm is one loop, whatever failed."""
        return "error_storm"


ERROR_STORM: Final = ErrorStorm()
