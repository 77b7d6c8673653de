"""HTTP transports that guard every LLM request an SDK sends: OpenAI, Anthropic, Ollama, ...

:class:`GuardTransport` (sync) and :class:`AsyncGuardTransport` wrap the transport of an
``httpx2`` or ``httpx`` client. The current ``openai`` and ``anthropic`` SDKs take an
``httpx2`` client; ``ollama``, older SDKs (and ``openai`` still) an ``httpx`` one. Both
work: each response is built with the library of its request. Before a request goes out
the transport runs its :class:`~loopfuse.Guard` on the body:

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

``httpx2`` and ``httpx`` have the same request/response API but distinct classes, and a
client only accepts responses of its own library. So this module imports neither: the
library is read off each request (it is necessarily imported already) and the synthetic
responses are built with that library's ``Response``. Types are spelled with ``httpx2``'s
names for the checker; at run time either library's objects flow through.

For the OpenAI and Anthropic SDKs, :func:`guard_client` does it in one line: it takes the
client you made (sync or async) and returns its copy on a guarded HTTP client.

Examples need the extra, so they are not run here; docs/integrations/httpx.md runs them.

>>> import openai  # doctest: +SKIP
>>> from loopfuse.integrations.httpx import guard_client
>>> client = guard_client(openai.OpenAI(api_key="sk-..."))  # doctest: +SKIP

which is, spelled out:

>>> import httpx2  # doctest: +SKIP
>>> from loopfuse.integrations.httpx import GuardTransport
>>> transport = GuardTransport(httpx2.HTTPTransport())  # doctest: +SKIP
>>> http_client = httpx2.Client(transport=transport)  # doctest: +SKIP
>>> client = openai.OpenAI(api_key="sk-...", http_client=http_client)  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeVar, cast

from loopfuse.dedup import (
    DedupCache,
    RequestKey,
    SingleFlightReentryError,
    SingleFlightTimeoutError,
)
from loopfuse.errors import ConfigError, InvalidInputError
from loopfuse.guard import Guard, GuardDecision, RequestContext
from loopfuse.guard.guard import GuardOptions, GuardSettings, build_guard
from loopfuse.integrations._extras import installed, require
from loopfuse.intent import MAX_BODY_BYTES, json_bytes

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

__all__ = [
    "CACHE_HEADER",
    "DEFAULT_MODE",
    "DEFAULT_PATHS",
    "AsyncGuardTransport",
    "GuardTransport",
    "HTTPAnswer",
    "SessionResolver",
    "guard_client",
    "retry_after",
]

DEFAULT_MODE: Final = GuardSettings().mode  # the one default (warn), read, not repeated
"""The transports' default ``mode``: a note first, a refusal when the loop goes on. The
transport sits under code it cannot see; a refusal is an exception that code may not
handle, while a note lets a capable model leave the loop by itself, for one more call."""

DEFAULT_PATHS: Final = (
    "/chat/completions",
    "/responses",
    "/messages",
    ":generateContent",
    ":streamGenerateContent",
    "/api/chat",
)
"""Path endings of the LLM endpoints checked by default: OpenAI Chat Completions and
Responses (and every server compatible with them), Anthropic Messages, Gemini, Ollama."""

SessionResolver = Callable[["Request"], "str | None"]
"""Reads a session id off a request; ``None`` falls back to the body's end user."""

CACHE_HEADER: Final = "x-loopfuse-cache"
"""The response header saying where a guarded answer came from: ``hit``, ``miss``, ``bypass``."""

_SINGLE_FLIGHT_ERRORS = (SingleFlightTimeoutError, SingleFlightReentryError)
_STREAM_TYPES: Final = ("text/event-stream", "application/x-ndjson", "application/jsonl")
# Headers that describe the upstream bytes on the wire, not the decoded body we replay.
_WIRE_HEADERS: Final = frozenset(
    {"content-encoding", "content-length", "transfer-encoding", "connection", "keep-alive"}
)


@dataclass(frozen=True, slots=True)
class HTTPAnswer:
    """An answer kept in the cache: status, content type and the decoded body."""

    status_code: int
    content_type: str
    content: bytes


class _Uncached(Exception):
    """Raised out of a cache computation to hand back an answer that must not be cached."""

    def __init__(self, response: Response) -> None:
        super().__init__("uncacheable response")
        self.response = response


