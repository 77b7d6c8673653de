"""``near_repeat``: calls that differ only slightly, each getting the same answer.

An agent re-applies an edit with one space more, or searches ``/usr`` then ``/opt`` for
the same file: the calls differ in whitespace, numbers or one token, and every answer is
the one before's. This signal counts such a run of near variants (identical batches are
:mod:`.repeat`'s business) and trips past ``max_near_repeats`` of them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from loopfuse.detector.records import HistoryEntry, same_answers_across
from loopfuse.detector.signals.base import (
    AnswerSignal,
    Tail,
    Trip,
    answer_key,
    call_text,
    ran,
    says_something,
)
from loopfuse.detector.signals.wording import names_text, quoted

if TYPE_CHECKING:
    from loopfuse.detector.settings import DetectorSettings

__all__ = ["NEAR_REPEAT", "NearRepeat", "is_near"]

_TOKENS: Final = re.compile(r"\w+|[^\w\s]")
_DIGITS: Final = re.compile(r"\d+")
_NEAR_TEXT_LIMIT: Final = 16_384  # longer arguments are never "near" (and cost nothing)


def _near_texts(a: str, b: str) -> bool:
    """Equal but for whitespace or numbers, or one token inserted, removed or replaced."""
    if a == b:
        return False  # identical is a repeat, not a near repeat
    if len(a) > _NEAR_TEXT_LIMIT or len(b) > _NEAR_TEXT_LIMIT:
        return False
    if _DIGITS.sub("#", " ".join(a.split())) == _DIGITS.sub("#", " ".join(b.split())):
        return True
    ta, tb = _TOKENS.findall(a), _TOKENS.findall(b)
    if abs(len(ta) - len(tb)) > 1:
        return False
    short = min(len(ta), len(tb))
    head = 0
    while head < short and ta[head] == tb[head]:
        head += 1
    tail = 0
    while tail < short - head and ta[-1 - tail] == tb[-1 - tail]:
        tail += 1
    return max(len(ta), len(tb)) - head - tail <= 1


def is_near(a: HistoryEntry, b: HistoryEntry) -> bool:
    """Whether two batches call the same tools with arguments that differ only slightly.

    >>> near = HistoryEntry("k1", ("find",), True, ({"command": "find /usr -name java"},))
    >>> other = HistoryEntry("k2", ("find",), True, ({"command": "find /opt -name java"},))
    >>> is_near(near, other)
    True
    >>> far = HistoryEntry("k3", ("find",), True, ({"command": "ls -la"},))
    >>> is_near(near, far)
    False
    """
    if a.names != b.names or len(a.args) != len(b.args) or not a.args:
        return False
    if a.key == b.key:
        return False
    pairs = list(zip(a.args, b.args, strict=True))
    differing = [(x, y) for x, y in pairs if x != y]
    if len(differing) != 1:
        return False  # one call of the batch may vary, the others must not
    x, y = differing[0]
    return _near_texts(call_text(x), call_text(y))


class NearRepeat(AnswerSignal):
    """The ``near_repeat`` signal (threshold: ``max_near_repeats``)."""

    __slots__ = ()

    kind = "near_repeat"
    setting = "max_near_repeats"
    quotes_error_line = False

    def find(self, history: Sequence[HistoryEntry], settings: DetectorSettings) -> Trip | None:
        """More than ``max_near_repeats`` batches in a row, each a near variant of the one
        before with the same answer."""
        limit = settings.max_near_repeats
        if limit is None:
            return None
        newest = history[-1]
        if says_something(newest) is None:
            return None
        count = 1
        later = newest
        for entry in ran(history):
            if says_something(entry) is None or not is_near(entry, later):
                break
            if same_answers_across(entry.answers, later.answers) is not True:
                break
            count += 1
            later = entry
        if count <= limit:
            return None
        return Trip(self, count, newest, newest.names)

    def could_trip(self, tail: Tail) -> bool:
        """When the final batch repeats the answers of the batch before it, a near variant
        of it (whether or not its answers are an error)."""
        pair = tail.pair()
        if pair is None:
            return False
        before, final = pair
        # The answers first: they differ far more often than arguments are near.
        return same_answers_across(before.answers, final.answers) is True and is_near(before, final)

    def message(self, trip: Trip, detail: str | None, settings: DetectorSettings) -> str:
        """The message for calls that differ only slightly and get the same answer.

        >>> from loopfuse.detector import DetectorSettings
        >>> trip = Trip(NEAR_REPEAT, 4, HistoryEntry("k", ("find",), True), ("find",))
        >>> NEAR_REPEAT.message(trip, None, DetectorSettings())[:70]
        'Loop detected: you called `find` 4 times in a row with arguments that '
        """
        return (
            f"Loop detected: you called {names_text(trip.names)} {trip.count} times in a row "
            "with arguments that differ only slightly, and got the same result each "
            f"time{quoted(detail)}. Small changes to the same call are not getting anywhere: "
            "try a different approach, or stop and say what is blocking you."
        )

    def signature(self, trip: Trip) -> str:
        """``near:``, the tools, and the normalised answer's name."""
        return "near:" + ",".join(trip.names) + ":" + answer_key(trip.newest.answers)


NEAR_REPEAT: Final = NearRepeat()
