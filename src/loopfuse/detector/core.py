"""The lock-free core of one agent run: what :class:`LoopDetector`, ``scan`` and replay share.

A :class:`RunCore` keeps one run's state — the unbroken run of identical batches that
ends the conversation so far, and a bounded history of recent batches with their
answers — and decides, in two steps, what each signal says:

1. :meth:`RunCore.admit`, before a batch runs: **repeat** (the same batch again with the
   same answers; a batch whose repeated answer is an error one repeat earlier; read-only
   batches get an allowance, state-changing ones a ceiling even when their answers move;
   ``tool_limits`` caps), **cycle** (A → B → A → B … whose laps repeat their answers), and
   any answer-based signal the previous answers tripped;
2. :meth:`RunCore.record`, once its answers are known: the answer-based signals of
   :mod:`loopfuse.detector.streaks` (**error_streak**, **near_repeat**, **no_progress**,
   **error_storm**). One that trips refuses the next batch, whatever it is, once.

It takes no lock and does no I/O: :class:`~loopfuse.detector.LoopDetector` wraps it in a
lock for agent loops; :mod:`loopfuse.detector.replay` drives it over a transcript.
"""

from __future__ import annotations

from collections import deque

from loopfuse.detector import messages
from loopfuse.detector.answers import error_line
from loopfuse.detector.cycles import find_cycle
from loopfuse.detector.records import (
    Answers,
    BatchRecord,
    HistoryEntry,
    LoopDetected,
    RepeatOutcome,
    answer_detail,
    answer_facts,
    answers_key,
    same_answers,
    signature_of,
)
from loopfuse.detector.settings import DetectorSettings
from loopfuse.detector.streaks import (
    Finding,
    error_storm,
    error_streak,
    near_repeat,
    unchanged_check,
)

__all__ = ["RunCore"]