def _library(request: Request) -> ModuleType:
    """The HTTP library (``httpx2`` or ``httpx``) that ``request`` belongs to."""
    for name in ("httpx2", "httpx"):
        module = sys.modules.get(name)
        if module is not None and isinstance(request, module.Request):
            return module
    raise InvalidInputError(f"not an httpx2 or httpx request: {type(request).__name__}")


def _response(request: Request, status: int, headers: Any, content: bytes) -> Response:
    response: Response = _library(request).Response(
        status, headers=headers, content=content, request=request
    )
    return response


class _Transport:
    """What :class:`GuardTransport` and :class:`AsyncGuardTransport` share: their
    configuration, checked here once, and the steps of a request around the guard."""

    _handler: ClassVar[str]
    """The method an inner transport of this kind has."""

    def __init__(
        self,
        inner: Any,
        guard: Guard | None = None,
        *,
        session_header: str | None = "x-session-id",
        session_id: SessionResolver | None = None,
        namespace_header: str | None = "x-loopfuse-cache-namespace",
        paths: Iterable[str] = DEFAULT_PATHS,
        **options: Unpack[GuardOptions],
    ) -> None:
        name = type(self).__name__
        require("httpx2", "httpx", extra="openai", what=name)
        if not callable(getattr(inner, self._handler, None)):
            raise ConfigError(
                f"{name} needs the transport that sends requests (one with "
                f"{self._handler}()), not {inner!r}"
            )
        for option, header in (
            ("session_header", session_header),
            ("namespace_header", namespace_header),
        ):
            if header is not None and not (isinstance(header, str) and header):
                raise ConfigError(f"{option} must be a header name or None")
        if session_id is not None and not callable(session_id):
            raise ConfigError("session_id must be a callable taking the request, or None")
        if isinstance(paths, str):
            raise ConfigError("paths must be a collection of path endings, not one string")
        suffixes = tuple(paths)
        if not all(isinstance(path, str) and path for path in suffixes):
            raise ConfigError("paths must be non-empty strings (endings of request paths)")
        self.inner = inner
        self.guard = build_guard(guard, options)
        self.session_header = session_header
        self.session_id = session_id
        self.namespace_header = namespace_header
        self.paths = suffixes

    def wants(self, request: Request) -> bool:
        """Whether ``request`` is an LLM call this transport checks."""
        if request.method != "POST" or not request.url.path.endswith(self.paths):
            return False
        if "json" not in request.headers.get("content-type", "").lower():
            return False
        length = request.headers.get("content-length", "0").strip()
        return not (length.isdigit() and int(length) > MAX_BODY_BYTES)

    def decide(self, request: Request, body: bytes) -> GuardDecision:
        """Run the guard on ``body``, the content of ``request``."""
        asked = self._context(request)
        if isinstance(asked, GuardDecision):
            return asked
        return self.guard.check(body, asked)

    async def adecide(self, request: Request, body: bytes) -> GuardDecision:
        """:meth:`decide` for asyncio: the breaker's store is awaited, never waited for."""
        asked = self._context(request)
        if isinstance(asked, GuardDecision):
            return asked
        return await self.guard.acheck(body, asked)

    def _context(self, request: Request) -> RequestContext | GuardDecision:
        """What the guard is told about ``request``, or the decision when resolving its
        session failed."""
        url = request.url
        try:
            session = self._session(request)
        except Exception as exc:  # a resolver that raises fails open, like the guard
            return self.guard.failure(exc, RequestContext(path=url.path, integration="httpx"))
        headers = request.headers
        space = None if self.namespace_header is None else headers.get(self.namespace_header)
        return RequestContext(
            url.path,
            session,
            f"{url.scheme}://{url.host}:{url.port or ''}",
            None,
            headers.get("cache-control"),
            space,
            "httpx",
        )

    def _session(self, request: Request) -> str | None:
        """The session header, else ``session_id(request)``; ``None`` leaves it to the
        guard (the body's end user, then the guard's ``shared_session``)."""
        if self.session_header is not None:
            header = request.headers.get(self.session_header)
            if header:
                return header
        if self.session_id is not None:
            session = self.session_id(request)
            if session is not None and not isinstance(session, str):
                raise InvalidInputError(
                    f"session_id returned a {type(session).__name__}, not a str"
                )
            return session
        return None

    @staticmethod
    def outgoing(request: Request, decision: GuardDecision) -> Request:
        """The request to send: ``request`` itself, or a copy carrying the noted body."""
        if decision.action != "note":
            return request
        try:
            content = json_bytes(decision.value)
        except (TypeError, ValueError, RecursionError):
            return request  # a note that cannot be written: the body as the client sent it
        headers = [
            (name, value)
            for name, value in request.headers.multi_items()
            if name.lower() != "content-length"
        ]
        noted: Request = _library(request).Request(
            request.method,
            request.url,
            headers=headers,
            content=content,
            extensions=request.extensions,
        )
        return noted

    @staticmethod
    def refusal(request: Request, decision: GuardDecision) -> Response:
        """The synthetic HTTP 400 for a refused request, in the provider's error shape."""
        kind = decision.kind or "loop"
        headers = {
            "content-type": "application/json",
            "x-should-retry": "false",
            "x-loopfuse-refused": kind,
            CACHE_HEADER: "bypass",
        }
        return _response(
            request, 400, headers, decision.api.error_body(kind, decision.message or "")
        )

    @staticmethod
    def marked(response: Response, where: str) -> Response:
        """``response``, saying where its answer came from (``x-loopfuse-cache``)."""
        response.headers[CACHE_HEADER] = where
        return response

    def reported(self, decision: GuardDecision, response: Response) -> Response:
        """Tell the guard how the upstream answered ``decision``'s request."""
        self.guard.outcome(decision, response.status_code, retry_after=retry_after(response))
        return response

    def store(
        self, cache: DedupCache[Any], key: RequestKey, answer: HTTPAnswer, decision: GuardDecision
    ) -> None:
        """Keep a fresh answer (``Cache-Control: no-cache``); a cache that fails is counted
        and the answer served regardless."""
        try:
            cache.insert(key, answer)
        except Exception as exc:  # the answer is already here: serve it
            self.guard.internal_error(exc, decision.integration)

    async def astore(
        self, cache: DedupCache[Any], key: RequestKey, answer: HTTPAnswer, decision: GuardDecision
    ) -> None:
        """:meth:`store` for asyncio (an async store is awaited)."""
        try:
            await cache.ainsert(key, answer)
        except Exception as exc:  # the answer is already here: serve it
            self.guard.internal_error(exc, decision.integration)

    def cacheable(self, response: Response) -> bool:
        """Whether an upstream response may be kept (a 200; a stream only if configured)."""
        if response.status_code != 200:
            return False
        kind = response.headers.get("content-type", "").lower()
        return self.guard.cache_streams or not kind.startswith(_STREAM_TYPES)

    @staticmethod
    def answer(response: Response, content: bytes) -> HTTPAnswer:
        """What to cache of ``response``, whose decoded body is ``content``."""
        kind = response.headers.get("content-type", "application/json")
        return HTTPAnswer(response.status_code, kind, content)

    @staticmethod
    def replay(request: Request, answer: HTTPAnswer, upstream: Response | None) -> Response:
        """A response serving ``answer``: a cache hit, or (``upstream`` given) the answer
        just fetched, with the upstream headers that still describe the decoded body."""
        if upstream is None:
            headers = [("content-type", answer.content_type), (CACHE_HEADER, "hit")]
        else:
            headers = [
                (name, value)
                for name, value in upstream.headers.multi_items()
                if name.lower() not in _WIRE_HEADERS and name.lower() != CACHE_HEADER
            ]
            headers.append((CACHE_HEADER, "miss"))
        return _response(request, answer.status_code, headers, answer.content)


