"""The cache plan of a request: whether and under which key its answer may come from
the cache, from its ``Cache-Control`` and its cache namespace.

- ``Cache-Control: no-cache`` — skip the lookup, fetch a fresh answer and store it;
- ``Cache-Control: no-store`` — neither look up nor store (it wins over ``no-cache``);
- a **namespace** (an option, or a header per request) keeps the answers of tenants
  apart: a request is only ever served answers stored under its own namespace.

Junk never raises, and is reported so the guard can count it: a ``Cache-Control``
member that is not a valid directive is ignored (the valid ones still apply; unknown
valid directives are ignored, as HTTP says); an empty or over-long namespace means the
request **bypasses the cache** (never a shared pool two tenants could both land in).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from loopfuse.dedup import RequestKey
from loopfuse.guard.request import PreparedRequest
from loopfuse.intent.dialect import is_sampled

__all__ = [
    "MAX_NAMESPACE_CHARS",
    "CacheControl",
    "CachePlan",
    "CacheUse",
    "cache_control",
    "forwarded",
    "namespace",
    "plan",
    "scoped_key",
]

CacheUse = Literal["use", "refresh", "bypass"]
"""How an integration uses the cache for a request: look it up and store the answer
(``"use"``), skip the lookup but store the fresh answer (``"refresh"``,
``Cache-Control: no-cache``), or neither (``"bypass"``)."""

MAX_NAMESPACE_CHARS: Final = 256
"""The longest namespace accepted."""

# RFC 9110 token, optionally "=" token-or-quoted-string.
_DIRECTIVE: Final = re.compile(
    r"""[!#$%&'*+.^_`|~0-9A-Za-z-]+(?:=(?:[!#$%&'*+.^_`|~0-9A-Za-z-]+|"(?:[^"\\]|\\.)*"))?"""
)


@dataclass(frozen=True, slots=True)
class CacheControl:
    """The directives of a request's ``Cache-Control`` that loopfuse acts on."""

    no_cache: bool = False
    no_store: bool = False


def cache_control(header: str | None) -> tuple[CacheControl, list[str]]:
    """The ``no-cache``/``no-store`` directives of a ``Cache-Control`` header, and a
    note for each member that is not a valid directive.

    >>> cache_control("no-cache")
    (CacheControl(no_cache=True, no_store=False), [])
    >>> cache_control("No-Store, max-age=0")
    (CacheControl(no_cache=False, no_store=True), [])
    >>> control, junk = cache_control('no-cache, ===')
    >>> control.no_cache, junk
    (True, ["Cache-Control member '===' is not a directive"])
    >>> cache_control(None)
    (CacheControl(no_cache=False, no_store=False), [])
    """
    if not header:
        return CacheControl(), []
    no_cache = no_store = False
    junk: list[str] = []
    for member in header.split(","):
        member = member.strip()
        if not member:
            continue
        if _DIRECTIVE.fullmatch(member) is None:
            junk.append(f"Cache-Control member {member[:40]!r} is not a directive")
            continue
        name = member.split("=", 1)[0].lower()
        no_cache = no_cache or name == "no-cache"
        no_store = no_store or name == "no-store"
    return CacheControl(no_cache, no_store), junk


def namespace(header: str | None, option: str | None) -> tuple[str | None, str | None]:
    """The namespace of a request (the header's, else the option's) and, when it is
    junk, why (the request then bypasses the cache).

    >>> namespace(None, None), namespace("tenant-a", "default")
    ((None, None), ('tenant-a', None))
    >>> namespace(None, "shared")
    ('shared', None)
    >>> namespace("  ", "shared")
    (None, 'the cache namespace is empty')
    """
    chosen = option if header is None else header
    if chosen is None:
        return None, None
    if not chosen.strip():
        return None, "the cache namespace is empty"
    if len(chosen) > MAX_NAMESPACE_CHARS:
        return None, f"the cache namespace is longer than {MAX_NAMESPACE_CHARS} characters"
    return chosen, None


