"""``error_streak``: the same error-looking answer again and again, whatever the calls.

Stuck agents rarely repeat byte for byte: they run six variants of a command that all
fail the same way (docs/detector.md, "Loops in the wild"). This signal counts the run of
batches, newest first, whose answers are the same error (normalised), and trips past
``max_error_streak`` of them. A streak that is one editor edit rejected again and again
(the very same call) is left to ``repeat``, which judges a rejected edit as a read: an
agent re-sending an edit the editor refused ("multiple occurrences of old_str") a few
times is an editor's normal recovery (OpenHands, SWE-agent and Claude Code editors alike:
it only makes the detector later on them; a shell command failing alike is unchanged).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from loopfuse.detector.records import HistoryEntry, same_answers_across
from loopfuse.detector.signals.base import AnswerSignal, Trip, answer_key, ran, says_something
from loopfuse.detector.signals.wording import names_text, quoted

if TYPE_CHECKING:
    from loopfuse.detector.settings import DetectorSettings

__all__ = ["ERROR_STREAK", "ErrorStreak"]


class ErrorStreak(AnswerSignal):
    """The ``error_streak`` signal (threshold: ``max_error_streak``)."""

    __slots__ = ()

    kind = "error_streak"
    setting = "max_error_streak"

    def find(self, history: Sequence[HistoryEntry], settings: DetectorSettings) -> Trip | None:
        """The same error more than ``max_error_streak`` times in a row, whatever the calls.

        >>> from loopfuse.detector import DetectorSettings, ToolCall, results_digest
        >>> def entry(command, answer):
        ...     e = HistoryEntry(command, ("bash",), False)
        ...     e.answers = results_digest([ToolCall("bash")], [answer])
        ...     return e
        >>> err = "ModuleNotFoundError: No module named 'yaml'"
        >>> h = [entry(f"python -m tool{i}", err) for i in range(4)]
        >>> ERROR_STREAK.find(h, DetectorSettings()).count
        4
        >>> ERROR_STREAK.find(h[:3], DetectorSettings()) is None
        True
        """
        limit = settings.max_error_streak
        if limit is None:
            return None
        newest = history[-1]
        facts = says_something(newest)
        if facts is None or not facts[0]:
            return None
        count = 1
        names = list(newest.names)
        one_edit = newest.edits is not None  # every entry so far: this very editor edit
        for entry in ran(history):
            facts = says_something(entry)
            if facts is None or not facts[0]:
                break
            if same_answers_across(entry.answers, newest.answers) is not True:
                break
            count += 1
            names.extend(entry.names)
            one_edit = one_edit and entry.key == newest.key
        if count <= limit or one_edit:
            # One editor edit rejected again and again is the repeat signal's (it judges
            # a rejected edit as a read, see RunCore.admit), not a streak of varied calls.
            return None
        return Trip(self, count, newest, tuple(dict.fromkeys(names)))

    def message(self, trip: Trip, detail: str | None, settings: DetectorSettings) -> str:
        """The message for the same error again and again, whatever the calls.

        >>> from loopfuse.detector import DetectorSettings
        >>> from loopfuse.detector.records import HistoryEntry
        >>> trip = Trip(ERROR_STREAK, 4, HistoryEntry("k", ("bash",), False), ("bash",))
        >>> detail = "ModuleNotFoundError: No module named 'x'"
        >>> ERROR_STREAK.message(trip, detail, DetectorSettings())[:74]
        'Loop detected: your last 4 tool calls (`bash`) all failed with the same er'
        """
        return (
            f"Loop detected: your last {trip.count} tool calls ({names_text(trip.names)}) all "
            f"failed with the same error{quoted(detail)}, whatever you varied in them. Another "
            "variant of the same call will fail the same way: deal with the cause the error "
            "names first, try a different approach, or stop and say what is blocking you."
        )

    def signature(self, trip: Trip) -> str:
        """``answer:`` and the normalised answer's name."""
        return "answer:" + answer_key(trip.newest.answers)


ERROR_STREAK: Final = ErrorStreak()
