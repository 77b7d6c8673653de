"""``Guard``: the one check every integration runs before an LLM request goes out.

An integration (an HTTP transport, a framework hook) hands :meth:`Guard.check` the
request body it is about to send and gets back a :class:`GuardDecision`: forward it,
refuse it (with a message written for the model), or forward it with a note for the
model. The integration only translates that decision into its framework's terms, so
every integration refuses, notes, caches and fails open in exactly the same way.

The checks, in order:

1. :class:`~loopfuse.LoopBreaker` — the same request intent again and again in one
   session (retry storms, stateless loops);
2. a detector's ``scan`` (by default :class:`loopfuse.detector.LoopDetector`) — the
   conversation ends in a tool-call loop, a cycle, or the same prose again and again;
3. the :class:`~loopfuse.DedupCache` key — an identical request may be answered from
   the cache (the integration does the lookup: only it knows what an answer is).
"""

from __future__ import annotations

import enum
import logging
import threading
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, TypedDict

from loopfuse.breaker import LoopBreaker, LoopDecision
from loopfuse.dedup import DedupCache, RequestKey
from loopfuse.errors import ConfigError
from loopfuse.integrations._shapes import ErrorFormat, add_note, error_format
from loopfuse.intent import analyse, fingerprint_canonical

if TYPE_CHECKING:
    from loopfuse.detector import LoopDetected

__all__ = [
    "DEFAULT",
    "Guard",
    "GuardDecision",
    "GuardOptions",
    "Mode",
    "ScanVerdict",
    "Scanner",
    "build_guard",
    "decision_message",
    "loop_detected",
]

logger = logging.getLogger("loopfuse")

Mode = Literal["refuse", "note"]


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


class Scanner(Protocol):
    """Anything with ``scan(body) -> verdict``, like :class:`loopfuse.detector.LoopDetector`."""

    def scan(self, body: object) -> ScanVerdict: ...


def default_detector() -> Scanner | None:
    """A ``LoopDetector()`` with its measured defaults, or ``None`` if it is unavailable."""
    try:
        from loopfuse.detector import LoopDetector
    except ImportError:  # pragma: no cover - the detector ships with loopfuse
        return None
    return LoopDetector()


class GuardOptions(TypedDict, total=False):
    """The keyword arguments of :class:`Guard`, for integrations that build one."""

    breaker: LoopBreaker | _Default | None
    detector: Scanner | _Default | None
    cache: DedupCache[Any] | None
    mode: Mode
    cache_streams: bool
    fail_closed: bool


