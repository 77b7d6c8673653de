"""The values a :class:`~loopfuse.detector.LoopDetector` hands out and keeps.

:class:`BatchRecord` (the ticket from ``check`` to ``record_results``),
:class:`RepeatOutcome`, :class:`LoopDetected`, the history entry a run keeps per batch,
and the one rule for comparing two batches' answers.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from functools import partial
from typing import Protocol

from loopfuse.detector.digests import answers_part, digest_facts, same_digest
from loopfuse.errors import LoopfuseError
from loopfuse.loop import Loop

__all__ = [
    "BatchRecord",
    "BatchRecordError",
    "LoopDetected",
    "RepeatOutcome",
]


class RepeatOutcome(enum.Enum):
    """What :meth:`LoopDetector.record_results` learnt from a batch's answers."""

    ANSWER_REPEATED = "answer_repeated"
    """Same answers as the previous occurrence of the batch: the strike stands."""
    ANSWER_CHANGED = "answer_changed"
    """Different answers: progress; the run's strikes restart at 1."""
    NOT_COMPARABLE = "not_comparable"
    """First occurrence, or an unknown (``None``) digest on either side: no rescue."""
    NOT_THE_CURRENT_RUN = "not_the_current_run"
    """The batch's run has ended (another batch or a user turn came in between)."""


class BatchRecordError(LoopfuseError, ValueError):
    """A :class:`BatchRecord` was used twice, or with a detector that did not issue it.

    >>> issubclass(BatchRecordError, ValueError)
    True
    """