@dataclass(frozen=True, slots=True)
class CachePlan:
    """How a request uses the cache: ``use`` (with ``namespace``), and why it bypasses
    it (``reason``); ``junk`` notes the junk inputs met."""

    use: CacheUse
    namespace: str | None = None
    reason: str | None = None
    junk: tuple[str, ...] = ()


def plan(
    *,
    streaming: bool,
    cache_streams: bool,
    sampled: bool,
    cache_sampled: bool,
    control_header: str | None,
    namespace_header: str | None,
    namespace_option: str | None,
) -> CachePlan:
    """The cache plan of a request the cache may serve (a cache is configured).

    >>> plan(streaming=False, cache_streams=False, sampled=False, cache_sampled=False,
    ...      control_header="no-cache", namespace_header=None, namespace_option="t1")
    CachePlan(use='refresh', namespace='t1', reason=None, junk=())
    >>> plan(streaming=False, cache_streams=False, sampled=True, cache_sampled=False,
    ...      control_header=None, namespace_header=None, namespace_option=None).reason
    'a sampled request (temperature > 0, no seed)'
    """
    if streaming and not cache_streams:
        return CachePlan("bypass", reason="streamed answers are not cached (cache_streams=False)")
    if sampled and not cache_sampled:
        return CachePlan("bypass", reason="a sampled request (temperature > 0, no seed)")
    chosen, bad_namespace = namespace(namespace_header, namespace_option)
    control, junk = cache_control(control_header)
    if bad_namespace is not None:
        return CachePlan("bypass", reason=bad_namespace, junk=(*junk, bad_namespace))
    if control.no_store:
        return CachePlan("bypass", reason="Cache-Control: no-store", junk=tuple(junk))
    return CachePlan("refresh" if control.no_cache else "use", chosen, junk=tuple(junk))


def scoped_key(key: RequestKey, scope: str, streaming: bool, space: str | None) -> RequestKey:
    """``key`` (a :meth:`RequestKey.from_request <loopfuse.dedup.RequestKey.from_request>`
    key) for one endpoint (``scope``), one answer form (streamed or not) and one namespace.

    ``from_request`` ignores ``stream`` (the answer's content is the same) and the
    endpoint; an HTTP answer differs in both (SSE or JSON; one server's model ``m`` is not
    another's), and tenants must never share one: all three are folded, with the content
    digest, into a new content key.

    >>> key = RequestKey.from_str("q")
    >>> scoped_key(key, "https://a:", False, None) == scoped_key(key, "https://a:", False, "t")
    False
    """
    digest = key.digest or key.value.to_bytes(8, "little")
    material = b"loopfuse-http\x00" + scope.encode("utf-8", "surrogatepass") + b"\x00"
    if space is not None:
        encoded = space.encode("utf-8", "surrogatepass")
        material += b"N" + len(encoded).to_bytes(4, "little") + encoded
    return RequestKey.from_bytes(material + (b"S" if streaming else b"J") + digest)


def forwarded(
    prepared: PreparedRequest, cache_streams: bool, cache_sampled: bool, cache_namespace: str | None
) -> tuple[CachePlan, RequestKey | None]:
    """The cache plan of a forwarded request and, unless it bypasses the cache, the key
    its answer goes under: its content's (or the name it was given,
    :meth:`PreparedRequest.named <loopfuse.guard.request.PreparedRequest.named>`), for
    its endpoint, answer form and namespace.

    >>> from loopfuse import Guard, RequestContext
    >>> body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    >>> prepared = Guard().prepare(body, RequestContext(cache_control="no-cache"))
    >>> chosen, key = forwarded(prepared, False, False, None)
    >>> chosen.use, key is not None
    ('refresh', True)
    """
    context = prepared.context
    chosen = plan(
        streaming=prepared.streaming,
        cache_streams=cache_streams,
        sampled=is_sampled(prepared.value),
        cache_sampled=cache_sampled,
        control_header=context.cache_control,
        namespace_header=context.namespace,
        namespace_option=cache_namespace,
    )
    if chosen.use == "bypass":
        return chosen, None
    key = prepared.key or RequestKey.from_analysis(prepared.analysis, context.path)
    return chosen, scoped_key(key, context.scope, prepared.streaming, chosen.namespace)
