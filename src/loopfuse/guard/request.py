"""A request as the guard reads it: what the caller says about it, and one parse of it.

:class:`RequestContext` is what an integration knows about a request besides its body
(the path, its session, the endpoint, its cache headers, who asks), as one value.
:func:`prepare` parses the body once into a :class:`PreparedRequest`: the analysis
(value, dialect, canonical intent), the breaker session, the breaker fingerprint (with
the sampling identity folded in) and whether the answer streams; every guard reads that.
Pure: no clock, no store, no state.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Final

from blake3 import blake3

from loopfuse.dedup import RequestKey
from loopfuse.dedup.request import IGNORED_PARAMS
from loopfuse.integrations import _facts
from loopfuse.integrations._shapes import ErrorFormat, error_format
from loopfuse.intent import Analysis, analyse, canonical_json, fingerprint_canonical
from loopfuse.loop import Loop

__all__ = ["NO_CONTEXT", "PreparedRequest", "RequestContext", "prepare", "resolve_session"]


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What the caller knows about a request besides its body; every field is optional.

    ``path`` is the request path: it picks the provider error shape and is part of the
    breaker's fingerprint. ``session_id`` is the integration's session for the breaker
    (a header, a callable); without one, the end user the body names, then the guard's
    ``shared_session``. ``scope`` (say, the scheme and host) keeps cached answers of
    different endpoints apart. ``streaming`` overrides what the body says.
    ``cache_control`` and ``namespace`` are the request's ``Cache-Control`` header and
    cache namespace, if any; ``integration`` names the caller in events.

    >>> context = RequestContext(path="/v1/chat/completions", session_id="run-1")
    >>> context.session_id, context.scope
    ('run-1', '')
    """

    path: str = ""
    session_id: str | None = None
    scope: str = ""
    streaming: bool | None = None
    cache_control: str | None = None
    namespace: str | None = None
    integration: str | None = None


NO_CONTEXT: Final = RequestContext()
"""The context of a request the caller says nothing about."""


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    """What the guard learned about a request before touching the breaker's store:
    :meth:`Guard.prepare <loopfuse.Guard.prepare>` makes it, :meth:`Guard.decide
    <loopfuse.Guard.decide>` decides it.

    ``analysis`` is the one parse (``analysis.parsed_intent`` is the canonical intent
    the detector reads), ``value`` the parsed body, ``dialect`` its dialect and ``fmt``
    the provider error shape of a refusal. ``session`` is the breaker session (``None``:
    the request is not counted) and :attr:`fingerprint` what the breaker counts it by.
    ``streaming`` says whether the answer streams. ``retry`` marks a retry of an attempt
    that failed upstream (its backoff respected), ``retry_noted`` the loop that attempt
    was noted for. ``key`` is the cache key of a request :meth:`named` by the caller
    (``None``: its answer is keyed by its content).
    """

    analysis: Analysis
    value: dict[str, Any]
    dialect: str
    fmt: ErrorFormat
    context: RequestContext
    streaming: bool
    session: str | None
    retry: bool = False
    retry_noted: Loop | None = None
    key: RequestKey | None = None
    _fingerprint: int | None = field(default=None, repr=False, compare=False)

    @property
    def fingerprint(self) -> int:
        """What the breaker counts the request by: the fingerprint of its intent and
        path (:func:`loopfuse.intent.fingerprint`), with its sampling identity folded in
        (another seed or ``n`` is another request), or the name it was given
        (:meth:`named`). Computed when first asked: a request that no breaker counts
        and no retry can follow is never hashed."""
        found = self._fingerprint
        if found is None:
            found = _fingerprint_of(self.analysis, self.value, self.context.path)
            object.__setattr__(self, "_fingerprint", found)  # frozen: computed once, kept
        return found

    @property
    def identity(self) -> str:
        """Whose retries these are: the session (``""`` for none; the fingerprint, which
        names the request exactly, does the rest)."""
        return self.session or ""

    def named(self, identity: int) -> PreparedRequest:
        """This request known by ``identity`` (an int in ``[0, 2**64)``) instead of its
        content: the breaker counts it, and the cache keys its answer, under that name.

        For a caller that knows two requests are the same exactly when their identities
        are, and so need not hash each: ``loopfuse scan`` names each cut of a replayed
        conversation by how many messages it holds.

        >>> from loopfuse import Guard
        >>> guard = Guard(breaker=None, detector=None)
        >>> prepared = guard.prepare(b'{"messages": [{"role": "user", "content": "hi"}]}')
        >>> prepared.named(7).fingerprint, prepared.named(7).key.value
        (7, 7)
        """
        return replace(self, key=RequestKey(identity), _fingerprint=identity)

    def owner(self) -> str:
        """Whose notes these are: the session, else the conversation (how it opens), so
        that a note given to one conversation is not held against another. Computed
        only when asked: it writes the opening's canonical JSON."""
        if self.session is not None:
            return self.session
        return _facts.conversation_anchor(self.analysis.parsed_intent)


