"""``prepare``: everything the guard learns from one parse of a request, before any guard.

The analysis (value, dialect, canonical intent), the breaker session, the breaker
fingerprint (with the sampling identity folded in) and whether the answer streams.
Pure: no clock, no store, no state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from blake3 import blake3

from loopfuse.dedup import RequestKey
from loopfuse.dedup.request import IGNORED_PARAMS
from loopfuse.integrations import _facts
from loopfuse.integrations._decision import Attempt, CacheUse, GuardDecision, Loop
from loopfuse.integrations._shapes import ErrorFormat, error_format
from loopfuse.intent import Analysis, analyse, canonical_json, fingerprint_canonical

__all__ = ["Prepared", "prepare", "resolve_session"]


@dataclass(frozen=True, slots=True)
class Prepared:
    """What the guard learned about a request before touching the breaker's store."""

    analysis: Analysis
    value: dict[str, Any]
    dialect: str
    fmt: ErrorFormat
    path: str
    scope: str
    streaming: bool
    session: str | None
    """The breaker session (``None``: the request is not counted)."""
    fingerprint: int
    integration: str | None
    cache_control: str | None
    namespace: str | None
    retry: bool = False
    """A retry of an attempt that failed upstream (its backoff respected)."""
    retry_noted: Loop | None = None
    """The loop that failed attempt was noted for."""

    @property
    def identity(self) -> str:
        """Whose retries these are: the session (``""`` for none; the fingerprint, which
        names the request exactly, does the rest)."""
        return self.session or ""

    def decision(
        self,
        action: Any,
        loop: Loop | None,
        counted: bool,
        noted: object = None,
        *,
        cache: CacheUse = "bypass",
        cache_key: RequestKey | None = None,
        cache_reason: str | None = None,
    ) -> GuardDecision:
        """The guard's decision on this request: ``action`` for ``loop`` (if any);
        ``counted`` when the breaker counted it; ``noted`` is the body with a note. The
        cache plan (``cache``, ``cache_key``, ``cache_reason``) is a forwarded request's:
        a request refused or noted for a loop bypasses the cache."""
        attempt = Attempt(self.identity, self.fingerprint, counted, None if noted is None else loop)
        return GuardDecision(
            action,
            self.value if noted is None else noted,
            self.dialect,
            self.fmt,
            code=None if loop is None else loop.code,
            message=None if loop is None else loop.message,
            streaming=self.streaming,
            signature=None if loop is None else loop.signature,
            count=0 if loop is None else loop.count,
            tool_names=() if loop is None else loop.tool_names,
            session=self.session if counted else None,
            cache=cache,
            cache_key=cache_key,
            cache_reason=cache_reason if loop is None else f"the request was {action}d",
            attempt=attempt,
            integration=self.integration,
        )

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
    body: object,
    *,
    path: str,
    session_id: object,
    shared_session: str | None,
    scope: str,
    streaming: bool | None,
    cache_control: str | None,
    namespace: str | None,
    integration: str | None,
) -> tuple[Prepared | None, list[str]]:
    """The request's :class:`Prepared` form (``None`` when it is not an LLM request of a
    known dialect) and the junk inputs met."""
    analysis = analyse(body, ignore=IGNORED_PARAMS)
    value, dialect, canon = analysis.value, analysis.dialect, analysis.intent
    if dialect is None or canon is None or not isinstance(value, dict):
        return None, []
    fmt = error_format(path, dialect)
    session, junk = resolve_session(session_id, value, fmt, shared_session)
    fingerprint = fingerprint_canonical(canon, path)
    sampling = _facts.sampling_identity(value)
    if sampling is not None:  # another seed or n: another request for the breaker
        material = fingerprint.to_bytes(8, "little") + canonical_json(sampling)
        fingerprint = int.from_bytes(blake3(material).digest(8), "little")
    if streaming is None:
        streaming = _facts.is_streaming(value, path, dialect)
    prepared = Prepared(
        analysis,
        value,
        dialect,
        fmt,
        path,
        scope,
        streaming,
        session,
        fingerprint,
        integration,
        cache_control,
        namespace,
    )
    return prepared, junk
