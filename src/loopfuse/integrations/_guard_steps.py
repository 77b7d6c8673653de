"""``GuardSteps``: the :class:`~loopfuse.integrations.Guard`'s decision on a parsed request.

:class:`~loopfuse.integrations.Guard` holds the ways in (``check``, ``acheck``,
``prepare`` then ``check_prepared``): each parses the request once, counts it in the
breaker (``acheck`` awaits the breaker's store) and hands both here. What follows is the
same for every way in: the breaker's verdict, then the detector's, then what the mode
makes of a loop (a refusal, a note, or a refusal of a loop that went on after its note),
and for a request that goes on, the cache plan; with the events of those decisions.

No I/O and no parse: only the state the guard keeps (the warn-mode notes) and its
options, which :class:`~loopfuse.integrations.Guard` sets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Final

from blake3 import blake3

from loopfuse.breaker import LoopBreaker, LoopDecision
from loopfuse.dedup import DedupCache, RequestKey
from loopfuse.errors import InvalidInputError
from loopfuse.events import EventAction
from loopfuse.integrations import _cache_controls
from loopfuse.integrations._decision import (
    GuardDecision,
    Loop,
    Mode,
    Scanner,
    ScanVerdict,
    failed_message,
)
from loopfuse.integrations._notes import add_note
from loopfuse.integrations._prepared import Prepared
from loopfuse.integrations._records import TimedRecords
from loopfuse.integrations._reporting import Reporter
from loopfuse.intent import call_ids, canonical_json

__all__ = ["GuardSteps"]

_IGNORED_NOTE: Final = "This loop went on after loopfuse's note about it, so it was stopped."
_THREADS_KEPT: Final = 8  # conversations remembered per (owner, kind, signature)


@dataclass(frozen=True, slots=True)
class Thread:
    """The conversation a note was written into, so that only a later request of *that*
    conversation is refused for ignoring it: by the provider ids of its tool calls (each
    run gets fresh ones, and keeps them in its history); in a dialect without ids, by
    its canonical messages (a later request of the run starts with them)."""

    ids: frozenset[str]
    messages: int
    digest: bytes

    @classmethod
    def of(cls, prepared: Prepared) -> Thread:
        ids = call_ids(prepared.value)
        if ids:
            return cls(ids, 0, b"")
        messages = _messages(prepared)
        return cls(ids, len(messages), _digest(messages))

    def continued_by(self, prepared: Prepared) -> bool:
        """Whether ``prepared`` is a later request of this conversation."""
        if self.ids:
            return self.ids <= call_ids(prepared.value)
        messages = _messages(prepared)
        if not self.digest or len(messages) < self.messages:
            return False
        return _digest(messages[: self.messages]) == self.digest


def _messages(prepared: Prepared) -> list[Any]:
    intent = prepared.analysis.parsed_intent
    messages = intent.get("messages") if isinstance(intent, dict) else None
    return messages if isinstance(messages, list) else []


def _digest(messages: list[Any]) -> bytes:
    try:
        return blake3(canonical_json(messages)).digest(16)
    except (InvalidInputError, RecursionError, ValueError):
        return b""  # cannot be written: never the same conversation as another


class GuardSteps:
    """The decision steps of :class:`~loopfuse.integrations.Guard` after the breaker's
    count; its options and state are set by ``Guard.__init__``."""

    breaker: LoopBreaker | None
    detector: Scanner | None
    cache: DedupCache[Any] | None
    mode: Mode
    cache_streams: bool
    cache_sampled: bool
    cache_namespace: str | None
    clock: Callable[[], float]
    _report: Reporter
    _notes: TimedRecords[tuple[str, str, str], tuple[Thread, ...]]

    def _finish(
        self,
        prepared: Prepared,
        counted: LoopDecision | None,
        verdict: ScanVerdict | None = None,
        cache_key: RequestKey | None = None,
    ) -> GuardDecision:
        """The decision on ``prepared``, given the breaker's count (``None``: not
        counted) and, when the caller has them, the detector's verdict and the cache key."""
        if prepared.retry and self.breaker is not None and prepared.session is not None:
            self._report.about("retry_forgiven", "breaker", prepared, reason="a retry")
        loop: Loop | None = None
        if counted is not None and counted.error is not None:
            action: EventAction = "fail_open" if counted.allowed else "fail_closed"
            self._report.about(
                action, "breaker", prepared, kind="guard_failed", reason=counted.error
            )
            if not counted.allowed:
                failed = Loop("breaker", "guard_failed", failed_message(counted.error))
                return self._decided(prepared, "refuse", failed)
        elif counted is not None and not counted.allowed:
            signature = f"{prepared.fingerprint:016x}"
            loop = Loop("breaker", "repeated_request", counted.message, signature, counted.repeats)
        if loop is None and prepared.retry_noted is not None:
            return self._note(prepared, prepared.retry_noted)  # a retry is noted like its try
        if loop is None and self.detector is not None:
            if verdict is None:
                verdict = self.detector.scan_intent(prepared.analysis.parsed_intent)
            if not verdict.ok:
                code = verdict.kind or "loop"
                message = verdict.message or f"loopfuse: loop detected ({code})"
                names = tuple(verdict.tool_names)
                loop = Loop("detector", code, message, verdict.signature, verdict.count, names)
        if loop is not None:
            return self._intervene(prepared, loop)
        return self._forward(prepared, cache_key)

    def _intervene(self, prepared: Prepared, loop: Loop) -> GuardDecision:
        if self.mode == "refuse":
            return self._refuse(prepared, loop)
        if self.mode == "warn":
            key = (prepared.owner(), loop.code, loop.signature or "")
            now = self.clock()
            noted = self._notes.get(key, now) or ()
            if any(thread.continued_by(prepared) for thread in noted):
                ignored = replace(loop, message=f"{loop.message} {_IGNORED_NOTE}")
                return self._refuse(prepared, ignored)
            # Not this conversation's note (another run of the same prompt, say): note it.
            self._notes.put(key, (*noted[-(_THREADS_KEPT - 1) :], Thread.of(prepared)), now)
        return self._note(prepared, loop)

    def _refuse(self, prepared: Prepared, loop: Loop) -> GuardDecision:
        self._report.about("loop_refused", loop.guard, prepared, loop)
        return self._decided(prepared, "refuse", loop)

    def _note(self, prepared: Prepared, loop: Loop) -> GuardDecision:
        noted = add_note(prepared.value, prepared.fmt, f"[loopfuse] {loop.message}")
        if noted is None:  # no place for a note in this body: warn stops, note lets it go
            return self._refuse(prepared, loop) if self.mode == "warn" else self._forward(prepared)
        self._report.about("loop_noted", loop.guard, prepared, loop)
        return self._decided(prepared, "note", loop, noted)

    def _forward(self, prepared: Prepared, cache_key: RequestKey | None = None) -> GuardDecision:
        counted = self._counted(prepared)
        if self.cache is None:
            reason = "no cache is configured"
            return prepared.decision("forward", None, counted, cache_reason=reason)
        chosen, key = _cache_controls.forwarded(
            prepared, self.cache_streams, self.cache_sampled, self.cache_namespace, cache_key
        )
        self._report.fallbacks(chosen.junk, prepared.integration)
        return prepared.decision(
            "forward", None, counted, cache=chosen.use, cache_key=key, cache_reason=chosen.reason
        )

    def _decided(
        self, prepared: Prepared, action: Any, loop: Loop | None, noted: object = None
    ) -> GuardDecision:
        return prepared.decision(action, loop, self._counted(prepared), noted)

    def _counted(self, prepared: Prepared) -> bool:
        """Whether the breaker counted ``prepared`` (a retry of a failed attempt is not)."""
        return self.breaker is not None and prepared.session is not None and not prepared.retry
