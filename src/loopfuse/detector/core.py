"""The lock-free core of one agent run: what :class:`LoopDetector`, ``scan`` and replay share.

A :class:`RunCore` keeps one run's state — the unbroken run of identical batches that
ends the conversation so far, and a bounded history of recent batches with their
answers — and asks the signals (:mod:`loopfuse.detector.signals`), in two steps, what
each says:

1. :meth:`RunCore.admit`, before a batch runs: **repeat**, then **cycle**, and any
   answer-based signal the previous answers tripped;
2. :meth:`RunCore.record`, once its answers are known: the answer-based signals
   (**error_streak**, **near_repeat**, **no_progress**, **error_storm**), the first that
   trips speaking. One that trips refuses the next batch, whatever it is, once.

It takes no lock and does no I/O: :class:`~loopfuse.detector.LoopDetector` wraps it in a
lock for agent loops; :mod:`loopfuse.detector.replay` drives it over a transcript.
"""

from __future__ import annotations

from collections import deque

from loopfuse.detector.digests import digest_running
from loopfuse.detector.records import (
    Answers,
    BatchRecord,
    HistoryEntry,
    LoopDetected,
    RepeatOutcome,
    answer_facts,
    same_answers,
)
from loopfuse.detector.settings import DetectorSettings
from loopfuse.detector.signals import ANSWER_SIGNALS, CYCLE, REPEAT
from loopfuse.detector.signals.base import Trip

__all__ = ["RunCore", "rejected_edit"]


def rejected_edit(entry: HistoryEntry, last: tuple[int, Answers] | None) -> bool:
    """Whether ``entry``, a batch of editor edits only, repeats one whose last answers
    were an error (the editor rejected it: nothing changed)."""
    if entry.edits is None or last is None:
        return False
    facts = answer_facts(last[1])
    return facts is not None and facts[0] and not facts[1]