class GuardTransport(_Transport, _SyncBase):
    """A sync transport that runs loopfuse's guards before each LLM request.

    Args:
        inner: the transport that really sends requests (``httpx2.HTTPTransport()``,
            ``httpx.HTTPTransport()``, a mock in tests).
        guard: a :class:`~loopfuse.Guard` (share one between transports to
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

    _handler = "handle_request"
    inner: _SyncBase

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
                raise _Uncached(response)
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
        except _Uncached as uncached:
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


class AsyncGuardTransport(_Transport, _AsyncBase):
    """:class:`GuardTransport` for async clients (``httpx2.AsyncClient``, ``httpx.AsyncClient``).

    Same arguments; ``inner`` is an async transport such as ``httpx2.AsyncHTTPTransport()``.
    Concurrent identical requests of one event loop make one upstream call.

    >>> import httpx2  # doctest: +SKIP
    >>> inner = httpx2.AsyncHTTPTransport()  # doctest: +SKIP
    >>> AsyncGuardTransport(inner, breaker=None).guard.breaker is None  # doctest: +SKIP
    True
    """

    _handler = "handle_async_request"
    inner: _AsyncBase

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
                raise _Uncached(response)
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
        except _Uncached as uncached:
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


def retry_after(response: Response) -> float | None:
    """The backoff, in seconds, an upstream response asks for (``retry-after-ms``, else a
    numeric ``retry-after``); ``None`` when it asks for none (an HTTP date counts as none).
    """
    headers = response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            seconds = float(raw) * scale
        except ValueError:
            continue
        if seconds == seconds and 0 < seconds < float("inf"):
            return seconds
    return None


_SDKClient = TypeVar("_SDKClient")


def guard_client(
    client: _SDKClient,
    guard: Guard | None = None,
    *,
    transport: Any = None,
    session_header: str | None = "x-session-id",
    session_id: SessionResolver | None = None,
    namespace_header: str | None = "x-loopfuse-cache-namespace",
    paths: Iterable[str] = DEFAULT_PATHS,
    **options: Unpack[GuardOptions],
) -> _SDKClient:
    """``client``, an OpenAI or Anthropic SDK client, on loopfuse's guard: the one line.

    Works for the clients people make: ``openai.OpenAI``, ``openai.AsyncOpenAI`` (and
    Azure's), ``anthropic.Anthropic``, ``anthropic.AsyncAnthropic``, and every client of an
    SDK built the same way (one with ``with_options(http_client=...)`` and a
    ``DefaultHttpxClient``). It returns the SDK's own copy of ``client`` (same key, base
    URL, retries, timeout, headers) whose HTTP client sends through a
    :class:`GuardTransport` (:class:`AsyncGuardTransport` for an async client) over a new
    connection pool of the SDK's HTTP library, sized as the SDK sizes its own.

    Args:
        client: the SDK client to guard. A client given its own ``http_client`` (a proxy,
            certificates) loses it: guard that one with :class:`GuardTransport` instead.
        guard, session_header, session_id, namespace_header, paths, options: as for
            :class:`GuardTransport` (``cache=DedupCache(...)``, ``mode=...``, ...).
        transport: the transport that really sends the requests (default: the SDK's HTTP
            library's ``HTTPTransport``; a proxy's, or a mock in tests).

    Raises:
        ConfigError: ``client`` is not a client of such an SDK.

    >>> try:
    ...     guard_client(object())
    ... except ConfigError as exc:
    ...     print(str(exc).split(" (")[0])
    guard_client takes an OpenAI or Anthropic SDK client
    """
    copy = getattr(client, "with_options", None)
    sdk = sys.modules.get(type(client).__module__.partition(".")[0])
    asynchronous = inspect.iscoroutinefunction(getattr(client, "close", None))
    default = getattr(
        sdk, "DefaultAsyncHttpxClient" if asynchronous else "DefaultHttpxClient", None
    )
    library = _http_library(default)
    if not callable(copy) or sdk is None or library is None:
        raise ConfigError(
            "guard_client takes an OpenAI or Anthropic SDK client (one with "
            f"with_options(http_client=...)), not {type(client).__name__}; for another "
            "client, give its HTTP client transport=GuardTransport(...)"
        )
    if transport is None:
        limits = getattr(sdk, "DEFAULT_CONNECTION_LIMITS", None)
        sender = library.AsyncHTTPTransport if asynchronous else library.HTTPTransport
        transport = sender() if limits is None else sender(limits=limits)
    wrapper = AsyncGuardTransport if asynchronous else GuardTransport
    guarded = wrapper(
        transport,
        guard,
        session_header=session_header,
        session_id=session_id,
        namespace_header=namespace_header,
        paths=paths,
        **options,
    )
    settings: dict[str, Any] = {"transport": guarded, "follow_redirects": True}
    timeout = getattr(sdk, "DEFAULT_TIMEOUT", None)
    if timeout is not None:
        settings["timeout"] = timeout
    http_client = (library.AsyncClient if asynchronous else library.Client)(**settings)
    return cast(_SDKClient, copy(http_client=http_client))


def _http_library(default_client: Any) -> ModuleType | None:
    """The HTTP library (``httpx2`` or ``httpx``) an SDK's default HTTP client is made with."""
    for cls in getattr(default_client, "__mro__", ()):
        module = sys.modules.get(getattr(cls, "__module__", "").partition(".")[0])
        if module is not None and module.__name__ in ("httpx2", "httpx"):
            return module
    return None
