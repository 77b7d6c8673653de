"""Replaying a canonical conversation through one run, message by message.

:class:`Replay` is the incremental form: hand it the messages of a conversation (the
``messages`` of :func:`loopfuse.intent.extract_intent`) as they come, and after any
complete turn it tells the verdict of the conversation so far — exactly what
:func:`~loopfuse.detector.scan` says of a request holding those messages, at a cost
per message that does not grow with the conversation. ``loopfuse scan`` replays long
transcripts this way; :func:`~loopfuse.detector.scan` replays only the tail that
can matter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from loopfuse.detector.core import RunCore
from loopfuse.detector.failures import Failure, failure_of
from loopfuse.detector.records import BatchRecord, LoopDetected
from loopfuse.detector.settings import DetectorSettings
from loopfuse.detector.signals.stagnation import STAGNATION, StagnationDetected
from loopfuse.detector.transcript import Batch, BatchAnswers, answers_of, prose_text
from loopfuse.loop import Loop

__all__ = ["OK", "Replay", "Verdict", "replay", "stagnation_verdict"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What :func:`~loopfuse.detector.scan` found.

    ``loop`` is the :class:`~loopfuse.Loop` the conversation ends in, or ``None``
    (``ok``). Its fields are read here too: ``kind`` names the signal (one of
    :data:`~loopfuse.detector.signals.KINDS`: ``"repeat"``, ``"cycle"``,
    ``"error_streak"``, ``"near_repeat"``, ``"no_progress"``, ``"error_storm"``,
    ``"stagnation"``); ``signature`` names what repeated (a batch signature, a hash of
    the repeated answer or text); ``count`` how many times the pattern occurred (laps,
    for a cycle); ``message`` is written for the model; ``tool_names`` are the tools
    involved. ``index`` is the position of the offending assistant turn in
    ``extract_intent(body)["messages"]``. ``answers`` are the final batch's tool
    results, when the conversation ends in one (not compared: two verdicts are equal
    when they say the same); :attr:`failure` names the failure they report.

    >>> OK.ok, OK.kind, OK.loop, OK.failure
    (True, None, None, None)
    """

    loop: Loop | None = None
    index: int | None = None
    answers: BatchAnswers | None = field(default=None, compare=False, repr=False)

    @property
    def failure(self) -> Failure | None:
        """The failure the final batch's answers report (:func:`~loopfuse.detector.
        failures.failure_of`), or ``None``: what ``mode="warn"`` compares with the one
        its note was about. Read on demand: a scan does not pay for it."""
        return None if self.answers is None else failure_of(self.answers)

    @property
    def ok(self) -> bool:
        """Whether the conversation does not end in a loop."""
        return self.loop is None

    @property
    def kind(self) -> str | None:
        """The signal that spoke, or ``None``."""
        return None if self.loop is None else self.loop.kind

    @property
    def signature(self) -> str | None:
        """What repeated, or ``None``."""
        return None if self.loop is None else self.loop.signature

    @property
    def count(self) -> int:
        """How many times the pattern occurred (0 when ok)."""
        return 0 if self.loop is None else self.loop.count

    @property
    def message(self) -> str | None:
        """The message for the model, or ``None``."""
        return None if self.loop is None else self.loop.message

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The tools involved."""
        return () if self.loop is None else self.loop.tool_names


OK: Final = Verdict()
"""The verdict for a conversation that does not end in a loop."""


class _Open:
    """An assistant turn's batch, admitted, waiting for its tool results."""

    __slots__ = ("batch", "error", "full", "index", "keep", "record", "results")

    def __init__(
        self,
        index: int,
        full: Batch,
        batch: Batch,
        keep: list[int] | None,
        record: BatchRecord,
        error: LoopDetected | None,
    ) -> None:
        self.index = index
        self.full = full
        self.batch = batch
        self.keep = keep
        self.record = record
        self.error = error
        self.results: list[Any] = []


