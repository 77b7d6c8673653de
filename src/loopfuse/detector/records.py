"""The values a :class:`~loopfuse.detector.detector.LoopDetector` hands out and keeps.

:class:`BatchRecord` (the ticket from ``check`` to ``record_results``),
:class:`RepeatOutcome`, :class:`LoopDetected` and the messages it carries, and the one
rule for comparing two batches' answers.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Final, Protocol

from loopfuse.detector.signature import same_digest
from loopfuse.errors import LoopfuseError

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

    ``kind`` is ``"repeat"`` (one batch again and again) or ``"cycle"`` (a lap of
    ``period`` different batches again and again); ``count`` is how many times the
    refused batch has now been asked for in the run (or laps, for a cycle);
    ``signature`` is the refused batch's ``batch_signature``; ``tool_names`` the tools
    involved; ``record`` lets a caller that runs the batch anyway still report its
    answers.

    >>> err = LoopDetected("stop", signature="ls:00", kind="repeat", count=4)
    >>> err.kind, err.count, str(err)
    ('repeat', 4, 'stop')
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
    ) -> None:
        super().__init__(message)
        self.message = message
        self.signature = signature
        self.kind = kind
        self.count = count
        self.tool_names = tool_names
        self.period = period
        self.record = record


class AnswersLike(Protocol):
    """Answers known without a digest (the scanner's lazily compared tool results)."""

    def same_as(self, other: object, normalize: bool) -> bool | None:
        """True/False when comparable with ``other``, ``None`` when not."""


Answers = str | AnswersLike | None


def same_answers(a: Answers, b: Answers, normalize: bool) -> bool | None:
    """True/False when both answers are known and comparable, ``None`` otherwise.

    >>> [same_answers(a, b, True) for a, b in [("d1", "d1"), ("d1", "d2"), (None, "d1")]]
    [True, False, None]
    """
    if a is None or b is None:
        return None
    if isinstance(a, str):
        return same_digest(a, b, normalize=normalize) if isinstance(b, str) else None
    return a.same_as(b, normalize)


class HistoryEntry:
    """One checked batch: its key, tool names, answers, and whether it gets the allowance."""

    __slots__ = ("answers", "eligible", "key", "names")

    def __init__(self, key: object, names: tuple[str, ...], eligible: bool) -> None:
        self.key = key
        self.names = names
        self.eligible = eligible
        self.answers: Answers = None


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
        "_cycle_ref",
        "_entry",
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
        self, owner: object, run: int, entry: HistoryEntry, count: int, strikes: int
    ) -> None:
        self._owner = owner
        self._run = run
        self._entry = entry
        self._used = False
        self._basis = ""  # why it was refused: "strikes", "ceiling", "cycle" or ""
        self._cycle_ref: HistoryEntry | None = None
        self.count = count
        self.strikes = strikes
        self.observation = False
        self.costly = False
        self.rescued = False

    @property
    def signature(self) -> str:
        """The batch signature (see :func:`~loopfuse.detector.signature.batch_signature`)."""
        return signature_of(self._entry.key)

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The names of the batch's calls, in call order."""
        return self._entry.names

    def __repr__(self) -> str:
        return (
            f"BatchRecord(signature={self.signature!r}, count={self.count}, "
            f"strikes={self.strikes}, rescued={self.rescued})"
        )


def names_text(names: Iterable[str]) -> str:
    """Tool names for a message: unique, back-quoted, at most four.

    >>> names_text(["edit", "python", "edit"])
    '`edit`, `python`'
    """
    unique = list(dict.fromkeys(name or "<unnamed>" for name in names))
    return ", ".join(f"`{name}`" for name in unique[:4]) + (" …" if len(unique) > 4 else "")


_ADVICE: Final = (
    "Calling it again will not give a different answer: change the arguments, use a "
    "different tool, or stop and say what is blocking you."
)


def repeat_message(names: tuple[str, ...], count: int, *, same: bool, moved: bool) -> str:
    """The model-facing message for a refused repeat.

    ``same``: every answer in the streak repeated; ``moved``: the answers kept changing
    and the batch is refused only because it changes state and went past the ceiling.

    >>> repeat_message(("find_file",), 4, same=True, moved=False)[:78]
    'Loop detected: you called `find_file` with the same arguments 4 times in a row'
    """
    head = (
        f"Loop detected: you called {names_text(names)} with the same arguments "
        f"{count} times in a row"
    )
    if moved:
        return (
            head + ". Its results kept changing, but repeating the same call is not "
            "converging: stop repeating it and try a different approach, or stop and say "
            "what is blocking you."
        )
    if same:
        return head + " and got the same result each time. " + _ADVICE
    return head + ". " + _ADVICE


def cycle_message(names: tuple[str, ...], period: int, laps: int) -> str:
    """The model-facing message for a refused cycle.

    >>> cycle_message(("edit", "python"), 2, 3)[:64]
    'Loop detected: you are going round a cycle of 2 steps (`edit`, `'
    """
    return (
        f"Loop detected: you are going round a cycle of {period} steps ({names_text(names)}) "
        f"and this is lap {laps}; every lap got the same results as the lap before. Going "
        "round again will not change them: change the arguments, use a different tool, or "
        "stop and say what is blocking you."
    )
