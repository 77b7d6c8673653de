"""``LoopDetector``: an agent run's tool calls, checked before they run.

An agent loop asks :meth:`LoopDetector.check` before it runs a batch of tool calls and
tells :meth:`LoopDetector.record_results` what the batch got back. The decisions are
made by the run's :class:`~loopfuse.detector.core.RunCore` (see its module for every
signal); this class adds the lock, the validation of what callers hand in, and the
settings. A user turn (:meth:`LoopDetector.break_run`) ends the run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from loopfuse.detector.core import RunCore
from loopfuse.detector.digests import digest_facts, is_digest, results_digest
from loopfuse.detector.records import (
    BatchRecord,
    BatchRecordError,
    HistoryEntry,
    RepeatOutcome,
)
from loopfuse.detector.settings import (
    DEFAULT_ERROR_STORM,
    DEFAULT_MAX_CYCLE_LAPS,
    DEFAULT_MAX_CYCLE_PERIOD,
    DEFAULT_MAX_ERROR_STREAK,
    DEFAULT_MAX_NEAR_REPEATS,
    DEFAULT_MAX_OBSERVATION_STEPS,
    DEFAULT_MAX_STAGNATION_STEPS,
    DEFAULT_MAX_STRIKES,
    DEFAULT_MAX_UNCHANGED_CHECKS,
    DEFAULT_MAX_UNREAD_EDIT_CHECKS,
    DEFAULT_WINDOW,
    DetectorSettings,
)
from loopfuse.detector.shell import DEFAULT_READ_ONLY_COMMANDS, DEFAULT_SHELL_TOOLS
from loopfuse.detector.signature import ToolCall, batch_signature
from loopfuse.detector.tools import DEFAULT_COSTLY_TOOLS, DEFAULT_OBSERVATION_TOOLS
from loopfuse.detector.transcript import clip_text
from loopfuse.errors import InvalidInputError

if TYPE_CHECKING:
    from loopfuse.detector.scan import Verdict

__all__ = ["LoopDetector"]


class LoopDetector:
    """Refuses a tool-call batch that repeats a loop: the same call, a cycle, the same
    error, a near variant, a check that edits don't move.

    Every parameter has a default measured on real agent runs (docs/detector.md) and
    an off switch:

    - ``max_strikes`` (3): identical batches allowed in a row while their answers repeat
      (or are unknown); the next one is refused (``kind="repeat"``). ``None``: off.
      With ``error_aware`` (on), a batch whose repeated answer is an error is refused one
      repeat earlier.
    - ``max_observation_steps`` (5): the same, for read-only batches (never lower than
      ``max_strikes``); also the *ceiling* past which a state-changing (or costly) batch
      is refused even when every answer moved. ``None``: neither.
    - ``observation_tools`` / ``costly_tools``: name patterns (see
      :mod:`loopfuse.detector.tools`); costly read-only tools keep ``max_strikes``.
    - ``shell_tools`` / ``read_only_commands``: which tools are shells, and which command
      lines only read (see :mod:`loopfuse.detector.shell` and docs/shell.md): a shell call
      is read-only when its command line is (``tail -5 build.log``, ``gh run view 42``),
      so a poll whose answer moves is never refused. ``()`` reads no command line.
    - ``max_cycle_period`` (8) / ``max_cycle_laps`` (2): cycles A → B → A … of up to 8
      batches, refused on the lap after ``max_cycle_laps`` laps that repeated their answers
      (``kind="cycle"``). A period below 2 turns cycles off.
    - ``max_error_streak`` (3): the same error answer allowed that many times in a row,
      whatever the calls; the next one trips (``kind="error_streak"``). ``None``: off.
    - ``max_near_repeats`` (3): calls differing only slightly (whitespace, numbers, one
      token) with the same answer, allowed in a row (``kind="near_repeat"``).
    - ``max_unchanged_checks`` (4): runs of the same check with edits in between that gave
      the same answer every time (``kind="no_progress"``).
    - ``editor_aware`` (on): editor and file tools are judged by their arguments
      (:mod:`loopfuse.detector.editors`): a view or a ``Read`` only reads; an edit whose
      answer is an error changed nothing.
    - ``max_unread_edit_checks`` (9): for ``no_progress``, runs of a failing check after
      editor edits of files it does not read (neither its command line nor its answer
      names them: the edits land where the check does not look) trip only past this many
      runs in all (``max_unchanged_checks`` counts runs after changes the check reads).
      ``None``: every edit counts alike.
    - ``error_storm`` ((10, 12)): 10 of the last 12 calls failed (``kind="error_storm"``).
    - ``error_flags`` (on): a result that says it failed is an error whatever its text:
      Anthropic ``is_error``, MCP ``isError``, LangChain ``status="error"``. ``False``:
      only the text decides.
    - ``framework_errors`` (on): an agent framework's answer to a call it could not run
      (``Tool 'x' not found``, an unknown tool, invalid arguments: see
      :mod:`loopfuse.detector.errors`) is an error, and the same error whatever tool name
      or arguments the model invented, for the answer-based signals and error-aware
      repeats. ``False``: such answers count only by what their text says.
    - ``max_stagnation_steps`` (5): the same prose answer, in :meth:`scan`
      (:class:`~loopfuse.detector.stagnation.StagnationDetector`). ``None``: off.
    - ``tool_limits``: per-tool caps, ``{"deploy": 1}`` (a second identical deploy in a row
      is refused whatever its answer), ``{"browser_snapshot": 12}``; by full or own name.
    - ``ignore_tools``: tools never counted (``{"todo_write", "think"}``).
    - ``normalize_answers`` (on): answers that differ only in incidental noise count as
      the same (:func:`~loopfuse.detector.answers.normalize_answer`).
    - ``window`` (48): batches remembered; memory and cost per call are bounded by it.
    - ``enabled`` (on): ``False`` turns the detector off for this run: every batch passes.

    An answer-based signal (error_streak, near_repeat, no_progress, error_storm) is
    decided once a batch's answers are recorded; it refuses the next :meth:`check`,
    whatever the batch, once. Safe to share between threads; does no I/O.

    >>> from loopfuse.detector import LoopDetected, ToolCall, results_digest
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
        max_strikes: int | None = DEFAULT_MAX_STRIKES,
        observation_tools: Iterable[str] = DEFAULT_OBSERVATION_TOOLS,
        max_observation_steps: int | None = DEFAULT_MAX_OBSERVATION_STEPS,
        costly_tools: Iterable[str] = DEFAULT_COSTLY_TOOLS,
        *,
        shell_tools: Iterable[str] = DEFAULT_SHELL_TOOLS,
        read_only_commands: Iterable[str] = DEFAULT_READ_ONLY_COMMANDS,
        max_cycle_period: int = DEFAULT_MAX_CYCLE_PERIOD,
        max_cycle_laps: int = DEFAULT_MAX_CYCLE_LAPS,
        normalize_answers: bool = True,
        error_aware: bool = True,
        editor_aware: bool = True,
        max_unread_edit_checks: int | None = DEFAULT_MAX_UNREAD_EDIT_CHECKS,
        error_flags: bool = True,
        framework_errors: bool = True,
        max_error_streak: int | None = DEFAULT_MAX_ERROR_STREAK,
        max_near_repeats: int | None = DEFAULT_MAX_NEAR_REPEATS,
        max_unchanged_checks: int | None = DEFAULT_MAX_UNCHANGED_CHECKS,
        error_storm: tuple[int, int] | None = DEFAULT_ERROR_STORM,
        max_stagnation_steps: int | None = DEFAULT_MAX_STAGNATION_STEPS,
        tool_limits: Mapping[str, int] | None = None,
        ignore_tools: Iterable[str] = (),
        window: int = DEFAULT_WINDOW,
        enabled: bool = True,
    ) -> None:
        settings = DetectorSettings.build(
            observation_tools=observation_tools,
            costly_tools=costly_tools,
            shell_tools=shell_tools,
            read_only_commands=read_only_commands,
            tool_limits=tool_limits,
            ignore_tools=ignore_tools,
            max_strikes=max_strikes,
            max_observation_steps=max_observation_steps,
            max_cycle_period=max_cycle_period,
            max_cycle_laps=max_cycle_laps,
            normalize_answers=normalize_answers,
            error_aware=error_aware,
            editor_aware=editor_aware,
            max_unread_edit_checks=max_unread_edit_checks,
            error_flags=error_flags,
            framework_errors=framework_errors,
            max_error_streak=max_error_streak,
            max_near_repeats=max_near_repeats,
            max_unchanged_checks=max_unchanged_checks,
            error_storm=error_storm,
            max_stagnation_steps=max_stagnation_steps,
            window=window,
            enabled=enabled,
        )
        self._init(settings)

    def _init(self, settings: DetectorSettings) -> None:
        self.settings = settings
        """The validated settings (read-only)."""
        self._core = RunCore(settings, owner=self)
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: DetectorSettings) -> LoopDetector:
        """A detector with ``settings`` (say, another detector's) and no history."""
        det = cls.__new__(cls)
        det._init(settings)
        return det

    def fresh(self) -> LoopDetector:
        """A new detector with the same settings and no history."""
        return LoopDetector.from_settings(self.settings)

    # The settings most code reads; every other one is on :attr:`settings`.

    @property
    def max_strikes(self) -> int | None:
        """Identical batches allowed in a row while their answers repeat (``None``: off)."""
        return self.settings.max_strikes

    @property
    def max_observation_steps(self) -> int | None:
        """The read-only allowance and state-changing ceiling (``None``: neither)."""
        return self.settings.max_observation_steps

    @property
    def max_cycle_period(self) -> int:
        """Longest cycle looked for (below 2: cycles are not looked for)."""
        return self.settings.max_cycle_period

    @property
    def max_cycle_laps(self) -> int:
        """Laps of a cycle allowed while every lap's answers repeat the previous lap's."""
        return self.settings.max_cycle_laps

    @property
    def normalize_answers(self) -> bool:
        """Whether answers that differ only in incidental noise count as the same."""
        return self.settings.normalize_answers

    @property
    def max_stagnation_steps(self) -> int | None:
        """Prose-stagnation threshold used by :meth:`scan` (``None``: off)."""
        return self.settings.max_stagnation_steps

    def __repr__(self) -> str:
        return f"LoopDetector({self.settings!r})"

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
        settings = self.settings
        keep = settings.kept(tuple(call.name for call in calls))
        kept = tuple(calls) if keep is None else tuple(calls[k] for k in keep)
        if not settings.enabled or not kept:
            # Off, or only ignored tools: a ticket that no run counts.
            entry = HistoryEntry(signature, tuple(call.name for call in calls), False)
            record = BatchRecord(self, -1, entry, 0, 0)
            record._calls = tuple(calls)
            return record
        if keep is not None:
            signature = batch_signature(kept)
        names = tuple(call.name for call in kept)
        args = tuple(call.arguments for call in kept)
        observation, costly = settings.classify(names, args)
        with self._lock:
            record, error = self._core.admit(signature, names, args, observation, costly)
        record._calls = tuple(calls)
        if error is not None:
            raise error
        return record

    def record_results(
        self,
        record: BatchRecord,
        digest: str | None = None,
        *,
        answers: Sequence[object] | Mapping[str, object] | None = None,
        error: bool | None = None,
    ) -> RepeatOutcome:
        """Report the answers of a checked batch: a :func:`results_digest` (or ``None``:
        unknown), or the raw ``answers`` (one per call, or by call id) to digest here.

        ``error`` says whether the batch failed, when the caller knows (with
        ``answers``). A record can be reported once; a second use, or a record from
        another detector, raises :class:`BatchRecordError`. An answer-based signal these
        answers trip refuses the next :meth:`check`.
        """
        if not isinstance(record, BatchRecord):
            raise BatchRecordError(f"expected a BatchRecord, got {type(record).__name__}")
        text = None
        if answers is not None:
            if digest is not None:
                raise InvalidInputError("pass either a digest or answers=, not both")
            calls = [c for c in record._calls if isinstance(c, ToolCall)]
            reading = self.settings.error_reading
            digest = results_digest(calls, answers, error=error, reading=reading)
            if digest is not None and digest_facts(digest)[0]:
                text = answers_text(answers)  # only a failing check's text is ever read
        elif digest is not None and not is_digest(digest):
            raise InvalidInputError(
                f"digest must be made by results_digest(), got {digest!r}: "
                "pass raw answers with record_results(record, answers=[...])"
            )
        if record._run < 0:  # the detector was off, or every call was ignored
            record.use(self)
            return RepeatOutcome.NOT_COMPARABLE
        with self._lock:
            outcome, _ = self._core.record(record, digest, text=text)
        return outcome

    def break_run(self) -> None:
        """End the run and forget its history: a user turn came in."""
        with self._lock:
            self._core.break_run()

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


def answers_text(answers: Sequence[object] | Mapping[str, object]) -> str | None:
    """The text answers handed to ``record_results``, joined and clipped as the error
    check reads an answer (a few KB, however many answers), for what reads answers as
    text (``no_progress``'s edits)."""
    values = answers.values() if isinstance(answers, Mapping) else answers
    if isinstance(values, str | bytes):
        return None
    texts = [clip_text(value) for value in values if isinstance(value, str)]
    return clip_text("\n".join(texts)) if texts else None  # bounded, however many answers