def resolve_session(
    session_id: object, value: dict[str, Any], api: ErrorFormat, shared: str | None
) -> tuple[str | None, list[str]]:
    """The breaker session: the integration's, else the body's end user, else ``shared``;
    and a note for each junk input met on the way (which falls back to the next source).

    >>> resolve_session(None, {"user": "u-1"}, "openai", None)
    ('u-1', [])
    >>> resolve_session("run-1", {"user": "u-1"}, "openai", None)
    ('run-1', [])
    >>> session, junk = resolve_session(7, {"user": ["x"]}, "openai", "all")
    >>> session, len(junk)
    ('all', 2)
    """
    junk: list[str] = []
    session: str | None = None
    if isinstance(session_id, str) and session_id:
        session = session_id
    elif session_id is not None:
        junk.append(f"the session id is a {type(session_id).__name__}, not a non-empty str")
    if session is None:
        session, user_junk = _facts.end_user(value, api)
        junk.extend(user_junk)
    if session is None:
        session = shared
    return (None if session is None else _facts.session_name(session)), junk


def prepare(
    body: object, context: RequestContext, shared_session: str | None
) -> tuple[PreparedRequest | None, list[str]]:
    """The request's :class:`PreparedRequest` form (``None`` when it is not an LLM
    request of a known dialect) and the junk inputs met; ``shared_session`` is the
    session of a request that names none.

    >>> prepared, junk = prepare(b'{"input": "hi", "user": "u-1"}', NO_CONTEXT, None)
    >>> prepared.dialect, prepared.session, prepared.streaming, junk
    ('openai_responses', 'u-1', False, [])
    >>> prepare(b'{"not": "a request"}', NO_CONTEXT, None)
    (None, [])
    """
    analysis = analyse(body, ignore=IGNORED_PARAMS)
    value, dialect, canon = analysis.value, analysis.dialect, analysis.intent
    if dialect is None or canon is None or not isinstance(value, dict):
        return None, []
    path = context.path
    fmt = error_format(path, dialect)
    session, junk = resolve_session(context.session_id, value, fmt, shared_session)
    streaming = context.streaming
    if streaming is None:
        streaming = _facts.is_streaming(value, path, dialect)
    return PreparedRequest(analysis, value, dialect, fmt, context, streaming, session), junk


def _fingerprint_of(analysis: Analysis, value: dict[str, Any], path: str) -> int:
    """The breaker's fingerprint of a request :func:`prepare` read."""
    assert analysis.intent is not None  # prepare makes no PreparedRequest without one
    fingerprint = fingerprint_canonical(analysis.intent, path)
    sampling = _facts.sampling_identity(value)
    if sampling is not None:  # another seed or n: another request for the breaker
        material = fingerprint.to_bytes(8, "little") + canonical_json(sampling)
        fingerprint = int.from_bytes(blake3(material).digest(8), "little")
    return fingerprint
