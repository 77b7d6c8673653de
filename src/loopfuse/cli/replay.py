"""Replaying one file's requests through the three guards, as they would have run live.

Each file gets its own :class:`~loopfuse.LoopBreaker` and :class:`~loopfuse.DedupCache`
on a fake clock (see :mod:`loopfuse.cli.turns` for the time of each request), so files
never influence each other. Every guard sees every request, as if it ran alone:

- the **breaker** checks ``check_request(session, body, path)``; a refusal is an
  intervention;
- the **detector** scans each request body (``LoopDetector.scan``); a verdict that is
  not ``ok`` means the conversation ends in a loop: that request would have been refused;
- the **dedup cache** keys each request (``RequestKey.from_request(body, path)``); a
  key already cached (and not expired) is a request answered from the cache, a new one
  is stored, as if the answer had been computed.

Consecutive acts of one guard, in one session, on the same loop (the same signature;
for a cycle, any step of it) are reported as one :class:`Intervention` spanning those
requests.

What would not have been spent: every request refused (breaker or detector) or
answered from the cache, with its characters of context and the tool calls of the turn
it produced. No request is counted twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loopfuse import DedupCache, LoopBreaker, RequestKey, intent
from loopfuse.cli.config import Settings
from loopfuse.cli.readers import Source
from loopfuse.cli.turns import Request, requests_of
from loopfuse.detector import LoopDetector
from loopfuse.errors import LoopfuseError

__all__ = ["FakeClock", "FileResult", "Intervention", "replay"]

_SUBJECT_CHARS = 300
_CYCLE_STEPS_SHOWN = 4


class FakeClock:
    """A clock the replay moves by hand: ``clock.now = t``; ``clock()`` returns it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass(slots=True)
class Intervention:
    """One guard acting on one or more consecutive requests of a session.

    ``kind``: ``"same-request"`` (breaker), ``"repeat"``/``"cycle"``/``"stagnation"``
    (detector), ``"cache-hit"`` (dedup). ``unit`` is ``"turn"`` (transcripts: requests
    counted from 1) or ``"line"`` (logs); ``first`` and ``last`` are positions in that
    unit. ``count`` is the guard's count at the first request (the breaker's repeats in
    its window, the detector's count, laps for a cycle, or how many times the cached
    request had been asked) and ``max_count`` the highest over the span. ``subject``
    shows what was repeated (the tool calls, or the request's last message; each step of
    a cycle); ``message`` is what the model would have been told (``None`` for a cache
    hit: the client gets the cached answer instead, the one first asked at ``same_as``).
    ``message_index`` is where the assistant turn that the first request produced starts
    in the conversation list (transcripts).
    """

    guard: str
    kind: str
    session: str
    signature: str
    unit: str
    first: int
    last: int
    count: int
    max_count: int
    subjects: list[str]
    message: str | None
    requests: int = 1
    message_index: int | None = None
    same_as: int | None = None

    @property
    def subject(self) -> str:
        """The subjects, joined: one for a repeat, each step for a cycle."""
        return " -> ".join(self.subjects)


@dataclass(slots=True)
class FileResult:
    """What the guards would have done to one file's requests."""

    name: str
    kind: str
    dialect: str
    meta: dict[str, str]
    requests: int = 0
    sessions: int = 0
    tool_calls: int = 0
    chars: int = 0
    interventions: list[Intervention] = field(default_factory=list)
    acted: dict[str, int] = field(default_factory=dict)
    """Requests each guard acted on."""
    spared_requests: int = 0
    spared_tool_calls: int = 0
    spared_chars: int = 0

    @property
    def clean(self) -> bool:
        """No guard acted on any request."""
        return not self.interventions


def replay(source: Source, settings: Settings, detector: LoopDetector | None) -> FileResult:
    """Run ``source``'s requests through the guards ``settings.guards`` names.

    ``detector`` is used only through its stateless ``scan``, so one instance may serve
    every file; pass ``None`` to skip the detector.
    """
    clock = FakeClock()
    breaker = None
    if "breaker" in settings.guards:
        breaker = LoopBreaker(settings.window, settings.max_repeats, clock=clock)
    cache: DedupCache[int] | None = None
    if "dedup" in settings.guards:
        cache = DedupCache(settings.cache_capacity, settings.cache_ttl, clock)
    if "detector" not in settings.guards:
        detector = None
    meta = dict(getattr(source, "meta", {}))
    result = FileResult(source.name, source.kind, source.dialect, meta)
    requests = requests_of(source, turn_seconds=settings.turn_seconds, path=settings.path)
    grouper = _Grouper(result)
    asked: dict[RequestKey, tuple[int, int]] = {}  # key -> (times asked, first position)
    for request in requests:
        clock.now = request.time
        spared = False
        if breaker is not None:
            decision = breaker.check_request(request.session, request.body, request.path)
            if not decision.allowed:
                spared = True
                fp = decision.fingerprint
                grouper.act(
                    request,
                    "breaker",
                    "same-request",
                    "-" if fp is None else f"{fp:016x}",
                    decision.repeats,
                    decision.message,
                )
        if detector is not None:
            verdict = detector.scan(request.body)
            if not verdict.ok:
                spared = True
                grouper.act(
                    request,
                    "detector",
                    verdict.kind or "loop",
                    verdict.signature or "-",
                    verdict.count,
                    verdict.message,
                    verdict=verdict,
                )
        if cache is not None:
            key = _key(request)
            times, first = asked.get(key, (0, _position(request)))
            asked[key] = (times + 1, first)
            if cache.get(key) is not None:
                spared = True
                grouper.act(
                    request, "dedup", "cache-hit", f"{key.value:016x}", times + 1, None, first
                )
            else:
                cache.insert(key, request.turn)
        result.requests += 1
        result.tool_calls += request.tool_calls
        result.chars += request.chars
        if spared:
            result.spared_requests += 1
            result.spared_tool_calls += request.tool_calls
            result.spared_chars += request.chars
        grouper.seen(request)
    result.sessions = len({request.session for request in requests})
    return result


