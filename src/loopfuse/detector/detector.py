"""``LoopDetector``: the same tool call with the same answer, again — or a cycle of them.

An agent loop asks :meth:`LoopDetector.check` before it runs a batch of tool calls and
tells :meth:`LoopDetector.record_results` what the batch got back. The detector keeps
one *run*: the unbroken sequence of identical batches that ends the conversation so
far. A repeat is a strike only when its answers equal the previous occurrence's; an
answer that moves restarts the strikes (a build being polled is making progress). A
batch that changes state cannot be carried forever by moving answers: past the
read-only allowance it is refused anyway. Cycles (A → B → A → B …) whose every lap got
the same answers as the lap before are refused the same way. A user turn
(:meth:`LoopDetector.break_run`) ends the run.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from loopfuse.detector.cycles import find_cycle
from loopfuse.detector.records import (
    Answers,
    BatchRecord,
    BatchRecordError,
    HistoryEntry,
    LoopDetected,
    RepeatOutcome,
    cycle_message,
    repeat_message,
    same_answers,
)
from loopfuse.detector.signature import ToolCall, batch_signature
from loopfuse.detector.tools import (
    DEFAULT_COSTLY_TOOLS,
    DEFAULT_OBSERVATION_TOOLS,
    ToolClassifier,
)
from loopfuse.errors import ConfigError, InvalidInputError

if TYPE_CHECKING:
    from loopfuse.detector.scan import Verdict

__all__ = [
    "DEFAULT_MAX_CYCLE_LAPS",
    "DEFAULT_MAX_CYCLE_PERIOD",
    "DEFAULT_MAX_OBSERVATION_STEPS",
    "DEFAULT_MAX_STAGNATION_STEPS",
    "DEFAULT_MAX_STRIKES",
    "LoopDetector",
]

DEFAULT_MAX_STRIKES: Final = 3
DEFAULT_MAX_OBSERVATION_STEPS: Final = 5
DEFAULT_MAX_CYCLE_PERIOD: Final = 4
DEFAULT_MAX_CYCLE_LAPS: Final = 2
DEFAULT_MAX_STAGNATION_STEPS: Final = 5


@dataclass(frozen=True, slots=True)
class _Config:
    max_strikes: int
    max_observation_steps: int | None
    max_cycle_period: int
    max_cycle_laps: int
    normalize_answers: bool
    max_stagnation_steps: int | None
    observation_tools: tuple[str, ...]
    costly_tools: tuple[str, ...]


def _non_negative(name: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(
            f"{name} must be an int >= 0{' or None' if optional else ''}, got {value!r}"
        )


class LoopDetector:
    """Refuses a tool-call batch that repeats, alone or in a cycle, with the same answers.

    Parameters (defaults measured on the corpus, see docs/detector.md):

    - ``max_strikes`` (3): identical batches allowed in a row while their answers repeat
      (or are unknown); the next one is refused. ``2`` refuses the third; ``0`` the first.
    - ``max_observation_steps`` (5): the same, for batches of read-only tools (never
      lower than ``max_strikes``). It is also the *ceiling*: a batch that changes state
      (or a costly one) is refused past it even when every answer moved. ``None``: no
      separate allowance and no ceiling.
    - ``observation_tools`` / ``costly_tools``: name patterns (see
      :mod:`loopfuse.detector.tools`); costly read-only tools keep ``max_strikes``.
    - ``max_cycle_period`` (4): longest cycle looked for (A → B → A … is 2); below 2, off.
    - ``max_cycle_laps`` (2): laps of a cycle allowed while each lap's answers repeat the
      previous lap's; the next lap is refused (read-only laps get the allowance).
    - ``normalize_answers`` (on): answers that differ only in incidental noise count as
      the same (:func:`~loopfuse.detector.signature.normalize_answer`).
    - ``max_stagnation_steps`` (5): used by :meth:`scan` for prose turns
      (:class:`~loopfuse.detector.stagnation.StagnationDetector`); ``None``: off.

    Safe to share between threads (``check``, ``record_results`` and ``break_run`` take
    a lock); does no I/O.

    >>> from loopfuse.detector import ToolCall, results_digest
    >>> det = LoopDetector(max_strikes=2)
    >>> calls = [ToolCall("write_file", {"path": "a.py", "text": "x"})]
    >>> for _ in range(2):
    ...     record = det.check(calls)
    ...     det.record_results(record, results_digest(calls, ["ok"]))
    <RepeatOutcome.NOT_COMPARABLE: 'not_comparable'>
    <RepeatOutcome.ANSWER_REPEATED: 'answer_repeated'>
    >>> try:
    ...     det.check(calls)
    ... except LoopDetected as loop:
    ...     print(loop.kind, loop.count, loop.message.split(" in a row")[0])
    repeat 3 Loop detected: you called `write_file` with the same arguments 3 times
    >>> det.break_run()  # a user turn
    >>> det.check(calls).count
    1
    """

    def __init__(
        self,
        max_strikes: int = DEFAULT_MAX_STRIKES,
        observation_tools: Iterable[str] = DEFAULT_OBSERVATION_TOOLS,
        max_observation_steps: int | None = DEFAULT_MAX_OBSERVATION_STEPS,
        costly_tools: Iterable[str] = DEFAULT_COSTLY_TOOLS,
        *,
        max_cycle_period: int = DEFAULT_MAX_CYCLE_PERIOD,
        max_cycle_laps: int = DEFAULT_MAX_CYCLE_LAPS,
        normalize_answers: bool = True,
        max_stagnation_steps: int | None = DEFAULT_MAX_STAGNATION_STEPS,
    ) -> None:
        _non_negative("max_strikes", max_strikes)
        _non_negative("max_observation_steps", max_observation_steps, optional=True)
        _non_negative("max_cycle_period", max_cycle_period)
        _non_negative("max_cycle_laps", max_cycle_laps)
        _non_negative("max_stagnation_steps", max_stagnation_steps, optional=True)
        if not isinstance(normalize_answers, bool):
            raise ConfigError(f"normalize_answers must be a bool, got {normalize_answers!r}")
        if isinstance(observation_tools, str) or isinstance(costly_tools, str):
            raise ConfigError("observation_tools and costly_tools must be collections of names")
        self._config = _Config(
            max_strikes=max_strikes,
            max_observation_steps=max_observation_steps,
            max_cycle_period=max_cycle_period if max_cycle_period >= 2 else 0,
            max_cycle_laps=max_cycle_laps,
            normalize_answers=normalize_answers,
            max_stagnation_steps=max_stagnation_steps,
            observation_tools=tuple(observation_tools),
            costly_tools=tuple(costly_tools),
        )
        self._classifier = ToolClassifier(self._config.observation_tools, self._config.costly_tools)
        self._init_state()

    def _init_state(self) -> None:
        c = self._config
        self._allowance = (
            c.max_strikes
            if c.max_observation_steps is None
            else max(c.max_observation_steps, c.max_strikes)
        )
        self._ceiling = None if c.max_observation_steps is None else self._allowance
        self._cycle_allowance = max(self._allowance, c.max_cycle_laps)
        # Just long enough to see a cycle go past the larger of its two limits.
        self._history_len = max(1, c.max_cycle_period * self._cycle_allowance + 1)
        self._history: deque[HistoryEntry] = deque(maxlen=self._history_len)
        self._lock = threading.Lock()
        self._run = 0
        self._break()

    @classmethod
    def _from_config(cls, config: _Config, classifier: ToolClassifier) -> LoopDetector:
        det = cls.__new__(cls)
        det._config = config
        det._classifier = classifier
        det._init_state()
        return det

    def fresh(self) -> LoopDetector:
        """A new detector with the same settings and no history."""
        return LoopDetector._from_config(self._config, self._classifier)

    @property
    def max_strikes(self) -> int:
        """Identical batches allowed in a row while their answers repeat."""
        return self._config.max_strikes

    @property
    def max_observation_steps(self) -> int | None:
        """The read-only allowance and state-changing ceiling (``None``: neither)."""
        return self._config.max_observation_steps

    @property
    def max_cycle_period(self) -> int:
        """Longest cycle looked for (0: cycles are not looked for)."""
        return self._config.max_cycle_period

    @property
    def max_cycle_laps(self) -> int:
        """Laps of a cycle allowed while every lap's answers repeat the previous lap's."""
        return self._config.max_cycle_laps

    @property
    def normalize_answers(self) -> bool:
        """Whether answers that differ only in incidental noise count as the same."""
        return self._config.normalize_answers

    @property
    def max_stagnation_steps(self) -> int | None:
        """Prose-stagnation threshold used by :meth:`scan` (``None``: off)."""
        return self._config.max_stagnation_steps

    # --- the public, locked API ---------------------------------------------------------

    def check(self, calls: Sequence[ToolCall]) -> BatchRecord:
        """Count the batch ``calls`` about to run; raise :class:`LoopDetected` to refuse it.

        The batch is counted even when refused, so a caller that retries it anyway
        stays refused. Raises :class:`~loopfuse.errors.InvalidInputError` for an empty
        batch or an element that is not a :class:`ToolCall`.
        """
        if isinstance(calls, ToolCall) or not isinstance(calls, Sequence):
            raise InvalidInputError("check() takes a sequence of ToolCall")
        if not calls:
            raise InvalidInputError(
                "check() needs at least one ToolCall: an empty batch is no call"
            )
        signature = batch_signature(calls)  # validates the elements
        names = tuple(call.name for call in calls)
        with self._lock:
            record, error = self._admit(signature, names)
        if error is not None:
            raise error
        return record

    def record_results(self, record: BatchRecord, digest: str | None) -> RepeatOutcome:
        """Report the answers of a checked batch (a :func:`results_digest`, or ``None``).

        A record can be reported once; a second use, or a record from another
        detector, raises :class:`BatchRecordError`.
        """
        if not isinstance(record, BatchRecord):
            raise BatchRecordError(f"expected a BatchRecord, got {type(record).__name__}")
        if digest is not None and not isinstance(digest, str):
            raise InvalidInputError(f"digest must be a str or None, not {type(digest).__name__}")
        with self._lock:
            return self._record(record, digest)

    def break_run(self) -> None:
        """End the run and forget the cycle history: a user turn came in."""
        with self._lock:
            self._break()

    def scan(self, body: object) -> Verdict:
        """Walk a whole request body with these settings; see :func:`loopfuse.detector.scan`.

        Stateless: this detector's own run is neither read nor changed.
        """
        from loopfuse.detector.scan import scan

        return scan(body, detector=self)

    def scan_intent(self, intent: object) -> Verdict:
        """:meth:`scan` for an intent already made by :func:`loopfuse.intent.extract_intent`
        (or :func:`loopfuse.intent.analyse`), so a caller that parsed once need not again.
        """
        from loopfuse.detector.scan import scan_intent

        return scan_intent(intent, detector=self)

    # --- the unlocked core, shared with the scanner --------------------------------------

    def _break(self) -> None:
        self._run += 1
        self._key: object = None  # the current run's batch
        self._total = 0  # its length
        self._strikes = 0  # occurrences since its answers last moved
        self._repeated = 0  # answers confirmed repeated since the strikes last restarted
        self._last: tuple[int, Answers] | None = None  # (count, answers) last recorded
        self._refused: LoopDetected | None = None  # the previous batch, if a refused cycle
        self._history.clear()

    def _admit(
        self, key: object, names: tuple[str, ...], judge: bool = True
    ) -> tuple[BatchRecord, LoopDetected | None]:
        """Count a batch; with ``judge``, also decide whether it is refused.

        The scanner replays earlier turns with ``judge=False``: their counting and history
        are what later turns depend on, their own verdicts are never read.
        """
        observation, costly = self._classifier.classify_names(names)
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
        entry = HistoryEntry(key, names, observation and not costly)
        self._history.append(entry)
        record = BatchRecord(self, self._run, entry, self._total, self._strikes)
        record.observation = observation
        record.costly = costly
        error = self._judge(record, retry) if judge else None
        if error is not None:
            error.record = record
        self._refused = error if error is not None and error.kind == "cycle" else None
        return record, error

    def _judge(self, record: BatchRecord, retry: LoopDetected | None) -> LoopDetected | None:
        names = record.tool_names
        eligible = record._entry.eligible
        limit = self._allowance if eligible else self._config.max_strikes
        ceiling_hit = not eligible and self._ceiling is not None and self._total > self._ceiling
        strikes_hit = self._strikes > limit
        if ceiling_hit or strikes_hit:
            # The ceiling wins: it stands whatever the batch's own answer turns out to be.
            record._basis = "ceiling" if ceiling_hit else "strikes"
            count = self._total if ceiling_hit else self._strikes
            # "Got the same result" only when every answer seen in the streak repeated.
            same = strikes_hit and self._repeated >= max(1, self._strikes - 2)
            message = repeat_message(names, count, same=same, moved=not strikes_hit)
            return LoopDetected(
                message, signature=record.signature, kind="repeat", count=count, tool_names=names
            )
        record.rescued = self._total > limit
        hit = None
        if self._config.max_cycle_period:
            hit = find_cycle(
                self._history,
                self._config.max_cycle_period,
                self._config.max_cycle_laps,
                self._cycle_allowance,
                self._config.normalize_answers,
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
            cycle_message(lap_names, period, laps),
            signature=record.signature,
            kind="cycle",
            count=laps,
            tool_names=lap_names,
            period=period,
        )

    def _record(self, record: BatchRecord, answers: Answers) -> RepeatOutcome:
        if record._owner is not self:
            raise BatchRecordError("this BatchRecord was issued by another LoopDetector")
        if record._used:
            raise BatchRecordError("this BatchRecord has already been recorded")
        record._used = True
        record._entry.answers = answers
        if self._refused is not None and self._refused.record is record:
            self._refused = None  # it ran after all: its answers now speak for it
        if record._run != self._run:
            return RepeatOutcome.NOT_THE_CURRENT_RUN
        last = self._last
        outcome = RepeatOutcome.NOT_COMPARABLE
        if last is not None and last[0] == record.count - 1:
            same = same_answers(last[1], answers, self._config.normalize_answers)
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
        return outcome

    def _refusal_stands(self, record: BatchRecord, outcome: RepeatOutcome) -> bool:
        """After a refused batch ran anyway (a replayed transcript): was it still a loop?"""
        if record._basis == "strikes":
            return outcome is not RepeatOutcome.ANSWER_CHANGED
        if record._basis == "cycle" and record._cycle_ref is not None:
            same = same_answers(
                record._cycle_ref.answers, record._entry.answers, self._config.normalize_answers
            )
            return same is not False
        return True