@dataclass(frozen=True, slots=True)
class GuardDecision:
    """What :meth:`Guard.check` decided about one request body.

    ``action`` is ``"forward"`` (send the body as it is; ``value`` is its parsed form,
    ``None`` when it is not an LLM request), ``"refuse"`` (do not send it: answer with an
    error carrying ``message``) or ``"note"`` (send ``value`` instead: the body with
    ``message`` added for the model). ``code`` names the
    guard that spoke: ``"repeated_request"`` (the breaker), the detector's kind
    (``"repeat"``, ``"cycle"``, ``"stagnation"``) or ``"guard_failed"``. ``fmt`` is the
    provider error shape for a refusal. ``signature`` and ``count`` describe the loop:
    the repeated batch's signature and how often it ran (the detector), or the request
    fingerprint in hex and its repeats (the breaker). ``cache_key`` is set when the
    cache applies to this request. ``error`` is set when a guard failed and the request
    was let through (or refused, with ``fail_closed=True``).
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

    @property
    def refused(self) -> bool:
        """Whether the request must not be sent."""
        return self.action == "refuse"


_PASS: Final = GuardDecision("forward")


class Guard:
    """Breaker, detector and cache key for one request body; shared by every integration.

    Args:
        breaker: a :class:`~loopfuse.LoopBreaker`; default ``LoopBreaker()`` (5 identical
            requests per 30 s per session); ``None`` turns it off.
        detector: anything with ``scan(body)``; default
            :class:`loopfuse.detector.LoopDetector` with its measured thresholds;
            ``None`` turns it off.
        cache: a :class:`~loopfuse.DedupCache` of answers; default ``None`` (no cache:
            caching answers is an explicit choice).
        mode: ``"refuse"`` a looping request, or forward it with a ``"note"`` for the
            model instead.
        cache_streams: cache streamed answers too (``stream: true``). Off by default:
            a cached stream is replayed whole, not token by token.
        fail_closed: refuse, instead of forwarding, a request the guard failed to check.

    A guard that fails internally lets the request through: one warning on the
    ``loopfuse`` logger, counted in :attr:`internal_errors`.

    >>> guard = Guard(breaker=LoopBreaker(max_repeats=1, clock=lambda: 0.0))
    >>> body = b'{"model": "m", "messages": [{"role": "user", "content": "again?"}]}'
    >>> guard.check(body, session_id="s").action
    'forward'
    >>> decision = guard.check(body, session_id="s")
    >>> decision.action, decision.code
    ('refuse', 'repeated_request')
    >>> Guard(mode="note").check(body).action  # a fresh breaker: nothing to note yet
    'forward'
    """

    def __init__(
        self,
        *,
        breaker: LoopBreaker | _Default | None = DEFAULT,
        detector: Scanner | _Default | None = DEFAULT,
        cache: DedupCache[Any] | None = None,
        mode: Mode = "refuse",
        cache_streams: bool = False,
        fail_closed: bool = False,
    ) -> None:
        if mode not in ("refuse", "note"):
            raise ConfigError(f"mode must be 'refuse' or 'note', got {mode!r}")
        if breaker is DEFAULT:
            breaker = LoopBreaker()
        elif breaker is not None and not isinstance(breaker, LoopBreaker):
            raise ConfigError(f"breaker must be a LoopBreaker or None, not {breaker!r}")
        if detector is DEFAULT:
            detector = default_detector()
        elif detector is not None and not callable(getattr(detector, "scan", None)):
            raise ConfigError(f"detector must have a scan(body) method, not {detector!r}")
        if cache is not None and not isinstance(cache, DedupCache):
            raise ConfigError(f"cache must be a DedupCache or None, not {cache!r}")
        self.breaker: LoopBreaker | None = breaker
        self.detector: Scanner | None = detector
        self.cache: DedupCache[Any] | None = cache
        self.mode: Mode = mode
        self.cache_streams = bool(cache_streams)
        self.fail_closed = bool(fail_closed)
        self.internal_errors = 0
        """How many checks failed internally (let through unless ``fail_closed``)."""
        self._lock = threading.Lock()

    def check(
        self,
        body: object,
        *,
        path: str = "",
        session_id: str | None = "default",
        scope: str = "",
        streaming: bool | None = None,
    ) -> GuardDecision:
        """Run the guards on ``body`` (``bytes``, ``str`` or a parsed mapping).

        ``path`` is the request path (it picks the provider error shape and is part of
        the breaker's fingerprint). ``session_id`` scopes the breaker; ``None`` skips
        it. ``scope`` (say, the scheme and host) keeps cached answers of different
        endpoints apart. ``streaming`` overrides what the body says (``stream: true``).
        A body that is not an LLM request of a known dialect is forwarded unchecked.
        """
        try:
            return self._check(body, path, session_id, scope, streaming)
        except Exception as exc:  # fail open: a guard must never take the request path down
            return self.failure(exc, path)

    def _check(
        self,
        body: object,
        path: str,
        session_id: str | None,
        scope: str,
        streaming: bool | None,
    ) -> GuardDecision:
        # One parse serves the breaker's fingerprint and the detector's scan.
        value, dialect, canon, conversation = analyse(body)
        if dialect is None or canon is None or not isinstance(value, dict):
            return _PASS
        fmt = error_format(path, dialect)
        if streaming is None:
            streaming = is_streaming(value, path, dialect)
        code: str | None = None
        message: str | None = None
        signature: str | None = None
        count = 0
        if self.breaker is not None and session_id is not None:
            decision = self.breaker.check(session_id, fingerprint_canonical(canon, path))
            if not decision.allowed:
                code, message = "repeated_request", _breaker_message(decision)
                count = decision.repeats
                if decision.fingerprint is not None:
                    signature = f"{decision.fingerprint:016x}"
        if code is None and self.detector is not None:
            # A scanner that takes the intent (LoopDetector does) reuses this parse;
            # any other gets the body, as its protocol says.
            scan_parsed = getattr(self.detector, "scan_intent", None)
            if callable(scan_parsed):
                verdict: ScanVerdict = scan_parsed(conversation)
            else:
                verdict = self.detector.scan(body)
            if not verdict.ok:
                code = verdict.kind or "loop"
                message = verdict.message or f"loopfuse: loop detected ({code})"
                signature, count = verdict.signature, verdict.count
        if code is not None and message is not None:
            refusal = GuardDecision(
                "refuse",
                value,
                dialect,
                fmt,
                code=code,
                message=message,
                streaming=streaming,
                signature=signature,
                count=count,
            )
            if self.mode == "refuse":
                return refusal
            noted = add_note(value, fmt, f"[loopfuse] {message}")
            if noted is not None:
                return replace(refusal, action="note", value=noted)
        key = None
        if self.cache is not None and (self.cache_streams or not streaming):
            key = _scoped_key(RequestKey.from_request(body, path), scope, streaming)
        return GuardDecision("forward", value, dialect, fmt, streaming=streaming, cache_key=key)

    def failure(self, exc: Exception, path: str = "") -> GuardDecision:
        """Count and log an internal failure; the decision for the request it hit.

        For integrations whose own preparation (reading a session id, say) fails:
        forward unchecked, or refuse with ``code="guard_failed"`` when ``fail_closed``.
        """
        with self._lock:
            self.internal_errors += 1
        action = "refusing" if self.fail_closed else "forwarding"
        logger.warning("loopfuse: guard check failed, %s the request: %r", action, exc)
        if not self.fail_closed:
            return GuardDecision("forward", error=repr(exc))
        message = f"loopfuse: request refused because the loop guard failed: {exc!r}"
        fmt = error_format(path, None)
        return GuardDecision(
            "refuse", fmt=fmt, code="guard_failed", message=message, error=repr(exc)
        )

    def __repr__(self) -> str:
        return (
            f"Guard(breaker={self.breaker!r}, detector={self.detector!r}, cache={self.cache!r}, "
            f"mode={self.mode!r})"
        )


def is_streaming(value: dict[str, Any], path: str, dialect: str | None) -> bool:
    """Whether the request asks for a streamed answer.

    ``stream: true``; Gemini's ``:streamGenerateContent``; Ollama streams unless told not to.

    >>> is_streaming({"stream": True}, "/v1/chat/completions", "openai_chat")
    True
    >>> is_streaming({}, "/api/chat", "ollama"), is_streaming({}, "/v1/messages", "anthropic")
    (True, False)
    """
    if ":streamGenerateContent" in path:
        return True
    stream = value.get("stream")
    if dialect == "ollama" and stream is None:
        return True
    return stream is True


def _scoped_key(key: RequestKey, scope: str, streaming: bool) -> RequestKey:
    # RequestKey.from_request ignores `stream` (the answer's content is the same) and the
    # endpoint; an HTTP answer differs in both (SSE or JSON; one server's model "m" is not
    # another's), so both are folded in, with the content digest, into a new content key.
    digest = key.digest or key.value.to_bytes(8, "little")
    material = b"loopfuse-http\x00" + scope.encode("utf-8", "surrogatepass") + b"\x00"
    return RequestKey.from_bytes(material + (b"S" if streaming else b"J") + digest)


def _breaker_message(decision: LoopDecision) -> str:
    return (
        f"Loop detected: this exact request has been sent {decision.repeats} times within "
        f"{decision.window:g}s. Sending it again unchanged will not give a different result: "
        "change the request or your approach, or stop and say what is blocking you."
    )


def build_guard(guard: Guard | None, options: GuardOptions) -> Guard:
    """``guard``, or a new :class:`Guard` built from ``options``; never both.

    >>> build_guard(None, {"mode": "note"}).mode
    'note'
    >>> build_guard(Guard(), {"mode": "note"})
    Traceback (most recent call last):
        ...
    loopfuse.errors.ConfigError: pass either guard= or the guard's options (mode), not both
    """
    if guard is None:
        return Guard(**options)
    if not isinstance(guard, Guard):
        raise ConfigError(f"guard must be a Guard, not {type(guard).__name__}")
    if options:
        names = ", ".join(sorted(options))
        raise ConfigError(f"pass either guard= or the guard's options ({names}), not both")
    return guard


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
    )


def decision_message(decision: GuardDecision) -> str:
    """The message of a decision that found a loop (a fallback when it carries none)."""
    return decision.message or f"loopfuse: loop detected ({decision.code})"
