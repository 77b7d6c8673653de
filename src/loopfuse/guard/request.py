"""A request as the guard reads it: what the caller says about it, and one parse of it.

:class:`RequestContext` is what an integration knows about a request besides its body
(the path, its session, the endpoint, its cache headers, who asks), as one value.
:func:`prepare` parses the body once into a :class:`PreparedRequest`: the analysis
(value, dialect, canonical intent), the breaker session, the breaker fingerprint (with
the sampling identity folded in) and whether the answer streams; every guard reads that.
Pure: no clock, no store, no state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from blake3 import blake3

from loopfuse.dedup import RequestKey
from loopfuse.dedup.request import IGNORED_PARAMS
from loopfuse.intent import Analysis, analyse, call_ids, canonical_json, fingerprint_canonical
from loopfuse.intent.dialect import (
    Dialect,
    dialect_for,
    dialect_named,
    is_streaming,
    sampling_identity,
)
from loopfuse.loop import Loop

__all__ = [
    "MAX_SESSION_CHARS",
    "NO_CONTEXT",
    "PreparedRequest",
    "RequestContext",
    "conversation_anchor",
    "first_text",
    "prepare",
    "resolve_session",
    "session_name",
]

MAX_SESSION_CHARS: Final = 256
"""A session id longer than this is kept as its BLAKE3 digest (``"blake3:<hex>"``): ids
come from request bodies too, and a 1 MB ``user`` must not become 1 MB of breaker state."""


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
    the detector reads), ``value`` the parsed body and ``dialect`` its dialect's name;
    ``api`` is the :class:`~loopfuse.intent.dialect.Dialect` of the API the request goes
    to (:func:`~loopfuse.intent.dialect.dialect_for`: the path first, then the body),
    which writes its refusal and its note. ``session`` is the breaker session (``None``:
    the request is not counted) and :attr:`fingerprint` what the breaker counts it by.
    ``streaming`` says whether the answer streams. ``retry`` marks a retry of an attempt
    that failed upstream (its backoff respected), ``retry_noted`` the loop that attempt
    was noted for. ``key`` is the cache key of a request :meth:`named` by the caller
    (``None``: its answer is keyed by its content).
    """

    analysis: Analysis
    value: dict[str, Any]
    dialect: str
    api: Dialect
    context: RequestContext
    streaming: bool
    session: str | None
    retry: bool = False
    retry_noted: Loop | None = None
    key: RequestKey | None = None
    _fingerprint: int | None = field(default=None, repr=False, compare=False)
    # The body's call ids once read, shared with the copies named() makes (a list: its
    # one slot is filled in place, and replace() hands the same list to each copy).
    _call_ids: list[frozenset[str]] = field(default_factory=list, repr=False, compare=False)

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

    def call_ids(self) -> frozenset[str]:
        """The provider ids of the tool calls the body holds
        (:func:`loopfuse.intent.call_ids`), read once per body: every copy :meth:`named`
        makes shares them, so that ``loopfuse scan``, which names each cut of one
        conversation, reads them once, not once per cut.

        >>> from loopfuse import Guard
        >>> body = {"messages": [{"role": "assistant", "tool_calls": [{"id": "c1"}]}]}
        >>> prepared = Guard().prepare(body)
        >>> sorted(prepared.call_ids()), prepared.named(3).call_ids() is prepared.call_ids()
        (['c1'], True)
        """
        found = self._call_ids
        if not found:
            found.append(call_ids(self.value))
        return found[0]

    def owner(self) -> str:
        """Whose notes these are: the session, else the conversation (how it opens), so
        that a note given to one conversation is not held against another. Computed
        only when asked: it writes the opening's canonical JSON."""
        if self.session is not None:
            return self.session
        return conversation_anchor(self.analysis.parsed_intent)


def first_text(candidates: Iterable[tuple[str, object]]) -> tuple[str | None, list[str]]:
    """The first non-empty string among named ``candidates`` (``None`` ones are absent),
    and a note for each junk one met before it (present, but not a non-empty string).

    >>> first_text([("a", None), ("b", 42), ("c", "u-1"), ("d", [])])
    ('u-1', ['b is a int, not a non-empty string'])
    """
    junk: list[str] = []
    for name, found in candidates:
        if isinstance(found, str) and found:
            return found, junk
        if found is not None:
            junk.append(f"{name} is a {type(found).__name__}, not a non-empty string")
    return None, junk


def session_name(session: str) -> str:
    """``session``, or its digest when it is longer than :data:`MAX_SESSION_CHARS`.

    >>> session_name("run-42")
    'run-42'
    >>> session_name("x" * 1000).startswith("blake3:")
    True
    """
    if len(session) <= MAX_SESSION_CHARS:
        return session
    return "blake3:" + blake3(session.encode("utf-8", "surrogatepass")).hexdigest()


def conversation_anchor(intent: Mapping[str, Any] | None) -> str:
    """A short digest of how a conversation opens (system prompt and first message).

    Names a conversation when no session does, so that a note given to one conversation
    is remembered for it and not for another that happens to loop the same way.

    >>> a = conversation_anchor({"messages": [{"role": "user", "content": ["hi"]}]})
    >>> a == conversation_anchor({"messages": [{"role": "user", "content": ["hi"]}, {}]})
    True
    >>> a == conversation_anchor({"messages": [{"role": "user", "content": ["yo"]}]})
    False
    """
    if intent is None:
        return "conversation:"
    messages = intent.get("messages")
    first = messages[0] if isinstance(messages, list) and messages else None
    opening = canonical_json({"first": first, "system": intent.get("system")})
    return "conversation:" + blake3(opening).hexdigest(length=8)


def resolve_session(
    session_id: object, value: dict[str, Any], api: Dialect, shared: str | None
) -> tuple[str | None, list[str]]:
    """The breaker session: the integration's, else the end user the body names in the
    fields of ``api`` (the dialect of the API the request goes to), else ``shared``; and
    a note for each junk input met on the way (which falls back to the next source).

    >>> from loopfuse.intent.openai_chat import OPENAI_CHAT
    >>> resolve_session(None, {"user": "u-1"}, OPENAI_CHAT, None)
    ('u-1', [])
    >>> resolve_session("run-1", {"user": "u-1"}, OPENAI_CHAT, None)
    ('run-1', [])
    >>> session, junk = resolve_session(7, {"user": ["x"]}, OPENAI_CHAT, "all")
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
        session, user_junk = first_text(api.end_users(value))
        junk.extend(user_junk)
    if session is None:
        session = shared
    return (None if session is None else session_name(session)), junk


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
    api = dialect_for(path, dialect)
    session, junk = resolve_session(context.session_id, value, api, shared_session)
    streaming = context.streaming
    if streaming is None:
        streaming = is_streaming(value, path, dialect_named(dialect))
    return PreparedRequest(analysis, value, dialect, api, context, streaming, session), junk


def _fingerprint_of(analysis: Analysis, value: dict[str, Any], path: str) -> int:
    """The breaker's fingerprint of a request :func:`prepare` read."""
    assert analysis.intent is not None  # prepare makes no PreparedRequest without one
    fingerprint = fingerprint_canonical(analysis.intent, path)
    sampling = sampling_identity(value)
    if sampling is not None:  # another seed or n: another request for the breaker
        material = fingerprint.to_bytes(8, "little") + canonical_json(sampling)
        fingerprint = int.from_bytes(blake3(material).digest(8), "little")
    return fingerprint
