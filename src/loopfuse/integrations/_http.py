"""The HTTP side of the guard transports, common to sync and async and to httpx2 and httpx.

``httpx2`` and ``httpx`` have the same request/response API but distinct classes, and a
client only accepts responses of its own library. So nothing here imports either: the
library is read off each request (it is necessarily imported already) and the synthetic
responses are built with that library's ``Response``. Types are spelled with ``httpx2``'s
names for the checker; at run time either library's objects flow through.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

from loopfuse.dedup import DedupCache, RequestKey
from loopfuse.errors import ConfigError, InvalidInputError
from loopfuse.integrations._decision import GuardDecision
from loopfuse.integrations._extras import require
from loopfuse.integrations._guard import Guard
from loopfuse.integrations._shapes import error_body, json_bytes
from loopfuse.intent import MAX_BODY_BYTES

if TYPE_CHECKING:
    from httpx2 import Request, Response

__all__ = [
    "CACHE_HEADER",
    "DEFAULT_PATHS",
    "HTTPAnswer",
    "SessionResolver",
    "TransportCore",
    "Uncached",
    "retry_after",
]

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


class Uncached(Exception):
    """Raised out of a cache computation to hand back an answer that must not be cached."""

    def __init__(self, response: Response) -> None:
        super().__init__("uncacheable response")
        self.response = response


def library(request: Request) -> ModuleType:
    """The HTTP library (``httpx2`` or ``httpx``) that ``request`` belongs to."""
    for name in ("httpx2", "httpx"):
        module = sys.modules.get(name)
        if module is not None and isinstance(request, module.Request):
            return module
    raise InvalidInputError(f"not an httpx2 or httpx request: {type(request).__name__}")


def _response(request: Request, status: int, headers: Any, content: bytes) -> Response:
    response: Response = library(request).Response(
        status, headers=headers, content=content, request=request
    )
    return response


class TransportCore:
    """Configuration and per-request decisions of :mod:`loopfuse.integrations.httpx`."""

    guard: Guard
    session_header: str | None
    session_id: SessionResolver | None
    namespace_header: str | None
    paths: tuple[str, ...]

    def _configure(
        self,
        guard: Guard,
        session_header: str | None,
        session_id: SessionResolver | None,
        namespace_header: str | None,
        paths: Iterable[str],
    ) -> None:
        require("httpx2", "httpx", extra="openai", what=type(self).__name__)
        for name, header in (
            ("session_header", session_header),
            ("namespace_header", namespace_header),
        ):
            if header is not None and not (isinstance(header, str) and header):
                raise ConfigError(f"{name} must be a header name or None")
        if session_id is not None and not callable(session_id):
            raise ConfigError("session_id must be a callable taking the request, or None")
        if isinstance(paths, str):
            raise ConfigError("paths must be a collection of path endings, not one string")
        suffixes = tuple(paths)
        if not all(isinstance(path, str) and path for path in suffixes):
            raise ConfigError("paths must be non-empty strings (endings of request paths)")
        self.guard = guard
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
        asked = self._question(request)
        if isinstance(asked, GuardDecision):
            return asked
        return self.guard.check(body, **asked)

    async def adecide(self, request: Request, body: bytes) -> GuardDecision:
        """:meth:`decide` for asyncio: the breaker's store is awaited, never waited for."""
        asked = self._question(request)
        if isinstance(asked, GuardDecision):
            return asked
        return await self.guard.acheck(body, **asked)

    def _question(self, request: Request) -> dict[str, Any] | GuardDecision:
        """The guard's keyword arguments for ``request``, or the decision when resolving
        its session failed."""
        url = request.url
        try:
            session = self._session(request)
        except Exception as exc:  # a resolver that raises fails open, like the guard
            return self.guard.failure(exc, url.path, "httpx")
        headers = request.headers
        space = None if self.namespace_header is None else headers.get(self.namespace_header)
        return {
            "path": url.path,
            "session_id": session,
            "scope": f"{url.scheme}://{url.host}:{url.port or ''}",
            "cache_control": headers.get("cache-control"),
            "namespace": space,
            "integration": "httpx",
        }

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
        noted: Request = library(request).Request(
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
        code = decision.code or "loop"
        headers = {
            "content-type": "application/json",
            "x-should-retry": "false",
            "x-loopfuse-refused": code,
            CACHE_HEADER: "bypass",
        }
        return _response(
            request, 400, headers, error_body(decision.fmt, code, decision.message or "")
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
            self.guard.failure(exc, integration=decision.integration)

    async def astore(
        self, cache: DedupCache[Any], key: RequestKey, answer: HTTPAnswer, decision: GuardDecision
    ) -> None:
        """:meth:`store` for asyncio (an async store is awaited)."""
        try:
            await cache.ainsert(key, answer)
        except Exception as exc:  # the answer is already here: serve it
            self.guard.failure(exc, integration=decision.integration)

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
