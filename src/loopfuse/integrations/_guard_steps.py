"""The :class:`~loopfuse.integrations.Guard` decision in two steps, for callers that
already hold part of it.

:meth:`Guard.check <loopfuse.integrations.Guard.check>` is one parse (``prepare``), the
breaker's count, then the decision. A caller that replays a recorded conversation
(``loopfuse scan``) walks it once and keeps one detector run going, so it has the
detector's verdict for each request before the guard would compute it; it also knows
which requests of the conversation are the same request. :meth:`PreparedChecks.prepare`
and :meth:`PreparedChecks.check_prepared` let it hand those in and still get exactly
the decision ``check`` makes: the same breaker count, the same order of the guards, the
same modes, cache plan, events and failing open.
"""

from __future__ import annotations

from typing import Protocol

from loopfuse.breaker import LoopDecision
from loopfuse.dedup import RequestKey
from loopfuse.integrations._decision import GuardDecision, ScanVerdict
from loopfuse.integrations._prepared import Prepared

__all__ = ["PreparedChecks"]


class _Steps(Protocol):
    """The steps of ``Guard.check`` (defined in ``_guard.py``)."""

    def _prepare(
        self,
        body: object,
        path: str,
        session_id: object,
        scope: str,
        streaming: bool | None,
        control: str | None,
        space: str | None,
        integration: str | None,
    ) -> Prepared | None: ...

    def _count(self, prepared: Prepared) -> LoopDecision | None: ...

    def _finish(
        self,
        prepared: Prepared,
        counted: LoopDecision | None,
        verdict: ScanVerdict | None = None,
        cache_key: RequestKey | None = None,
    ) -> GuardDecision: ...

    def failure(
        self, exc: BaseException, path: str = "", integration: str | None = None
    ) -> GuardDecision: ...


class PreparedChecks:
    """``prepare`` and ``check_prepared``: :meth:`Guard.check
    <loopfuse.integrations.Guard.check>` in two steps."""

    def prepare(
        self: _Steps,
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
        return self._prepare(
            body, path, session_id, scope, streaming, cache_control, namespace, integration
        )

    def check_prepared(
        self: _Steps,
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

        >>> from loopfuse import LoopBreaker
        >>> from loopfuse.integrations import Guard
        >>> guard = Guard(breaker=LoopBreaker(max_repeats=1, clock=lambda: 0.0))
        >>> body = b'{"model": "m", "messages": [{"role": "user", "content": "again?"}]}'
        >>> prepared = guard.prepare(body, session_id="s")
        >>> [guard.check_prepared(prepared).action for _ in range(2)]
        ['forward', 'refuse']
        """
        try:
            return self._finish(prepared, self._count(prepared), verdict, cache_key)
        except Exception as exc:  # fail open (or closed), as check() does
            return self.failure(exc, prepared.path, prepared.integration)