class LoopDetected(LoopfuseError):
    """The agent is repeating itself; ``message`` is written for the model.

    ``loop`` is the :class:`~loopfuse.Loop` found; its fields are read here too.
    ``kind`` names the signal (one of :data:`~loopfuse.detector.signals.KINDS`):
    ``"repeat"`` (one batch again and again), ``"cycle"`` (a lap of ``period`` different
    batches again and again), ``"error_streak"`` (the same error whatever the calls),
    ``"near_repeat"`` (calls that differ only slightly, with the same answer),
    ``"no_progress"`` (the same check giving the same answer across edits) or
    ``"error_storm"`` (nearly every call failing). ``count`` is how many times the
    pattern has now occurred (laps, for a cycle); ``signature`` names what repeated (the
    refused batch's ``batch_signature``, or ``answer:<hash>`` for a repeated answer);
    ``tool_names`` the tools involved; ``record`` lets a caller that runs the batch anyway
    still report its answers. It pickles without its ``record``, which belongs to the
    detector that issued it.

    >>> err = LoopDetected("stop", signature="ls:00", kind="repeat", count=4)
    >>> err.kind, err.count, str(err)
    ('repeat', 4, 'stop')
    >>> LoopDetected.of(err.loop).loop == err.loop
    True
    """

    def __init__(
        self,
        message: str,
        *,
        signature: str,
        kind: str,
        count: int,
        tool_names: tuple[str, ...] = (),
        period: int = 1,
        record: BatchRecord | None = None,
        guard: str = "detector",
    ) -> None:
        super().__init__(message)
        self.loop = Loop(kind, guard, signature, count, tool_names, message)
        """The loop found."""
        self.period = period
        self.record = record

    @classmethod
    def of(cls, loop: Loop, *, period: int = 1, record: BatchRecord | None = None) -> LoopDetected:
        """The exception that reports ``loop`` (found by any guard).

        >>> from loopfuse.loop import Loop
        >>> LoopDetected.of(Loop("repeated_request", "breaker", "ff", 6)).loop.guard
        'breaker'
        """
        return cls(
            loop.message,
            signature=loop.signature,
            kind=loop.kind,
            count=loop.count,
            tool_names=loop.tool_names,
            period=period,
            record=record,
            guard=loop.guard,
        )

    @property
    def message(self) -> str:
        """The message for the model."""
        return self.loop.message

    @property
    def kind(self) -> str:
        """The signal that spoke (one of :data:`~loopfuse.detector.signals.KINDS`)."""
        return self.loop.kind

    @property
    def signature(self) -> str:
        """What repeated."""
        return self.loop.signature

    @property
    def count(self) -> int:
        """How many times the pattern occurred (laps, for a cycle)."""
        return self.loop.count

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The tools involved."""
        return self.loop.tool_names

    def __reduce__(self) -> tuple[Callable[..., LoopDetected], tuple[Loop]]:
        # Rebuilt from its loop; the record stays behind: it belongs to this process's
        # detector.
        return (partial(type(self).of, period=self.period), (self.loop,))


class AnswersLike(Protocol):
    """Answers known without a digest (the scanner's lazily compared tool results)."""

    def same_as(self, other: object, normalize: bool) -> bool | None:
        """True/False when comparable with ``other``, ``None`` when not."""

    @property
    def facts(self) -> tuple[bool, bool]:
        """``(some answer looks like an error, every answer says nothing)``."""

    def detail(self) -> str | None:
        """The text of the first answer, for a message (``None`` when not text)."""

    def text(self) -> str:
        """Every answer's text, joined (its first and last few KB each)."""

    def key(self) -> str:
        """The normalised answers alone, whatever the calls (see :func:`answers_key`)."""


Answers = str | AnswersLike | None


def same_answers(a: Answers, b: Answers, normalize: bool) -> bool | None:
    """True/False when both answers are known and comparable, ``None`` otherwise.

    >>> from loopfuse.detector import ToolCall, results_digest
    >>> d1, d2 = (results_digest([ToolCall("ls")], [t]) for t in ("a", "b"))
    >>> [same_answers(a, b, True) for a, b in [(d1, d1), (d1, d2), (None, d1)]]
    [True, False, None]
    """
    if a is None or b is None:
        return None
    if isinstance(a, str):
        return same_digest(a, b, normalize=normalize) if isinstance(b, str) else None
    return a.same_as(b, normalize)


def answers_key(answers: Answers) -> str | None:
    """A name of the normalised answers alone, equal for two batches — even of different
    calls — that got the same answers; ``None`` when unknown."""
    if answers is None:
        return None
    if isinstance(answers, str):
        return answers_part(answers)
    return answers.key()


def same_answers_across(a: Answers, b: Answers) -> bool | None:
    """Whether two batches, maybe of different calls, got the same (normalised) answers.

    ``None`` when either is unknown.
    """
    key_a, key_b = answers_key(a), answers_key(b)
    if key_a is None or key_b is None:
        return None
    return key_a == key_b


def answer_facts(answers: Answers) -> tuple[bool, bool] | None:
    """``(looks like an error, says nothing)`` of known answers; ``None`` when unknown."""
    if answers is None:
        return None
    if isinstance(answers, str):
        return digest_facts(answers)
    return answers.facts


def answer_detail(answers: Answers) -> str | None:
    """The first answer's text when known (a digest does not carry it)."""
    if answers is None or isinstance(answers, str):
        return None
    return answers.detail()


class HistoryEntry:
    """One checked batch as a run remembers it.

    ``key`` compares batches (a signature, or the scanner's lazy batch); ``args`` are the
    calls' arguments (for telling near repeats); ``eligible`` says the batch gets the
    read-only allowance; ``limit`` is its ``tool_limits`` cap; ``refused`` marks a batch
    refused and never reported as run, which answer-based signals look through.
    ``edits`` names the files the batch edits when editor edits are all it does
    (:meth:`~loopfuse.detector.settings.DetectorSettings.edits`); ``text`` is its
    answers' text when known beside a digest (what a later check's edits are read
    against). ``wait`` marks a batch of waits on something already running
    (:class:`~loopfuse.harness.ToolKind`), ``running`` one whose answers said it still runs.
    """

    __slots__ = (
        "answers",
        "args",
        "edits",
        "eligible",
        "key",
        "limit",
        "names",
        "refused",
        "running",
        "text",
        "wait",
    )

    def __init__(
        self,
        key: object,
        names: tuple[str, ...],
        eligible: bool,
        args: tuple[object, ...] = (),
        limit: int | None = None,
    ) -> None:
        self.key = key
        self.names = names
        self.eligible = eligible
        self.args = args
        self.limit = limit
        self.answers: Answers = None
        self.refused = False
        self.edits: tuple[str, ...] | None = None
        self.text: str | None = None
        self.wait = False
        self.running = False

    def facts(self) -> tuple[bool, bool] | None:
        """:func:`answer_facts` of this batch's answers."""
        return answer_facts(self.answers)

    def answer_text(self) -> str | None:
        """The text of this batch's answers, when known (``None`` for a bare digest)."""
        if self.text is not None:
            return self.text
        answers = self.answers
        if answers is None or isinstance(answers, str):
            return None
        return answers.text()


def signature_of(key: object) -> str:
    """The batch signature behind a detector key (a ``str``, or a lazy batch)."""
    return key if isinstance(key, str) else str(getattr(key, "signature", key))


class BatchRecord:
    """A ticket from :meth:`LoopDetector.check`, handed back to ``record_results`` once.

    ``count`` is the batch's place in its run (1 for a new batch); ``strikes`` counts
    the occurrences since the answers last moved; ``rescued`` is true exactly when the
    run has repeated past the threshold and passed only because an earlier answer moved;
    ``observation`` / ``costly`` tell how the batch's tools were classified.
    """

    __slots__ = (
        "_basis",
        "_calls",
        "_entry",
        "_lap_back",
        "_owner",
        "_run",
        "_used",
        "costly",
        "count",
        "observation",
        "rescued",
        "strikes",
    )

    def __init__(
        self,
        owner: object,
        run: int,
        entry: HistoryEntry,
        count: int,
        strikes: int,
        calls: tuple[object, ...] = (),
    ) -> None:
        self._owner = owner
        self._run = run
        self._entry = entry
        self._calls = calls
        self._used = False
        self._basis = ""
        self._lap_back: HistoryEntry | None = None
        self.count = count
        self.strikes = strikes
        self.observation = False
        self.costly = False
        self.rescued = False

    # What the detector that issued the ticket reads back (its run, the calls for answers
    # handed in raw, why it refused the batch): read-only here, set only by mark_refused().

    @property
    def run(self) -> int:
        """The number of the run the batch was counted in (``-1``: counted in none: the
        detector was off, or every call was of an ignored tool)."""
        return self._run

    @property
    def entry(self) -> HistoryEntry:
        """The batch as its run remembers it."""
        return self._entry

    @property
    def calls(self) -> tuple[object, ...]:
        """The :class:`~loopfuse.detector.ToolCall` objects checked (for answers handed
        to ``record_results`` raw)."""
        return self._calls

    @property
    def basis(self) -> str:
        """Why the batch was refused: ``"strikes"``, ``"ceiling"``, ``"cycle"``,
        ``"signal"`` (an answer-based signal), or ``""`` (it was not)."""
        return self._basis

    @property
    def lap_back(self) -> HistoryEntry | None:
        """For a refused cycle: the same batch one lap back (its answers decide whether
        the refusal stands once this one has run)."""
        return self._lap_back

    def mark_refused(self, basis: str, lap_back: HistoryEntry | None = None) -> None:
        """Mark the batch refused on ``basis`` (see :attr:`basis`)."""
        self._basis = basis
        if lap_back is not None:
            self._lap_back = lap_back

    @property
    def signature(self) -> str:
        """The batch signature (see :func:`~loopfuse.detector.signature.batch_signature`)."""
        return signature_of(self._entry.key)

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The names of the batch's calls, in call order."""
        return self._entry.names

    def use(self, owner: object) -> None:
        """Spend this ticket, reported to the detector ``owner``; it is good for one use."""
        if self._owner is not owner:
            raise BatchRecordError("this BatchRecord was issued by another LoopDetector")
        if self._used:
            raise BatchRecordError("this BatchRecord has already been recorded")
        self._used = True

    def __repr__(self) -> str:
        return (
            f"BatchRecord(signature={self.signature!r}, count={self.count}, "
            f"strikes={self.strikes}, rescued={self.rescued})"
        )