def _position(request: Request) -> int:
    return request.line if request.line is not None else request.turn


def _key(request: Request) -> RequestKey:
    try:
        return RequestKey.from_request(request.body, request.path)
    except LoopfuseError:  # a parsed body JSON cannot hold: key it as the bytes it came as
        return RequestKey.from_request(repr(request.body), request.path)


class _Grouper:
    """Merges consecutive acts of one guard on one signature in one session."""

    def __init__(self, result: FileResult) -> None:
        self.result = result
        self.last_turn: dict[str, int] = {}  # session -> its previous request's turn
        self.last_at: dict[tuple[str, str], int] = {}  # (guard, session) -> turn it last acted
        self.open: dict[tuple[str, str], Intervention] = {}  # (guard, session) -> last one

    def act(
        self,
        request: Request,
        guard: str,
        kind: str,
        signature: str,
        count: int,
        message: str | None,
        same_as: int | None = None,
        *,
        verdict: Any = None,
    ) -> None:
        result = self.result
        result.acted[guard] = result.acted.get(guard, 0) + 1
        slot = (guard, request.session)
        previous = self.open.get(slot)
        acted_last = self.last_at.get(slot)
        self.last_at[slot] = request.turn
        if (
            previous is not None
            and previous.kind == kind
            and (previous.signature == signature or kind == "cycle")
            and acted_last is not None
            and acted_last == self.last_turn.get(request.session)
        ):
            previous.last = _position(request)
            previous.requests += 1
            previous.max_count = max(previous.max_count, count)
            if kind == "cycle" and len(previous.subjects) < _CYCLE_STEPS_SHOWN:
                subject = _subject(request.body, verdict)
                if subject not in previous.subjects:
                    previous.subjects.append(subject)
            return
        found = Intervention(
            guard=guard,
            kind=kind,
            session=request.session,
            signature=signature,
            unit="line" if request.line is not None else "turn",
            first=_position(request),
            last=_position(request),
            count=count,
            max_count=count,
            subjects=[_subject(request.body, verdict)],
            message=message,
            message_index=request.message_index,
            same_as=same_as,
        )
        self.open[slot] = found
        result.interventions.append(found)

    def seen(self, request: Request) -> None:
        self.last_turn[request.session] = request.turn


def _subject(body: object, verdict: Any) -> str:
    """What was repeated: the offending turn's tool calls, or the request's last message."""
    try:
        canonical = intent.extract_intent(body)
    except LoopfuseError:
        canonical = None
    messages = canonical.get("messages") if isinstance(canonical, dict) else None
    if not isinstance(messages, list) or not messages:
        return "(a body loopfuse cannot read as a conversation)"
    index = getattr(verdict, "index", None)
    if isinstance(index, int) and 0 <= index < len(messages):
        message = messages[index]
    else:
        message = messages[-1]
    return _clip(_describe(message) if isinstance(message, dict) else str(message))


def _describe(message: dict[str, Any]) -> str:
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        return "; ".join(_call(call) for call in calls)
    content = message.get("content")
    texts = [part for part in content if isinstance(part, str)] if isinstance(content, list) else []
    text = " ".join(texts)
    return f"{message.get('role', '?')}: {' '.join(text.split()) or '(no text)'}"


def _call(call: object) -> str:
    if not isinstance(call, dict):
        return str(call)
    try:
        arguments = intent.canonical_json(call.get("arguments")).decode("utf-8", "replace")
    except (LoopfuseError, ValueError, RecursionError):
        arguments = str(call.get("arguments"))
    return f"{call.get('name')} {arguments}"


def _clip(text: str) -> str:
    return text if len(text) <= _SUBJECT_CHARS else text[: _SUBJECT_CHARS - 3] + "..."
