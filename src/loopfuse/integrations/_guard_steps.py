"""The :class:`~loopfuse.integrations.Guard` decision taken other ways than ``check``.

:meth:`Guard.check <loopfuse.integrations.Guard.check>` is one parse (``_prepare``), the
breaker's count (``_count``, the one step that touches a store), then the decision
(``_finish``). Built on the same steps:

- :meth:`GuardSteps.acheck`, for asyncio: the same decision, with the breaker's store
  awaited, so the event loop never waits for it;
- :meth:`GuardSteps.prepare` and :meth:`GuardSteps.check_prepared`, ``check`` in two
  steps for a caller that already holds part of the decision. A caller that replays a
  recorded conversation (``loopfuse scan``) walks it once and keeps one detector run
  going, so it has the detector's verdict for each request before the guard would
  compute it; it also knows which requests of the conversation are the same request.
  It hands those in and still gets exactly the decision ``check`` makes: the same
  breaker count, the same order of the guards, the same modes, cache plan, events and
  failing open.
"""

from __future__ import annotations

from typing import Protocol

from loopfuse.breaker import LoopBreaker, LoopDecision
from loopfuse.dedup import RequestKey
from loopfuse.errors import ConfigError
from loopfuse.integrations._decision import GuardDecision, ScanVerdict
from loopfuse.integrations._prepared import Prepared

__all__ = ["GuardSteps"]


class _Steps(Protocol):
    """The steps of ``Guard.check`` (defined in ``_guard.py``)."""

    breaker: LoopBreaker | None

    def _begin(
        self,
        body: object,
        path: str,
        session_id: object,
        scope: str,
        streaming: bool | None,
        control: str | None,
        space: str | None,
        integration: str | None,
    ) -> Prepared | GuardDecision: ...

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


class GuardSteps:
    """``acheck``, ``prepare`` and ``check_prepared`` of :class:`~loopfuse.integrations.Guard`."""

    async def acheck(
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
    ) -> GuardDecision:
        """``check`` for asyncio (the same keywords and decisions): the breaker's store is
        awaited (an :class:`~loopfuse.stores.redis.AsyncRedisStore`, or a sync store in a
        worker thread), so the event loop never waits for it. The in-memory store is
        checked in line.

        >>> import asyncio
        >>> from loopfuse import LoopBreaker
        >>> from loopfuse.integrations import Guard
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
            # The one step that touches the breaker's store (acheck awaits it).
            return self._finish(prepared, self._count(prepared), verdict, cache_key)
        except ConfigError:
            raise  # a sync check on an async-only store: a programming error, not a failure
        except Exception as exc:  # fail open (or closed): a guard never takes a request down
            return self.failure(exc, prepared.path, prepared.integration)