class Replay:
    """A conversation walked through one run's :class:`~loopfuse.detector.core.RunCore`.

    Call :meth:`add` with each message and its index, then :meth:`verdict` at any turn
    boundary. ``judge_from`` lets a caller that replays a tail only for its state skip the
    decisions of the turns before it (their verdicts, and the answer-based signals their
    answers would trip, are never read).

    >>> from loopfuse.detector.settings import DetectorSettings
    >>> replay_ = Replay(DetectorSettings(max_strikes=1))
    >>> turn = [{"role": "assistant", "tool_calls": [{"name": "edit", "arguments": {}}]},
    ...         {"role": "tool", "call": 0, "content": ["a.py"]}]
    >>> for i, message in enumerate(turn + turn):
    ...     replay_.add(message, i)
    >>> replay_.verdict().kind
    'repeat'
    """

    def __init__(self, settings: DetectorSettings, *, judge_from: int = 0) -> None:
        self.settings = settings
        self.core = RunCore(settings)
        self.stagnation = STAGNATION.detector(settings)
        self.judge_from = judge_from
        self._verdict = OK
        self._answers: BatchAnswers | None = None  # an ok verdict's final batch's answers
        self._open: _Open | None = None

    def add(self, message: object, index: int) -> None:
        """Walk one message (at position ``index`` of the conversation)."""
        if type(message) is not dict:
            self._close()
            return
        role = message.get("role")
        if role == "tool":
            if self._open is not None:
                self._open.results.append(message)
            return
        self._close()
        if not self.settings.enabled:
            return
        if role == "assistant":
            calls = message.get("tool_calls")
            if type(calls) is list and calls:
                self._admit(Batch(calls), index)
                return
            self._verdict = OK
            self._answers = None
            if self.stagnation is not None:
                try:
                    self.stagnation.record(prose_text(message.get("content")))
                except StagnationDetected as exc:
                    self._verdict = stagnation_verdict(exc, index)
        elif role == "user" or role == "system":
            self.core.break_run()
            if self.stagnation is not None:
                self.stagnation.clear()
            self._verdict = OK
            self._answers = None

    def admit_batch(self, batch: Batch, index: int) -> None:
        """Walk an assistant turn whose :class:`Batch` the caller already built."""
        self._close()
        if self.settings.enabled:
            self._admit(batch, index)

    def verdict(self) -> Verdict:
        """The verdict of the conversation so far (its last assistant turn's)."""
        self._close()
        answers = self._answers
        if answers is not None and self._verdict is OK:
            return Verdict(answers=answers)  # made when asked, not for every batch walked
        return self._verdict

    def _admit(self, full: Batch, index: int) -> None:
        reader = self.settings.reader
        batch, keep = full, reader.kept(full.names)
        if keep is not None:
            if not keep:
                return  # only ignored tools: the turn is not counted
            batch = Batch([{"name": full.names[k], "arguments": full.args[k]} for k in keep])
        args = tuple(batch.args)
        kinds = batch.kinds
        if kinds is None:  # the identical batches of a run share one Batch: classified once
            kinds = batch.kinds = reader.kinds(batch.names, args)
        observation, costly, wait = kinds
        record, error = self.core.admit(
            batch, batch.names, args, observation, costly, judge=index >= self.judge_from, wait=wait
        )
        self._open = _Open(index, full, batch, keep, record, error)

    def _close(self) -> None:
        state = self._open
        if state is None:
            return
        self._open = None
        results = state.results
        answers = answers_of(state.full, results, 0, len(results), self.settings.error_reading)
        if answers is not None and state.keep is not None:
            kept = [answers.items[k] for k in state.keep]
            answers = BatchAnswers(state.batch, kept, answers.reading)
        core = self.core
        judged = state.index >= self.judge_from
        outcome, tripped = core.record(state.record, answers, signals=judged)
        error = state.error
        if error is not None and core.refusal_stands(state.record, outcome):
            self._verdict = _verdict_of(error, state.index, answers)
        elif tripped is not None:
            self._verdict = _verdict_of(core.loop(tripped, state.record), state.index, answers)
        else:
            self._verdict = OK
            self._answers = answers


def _verdict_of(error: LoopDetected, index: int, answers: BatchAnswers | None) -> Verdict:
    return Verdict(error.loop, index, answers)


def replay(
    messages: list[Any],
    settings: DetectorSettings,
    start: int = 0,
    batches: dict[int, Batch] | None = None,
    judge_from: int = 0,
) -> Verdict:
    """The verdict of ``messages`` walked from ``start`` through a fresh run.

    ``batches`` may hold :class:`Batch` objects already built, by index.
    """
    walk = Replay(settings, judge_from=judge_from)
    for i in range(start, len(messages)):
        batch = batches.get(i) if batches else None
        if batch is not None:
            walk.admit_batch(batch, i)
        else:
            walk.add(messages[i], i)
    return walk.verdict()


def stagnation_verdict(exc: StagnationDetected, index: int) -> Verdict:
    """The verdict for a prose turn the stagnation detector refused."""
    return Verdict(exc.loop, index)