class RunCore:
    """One run's state and the decisions every signal makes on it (not thread-safe).

    The signals decided before a batch runs read the run of identical batches that ends
    the history: ``total`` (its length), ``strikes`` (its occurrences since its answers
    last moved), ``repeated`` (answers confirmed repeated since the strikes last
    restarted) and ``last`` (the ``(count, answers)`` last recorded for it).
    """

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
        self.total = 0
        self.strikes = 0
        self.repeated = 0
        self.last: tuple[int, Answers] | None = None
        self._refused: LoopDetected | None = None  # the previous batch, if a refused cycle
        self._tripped: Trip | None = None  # what the newest answers tripped
        self.waits = 0  # waits in a row on something still running (max_waits)
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
        calls: tuple[object, ...] = (),
        wait: bool = False,
        answered: bool = True,
    ) -> tuple[BatchRecord, LoopDetected | None]:
        """Count a batch; with ``judge``, also decide whether it is refused.

        ``answered=False``: the answers of the batches before this one are not known and
        never will be (a hook that runs only before a call: Crush's). Nothing that an
        answer could overturn is then decided: no answer is read as "the same answer".
        A repeat is judged by what stands whatever the answers were: the *ceiling* of a
        state-changing or costly batch (more than ``allowance`` in a row) and a
        ``tool_limits`` cap (and a wait's ``max_waits``); its strikes and a cycle (laps
        with repeating answers) are not.
        Measured on every population's tool calls with their answers hidden
        (``benchmarks/answerless_eval.py``, 847 healthy runs of Claude Code, Codex,
        Gemini CLI, Copilot CLI, OpenHands, SWE-agent and mini-SWE-agent in 4
        populations): reading each unknown answer as a repeated one stops 6 of them
        (5 Codex sessions polling a build with ``write_stdin``, a mini-SWE-agent run
        repeating an edit before it resolved); this reading stops none, in every source,
        and still stops 17 failed runs. It adds no threshold: the ceiling is the one
        measured with answers, a rule that never read them.

        ``wait``: every call waits on something already running. A wait that follows a
        wait whose answer said the thing still runs is progress: neither a repeat nor a
        cycle, up to ``max_waits`` waits in a row (then it is refused).

        An editor edit sent again after the editor rejected it (its answer an error: it
        changed nothing, :func:`rejected_edit`) is judged as a read: the read-only
        allowance, no ceiling. Re-sending a rejected edit a few times before reading the
        file again is how agents recover from an editor's "multiple occurrences" or
        "new_str must differ" (seen on OpenHands runs that then resolved); a state change
        it is not. It can only make the detector later, never earlier, on any harness:
        OpenHands, SWE-agent, Claude Code and Codex edits that kept failing alike are
        still refused, at the 5th identical call instead of the 3rd (calibration, OpenHands
        half and corpus: no run flagged changes, docs/detector.md).

        A replay counts earlier turns with ``judge=False``: their counting and history are
        what later turns depend on, their own verdicts are never read. ``calls`` are the
        checked :class:`~loopfuse.detector.ToolCall` objects the ticket keeps.
        """
        same_batch = self._key is not None and key == self._key
        retry = self._refused if same_batch else None
        if same_batch:
            self.total += 1
            # Without answers nothing says the answers repeated: each occurrence is a
            # first strike, and only the ceiling (counted on ``total``) can refuse.
            self.strikes = self.strikes + 1 if answered else 1
        else:
            self._run += 1
            self._key = key
            self.total = self.strikes = 1
            self.repeated = 0
            self.last = None
        reader = self.settings.reader
        limit = reader.tool_limit(names)
        entry = HistoryEntry(key, names, observation and not costly, args, limit)
        if not observation:
            entry.edits = reader.edits(names, args)
            if same_batch and rejected_edit(entry, self.last):
                entry.eligible = True
        previous = self.history[-1] if self.history else None
        waiting = False
        if wait and self.settings.max_waits is not None:
            entry.wait = True
            self.waits = self.waits + 1 if previous is not None and previous.wait else 1
            waiting = previous is not None and previous.wait and previous.running
        else:
            self.waits = 0
        self.history.append(entry)
        record = BatchRecord(self.owner, self._run, entry, self.total, self.strikes, calls)
        record.observation = observation
        record.costly = costly
        tripped, self._tripped = self._tripped, None
        error = None
        max_waits = self.settings.max_waits
        if judge and entry.wait and max_waits is not None and self.waits > max_waits:
            bound = REPEAT.waited_too_long(self, entry, record)
            record.mark_refused(bound.basis)
            error = bound.error
        elif judge and waiting:
            pass  # the thing waited on still runs: progress, whatever the answers
        elif judge:
            refusal = REPEAT.judge(self, entry, record, answered)
            if refusal is None and answered:
                earlier = None if retry is None else retry.record
                lap_back = None if earlier is None else earlier.lap_back
                refusal = CYCLE.judge(self, record, None if earlier is None else retry, lap_back)
            if refusal is not None:
                record.mark_refused(refusal.basis, refusal.lap_back)
                error = refusal.error
            elif tripped is not None:
                record.mark_refused("signal")
                error = self.loop(tripped, record)
        if error is not None:
            error.record = record
            entry.refused = True
        self._refused = error if error is not None and error.kind == CYCLE.kind else None
        return record, error

    # --- once its answers are known -----------------------------------------------------

    def record(
        self,
        record: BatchRecord,
        answers: Answers,
        signals: bool = True,
        text: str | None = None,
    ) -> tuple[RepeatOutcome, Trip | None]:
        """Report a batch's answers; also what answer-based signal they trip, if any
        (:meth:`loop` tells it as a :class:`LoopDetected`; the next :meth:`admit` refuses).

        A replay that only needs an earlier turn's effect on the run skips its signals
        (``signals=False``): they would trip only the next turn, which it does not judge.
        ``text`` is the answers' text when the caller has it beside a digest.
        """
        record.use(self.owner)
        entry = record.entry
        entry.answers = answers
        entry.text = text
        if entry.wait:
            if isinstance(answers, str):  # a digest: it says so itself (made with a text)
                entry.running = digest_running(answers) or self.settings.reader.still_running(
                    entry.names, text
                )
            else:
                said = text if text is not None or answers is None else answers.text()
                entry.running = self.settings.reader.still_running(entry.names, said)
        entry.refused = False  # it ran after all: answer-based signals read it again
        if self._refused is not None and self._refused.record is record:
            self._refused = None  # it ran after all: its answers now speak for it
        if record.run != self._run:
            return RepeatOutcome.NOT_THE_CURRENT_RUN, None
        last = self.last
        outcome = RepeatOutcome.NOT_COMPARABLE
        if last is not None and last[0] == record.count - 1:
            same = same_answers(last[1], answers, False)
            if same is False and self._normalize(entry, answers):
                same = same_answers(last[1], answers, True)
            if same is True:
                outcome = RepeatOutcome.ANSWER_REPEATED
                self.repeated += 1
            elif same is False:
                outcome = RepeatOutcome.ANSWER_CHANGED
        if last is None or record.count > last[0]:
            self.last = (record.count, answers)
        if outcome is RepeatOutcome.ANSWER_CHANGED:
            # Progress: only the occurrences from this one on are strikes.
            self.strikes = self.total - record.count + 1
            self.repeated = 0
        if not signals or not self.history or self.history[-1] is not entry:
            return outcome, None  # an older batch reported late: the newest one speaks
        if entry.running:
            self._tripped = None  # a wait on something still running: no answer is a loop
            return outcome, None
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

    def _answer_signals(self) -> Trip | None:
        settings = self.settings
        history = self.history
        for signal in ANSWER_SIGNALS:
            found = signal.find(history, settings)
            if found is not None:
                return found
        return None

    def refusal_stands(self, record: BatchRecord, outcome: RepeatOutcome) -> bool:
        """After a refused batch ran anyway (a replayed transcript): was it still a loop?

        A repeat stands unless its answer moved; a cycle unless its lap's answer moved; a
        refusal an answer-based signal made is judged again on the new answers (by
        :meth:`record`), so it does not stand on its own.
        """
        if record.basis == "strikes":
            return outcome is not RepeatOutcome.ANSWER_CHANGED
        if record.basis == "cycle" and record.lap_back is not None:
            same = same_answers(
                record.lap_back.answers, record.entry.answers, self.settings.normalize_answers
            )
            return same is not False
        return record.basis != "signal"

    def loop(self, found: Trip, record: BatchRecord) -> LoopDetected:
        """The :class:`LoopDetected` that reports an answer-based signal's trip."""
        return found.signal.refusal(found, record, self.settings)
