"""``Guard``: the one decision every integration and ``loopfuse scan`` run before an LLM
request goes out, and the data of that decision.

An integration (an HTTP transport, a framework hook) hands :meth:`Guard.check` the
request body it is about to send and gets back a :class:`GuardDecision`: forward it,
refuse it (with a message written for the model), or forward it with a note for the
model. The integration only translates that decision into its framework's terms, so
every integration refuses, notes, caches and fails open in exactly the same way.

One parse (:func:`~loopfuse.guard.request.prepare`) serves every step, in this order:

1. :class:`~loopfuse.LoopBreaker` — the same request again and again in one session
   (retry storms, stateless loops). The session is the integration's (a header, a
   callable), else the end user the body names, else the opt-in ``shared_session``;
   with none, the request is not counted. A retry of an attempt that failed upstream
   is not counted again (see :meth:`Guard.outcome`);
2. a detector's ``scan_intent`` (by default :class:`loopfuse.detector.LoopDetector`) —
   the conversation ends in a tool-call loop, a cycle, or the same prose again and again;
3. the **mode**: what a loop found by either makes — a refusal, a note for the model,
   or (``"warn"``) a note first, one count before the refusal (``note_early``), and a
   refusal when the loop goes on after it (:class:`~loopfuse.guard.memory.NoteMemory`);
4. for a request that goes on, the **cache plan** (:mod:`loopfuse.guard.cache_plan`) —
   whether and under which key an answer may come from the :class:`~loopfuse.DedupCache`
   (the integration does the lookup: only it knows what an answer is).

Each decision is also an event (:mod:`loopfuse.events`), a request let through included.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Literal,
    Protocol,
    TypedDict,
    Unpack,
    get_args,
    runtime_checkable,
)

from loopfuse._api import deprecated
from loopfuse.breaker import LoopBreaker, LoopDecision
from loopfuse.dedup import DedupCache, RequestKey
from loopfuse.errors import ConfigError, InvalidInputError
from loopfuse.events import EventAction, EventCallback, EventSink, GuardEvent
from loopfuse.fields import Choice, Flag, Seconds, Text, check_fields, configured, setting
from loopfuse.guard import cache_plan, request
from loopfuse.guard.cache_plan import CacheUse
from loopfuse.guard.memory import NoteMemory, RetryLedger, retryable
from loopfuse.guard.request import NO_CONTEXT, PreparedRequest, RequestContext
from loopfuse.intent.dialect import Dialect, add_note, dialect_for
from loopfuse.intent.openai_chat import OPENAI_CHAT
from loopfuse.loop import HoldsLoop, Loop

if TYPE_CHECKING:
    from loopfuse.overrides import GuardOverrides

__all__ = [
    "DEFAULT",
    "MODES",
    "Attempt",
    "Guard",
    "GuardDecision",
    "GuardOptions",
    "GuardSettings",
    "Mode",
    "ScanVerdict",
    "Scanner",
    "build_guard",
]

logger = logging.getLogger("loopfuse")

Mode = Literal["refuse", "warn", "note"]
"""What the guard does with a looping request: ``"refuse"`` it; ``"warn"``: note it the
first time, refuse it when the run goes on looping, in any way, or failing the way the
noted loop's calls failed, after the note; or forward it with a ``"note"`` for the
model, every time."""

MODES: Final[tuple[Mode, ...]] = get_args(Mode)
_NOTES_KEPT: Final = 10_000
_IGNORED_NOTE: Final = "This loop went on after loopfuse's note about it, so it was stopped."
_CACHE_ACTIONS: Final[dict[str, EventAction]] = {
    "hit": "cache_hit",
    "miss": "cache_miss",
    "bypass": "cache_bypass",
}


class _Default(enum.Enum):
    TOKEN = "DEFAULT"

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Final = _Default.TOKEN
"""Marks a guard argument left to its default (``None`` turns that guard off)."""


class ScanVerdict(Protocol):
    """What a detector's ``scan`` returns: anything with ``loop``, the
    :class:`~loopfuse.Loop` the conversation ends in or ``None``
    (:class:`loopfuse.detector.Verdict` is one)."""

    @property
    def loop(self) -> Loop | None: ...


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
class Attempt:
    """Identifies a forwarded request for :meth:`Guard.outcome`: who sent it, what it
    asked, and the loop it was noted for (a retry of it is noted again rather than
    refused)."""

    identity: str
    fingerprint: int
    counted: bool
    noted: Loop | None = None


@dataclass(frozen=True, slots=True)
class GuardDecision(HoldsLoop):
    """What :meth:`Guard.check` decided about a body.

    ``action`` is ``"forward"`` (send the body as it is; ``value`` is its parsed form,
    ``None`` when it is not an LLM request), ``"refuse"`` (do not send it: answer with an
    error carrying ``message``) or ``"note"`` (send ``value`` instead: the body with
    ``message`` added for the model). ``loop`` is the :class:`~loopfuse.Loop` refused
    or noted: the breaker's (``kind="repeated_request"``, the request fingerprint in hex
    as its ``signature``), the detector's (``"repeat"``, ``"cycle"``, ``"stagnation"``,
    ...), or ``Loop("guard_failed", ...)`` for a refusal because a guard failed with
    ``fail_closed``; ``None`` for a request forwarded as it is. Its ``kind``,
    ``message``, ``signature``, ``count`` and ``tool_names`` are read here too.
    ``api`` is the :class:`~loopfuse.intent.dialect.Dialect` of the API the request goes
    to: ``api.error_body(kind, message)`` is its refusal as that provider's SDK reads
    it. ``error`` is set when a guard failed and the request was let through (or
    refused, with ``fail_closed``).

    ``session`` is the breaker session the request was counted in (``None``: not
    counted). ``cache`` says how to use the cache (:data:`CacheUse`), under
    ``cache_key``; ``cache_reason`` why it is bypassed. ``attempt`` is what
    :meth:`Guard.outcome` needs to tell a retry from a repeat (``None`` where a retry
    would be decided as its first try anyway: no breaker counts the session, and no
    note was given); ``integration`` names the integration that asked. The repr leaves
    out ``value`` (the conversation).

    >>> decision = GuardDecision("refuse", loop=Loop("repeat", "detector", "ls:1f", 3))
    >>> decision.refused, decision.kind, decision.count
    (True, 'repeat', 3)
    >>> "value" in repr(GuardDecision("forward", {"messages": ["a secret"]}))
    False
    """

    action: Literal["forward", "refuse", "note"]
    value: object = field(default=None, repr=False)
    dialect: str | None = None
    api: Dialect = OPENAI_CHAT
    loop: Loop | None = None
    streaming: bool = False
    cache_key: RequestKey | None = None
    error: str | None = None
    session: str | None = None
    cache: CacheUse = "bypass"
    cache_reason: str | None = None
    attempt: Attempt | None = None
    integration: str | None = None

    @property
    def refused(self) -> bool:
        """Whether the request must not be sent."""
        return self.action == "refuse"

    @property
    def code(self) -> str | None:
        """Deprecated: :attr:`kind` (one name for it everywhere since issue 19)."""
        deprecated("GuardDecision.code", "use GuardDecision.kind")
        return self.kind


_NON_EMPTY_OR_NONE: Final = Text(off=True, blank=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardSettings:
    """Every setting of a :class:`Guard` (what it does with a loop, how it plans the
    cache, which requests it counts, how it fails), checked once: each field is declared
    here with its default, its kind and a one-line help (:mod:`loopfuse.fields`), and
    ``loopfuse scan``'s flags and a settings file's keys are made from them. The guards
    it runs (breaker, detector, cache) have settings of their own.

    >>> GuardSettings(mode="warn", cache_namespace="tenant-a").cache_namespace
    'tenant-a'
    >>> GuardSettings(mode="later")
    Traceback (most recent call last):
        ...
    loopfuse.fields.SettingError: mode must be one of refuse, warn, note, got 'later'
    """

    mode: Mode = setting(  # noqa: RUF009 (a field, as every setting(); ruff knows str, not Mode)
        "warn",
        Choice(MODES),
        "what a loop gets: warn: a note first, a refusal when the loop goes on (the default, "
        "everywhere); refuse it at once; note: a note every time",
    )
    cache_streams: bool = setting(False, Flag(), "cache streamed answers too")
    cache_sampled: bool = setting(
        False, Flag(), "serve sampled requests (temperature > 0, no seed) from the cache too"
    )
    cache_namespace: str | None = setting(
        None,
        _NON_EMPTY_OR_NONE,
        "the namespace answers are stored and served under (a request's own wins)",
    )
    shared_session: str | None = setting(
        None,
        _NON_EMPTY_OR_NONE,
        "the breaker's session of requests that name none (none: not counted; a scan: one)",
    )
    fail_closed: bool = setting(
        False, Flag(), "refuse, instead of forwarding, a request the guard failed to check"
    )
    warn_window: float = setting(
        600.0, Seconds(forever=True), "seconds a note is remembered (mode warn)"
    )
    note_early: bool = setting(
        True,
        Flag(),
        "mode warn: note a loop one count before the refusal (the detector's counts one lower)",
    )

    def __post_init__(self) -> None:
        check_fields(self)


class GuardOptions(TypedDict, total=False):
    """The keyword arguments of :class:`Guard`, for the integrations that build one."""

    breaker: LoopBreaker | _Default | None
    detector: Scanner | _Default | None
    cache: DedupCache[Any] | None
    mode: Mode
    cache_streams: bool
    cache_sampled: bool
    cache_namespace: str | None
    shared_session: str | None
    fail_closed: bool
    on_event: EventCallback | None
    clock: Callable[[], float] | None
    warn_window: float
    note_early: bool


class Guard:
    """Breaker, detector, mode and cache plan for one request body; shared by every
    integration and by ``loopfuse scan``.

    Its settings are a :class:`GuardSettings` (``Guard(mode="warn")`` changes one,
    ``Guard(settings, mode="warn")`` one of ``settings``; an unknown or refused setting is
    a :class:`~loopfuse.errors.ConfigError` naming it):

    - ``mode``: ``"warn"`` (the default, as in every integration, ``loopfuse scan`` and
      ``loopfuse hook``): note a looping request the first time, refuse it when the
      conversation the note was written into (known by its tool calls' provider ids; same
      session) goes on looping, in any way (the same loop, or another shape of it: a new
      kind or signature), or its newest calls failed again the very way the noted loop's
      calls failed (:mod:`loopfuse.detector.failures`), within ``warn_window`` of the
      note; ``"refuse"`` it at once; or forward it with a ``"note"`` for the model,
      every time.
    - ``note_early``: ``mode="warn"`` gives its note one count before the refusal (from
      :attr:`early_detector`: the detector's counts one notch lower), so the loop is
      refused where ``"refuse"`` refuses it, after a note; ``False``: the note where
      ``"refuse"`` refuses, the refusal one request later.
    - ``cache_streams``: cache streamed answers too (``stream: true``).
    - ``cache_sampled``: serve sampled requests (temperature above 0, no seed) from the
      cache too. Off by default: a caller asking for randomness gets a fresh sample.
    - ``cache_namespace``: the namespace answers are stored and served under (a
      request's own namespace, from its integration, wins); tenants in different
      namespaces never share an answer.
    - ``shared_session``: the breaker session of requests that name none (no session
      from the integration, no end user in the body). ``None`` (default): such requests
      are not counted, so unrelated users are never refused for each other.
    - ``fail_closed``: refuse, instead of forwarding, a request the guard failed to check.
    - ``warn_window``: seconds a note is remembered for ``mode="warn"`` (default 600).

    The guards and objects it runs with are keywords of their own
    (:meth:`loopfuse.Settings.build_guard` builds them all from one settings file):

    Args:
        breaker: a :class:`~loopfuse.LoopBreaker`; default ``LoopBreaker()`` (5 identical
            requests per 30 s per session); ``None`` turns it off.
        detector: a :class:`Scanner`; default :class:`loopfuse.detector.LoopDetector`
            with its measured thresholds; ``None`` turns it off.
        cache: a :class:`~loopfuse.DedupCache` of answers; default ``None`` (no cache:
            caching answers is an explicit choice).
        on_event: called with a :class:`~loopfuse.events.GuardEvent` for each decision
            (a request let through included) and each junk input.
        clock: seconds, for retries and notes; default the breaker's clock.

    A guard that fails internally lets the request through: one warning on the
    ``loopfuse`` logger, counted in :attr:`internal_errors`. Junk in an input (a
    non-string end-user id, a malformed ``Cache-Control``, an empty namespace) gets its
    documented fallback, counted in :attr:`input_fallbacks`.

    >>> from loopfuse import LoopBreaker, RequestContext
    >>> guard = Guard(breaker=LoopBreaker(max_repeats=1, clock=lambda: 0.0), mode="refuse")
    >>> body = b'{"model": "m", "messages": [{"role": "user", "content": "again?"}]}'
    >>> guard.check(body, RequestContext(session_id="s")).action
    'forward'
    >>> decision = guard.check(body, RequestContext(session_id="s"))
    >>> decision.action, decision.kind
    ('refuse', 'repeated_request')
    >>> guard.check(body).action  # no session, no end user in the body: not counted
    'forward'
    """

    def __init__(
        self,
        settings: GuardSettings | None = None,
        *,
        breaker: LoopBreaker | _Default | None = DEFAULT,
        detector: Scanner | _Default | None = DEFAULT,
        cache: DedupCache[Any] | None = None,
        on_event: EventCallback | None = None,
        clock: Callable[[], float] | None = None,
        **overrides: Unpack[GuardOverrides],
    ) -> None:
        self.settings: GuardSettings = configured(
            "Guard", GuardSettings, settings, overrides, "mode='warn'"
        )
        """The checked settings (read-only)."""
        if breaker is DEFAULT:
            breaker = LoopBreaker()
        elif breaker is not None and not isinstance(breaker, LoopBreaker):
            raise ConfigError(f"breaker must be a LoopBreaker or None, not {breaker!r}")
        if detector is DEFAULT:
            detector = _default_detector()
        elif detector is not None and not isinstance(detector, Scanner):
            raise ConfigError(
                f"detector must have scan(body) and scan_intent(intent) methods, not {detector!r}"
            )
        if cache is not None and not isinstance(cache, DedupCache):
            raise ConfigError(f"cache must be a DedupCache or None, not {cache!r}")
        if clock is not None and not callable(clock):
            raise ConfigError("clock must be a callable returning seconds as a float")
        self.breaker: LoopBreaker | None = breaker
        self.detector: Scanner | None = detector
        self.cache = cache
        if clock is None:
            clock = time.monotonic if breaker is None else breaker.clock
        self.clock: Callable[[], float] = clock
        self.events = EventSink(on_event)
        """Where the guard's events go (``events.errors`` counts a raising callback)."""
        self.internal_errors = 0
        """How many checks failed internally (let through unless ``fail_closed``)."""
        self.input_fallbacks = 0
        """How many junk inputs got their documented fallback."""
        self._retries = RetryLedger()
        self._notes = NoteMemory(_NOTES_KEPT, self.settings.warn_window)
        self._early = _early_twin(detector, self.settings)
        self._lock = threading.Lock()

    @property
    def mode(self) -> Mode:
        """What a loop gets (``settings.mode``)."""
        return self.settings.mode

    @property
    def early_detector(self) -> Scanner | None:
        """``mode="warn"`` with ``note_early``: the detector whose verdict gives the
        note, the guard's own with every count one notch lower
        (:meth:`LoopDetector.earlier <loopfuse.detector.LoopDetector.earlier>`); the
        refusal stays the guard's ``detector``'s. ``None`` in the other modes, with
        ``note_early=False``, or for a detector that is not a ``LoopDetector`` (its
        verdict then gives the note, as before).

        >>> Guard().early_detector.settings.max_strikes, Guard(mode="refuse").early_detector
        (2, None)
        """
        return self._early

    @property
    def cache_streams(self) -> bool:
        """Whether streamed answers are cached too (``settings.cache_streams``)."""
        return self.settings.cache_streams

    @property
    def cache_sampled(self) -> bool:
        """Whether sampled requests are served from the cache too (``settings.cache_sampled``)."""
        return self.settings.cache_sampled

    @property
    def cache_namespace(self) -> str | None:
        """The namespace answers are stored under (``settings.cache_namespace``)."""
        return self.settings.cache_namespace

    @property
    def shared_session(self) -> str | None:
        """The session of requests that name none (``settings.shared_session``)."""
        return self.settings.shared_session

    @property
    def fail_closed(self) -> bool:
        """Whether a request the guard failed to check is refused (``settings.fail_closed``)."""
        return self.settings.fail_closed

    # --- the ways in ---------------------------------------------------------------------

    def check(self, body: object, context: RequestContext | None = None) -> GuardDecision:
        """Decide ``body`` (``bytes``, ``str`` or a parsed mapping), sent in ``context``
        (what the caller knows about the request: its path, session, ...; see
        :class:`RequestContext`). A body that is not an LLM request of a known dialect
        is forwarded unchecked. :meth:`prepare` then :meth:`decide`, failing open.
        """
        begun = self._begin(body, context)
        if isinstance(begun, GuardDecision):
            return begun
        return self.decide(begun)

    async def acheck(self, body: object, context: RequestContext | None = None) -> GuardDecision:
        """:meth:`check` for asyncio: the breaker's store is awaited (an
        :class:`~loopfuse.stores.redis.AsyncRedisStore`, or a sync store in a worker
        thread), so the event loop never waits for it. The in-memory store is checked
        in line.

        >>> import asyncio
        >>> from loopfuse import LoopBreaker, RequestContext
        >>> guard = Guard(breaker=LoopBreaker(max_repeats=1, clock=lambda: 0.0), mode="refuse")
        >>> body = b'{"model": "m", "messages": [{"role": "user", "content": "again?"}]}'
        >>> asked = RequestContext(session_id="s")
        >>> [asyncio.run(guard.acheck(body, asked)).action for _ in range(2)]
        ['forward', 'refuse']
        """
        begun = self._begin(body, context)
        if isinstance(begun, GuardDecision):
            return begun
        return await self.adecide(begun)

    def prepare(
        self, body: object, context: RequestContext | None = None
    ) -> PreparedRequest | None:
        """The first step of :meth:`check`: one parse of ``body``, sent in ``context``.

        ``None`` for a body that is not an LLM request of a known dialect (``check``
        forwards those unchecked). An internal error is raised, not caught: ``check``
        would have let the request through (see :meth:`failure`).

        >>> prepared = Guard().prepare(b'{"input": "hi", "user": "u-1"}')
        >>> prepared.dialect, prepared.session
        ('openai_responses', 'u-1')
        """
        context = _checked(context)
        prepared, junk = request.prepare(body, context, self.settings.shared_session)
        if junk:
            self._fallbacks(junk, context.integration)
        if prepared is None:
            return None
        if not len(self._retries):  # no attempt has failed: nothing can be a retry
            return prepared
        retry, noted = self._retries.take((prepared.identity, prepared.fingerprint), self.clock())
        return replace(prepared, retry=retry, retry_noted=noted) if retry else prepared

    def decide(
        self,
        prepared: PreparedRequest,
        *,
        verdict: ScanVerdict | None = None,
        early: ScanVerdict | None = None,
    ) -> GuardDecision:
        """The second step of :meth:`check`: the decision on a request :meth:`prepare`
        made, failing open (or closed).

        ``verdict`` is the detector's verdict on the request, when the caller already has
        it (``loopfuse scan`` replays a conversation once for all its requests); left
        out, the detector is asked. It is only read when the detector is on and the
        breaker let the request go, as in ``check``. ``early`` is the verdict of
        :attr:`early_detector` (``mode="warn"``), when the caller has it; a caller that
        has only ``early`` and found no loop in it may pass it as ``verdict`` too (the
        early detector finds every loop the detector does, one count sooner). To have
        the breaker and the cache know a request by a name of the caller's, decide
        :meth:`PreparedRequest.named
        <loopfuse.guard.request.PreparedRequest.named>`.

        >>> from loopfuse import LoopBreaker
        >>> guard = Guard(breaker=LoopBreaker(max_repeats=1, clock=lambda: 0.0), mode="refuse")
        >>> body = b'{"model": "m", "messages": [{"role": "user", "content": "again?"}]}'
        >>> prepared = guard.prepare(body, RequestContext(session_id="s"))
        >>> [guard.decide(prepared).action for _ in range(2)]
        ['forward', 'refuse']
        """
        try:
            counted = None  # the one step that touches the breaker's store (adecide awaits it)
            breaker = self.breaker
            if breaker is not None and prepared.session is not None and not prepared.retry:
                counted = breaker.check(prepared.session, prepared.fingerprint)
            return self._finish(prepared, counted, verdict, early)
        except ConfigError:
            raise  # a sync check on an async-only store: a programming error, not a failure
        except Exception as exc:  # fail open (or closed): a guard never takes a request down
            return self.failure(exc, prepared.context)

    async def adecide(
        self,
        prepared: PreparedRequest,
        *,
        verdict: ScanVerdict | None = None,
        early: ScanVerdict | None = None,
    ) -> GuardDecision:
        """:meth:`decide` for asyncio: the breaker's store is awaited."""
        try:
            counted = None
            breaker = self.breaker
            if breaker is not None and prepared.session is not None and not prepared.retry:
                counted = await breaker.acheck(prepared.session, prepared.fingerprint)
            return self._finish(prepared, counted, verdict, early)
        except ConfigError:
            raise  # a misuse of the guard, not a request it failed to check
        except Exception as exc:  # fail open: a guard must never take the request path down
            return self.failure(exc, prepared.context)

    def check_prepared(
        self,
        prepared: PreparedRequest,
        *,
        verdict: ScanVerdict | None = None,
        cache_key: RequestKey | None = None,
    ) -> GuardDecision:
        """Deprecated: :meth:`decide` (a ``cache_key`` of the caller's is
        ``replace(prepared, key=cache_key)``, or :meth:`PreparedRequest.named
        <loopfuse.guard.request.PreparedRequest.named>` to name it for the breaker too)."""
        deprecated("Guard.check_prepared", "use Guard.decide")
        if cache_key is not None:
            prepared = replace(prepared, key=cache_key)
        return self.decide(prepared, verdict=verdict)

    # --- what integrations tell the guard -------------------------------------------------

    def outcome(
        self,
        decision: GuardDecision,
        status: int | None = None,
        *,
        error: BaseException | None = None,
        retry_after: float | None = None,
    ) -> None:
        """Tell the guard how a forwarded request ended upstream; never raises.

        ``status`` is the HTTP status, ``error`` the exception (a timeout, a connection
        error) when there was no response, ``retry_after`` the backoff in seconds the
        upstream asked for. After a failure (``408``, ``409``, ``429``, ``5xx``, an
        error), the next identical request of the same session is a retry: it is not
        counted by the breaker again, unless it comes before ``retry_after`` is up.
        After an answer, an identical request is a repeat and is counted.
        """
        attempt = decision.attempt
        if attempt is None:
            return
        try:
            key = (attempt.identity, attempt.fingerprint)
            if error is not None or (status is not None and retryable(status)):
                self._retries.failed(key, at=self.clock(), backoff=retry_after, noted=attempt.noted)
            else:
                self._retries.answered(key)
        except Exception as exc:  # reporting an outcome must never break the response path
            self.internal_error(exc, decision.integration)

    def input_fallback(self, reasons: list[str], integration: str | None = None) -> None:
        """Count junk inputs an integration met and fell back from (one event each)."""
        self._fallbacks(reasons, integration)

    def cache_event(self, decision: GuardDecision, outcome: str) -> None:
        """Emit the cache event of a request (``"hit"``, ``"miss"`` or ``"bypass"``), for
        integrations that look the cache up; nothing when no cache is configured."""
        action = _CACHE_ACTIONS.get(outcome)
        if self.cache is not None and action is not None:
            reason = decision.cache_reason if action == "cache_bypass" else None
            self._say(action, "cache", decision.session, None, reason, decision.integration)

    def failure(self, exc: BaseException, context: RequestContext | None = None) -> GuardDecision:
        """Count and log an internal failure; the decision for the request, sent in
        ``context``, that it hit.

        For integrations whose own preparation (reading a session id, say) fails:
        forward unchecked, or refuse (``kind="guard_failed"``) when ``fail_closed``.
        """
        context = _checked(context)
        error = repr(exc)
        self._count_failure(exc)
        integration = context.integration
        if not self.settings.fail_closed:
            self._say("fail_open", "guard", None, _GUARD_FAILED, error, integration)
            self._say("request_forwarded", "guard", None, None, "the guard failed", integration)
            return GuardDecision("forward", error=error, integration=integration)
        failed = Loop("guard_failed", "guard", message=_failed_message(error))
        self._say("fail_closed", "guard", None, failed, error, integration)
        return GuardDecision(
            "refuse",
            api=dialect_for(context.path, None),
            loop=failed,
            error=error,
            integration=integration,
            cache_reason="the guard failed",
        )

    def internal_error(self, exc: BaseException, integration: str | None = None) -> None:
        """Count and log an internal failure that decides no request (a cache that failed
        to store an answer already served, say): an event ``fail_open``, since whatever
        it hit goes on."""
        self._count_failure(exc)
        self._say("fail_open", "guard", None, _GUARD_FAILED, repr(exc), integration)

    def __repr__(self) -> str:
        return (
            f"Guard(breaker={self.breaker!r}, detector={self.detector!r}, cache={self.cache!r}, "
            f"mode={self.mode!r})"
        )

    # --- the decision --------------------------------------------------------------------

    def _begin(
        self, body: object, context: RequestContext | None
    ) -> PreparedRequest | GuardDecision:
        """:meth:`prepare` for ``check`` and ``acheck``, or the decision when there is
        nothing to check (not an LLM request) or the parse failed (fail open)."""
        context = _checked(context)  # a context that is not one is a misuse: it raises
        try:
            prepared = self.prepare(body, context)
        except Exception as exc:  # fail open: a guard must never take the request path down
            return self.failure(exc, context)
        if prepared is None:  # not an LLM request of a known dialect
            integration = context.integration
            self._say("request_forwarded", "guard", None, None, "not checked", integration)
            return GuardDecision("forward", integration=integration, cache_reason="not checked")
        return prepared

    def _finish(
        self,
        prepared: PreparedRequest,
        counted: LoopDecision | None,
        verdict: ScanVerdict | None,
        early: ScanVerdict | None = None,
    ) -> GuardDecision:
        """The decision on ``prepared``, given the breaker's count (``None``: not
        counted) and, when the caller has them, the detector's verdict and the early
        detector's."""
        if prepared.retry and self.breaker is not None and prepared.session is not None:
            self._about("retry_forgiven", "breaker", prepared, None, "a retry")
        loop: Loop | None = None
        if counted is not None:
            if counted.error is not None:
                if counted.allowed:
                    self._about("fail_open", "breaker", prepared, _BREAKER_FAILED, counted.error)
                else:
                    message = _failed_message(counted.error)
                    failed = Loop("guard_failed", "breaker", message=message)
                    decision = self._decided(prepared, "refuse", failed)
                    self._about("fail_closed", "breaker", prepared, failed, counted.error)
                    return decision
            else:
                loop = counted.loop
        if loop is None and prepared.retry_noted is not None:
            return self._note(prepared, prepared.retry_noted)  # a retry is noted like its try
        if loop is None and self.detector is not None:
            if self._early is not None:
                verdict, early = _verdicts(prepared, self._early, self.detector, verdict, early)
            elif verdict is None:
                verdict = self.detector.scan_intent(prepared.analysis.parsed_intent)
            loop = _loop_of(verdict)
        mode = self.settings.mode
        if loop is None:
            if mode == "warn" and verdict is not None and self._notes:
                again = self._failed_again(prepared, verdict)
                if again is not None:
                    return self._refuse(prepared, again)
            if early is not None:
                return self._note_early(prepared, early)
            return self._forward(prepared)
        if not loop.message:  # a detector of the caller's that gave no message
            loop = replace(loop, message=f"loopfuse: loop detected ({loop.kind})")
        if mode == "refuse":
            return self._refuse(prepared, loop)
        if mode == "warn":
            failure = _failure_name(verdict) if loop.guard == "detector" else None
            if self._notes.ignored(prepared, loop, self.clock(), failure):
                ignored = replace(loop, message=f"{loop.message} {_IGNORED_NOTE}")
                return self._refuse(prepared, ignored)
        return self._note(prepared, loop)

    def _note_early(self, prepared: PreparedRequest, early: ScanVerdict) -> GuardDecision:
        """``mode="warn"``: the note on a loop found one count before the detector
        refuses it. Its conversation is remembered as noted (the first note only), so
        the loop still going on at the detector's counts ignored it and is refused where
        ``mode="refuse"`` refuses it.

        Its failure is not remembered: a call failing again the way an *early* note's
        calls failed is not refused. That would stop runs ``refuse`` lets through, one
        notch inside every threshold's measured margin (on the populations: a resolved
        OpenHands run, and a resolved mini-swe-agent run only its harness's format
        reminder kept from it); a note given at the detector's counts still arms it.

        Which harnesses it could misfire on: any, but only as a note, never a refusal a
        run ``refuse`` lets through would not get: a healthy run one count short of a
        refusal is told it loops (on the populations, 3 healthy Claude Code sessions, a
        resolved mini-swe-agent run and a resolved OpenHands run that used its budget;
        none stopped). ``note_early=False`` turns it off."""
        loop = _loop_of(early)
        assert loop is not None
        # `ignored` remembers the conversation unless it was noted already; either way
        # an early loop is noted, never refused: the refusal is the detector's.
        self._notes.ignored(prepared, loop, self.clock())
        return self._note(prepared, loop)

    def _failed_again(self, prepared: PreparedRequest, verdict: ScanVerdict) -> Loop | None:
        """``mode="warn"``: the loop a note was given about in this conversation, when the
        request's newest calls failed again the way the calls that note came with failed
        (:meth:`NoteMemory.failed_again <loopfuse.guard.memory.NoteMemory.failed_again>`):
        the note was ignored, though no signal counted to its threshold again."""
        failure = getattr(verdict, "failure", None)  # a verdict of loopfuse's detector
        name = getattr(failure, "name", None)
        again = getattr(failure, "again", None)
        if type(name) is not str or not callable(again):
            return None
        noted = self._notes.failed_again(prepared, name, self.clock())
        if noted is None:
            return None
        message = f"{again()} {_IGNORED_NOTE}"
        tools = getattr(failure, "tools", None)
        if type(tools) is not tuple:
            tools = noted.tool_names
        return replace(noted, count=noted.count + 1, tool_names=tools, message=message)

    # Each way out says its decision once it is made: a step that fails before it (the
    # request then fails open or closed) leaves one decision event, not two.

    def _refuse(self, prepared: PreparedRequest, loop: Loop) -> GuardDecision:
        decision = self._decided(prepared, "refuse", loop)
        self._about("loop_refused", loop.guard, prepared, loop)
        return decision

    def _note(self, prepared: PreparedRequest, loop: Loop) -> GuardDecision:
        noted = add_note(prepared.value, f"[loopfuse] {loop.message}", prepared.api)
        if noted is None:  # no place for a note in this body: warn stops, note lets it go
            warn = self.settings.mode == "warn"
            return self._refuse(prepared, loop) if warn else self._forward(prepared)
        decision = self._decided(prepared, "note", loop, noted)
        self._about("loop_noted", loop.guard, prepared, loop)
        return decision

    def _forward(self, prepared: PreparedRequest) -> GuardDecision:
        if self.cache is None:
            decision = self._decided(
                prepared, "forward", None, cache_reason="no cache is configured"
            )
        else:
            settings = self.settings
            chosen, key = cache_plan.forwarded(
                prepared, settings.cache_streams, settings.cache_sampled, settings.cache_namespace
            )
            if chosen.junk:
                self._fallbacks(chosen.junk, prepared.context.integration)
            decision = self._decided(
                prepared,
                "forward",
                None,
                cache=chosen.use,
                cache_key=key,
                cache_reason=chosen.reason,
            )
        self._about("request_forwarded", "guard", prepared)
        return decision

    def _decided(
        self,
        prepared: PreparedRequest,
        action: Literal["forward", "refuse", "note"],
        loop: Loop | None,
        noted: object = None,
        *,
        cache: CacheUse = "bypass",
        cache_key: RequestKey | None = None,
        cache_reason: str | None = None,
    ) -> GuardDecision:
        """The decision: ``action`` for ``loop`` (if any); ``noted`` is the body with a
        note. The cache plan is a forwarded request's: one refused or noted for a loop
        bypasses the cache."""
        # Whether the breaker counts this session's requests, and counted this one (a
        # retry of a failed attempt it is not). Only then, or for a request noted (whose
        # retry is noted again), can a retry follow: only those need an Attempt (and so
        # a fingerprint).
        counts = self.breaker is not None and prepared.session is not None
        counted = counts and not prepared.retry
        attempt = None
        if counts or noted is not None:
            attempt = Attempt(
                prepared.identity, prepared.fingerprint, counted, None if noted is None else loop
            )
        return GuardDecision(
            action,
            prepared.value if noted is None else noted,
            prepared.dialect,
            prepared.api,
            loop,
            prepared.streaming,
            cache_key,
            None,
            prepared.session if counted else None,
            cache,
            cache_reason if loop is None else f"the request was {action}d",
            attempt,
            prepared.context.integration,
        )

    # --- counts and events ---------------------------------------------------------------

    def _count_failure(self, exc: BaseException) -> None:
        with self._lock:
            self.internal_errors += 1
        action = "refusing" if self.settings.fail_closed else "forwarding"
        logger.warning("loopfuse: guard check failed, %s the request: %r", action, exc)

    def _fallbacks(self, reasons: list[str] | tuple[str, ...], integration: str | None) -> None:
        """Count junk inputs that got their fallback, one event each."""
        if not reasons:
            return
        with self._lock:
            self.input_fallbacks += len(reasons)
        for reason in reasons:
            self._say("input_fallback", "guard", None, None, reason, integration)

    def _about(
        self,
        action: EventAction,
        guard: str,
        prepared: PreparedRequest,
        loop: Loop | None = None,
        reason: str | None = None,
    ) -> None:
        """An event about a prepared request (and the loop it is about, if any)."""
        self._say(action, guard, prepared.session, loop, reason, prepared.context.integration)

    def _say(
        self,
        action: EventAction,
        guard: str,
        session: str | None,
        loop: Loop | None,
        reason: str | None,
        integration: str | None,
    ) -> None:
        """An event; built only when there is a callback to receive it."""
        if self.events.enabled:
            self.events.emit(
                GuardEvent(
                    action, guard, session, reason=reason, integration=integration, loop=loop
                )
            )


_BREAKER_FAILED: Final = Loop("guard_failed", "breaker")
_GUARD_FAILED: Final = Loop("guard_failed", "guard")


def _failed_message(error: str) -> str:
    """The message of a request refused because a guard failed (``fail_closed``)."""
    return f"loopfuse: request refused because the loop guard failed: {error}"


def _checked(context: RequestContext | None) -> RequestContext:
    """``context``, or the empty one for ``None``; anything else is a misuse."""
    if context is None:
        return NO_CONTEXT
    if not isinstance(context, RequestContext):
        raise InvalidInputError(
            f"context must be a RequestContext or None, not {type(context).__name__}"
        )
    return context


def _verdicts(
    prepared: PreparedRequest,
    twin: Scanner,
    detector: Scanner,
    verdict: ScanVerdict | None,
    early: ScanVerdict | None,
) -> tuple[ScanVerdict, ScanVerdict | None]:
    """``mode="warn"`` with an early detector (``twin``): the detector's verdict, and the
    early detector's when it found a loop the detector did not (else ``None``).

    The early detector is asked first: its counts are lower, so a request it finds no
    loop in has none at the detector's counts either (``tests/test_detector_scan.py``
    checks it on generated runs; on the 61,666 requests of the real populations it held
    for every one), and the detector is asked only when the early one found one. A
    request costs one scan, as in the other modes."""
    intent_ = prepared.analysis.parsed_intent
    if verdict is not None and _loop_of(verdict) is not None:
        return verdict, None  # a loop at the detector's counts: noted or refused as one
    if early is None:
        early = twin.scan_intent(intent_)
    if _loop_of(early) is None:
        return (early if verdict is None else verdict), None
    if verdict is None:
        verdict = detector.scan_intent(intent_)
    return verdict, (early if _loop_of(verdict) is None else None)


def _early_twin(detector: Scanner | None, settings: GuardSettings) -> Scanner | None:
    """The detector whose verdict gives ``mode="warn"``'s early note (see
    :attr:`Guard.early_detector`), or ``None``."""
    if detector is None or settings.mode != "warn" or not settings.note_early:
        return None
    from loopfuse.detector import LoopDetector

    if type(detector) is not LoopDetector:  # a subclass may scan in its own way
        return None
    if detector.settings.earlier() is detector.settings:
        return None  # every count is at its lowest: the note comes with the refusal
    return detector.earlier()


def _default_detector() -> Scanner | None:
    """A ``LoopDetector()`` with its measured defaults, or ``None`` if it is unavailable."""
    try:
        from loopfuse.detector import LoopDetector
    except ImportError:  # pragma: no cover - the detector ships with loopfuse
        return None
    return LoopDetector()


def build_guard(guard: Guard | None, options: GuardOptions) -> Guard:
    """``guard``, or a new :class:`Guard` built from ``options``; never both (for the
    integrations, which take either).

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


def _failure_name(verdict: ScanVerdict | None) -> str | None:
    """The name of the failure the calls of a looping request got
    (:attr:`loopfuse.detector.Verdict.failure`), when its verdict tells it."""
    failure = getattr(verdict, "failure", None)
    name = getattr(failure, "name", None)
    return name if type(name) is str else None


def _loop_of(verdict: ScanVerdict) -> Loop | None:
    """The loop a detector's verdict names: its ``loop``. A verdict of a detector written
    before issue 19 (``ok``, ``kind``, ``signature``, ``count``, ``message``,
    ``tool_names``, and no ``loop``) still counts, deprecated, for a release."""
    try:
        return verdict.loop
    except AttributeError:
        if not hasattr(verdict, "ok"):
            raise
    deprecated(
        "a detector verdict without `loop`",
        "give it loop=loopfuse.Loop(...) or None (loopfuse.detector.Verdict does)",
    )
    old: Any = verdict
    if old.ok:
        return None
    names = old.tool_names
    return Loop(
        str(old.kind or "loop"),
        "detector",
        str(old.signature or ""),
        int(old.count or 0),
        tuple(names) if names else (),
        str(old.message or ""),
    )