class RunCore:
    """One run's state and the decisions every signal makes on it (not thread-safe)."""

    def __init__(self, settings: DetectorSettings, owner: object = None) -> None:
        self.settings = settings
        self.owner = self if owner is None else owner
        self.history: deque[HistoryEntry] = deque(maxlen=settings.history_len)
        self._run = 0
        self.break_run()

    def break_run(self) -> None:
        """End the run and forget its history: a user turn came in."""
        self._run += 1
        self._key: object = None  # the current run's batch
        self._total = 0  # its length
        self._strikes = 0  # occurrences since its answers last moved
        self._repeated = 0  # answers confirmed repeated since the strikes last restarted
        self._last: tuple[int, Answers] | None = None  # (count, answers) last recorded
        self._refused: LoopDetected | None = None  # the previous batch, if a refused cycle
        self._tripped: Finding | None = None  # what the newest answers tripped
        self.history.clear()

    # --- before a batch runs ------------------------------------------------------------

    def admit(
        self,
        key: object,
        names: tuple[str, ...],
        args: tuple[object, ...],
        observation: bool,
        costly: bool,
        judge: bool = True,
    ) -> tuple[BatchRecord, LoopDetected | None]:
        """Count a batch; with ``judge``, also decide whether it is refused.

        A replay counts earlier turns with ``judge=False``: their counting and history are
        what later turns depend on, their own verdicts are never read.
        """
        same_batch = self._key is not None and key == self._key
        retry = self._refused if same_batch else None
        if same_batch:
            self._total += 1
            self._strikes += 1
        else:
            self._run += 1
            self._key = key
            self._total = self._strikes = 1
            self._repeated = 0
            self._last = None
        limit = self.settings.tool_limit(names)
        entry = HistoryEntry(key, names, observation and not costly, args, limit)
        if not observation:
            entry.edits = self.settings.edits(names, args)
        self.history.append(entry)
        record = BatchRecord(self.owner, self._run, entry, self._total, self._strikes)
        record.observation = observation
        record.costly = costly
        tripped, self._tripped = self._tripped, None
        error = None
        if judge:
            error = self._judge_repeat(record) or self._judge_cycle(record, retry)
            if error is None and tripped is not None:
                record._basis = "signal"
                error = self.loop(tripped, record)
        if error is not None:
            error.record = record
            entry.refused = True
        self._refused = error if error is not None and error.kind == "cycle" else None
        return record, error

    def _judge_repeat(self, record: BatchRecord) -> LoopDetected | None:
        entry = record._entry
        settings = self.settings
        ceiling: int | None
        if entry.limit is not None:
            limit = ceiling = entry.limit
        elif settings.max_strikes is None or settings.allowance is None:
            return None
        else:
            limit = settings.allowance if entry.eligible else settings.max_strikes
            ceiling = None if entry.eligible else settings.ceiling
        if settings.error_aware and self._last is not None and self._repeated:
            facts = answer_facts(self._last[1])
            if facts is not None and facts[0] and not facts[1]:
                limit = max(limit - 1, 0)  # the same error again: refused one repeat earlier
        ceiling_hit = ceiling is not None and self._total > ceiling
        strikes_hit = self._strikes > limit
        if not (ceiling_hit or strikes_hit):
            record.rescued = self._total > limit
            return None
        # The ceiling wins: it stands whatever the batch's own answer turns out to be.
        record._basis = "ceiling" if ceiling_hit else "strikes"
        count = self._total if ceiling_hit else self._strikes
        # "Got the same result" only when every answer seen in the streak repeated.
        same = strikes_hit and self._repeated >= max(1, self._strikes - 2)
        return LoopDetected(
            messages.repeat_message(entry.names, count, same=same, moved=not strikes_hit),
            signature=record.signature,
            kind="repeat",
            count=count,
            tool_names=entry.names,
        )

    def _judge_cycle(self, record: BatchRecord, retry: LoopDetected | None) -> LoopDetected | None:
        settings = self.settings
        hit = None
        if settings.max_cycle_period >= 2:
            hit = find_cycle(
                self.history,
                settings.max_cycle_period,
                settings.max_cycle_laps,
                settings.cycle_allowance,
                settings.normalize_answers,
            )
        if hit is not None:
            record._cycle_ref = hit.previous
            lap_names = tuple(name for e in hit.lap for name in e.names)
            period, laps = hit.period, hit.laps
        elif retry is not None and retry.record is not None:
            # A refused cycle batch asked for again at once is still that cycle (repeats
            # stay refused by themselves: their strikes keep growing).
            record._cycle_ref = retry.record._cycle_ref
            lap_names, period, laps = retry.tool_names, retry.period, retry.count + 1
        else:
            return None
        record._basis = "cycle"
        return LoopDetected(
            messages.cycle_message(lap_names, period, laps),
            signature=record.signature,
            kind="cycle",
            count=laps,
            tool_names=lap_names,
            period=period,
        )

    # --- once its answers are known -----------------------------------------------------

    def record(
        self,
        record: BatchRecord,
        answers: Answers,
        signals: bool = True,
        text: str | None = None,
    ) -> tuple[RepeatOutcome, Finding | None]:
        """Report a batch's answers; also what answer-based signal they trip, if any
        (:meth:`loop` tells it as a :class:`LoopDetected`; the next :meth:`admit` refuses).

        A replay that only needs an earlier turn's effect on the run skips its signals
        (``signals=False``): they would trip only the next turn, which it does not judge.
        ``text`` is the answers' text when the caller has it beside a digest.
        """
        record.use(self.owner)
        entry = record._entry
        entry.answers = answers
        entry.text = text
        entry.refused = False  # it ran after all: answer-based signals read it again
        if self._refused is not None and self._refused.record is record:
            self._refused = None  # it ran after all: its answers now speak for it
        if record._run != self._run:
            return RepeatOutcome.NOT_THE_CURRENT_RUN, None
        last = self._last
        outcome = RepeatOutcome.NOT_COMPARABLE
        if last is not None and last[0] == record.count - 1:
            same = same_answers(last[1], answers, False)
            if same is False and self._normalize(entry, answers):
                same = same_answers(last[1], answers, True)
            if same is True:
                outcome = RepeatOutcome.ANSWER_REPEATED
                self._repeated += 1
            elif same is False:
                outcome = RepeatOutcome.ANSWER_CHANGED
        if last is None or record.count > last[0]:
            self._last = (record.count, answers)
        if outcome is RepeatOutcome.ANSWER_CHANGED:
            # Progress: only the occurrences from this one on are strikes.
            self._strikes = self._total - record.count + 1
            self._repeated = 0
        if not signals or not self.history or self.history[-1] is not entry:
            return outcome, None  # an older batch reported late: the newest one speaks
        self._tripped = self._answer_signals()
        return outcome, self._tripped

    def _normalize(self, entry: HistoryEntry, answers: Answers) -> bool:
        """Whether a repeat compares normalised answers.

        Noise is normalised away (a shell's ``line 13068:``, a duration) so that a failing
        command is recognised as failing the same way. A read-only poll's healthy answer
        is compared as it is: a pod whose age moves, a log whose clock ticks, is a poll
        observing time pass, which is progress however often it runs.
        """
        if not self.settings.normalize_answers:
            return False
        if entry.eligible:
            facts = answer_facts(answers)
            if facts is not None and not facts[0]:
                return False
        return True

    def _answer_signals(self) -> Finding | None:
        settings = self.settings
        history = self.history
        if settings.max_error_streak is not None:
            found = error_streak(history, settings.max_error_streak)
            if found is not None:
                return found
        if settings.max_near_repeats is not None:
            found = near_repeat(history, settings.max_near_repeats)
            if found is not None:
                return found
        if settings.max_unchanged_checks is not None:
            limit = settings.max_unchanged_checks
            found = unchanged_check(
                history, limit, settings.normalize_answers, settings.max_unread_edit_checks
            )
            if found is not None:
                return found
        if settings.error_storm is not None:
            return error_storm(history, *settings.error_storm)
        return None

    def refusal_stands(self, record: BatchRecord, outcome: RepeatOutcome) -> bool:
        """After a refused batch ran anyway (a replayed transcript): was it still a loop?

        A repeat stands unless its answer moved; a cycle unless its lap's answer moved; a
        refusal an answer-based signal made is judged again on the new answers (by
        :meth:`record`), so it does not stand on its own.
        """
        if record._basis == "strikes":
            return outcome is not RepeatOutcome.ANSWER_CHANGED
        if record._basis == "cycle" and record._cycle_ref is not None:
            same = same_answers(
                record._cycle_ref.answers, record._entry.answers, self.settings.normalize_answers
            )
            return same is not False
        return record._basis != "signal"

    def loop(self, found: Finding, record: BatchRecord) -> LoopDetected:
        """The :class:`LoopDetected` that reports an answer-based finding."""
        newest = found.newest
        detail = answer_detail(newest.answers)
        if detail is not None and found.kind != "near_repeat":
            detail = error_line(detail) or detail
        count = found.count
        if found.kind == "error_streak":
            message = messages.error_streak_message(found.names, count, detail)
            signature = "answer:" + _answer_key(newest.answers)
        elif found.kind == "near_repeat":
            message = messages.near_repeat_message(found.names, count, detail)
            signature = "near:" + ",".join(found.names) + ":" + _answer_key(newest.answers)
        elif found.kind == "no_progress":
            message = messages.no_progress_message(found.names, count, detail)
            signature = signature_of(newest.key)
        else:
            storm = self.settings.error_storm or (count, count)
            message = messages.error_storm_message(count, storm[1], detail)
            signature = "error_storm"
        return LoopDetected(
            message,
            signature=signature,
            kind=found.kind,
            count=count,
            tool_names=found.names,
            record=record,
        )


def _answer_key(answers: Answers) -> str:
    """A short name of the normalised answers, the same for the same answer."""
    return answers_key(answers) or "unknown"
