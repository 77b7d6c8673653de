"""What the :class:`~loopfuse.integrations.Guard` decides, and the detector it asks.

Data only: the decision an integration acts on, the protocol a detector implements, and
the two helpers that turn a decision into a :class:`loopfuse.detector.LoopDetected`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, Protocol, runtime_checkable

from loopfuse.dedup import RequestKey
from loopfuse.integrations._shapes import ErrorFormat

if TYPE_CHECKING:
    from loopfuse.detector import LoopDetected

__all__ = [
    "DEFAULT",
    "Attempt",
    "CacheUse",
    "GuardDecision",
    "Loop",
    "Mode",
    "ScanVerdict",
    "Scanner",
    "decision_message",
    "failed_message",
    "loop_detected",
]

Mode = Literal["refuse", "note", "warn"]
"""What the guard does with a looping request: ``"refuse"`` it; forward it with a
``"note"`` for the model, every time; or ``"warn"``: note it the first time, refuse it
when the same loop goes on after the note."""

CacheUse = Literal["use", "refresh", "bypass"]
"""How an integration uses the cache for a request: look it up and store the answer
(``"use"``), skip the lookup but store the fresh answer (``"refresh"``,
``Cache-Control: no-cache``), or neither (``"bypass"``)."""


class _Default(enum.Enum):
    TOKEN = "DEFAULT"

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Final = _Default.TOKEN
"""Marks a guard argument left to its default (``None`` turns that guard off)."""


class ScanVerdict(Protocol):
    """What a detector's ``scan`` returns (``loopfuse.detector.Verdict`` is one)."""

    @property
    def ok(self) -> bool: ...
    @property
    def kind(self) -> str | None: ...
    @property
    def signature(self) -> str | None: ...
    @property
    def count(self) -> int: ...
    @property
    def message(self) -> str | None: ...
    @property
    def tool_names(self) -> tuple[str, ...]: ...


@runtime_checkable
class Scanner(Protocol):
    """A detector the guard can ask, like :class:`loopfuse.detector.LoopDetector`.

    ``scan(body)`` reads a whole request body; ``scan_intent(intent)`` the canonical
    intent (:func:`loopfuse.intent.extract_intent`) the guard has already parsed, so
    that a request is parsed once whichever guards run on it.
    """

    def scan(self, body: object) -> ScanVerdict: ...
    def scan_intent(self, intent: object) -> ScanVerdict: ...


@dataclass(frozen=True, slots=True)
class Loop:
    """A loop one guard found: which guard, its code, its message for the model, and
    what it is about."""

    guard: str
    code: str
    message: str
    signature: str | None = None
    count: int = 0
    tool_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Attempt:
    """Identifies a forwarded request for :meth:`Guard.outcome
    <loopfuse.integrations.Guard.outcome>`: who sent it, what it asked, and the loop it
    was noted for (a retry of it is noted again rather than refused)."""

    identity: str
    fingerprint: int
    counted: bool
    noted: Loop | None = None


@dataclass(frozen=True, slots=True)
class GuardDecision:
    """What :meth:`Guard.check <loopfuse.integrations.Guard.check>` decided about a body.

    ``action`` is ``"forward"`` (send the body as it is; ``value`` is its parsed form,
    ``None`` when it is not an LLM request), ``"refuse"`` (do not send it: answer with an
    error carrying ``message``) or ``"note"`` (send ``value`` instead: the body with
    ``message`` added for the model). ``code`` names the guard that spoke:
    ``"repeated_request"`` (the breaker), the detector's kind (``"repeat"``,
    ``"cycle"``, ``"stagnation"``) or ``"guard_failed"``. ``fmt`` is the provider error
    shape for a refusal. ``signature``, ``count`` and ``tool_names`` describe the loop:
    the repeated batch's signature, how often it ran and its tools (the detector), or the
    request fingerprint in hex and its repeats (the breaker). ``error`` is set when a
    guard failed and the request was let through (or refused, with ``fail_closed``).

    ``session`` is the breaker session the request was counted in (``None``: not
    counted). ``cache`` says how to use the cache (:data:`CacheUse`), under
    ``cache_key``; ``cache_reason`` why it is bypassed. ``attempt`` is what
    :meth:`Guard.outcome <loopfuse.integrations.Guard.outcome>` needs to tell a retry
    from a repeat; ``integration`` names the integration that asked.
    """

    action: Literal["forward", "refuse", "note"]
    value: object = None
    dialect: str | None = None
    fmt: ErrorFormat = "openai"
    code: str | None = None
    message: str | None = None
    streaming: bool = False
    cache_key: RequestKey | None = None
    error: str | None = None
    signature: str | None = None
    count: int = 0
    tool_names: tuple[str, ...] = ()
    session: str | None = None
    cache: CacheUse = "bypass"
    cache_reason: str | None = None
    attempt: Attempt | None = None
    integration: str | None = None

    @property
    def refused(self) -> bool:
        """Whether the request must not be sent."""
        return self.action == "refuse"


def loop_detected(decision: GuardDecision) -> LoopDetected:
    """The :class:`loopfuse.detector.LoopDetected` that reports ``decision``.

    >>> err = loop_detected(GuardDecision("refuse", code="repeat", message="stop", count=3))
    >>> err.kind, err.count, str(err)
    ('repeat', 3, 'stop')
    """
    from loopfuse.detector import LoopDetected

    return LoopDetected(
        decision_message(decision),
        signature=decision.signature or "",
        kind=decision.code or "loop",
        count=decision.count,
        tool_names=decision.tool_names,
    )


def decision_message(decision: GuardDecision) -> str:
    """The message of a decision that found a loop (a fallback when it carries none)."""
    return decision.message or f"loopfuse: loop detected ({decision.code})"


def failed_message(error: str) -> str:
    """The message of a request refused because a guard failed (``fail_closed``)."""
    return f"loopfuse: request refused because the loop guard failed: {error}"
