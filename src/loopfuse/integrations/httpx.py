"""HTTP transports that guard every LLM request an SDK sends: OpenAI, Anthropic, Ollama, ...

:class:`GuardTransport` (sync) and :class:`AsyncGuardTransport` wrap the transport of an
``httpx2`` or ``httpx`` client. The current ``openai`` and ``anthropic`` SDKs take an
``httpx2`` client; ``ollama``, older SDKs (and ``openai`` still) an ``httpx`` one. Both
work: each response is built with the library of its request. Before a request goes out
the transport runs its :class:`~loopfuse.integrations.Guard` on the body:

- by default (``mode="warn"``) the first request found looping goes out with a short
  note for the model; if the same loop goes on after the note, the request is
  **refused**: answered at once with a synthetic HTTP 400 in the provider's own error
  shape and ``x-should-retry: false``, so the SDK raises its ordinary ``BadRequestError``
  carrying loopfuse's message, and does not retry (``mode="refuse"`` refuses at once,
  ``mode="note"`` only ever notes);
- with a ``cache``, an identical request is answered from it: a synthetic 200 with the
  cached body; concurrent identical requests make one upstream call. Every checked
  request's response says ``x-loopfuse-cache: hit | miss | bypass``; the request's
  ``Cache-Control: no-cache`` / ``no-store`` and its ``x-loopfuse-cache-namespace``
  header are honoured. Streamed answers pass through uncached unless ``cache_streams=True``.

Only ``POST`` requests with a JSON body to an LLM endpoint (``paths``, default
:data:`DEFAULT_PATHS`) are checked; everything else (embeddings, files, ``GET``) passes
through untouched, as does a body that is not an LLM request of a known dialect.

The breaker's session is the ``x-session-id`` header (``session_header``), else
``session_id(request)``, else the end user the body names (OpenAI ``safety_identifier`` /
``user``, Anthropic ``metadata.user_id``), else the guard's opt-in ``shared_session``;
a request with none is not counted by the breaker. Upstream errors reach the SDK
unchanged, and a retry of an attempt that failed upstream (``429``, ``5xx``, a timeout)
is not counted again.

Examples need the extra, so they are not run here; docs/integrations/httpx.md runs them.

>>> import httpx2, openai  # doctest: +SKIP
>>> from loopfuse.integrations.httpx import GuardTransport
>>> transport = GuardTransport(httpx2.HTTPTransport())  # doctest: +SKIP
>>> http_client = httpx2.Client(transport=transport)  # doctest: +SKIP
>>> client = openai.OpenAI(api_key="sk-...", http_client=http_client)  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Final

from loopfuse.dedup import SingleFlightReentryError, SingleFlightTimeoutError
from loopfuse.integrations._decision import GuardDecision
from loopfuse.integrations._extras import installed
from loopfuse.integrations._guard import Guard, GuardOptions, build_guard
from loopfuse.integrations._http import (
    DEFAULT_PATHS,
    HTTPAnswer,
    SessionResolver,
    TransportCore,
    Uncached,
)

if TYPE_CHECKING:
    from httpx2 import AsyncBaseTransport as _AsyncBase
    from httpx2 import BaseTransport as _SyncBase
    from httpx2 import Request, Response
    from typing_extensions import Unpack
else:

    def _bases() -> tuple[type, type]:
        # Derive from the base transports of every installed library, so that code
        # checking isinstance(transport, httpx2.BaseTransport) (or httpx's) accepts ours.
        modules = [importlib.import_module(n) for n in ("httpx2", "httpx") if installed(n)]
        sync = tuple(module.BaseTransport for module in modules) or (object,)
        async_ = tuple(module.AsyncBaseTransport for module in modules) or (object,)
        return type("BaseTransport", sync, {}), type("AsyncBaseTransport", async_, {})

    _SyncBase, _AsyncBase = _bases()

__all__ = ["DEFAULT_MODE", "DEFAULT_PATHS", "AsyncGuardTransport", "GuardTransport", "HTTPAnswer"]

DEFAULT_MODE: Final = "warn"
"""The transports' default ``mode``: a note first, a refusal when the loop goes on. The
transport sits under code it cannot see; a refusal is an exception that code may not
handle, while a note lets a capable model leave the loop by itself, for one more call."""

_SINGLE_FLIGHT_ERRORS = (SingleFlightTimeoutError, SingleFlightReentryError)


class GuardTransport(TransportCore, _SyncBase):
    """A sync transport that runs loopfuse's guards before each LLM request.

    Args:
        inner: the transport that really sends requests (``httpx2.HTTPTransport()``,
            ``httpx.HTTPTransport()``, a mock in tests).
        guard: a :class:`~loopfuse.integrations.Guard` (share one between transports to
            share its breaker and cache); or leave it out and pass the guard's options
            (``breaker``, ``detector``, ``cache``, ``mode`` (default ``"warn"``),
            ``cache_streams``, ``cache_sampled``, ``cache_namespace``,
            ``shared_session``, ``fail_closed``, ``on_event``) here.
        session_header: the header carrying the session id.
        session_id: ``session_id(request) -> str | None``, tried after the header.
        namespace_header: the header carrying a request's cache namespace.
        paths: path endings of the requests to check.

    >>> import httpx2  # doctest: +SKIP
    >>> from loopfuse import DedupCache
    >>> inner = httpx2.HTTPTransport()  # doctest: +SKIP
    >>> GuardTransport(inner, mode="note", cache=DedupCache()).guard.mode  # doctest: +SKIP
    'note'
    """

    def __init__(
        self,
        inner: _SyncBase,
        guard: Guard | None = None,
        *,
        session_header: str | None = "x-session-id",
        session_id: SessionResolver | None = None,
        namespace_header: str | None = "x-loopfuse-cache-namespace",
        paths: Iterable[str] = DEFAULT_PATHS,
        **options: Unpack[GuardOptions],
    ) -> None:
        if guard is None:
            options.setdefault("mode", DEFAULT_MODE)
        self._configure(
            build_guard(guard, options), session_header, session_id, namespace_header, paths
        )
        self.inner = inner

    def handle_request(self, request: Request) -> Response:
        """Check ``request``; refuse it, answer it from the cache, or send it on."""
        if not self.wants(request):
            return self.inner.handle_request(request)
        decision = self.decide(request, request.read())
        if decision.refused:
            self.guard.cache_event(decision, "bypass")
            return self.refusal(request, decision)
        outgoing = self.outgoing(request, decision)
        cache, key = self.guard.cache, decision.cache_key
        if cache is None or key is None:
            self.guard.cache_event(decision, "bypass")
            return self.marked(self._send(outgoing, decision), "bypass")
        fetched: list[Response] = []

        def fetch() -> HTTPAnswer:
            response = self._send(outgoing, decision)
            if not self.cacheable(response):
                raise Uncached(response)
            try:
                content = response.read()
            finally:
                response.close()
            fetched.append(response)
            return self.answer(response, content)

        try:
            if decision.cache == "refresh":  # Cache-Control: no-cache
                answer = fetch()
                self.store(cache, key, answer, decision)
            else:
                answer = cache.get_or_compute(key, fetch)
        except Uncached as uncached:
            self.guard.cache_event(decision, "miss")
            return self.marked(uncached.response, "miss")
        except _SINGLE_FLIGHT_ERRORS:  # another caller's answer never came: ask ourselves
            self.guard.cache_event(decision, "miss")
            return self.marked(self._send(outgoing, decision), "miss")
        self.guard.cache_event(decision, "miss" if fetched else "hit")
        return self.replay(request, answer, fetched[0] if fetched else None)

    def _send(self, outgoing: Request, decision: GuardDecision) -> Response:
        try:
            response = self.inner.handle_request(outgoing)
        except Exception as exc:  # a timeout, a connection error: the SDK may retry it
            self.guard.outcome(decision, error=exc)
            raise
        return self.reported(decision, response)

    def close(self) -> None:
        """Close the inner transport."""
        self.inner.close()

    def __enter__(self) -> GuardTransport:
        self.inner.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        self.inner.__exit__(exc_type, exc_value, traceback)

    def __repr__(self) -> str:
        return f"GuardTransport({self.inner!r}, {self.guard!r})"


class AsyncGuardTransport(TransportCore, _AsyncBase):
    """:class:`GuardTransport` for async clients (``httpx2.AsyncClient``, ``httpx.AsyncClient``).

    Same arguments; ``inner`` is an async transport such as ``httpx2.AsyncHTTPTransport()``.
    Concurrent identical requests of one event loop make one upstream call.

    >>> import httpx2  # doctest: +SKIP
    >>> inner = httpx2.AsyncHTTPTransport()  # doctest: +SKIP
    >>> AsyncGuardTransport(inner, breaker=None).guard.breaker is None  # doctest: +SKIP
    True
    """

    def __init__(
        self,
        inner: _AsyncBase,
        guard: Guard | None = None,
        *,
        session_header: str | None = "x-session-id",
        session_id: SessionResolver | None = None,
        namespace_header: str | None = "x-loopfuse-cache-namespace",
        paths: Iterable[str] = DEFAULT_PATHS,
        **options: Unpack[GuardOptions],
    ) -> None:
        if guard is None:
            options.setdefault("mode", DEFAULT_MODE)
        self._configure(
            build_guard(guard, options), session_header, session_id, namespace_header, paths
        )
        self.inner = inner

    async def handle_async_request(self, request: Request) -> Response:
        """Check ``request``; refuse it, answer it from the cache, or send it on."""
        if not self.wants(request):
            return await self.inner.handle_async_request(request)
        decision = await self.adecide(request, await request.aread())
        if decision.refused:
            self.guard.cache_event(decision, "bypass")
            return self.refusal(request, decision)
        outgoing = self.outgoing(request, decision)
        cache, key = self.guard.cache, decision.cache_key
        if cache is None or key is None:
            self.guard.cache_event(decision, "bypass")
            return self.marked(await self._send(outgoing, decision), "bypass")
        fetched: list[Response] = []

        async def fetch() -> HTTPAnswer:
            response = await self._send(outgoing, decision)
            if not self.cacheable(response):
                raise Uncached(response)
            try:
                content = await response.aread()
            finally:
                await response.aclose()
            fetched.append(response)
            return self.answer(response, content)

        try:
            if decision.cache == "refresh":  # Cache-Control: no-cache
                answer = await fetch()
                await self.astore(cache, key, answer, decision)
            else:
                answer = await cache.aget_or_compute(key, fetch)
        except Uncached as uncached:
            self.guard.cache_event(decision, "miss")
            return self.marked(uncached.response, "miss")
        except _SINGLE_FLIGHT_ERRORS:  # another task's answer never came: ask ourselves
            self.guard.cache_event(decision, "miss")
            return self.marked(await self._send(outgoing, decision), "miss")
        self.guard.cache_event(decision, "miss" if fetched else "hit")
        return self.replay(request, answer, fetched[0] if fetched else None)

    async def _send(self, outgoing: Request, decision: GuardDecision) -> Response:
        try:
            response = await self.inner.handle_async_request(outgoing)
        except Exception as exc:  # a timeout, a connection error: the SDK may retry it
            self.guard.outcome(decision, error=exc)
            raise
        return self.reported(decision, response)

    async def aclose(self) -> None:
        """Close the inner transport."""
        await self.inner.aclose()

    async def __aenter__(self) -> AsyncGuardTransport:
        await self.inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        await self.inner.__aexit__(exc_type, exc_value, traceback)

    def __repr__(self) -> str:
        return f"AsyncGuardTransport({self.inner!r}, {self.guard!r})"
