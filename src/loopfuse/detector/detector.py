"""``LoopDetector``: an agent run's tool calls, checked before they run.

An agent loop asks :meth:`LoopDetector.check` before it runs a batch of tool calls and
tells :meth:`LoopDetector.record_results` what the batch got back. The decisions are
made by the run's :class:`~loopfuse.detector.core.RunCore` (see its module for every
signal); this class adds the lock, the validation of what callers hand in, and the
settings. A user turn (:meth:`LoopDetector.break_run`) ends the run.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Unpack

from loopfuse._api import deprecated
from loopfuse.detector.core import RunCore
from loopfuse.detector.digests import digest_facts, is_digest, results_digest
from loopfuse.detector.records import (
    BatchRecord,
    BatchRecordError,
    HistoryEntry,
    RepeatOutcome,
)
from loopfuse.detector.settings import DetectorSettings, default_settings
from loopfuse.detector.signature import ToolCall, batch_signature
from loopfuse.detector.transcript import clip_text
from loopfuse.errors import InvalidInputError
from loopfuse.fields import configured

if TYPE_CHECKING:
    from loopfuse.detector.replay import Verdict
    from loopfuse.overrides import DetectorOverrides

__all__ = ["LoopDetector"]


class LoopDetector:
    """Refuses a tool-call batch that repeats a loop: the same call, a cycle, the same
    error, a near variant, a check that edits don't move.

    Its settings are a :class:`~loopfuse.detector.DetectorSettings`, whose fields say each
    one's default (measured on real agent runs: docs/detector.md), meaning and off value
    (``None`` switches a signal off): ``LoopDetector()`` runs the defaults,
    ``LoopDetector(max_strikes=2)`` changes one, ``LoopDetector(settings, max_strikes=2)``
    changes one of ``settings``. An unknown or refused setting is a
    :class:`~loopfuse.errors.ConfigError` naming it. The signals, each one object in
    :mod:`loopfuse.detector.signals`: ``repeat`` (the same batch again, past
    ``max_strikes``; read-only batches get ``max_observation_steps``), ``cycle`` (laps of
    up to ``max_cycle_period`` batches, past ``max_cycle_laps``), ``error_streak``,
    ``near_repeat``, ``no_progress``, ``error_storm`` and, in :meth:`scan`, ``stagnation``.

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
        self, settings: DetectorSettings | None = None, **overrides: Unpack[DetectorOverrides]
    ) -> None:
        self.settings: DetectorSettings = configured(
            "LoopDetector", DetectorSettings, settings, overrides, "max_strikes=2", default_settings
        )
        """The checked settings (read-only)."""
        self._core = RunCore(self.settings, owner=self)
        self._lock = threading.Lock()

    def fresh(self) -> LoopDetector:
        """A new detector with the same settings and no history."""
        return LoopDetector(self.settings)

    def earlier(self) -> LoopDetector:
        """A new detector, with no history, whose counts are one notch lower
        (:meth:`DetectorSettings.earlier <loopfuse.detector.DetectorSettings.earlier>`):
        where ``mode="warn"`` notes a loop that this detector refuses one count later.

        >>> LoopDetector().earlier().settings.max_strikes
        2
        """
        return LoopDetector(self.settings.earlier())

    # --- deprecated (issue 19): every setting is read on `settings` --------------------

    @classmethod
    def from_settings(cls, settings: DetectorSettings) -> LoopDetector:
        """Deprecated: ``LoopDetector(settings)``."""
        deprecated("LoopDetector.from_settings(settings)", "use LoopDetector(settings)")
        return cls(settings)

    @staticmethod
    def _read_setting(name: str) -> None:
        deprecated(f"LoopDetector.{name}", f"use detector.settings.{name}", stacklevel=2)

    @property
    def max_strikes(self) -> int | None:
        """Deprecated: ``settings.max_strikes``."""
        self._read_setting("max_strikes")
        return self.settings.max_strikes

    @property
    def max_observation_steps(self) -> int | None:
        """Deprecated: ``settings.max_observation_steps``."""
        self._read_setting("max_observation_steps")
        return self.settings.max_observation_steps

    @property
    def max_cycle_period(self) -> int | None:
        """Deprecated: ``settings.max_cycle_period`` (``None``, no longer ``0``: off)."""
        self._read_setting("max_cycle_period")
        return self.settings.max_cycle_period

    @property
    def max_cycle_laps(self) -> int:
        """Deprecated: ``settings.max_cycle_laps``."""
        self._read_setting("max_cycle_laps")
        return self.settings.max_cycle_laps

    @property
    def normalize_answers(self) -> bool:
        """Deprecated: ``settings.normalize_answers``."""
        self._read_setting("normalize_answers")
        return self.settings.normalize_answers

    @property
    def max_stagnation_steps(self) -> int | None:
        """Deprecated: ``settings.max_stagnation_steps``."""
        self._read_setting("max_stagnation_steps")
        return self.settings.max_stagnation_steps

    def __repr__(self) -> str:
        return f"LoopDetector({self.settings!r})"

    # --- the public, locked API ---------------------------------------------------------

    def check(self, calls: Sequence[ToolCall], *, answered: bool = True) -> BatchRecord:
        """Count the batch ``calls`` about to run; raise :class:`LoopDetected` to refuse it.

        The batch is counted even when refused, so a caller that retries it anyway
        stays refused. Raises :class:`~loopfuse.errors.InvalidInputError` for an empty
        batch or an element that is not a :class:`ToolCall`.

        ``answered=False`` says the answers of the batches before this one are not known
        and never will be (a hook that runs only before each call): only what no answer
        could overturn is refused (see :meth:`RunCore.admit
        <loopfuse.detector.core.RunCore.admit>`).

        >>> from loopfuse.detector import LoopDetected, ToolCall
        >>> det = LoopDetector()
        >>> ls, rm = [ToolCall("ls", {})], [ToolCall("rm", {"path": "x"})]
        >>> for _ in range(9):
        ...     _ = det.check(ls, answered=False)  # a read: no ceiling, never refused
        >>> for _ in range(5):
        ...     _ = det.check(rm, answered=False)
        >>> try:
        ...     det.check(rm, answered=False)
        ... except LoopDetected as loop:
        ...     print(loop.kind, loop.count)
        repeat 6
        """
        if isinstance(calls, ToolCall) or not isinstance(calls, Sequence):
            raise InvalidInputError("check() takes a sequence of ToolCall")
        if not calls:
            raise InvalidInputError(
                "check() needs at least one ToolCall: an empty batch is no call"
            )
        signature = batch_signature(calls)  # validates the elements
        settings = self.settings
        keep = settings.reader.kept(tuple(call.name for call in calls))
        kept = tuple(calls) if keep is None else tuple(calls[k] for k in keep)
        if not settings.enabled or not kept:
            # Off, or only ignored tools: a ticket that no run counts.
            entry = HistoryEntry(signature, tuple(call.name for call in calls), False)
            return BatchRecord(self, -1, entry, 0, 0, tuple(calls))
        if keep is not None:
            signature = batch_signature(kept)
        names = tuple(call.name for call in kept)
        args = tuple(call.arguments for call in kept)
        observation, costly, wait = settings.reader.kinds(names, args)
        with self._lock:
            record, error = self._core.admit(
                signature,
                names,
                args,
                observation,
                costly,
                calls=tuple(calls),
                wait=wait,
                answered=answered,
            )
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
            calls = [c for c in record.calls if isinstance(c, ToolCall)]
            reading = self.settings.error_reading
            digest = results_digest(calls, answers, error=error, reading=reading)
            if digest is not None and (digest_facts(digest)[0] or record.entry.wait):
                # Only a failing check's text is ever read, and a wait's (does the thing
                # waited on still run?).
                text = answers_text(answers)
        elif digest is not None and not is_digest(digest):
            raise InvalidInputError(
                f"digest must be made by results_digest(), got {digest!r}: "
                "pass raw answers with record_results(record, answers=[...])"
            )
        if record.run < 0:  # the detector was off, or every call was ignored
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
        from loopfuse.detector.scanning import scan

        return scan(body, detector=self)

    def scan_intent(self, intent: object) -> Verdict:
        """:meth:`scan` for an intent already made by :func:`loopfuse.intent.extract_intent`
        (or :func:`loopfuse.intent.analyse`), so a caller that parsed once need not again.
        """
        from loopfuse.detector.scanning import scan_intent

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
