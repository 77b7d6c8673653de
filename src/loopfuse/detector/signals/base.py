"""What a signal is, and what the answer-based signals share.

A signal is one way an agent loops, as one small object (tenacity's strategies are the
model): its ``kind`` (the :class:`~loopfuse.Loop`'s), the
:class:`~loopfuse.detector.DetectorSettings` field its threshold is read from (``None``
there switches it off), its detection, the message the model gets, the loop's
signature, and the rule by which ``scan`` tells, before replaying anything, whether it
could trip. Each lives in its own module of this package; every signal's
:class:`~loopfuse.Loop` is built by :meth:`Signal.loop`.

The answer-based signals (:class:`AnswerSignal`) read the newest batch of a run's
history once its answers are known, and the run's bounded history before it, so a call
costs the same however long the run; a batch refused and never run is looked through
(:func:`ran`), and an answer that says nothing never counts as a repeated answer
(:func:`says_something`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol

from loopfuse.detector.answers import error_line
from loopfuse.detector.records import (
    Answers,
    BatchRecord,
    HistoryEntry,
    LoopDetected,
    answer_detail,
    answers_key,
)
from loopfuse.intent import canonical_json
from loopfuse.loop import Loop

if TYPE_CHECKING:
    from loopfuse.detector.settings import DetectorSettings

__all__ = [
    "AnswerSignal",
    "Refusal",
    "Run",
    "Signal",
    "Tail",
    "Trip",
    "answer_key",
    "call_text",
    "ran",
    "says_something",
]


class Signal:
    """One signal: ``kind``, the ``setting`` its threshold is read from, and how its
    count reads in a report (``unit``; ``per_lap``: the count is of laps of a period of
    turns, a cycle's or a check's runs with edits between)."""

    __slots__ = ()

    kind: ClassVar[str]
    setting: ClassVar[str]
    unit: ClassVar[str] = "in a row"
    per_lap: ClassVar[bool] = False

    def threshold(self, settings: DetectorSettings) -> Any:
        """Its threshold in ``settings`` (``None``: the signal is off)."""
        return getattr(settings, self.setting)

    def loop(self, signature: str, count: int, names: tuple[str, ...], message: str) -> Loop:
        """The :class:`~loopfuse.Loop` this signal found."""
        return Loop(self.kind, "detector", signature, count, names, message)

    def __repr__(self) -> str:
        return f"<signal {self.kind} ({self.setting})>"


class Run(Protocol):
    """What a run shows the signals decided before a batch runs (a
    :class:`~loopfuse.detector.core.RunCore`)."""

    @property
    def settings(self) -> DetectorSettings: ...

    @property
    def history(self) -> Sequence[HistoryEntry]: ...

    @property
    def total(self) -> int:
        """The length of the run of identical batches that ends the history."""

    @property
    def strikes(self) -> int:
        """Its occurrences since its answers last moved."""

    @property
    def repeated(self) -> int:
        """Answers confirmed repeated since the strikes last restarted."""

    @property
    def last(self) -> tuple[int, Answers] | None:
        """``(count, answers)`` last recorded for the run's batch."""


class Refusal(NamedTuple):
    """A batch refused before it runs: the exception, why (``basis``: ``"strikes"``,
    ``"ceiling"`` or ``"cycle"``, for telling later whether the refusal stands) and, for
    a cycle, the entry one lap back."""

    basis: str
    error: LoopDetected
    lap_back: HistoryEntry | None = None


@dataclass(frozen=True, slots=True)
class Trip:
    """An answer-based signal past its threshold: the ``signal``, how many times its
    pattern occurred, the newest entry, and the tools involved."""

    signal: AnswerSignal
    count: int
    newest: HistoryEntry
    names: tuple[str, ...]


class Tail(Protocol):
    """What ``scan`` knows of a conversation's final batch before it replays anything:
    its answers are known and say something."""

    @property
    def error(self) -> bool:
        """Whether its answers look like an error."""

    def pair(self) -> tuple[HistoryEntry, HistoryEntry] | None:
        """The batch before it in the run and itself, with their answers, when both call
        the same tools; ``None`` otherwise."""


class AnswerSignal(Signal):
    """A signal decided once a batch's answers are known; one that trips refuses the next
    batch, whatever it is, once. ``quotes_error_line``: its message quotes the line of
    the answer that names the error (not the first line)."""

    __slots__ = ()

    quotes_error_line: ClassVar[bool] = True

    def find(self, history: Sequence[HistoryEntry], settings: DetectorSettings) -> Trip | None:
        """The trip the newest batch of ``history`` (its answers known) makes, if any."""
        raise NotImplementedError

    def message(self, trip: Trip, detail: str | None, settings: DetectorSettings) -> str:
        """The message for the model; ``detail`` is the answer's text, when known."""
        raise NotImplementedError

    def signature(self, trip: Trip) -> str:
        """What repeated, for telling this loop from another."""
        raise NotImplementedError

    def could_trip(self, tail: Tail) -> bool:
        """Whether the final batch of a conversation could trip this signal (``scan``
        replays the history window only then): by default, when its answers are an
        error."""
        return tail.error

    def refusal(self, trip: Trip, record: BatchRecord, settings: DetectorSettings) -> LoopDetected:
        """The :class:`LoopDetected` that reports ``trip`` on the batch of ``record``."""
        detail = answer_detail(trip.newest.answers)
        if detail is not None and self.quotes_error_line:
            detail = error_line(detail) or detail
        message = self.message(trip, detail, settings)
        loop = self.loop(self.signature(trip), trip.count, trip.names, message)
        return LoopDetected.of(loop, record=record)


def ran(history: Sequence[HistoryEntry]) -> Iterator[HistoryEntry]:
    """The entries before the newest, newest first, skipping batches refused unrun."""
    for k in range(len(history) - 2, -1, -1):
        entry = history[k]
        if not (entry.refused and entry.answers is None):
            yield entry


def says_something(entry: HistoryEntry) -> tuple[bool, bool] | None:
    """The answer facts of an entry whose answers are known and say something."""
    facts = entry.facts()
    return None if facts is None or facts[1] else facts


def answer_key(answers: Answers) -> str:
    """A short name of the normalised answers, the same for the same answer."""
    return answers_key(answers) or "unknown"


def call_text(argument: object) -> str:
    """The text of one call's arguments that a person would compare by eye."""
    if type(argument) is dict and len(argument) == 1:
        (value,) = argument.values()
        if type(value) is str:
            return value  # {"command": "..."}: the command line itself
    if type(argument) is str:
        return argument
    try:
        return canonical_json(argument).decode("utf-8", "surrogatepass")
    except Exception:  # arguments JSON cannot hold are never near anything
        return "\x00" + repr(id(argument))
