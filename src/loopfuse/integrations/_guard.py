"""``Guard``: the one check every integration runs before an LLM request goes out.

An integration (an HTTP transport, a framework hook) hands :meth:`Guard.check` the
request body it is about to send and gets back a :class:`GuardDecision`: forward it,
refuse it (with a message written for the model), or forward it with a note for the
model. The integration only translates that decision into its framework's terms, so
every integration refuses, notes, caches and fails open in exactly the same way.

One parse serves every guard:

1. :class:`~loopfuse.LoopBreaker` — the same request again and again in one session
   (retry storms, stateless loops). The session is the integration's (a header, a
   callable), else the end user the body names, else the opt-in ``shared_session``;
   with none, the request is not counted. A retry of an attempt that failed upstream
   is not counted again (see :meth:`Guard.outcome`);
2. a detector's ``scan_intent`` (by default :class:`loopfuse.detector.LoopDetector`) —
   the conversation ends in a tool-call loop, a cycle, or the same prose again and again;
3. the :class:`~loopfuse.DedupCache` plan — whether and under which key an answer may
   come from the cache (the integration does the lookup: only it knows what an answer is).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Final

from loopfuse.breaker import LoopBreaker
from loopfuse.dedup import DedupCache, RequestKey
from loopfuse.errors import ConfigError
from loopfuse.events import EventCallback, EventSink
from loopfuse.integrations import _prepared
from loopfuse.integrations._decision import (
    DEFAULT,
    GuardDecision,
    Mode,
    Scanner,
    ScanVerdict,
    _Default,
    failed_message,
)
from loopfuse.integrations._guard_steps import GuardSteps
from loopfuse.integrations._options import GuardOptions, checked_options, default_detector
from loopfuse.integrations._prepared import Prepared
from loopfuse.integrations._records import RetryLedger, TimedRecords, retryable
from loopfuse.integrations._reporting import Reporter
from loopfuse.integrations._shapes import error_format

__all__ = ["Guard", "GuardOptions", "build_guard", "default_detector"]

logger = logging.getLogger("loopfuse")

_NOTES_KEPT: Final = 10_000


class Guard(GuardSteps):
    """Breaker, detector and cache plan for one request body; shared by every integration.

    Args:
        breaker: a :class:`~loopfuse.LoopBreaker`; default ``LoopBreaker()`` (5 identical
            requests per 30 s per session); ``None`` turns it off.
        detector: a :class:`Scanner`; default :class:`loopfuse.detector.LoopDetector`
            with its measured thresholds; ``None`` turns it off.
        cache: a :class:`~loopfuse.DedupCache` of answers; default ``None`` (no cache:
            caching answers is an explicit choice).
        mode: ``"refuse"`` a looping request; forward it with a ``"note"`` for the model;
            or ``"warn"``: note it the first time, refuse it when the same loop (same
            session, kind and signature) goes on after the note in the conversation the
            note was written into (known by its tool calls' provider ids).
        cache_streams: cache streamed answers too (``stream: true``).
        cache_sampled: serve sampled requests (temperature above 0, no seed) from the
            cache too. Off by default: a caller asking for randomness gets a fresh sample.
        cache_namespace: the namespace answers are stored and served under (a request's
            own namespace, from its integration, wins); tenants in different namespaces
            never share an answer.
        shared_session: the breaker session of requests that name none (no session from
            the integration, no end user in the body). ``None`` (default): such requests
            are not counted, so unrelated users are never refused for each other.
        fail_closed: refuse, instead of forwarding, a request the guard failed to check.
        on_event: called with a :class:`~loopfuse.events.GuardEvent` for each decision.
        clock: seconds, for retries and notes; default the breaker's clock.
        warn_window: seconds a note is remembered for ``mode="warn"`` (default 600).

    A guard that fails internally lets the request through: one warning on the
    ``loopfuse`` logger, counted in :attr:`internal_errors`. Junk in an input (a
    non-string end-user id, a malformed ``Cache-Control``, an empty namespace) gets its
    documented fallback, counted in :attr:`input_fallbacks`.

    >>> guard = Guard(breaker=LoopBreaker(max_repeats=1, clock=lambda: 0.0))
    >>> body = b'{"model": "m", "messages": [{"role": "user", "content": "again?"}]}'
    >>> guard.check(body, session_id="s").action
    'forward'
    >>> decision = guard.check(body, session_id="s")
    >>> decision.action, decision.code
    ('refuse', 'repeated_request')
    >>> guard.check(body).action  # no session, no end user in the body: not counted
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
        cache_sampled: bool = False,
        cache_namespace: str | None = None,
        shared_session: str | None = None,
        fail_closed: bool = False,
        on_event: EventCallback | None = None,
        clock: Callable[[], float] | None = None,
        warn_window: float = 600.0,
    ) -> None:
        breaker, detector = checked_options(
            mode, breaker, detector, cache, cache_namespace, shared_session, clock
        )
        self.breaker = breaker
        self.detector = detector
        self.cache = cache
        self.mode = mode
        self.cache_streams = bool(cache_streams)
        self.cache_sampled = bool(cache_sampled)
        self.cache_namespace = cache_namespace
        self.shared_session = shared_session
        self.fail_closed = bool(fail_closed)
        if clock is None:
            clock = time.monotonic if self.breaker is None else self.breaker.clock
        self.clock = clock
        self.internal_errors = 0
        """How many checks failed internally (let through unless ``fail_closed``)."""
        self._report = Reporter(on_event)
        self._retries = RetryLedger()
        self._notes = TimedRecords(_NOTES_KEPT, warn_window)
        self._lock = threading.Lock()

    @property
    def events(self) -> EventSink:
        """Where the guard's events go (``events.errors`` counts a raising callback)."""
        return self._report.events

    @property
    def input_fallbacks(self) -> int:
        """How many junk inputs got their documented fallback."""
        return self._report.input_fallbacks

    def check(
        self,
        body: object,
        *,
        path: str = "",
        session_id: str | None = None,
        scope: str = "",
        streaming: bool | None = None,
        cache_control: str | None = None,
        namespace: str | None = None,
        integration: str | None = None,
    ) -> GuardDecision:
        """Run the guards on ``body`` (``bytes``, ``str`` or a parsed mapping).

        ``path`` is the request path (it picks the provider error shape and is part of
        the breaker's fingerprint). ``session_id`` is the integration's session for the
        breaker (a header, a callable); without one, the end user the body names, then
        ``shared_session``. ``scope`` (say, the scheme and host) keeps cached answers of
        different endpoints apart. ``streaming`` overrides what the body says.
        ``cache_control`` and ``namespace`` are the request's ``Cache-Control`` header
        and cache namespace, if any; ``integration`` names the caller in events.
        A body that is not an LLM request of a known dialect is forwarded unchecked.
        """
        begun = self._begin(
            body, path, session_id, scope, streaming, cache_control, namespace, integration
        )
        if not isinstance(begun, Prepared):
            return begun
        return self.check_prepared(begun)

    async def acheck(
        self,
        body: object,
        *,
        path: str = "",
        session_id: str | None = None,
        scope: str = "",
        streaming: bool | None = None,
        cache_control: str | None = None,
        namespace: str | None = None,
        integration: str | None = None,
    ) -> GuardDecision:
        """``check`` for asyncio (the same keywords and decisions): the breaker's store is
        awaited (an :class:`~loopfuse.stores.redis.AsyncRedisStore`, or a sync store in a
        worker thread), so the event loop never waits for it. The in-memory store is
        checked in line.

        >>> import asyncio
        >>> guard = Guard(breaker=LoopBreaker(max_repeats=1, clock=lambda: 0.0))
        >>> body = b'{"model": "m", "messages": [{"role": "user", "content": "again?"}]}'
        >>> [asyncio.run(guard.acheck(body, session_id="s")).action for _ in range(2)]
        ['forward', 'refuse']
        """
        begun = self._begin(
            body, path, session_id, scope, streaming, cache_control, namespace, integration
        )
        if not isinstance(begun, Prepared):
            return begun
        try:
            counted = None
            if self.breaker is not None and begun.session is not None and not begun.retry:
                counted = await self.breaker.acheck(begun.session, begun.fingerprint)
            return self._finish(begun, counted)
        except ConfigError:
            raise  # a misuse of the guard, not a request it failed to check
        except Exception as exc:  # fail open: a guard must never take the request path down
            return self.failure(exc, begun.path, begun.integration)

    def prepare(
        self,
        body: object,
        *,
        path: str = "",
        session_id: str | None = None,
        scope: str = "",
        streaming: bool | None = None,
        cache_control: str | None = None,
        namespace: str | None = None,
        integration: str | None = None,
    ) -> Prepared | None:
        """The first step of ``check``: one parse of ``body`` (the same keywords).

        ``None`` for a body that is not an LLM request of a known dialect (``check``
        forwards those unchecked). An internal error is raised, not caught:
        ``check`` would have let the request through (see ``Guard.failure``).
        """
        prepared, junk = _prepared.prepare(
            body,
            path=path,
            session_id=session_id,
            shared_session=self.shared_session,
            scope=scope,
            streaming=streaming,
            cache_control=cache_control,
            namespace=namespace,
            integration=integration,
        )
        self._report.fallbacks(junk, integration)
        if prepared is None:
            return None
        retry, noted = self._retries.take((prepared.identity, prepared.fingerprint), self.clock())
        return replace(prepared, retry=retry, retry_noted=noted) if retry else prepared

    def check_prepared(
        self,
        prepared: Prepared,
        *,
        verdict: ScanVerdict | None = None,
        cache_key: RequestKey | None = None,
    ) -> GuardDecision:
        """The rest of ``check`` for a request :meth:`prepare` made.

        ``verdict`` is the detector's verdict on the request and ``cache_key`` the key
        to plan the cache with, when the caller already has them; left out, they are
        computed as ``check`` computes them. A verdict is only read when the detector is
        on and the breaker let the request go, as in ``check``.

        >>> guard = Guard(breaker=LoopBreaker(max_repeats=1, clock=lambda: 0.0))
        >>> body = b'{"model": "m", "messages": [{"role": "user", "content": "again?"}]}'
        >>> prepared = guard.prepare(body, session_id="s")
        >>> [guard.check_prepared(prepared).action for _ in range(2)]
        ['forward', 'refuse']
        """
        try:
            counted = None  # the one step that touches the breaker's store (acheck awaits it)
            if self.breaker is not None and prepared.session is not None and not prepared.retry:
                counted = self.breaker.check(prepared.session, prepared.fingerprint)
            return self._finish(prepared, counted, verdict, cache_key)
        except ConfigError:
            raise  # a sync check on an async-only store: a programming error, not a failure
        except Exception as exc:  # fail open (or closed): a guard never takes a request down
            return self.failure(exc, prepared.path, prepared.integration)

    def _begin(
        self,
        body: object,
        path: str,
        session_id: str | None,
        scope: str,
        streaming: bool | None,
        control: str | None,
        space: str | None,
        integration: str | None,
    ) -> Prepared | GuardDecision:
        """:meth:`prepare` for ``check`` and ``acheck``, or the decision when there is
        nothing to check (not an LLM request) or the parse failed (fail open)."""
        try:
            prepared = self.prepare(
                body,
                path=path,
                session_id=session_id,
                scope=scope,
                streaming=streaming,
                cache_control=control,
                namespace=space,
                integration=integration,
            )
        except Exception as exc:  # fail open: a guard must never take the request path down
            return self.failure(exc, path, integration)
        if prepared is None:  # not an LLM request of a known dialect
            return GuardDecision("forward", integration=integration, cache_reason="not checked")
        return prepared

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
        if decision.attempt is None:
            return
        try:
            failed = error is not None or (status is not None and retryable(status))
            self._retries.report(decision.attempt, failed, self.clock(), retry_after)
        except Exception as exc:  # reporting an outcome must never break the response path
            self.failure(exc, integration=decision.integration)

    def input_fallback(self, reasons: list[str], integration: str | None = None) -> None:
        """Count junk inputs an integration met and fell back from (one event each)."""
        self._report.fallbacks(reasons, integration)

    def cache_event(self, decision: GuardDecision, outcome: str) -> None:
        """Emit the cache event of a request (``"hit"``, ``"miss"`` or ``"bypass"``), for
        integrations that look the cache up; nothing when no cache is configured."""
        if self.cache is not None:
            self._report.cache(decision, outcome)

    def failure(
        self, exc: BaseException, path: str = "", integration: str | None = None
    ) -> GuardDecision:
        """Count and log an internal failure; the decision for the request it hit.

        For integrations whose own preparation (reading a session id, say) fails:
        forward unchecked, or refuse with ``code="guard_failed"`` when ``fail_closed``.
        """
        with self._lock:
            self.internal_errors += 1
        action = "refusing" if self.fail_closed else "forwarding"
        logger.warning("loopfuse: guard check failed, %s the request: %r", action, exc)
        self._report.failed(self.fail_closed, repr(exc), integration)
        if not self.fail_closed:
            return GuardDecision("forward", error=repr(exc), integration=integration)
        return GuardDecision(
            "refuse",
            fmt=error_format(path, None),
            code="guard_failed",
            message=failed_message(repr(exc)),
            error=repr(exc),
            integration=integration,
            cache_reason="the guard failed",
        )

    def __repr__(self) -> str:
        return (
            f"Guard(breaker={self.breaker!r}, detector={self.detector!r}, cache={self.cache!r}, "
            f"mode={self.mode!r})"
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
