"""The requests an agent sent, rebuilt from what ``scan`` read: one per turn.

A proxy or an SDK transport sees one request before each assistant turn, carrying the
whole conversation so far. So a transcript is replayed as the list of its prefixes:
before each assistant turn at position ``i`` of the conversation list (``messages``,
Gemini ``contents``, Responses ``input``), the request is the body with that list cut
to ``[:i]``. A turn is one assistant message (Gemini: a ``model`` message); in the
Responses dialect, one run of consecutive output items (assistant messages,
``reasoning``, ``*_call`` items). A request *body* is itself the request sent next, so
it is replayed last, whole; a trajectory is not (it ends where the agent stopped).

A log already holds the requests: each entry is one, in order.

Time: a request that carries no time of its own (every transcript turn; a log entry
without ``"time"``) comes ``turn_seconds`` after the one before it; the first at 0.
A log time that goes back is held at the previous one (clocks never go back).

>>> body = {"model": "m", "messages": [
...     {"role": "user", "content": "hi"},
...     {"role": "assistant", "content": "", "tool_calls": [{"id": "1", "type": "function",
...      "function": {"name": "ls", "arguments": "{}"}}]},
...     {"role": "tool", "tool_call_id": "1", "content": "a.py"}]}
>>> from loopfuse.cli.readers import Transcript
>>> reqs = requests_of(Transcript("x", "request", "openai_chat", body), turn_seconds=2.0)
>>> [(r.turn, len(r.body["messages"]), r.tool_calls, r.time) for r in reqs]
[(1, 1, 1, 0.0), (2, 3, 0, 2.0)]
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from loopfuse.cli.readers import Log, Source, Transcript

__all__ = ["CONVERSATION_KEY", "Request", "requests_of"]

CONVERSATION_KEY: Final = {
    "openai_chat": "messages",
    "anthropic": "messages",
    "ollama": "messages",
    "gemini": "contents",
    "openai_responses": "input",
}
"""Where each dialect keeps the conversation that grows turn by turn."""


@dataclass(frozen=True, slots=True)
class Request:
    """One request as the guards would have seen it live.

    ``body`` is what the guards are given (a parsed body, or bytes/str when the input
    held those). ``turn`` counts requests from 1 within a file; ``line`` is the log line
    (logs only); ``message_index`` is where the assistant turn this request produced
    starts in the conversation list (transcripts only; ``None`` for the final request of
    a body). ``chars`` is the size of the body as compact JSON: the context paid for.
    ``tool_calls`` counts the calls in the turn this request produced (transcripts).
    """

    turn: int
    session: str
    path: str
    body: object
    time: float
    chars: int
    tool_calls: int = 0
    line: int | None = None
    message_index: int | None = None


def requests_of(source: Source, *, turn_seconds: float, path: str = "") -> list[Request]:
    """Every request of ``source``, in the order they were sent."""
    if isinstance(source, Log):
        return _log_requests(source, turn_seconds, path)
    return _transcript_requests(source, turn_seconds, path)


def _log_requests(log: Log, turn_seconds: float, default_path: str) -> list[Request]:
    out = []
    now = 0.0
    for turn, entry in enumerate(log.entries, start=1):
        if turn > 1:
            now = now + turn_seconds if entry.time is None else max(now, entry.time)
        elif entry.time is not None:
            now = entry.time
        chars = len(entry.body) if isinstance(entry.body, str | bytes) else _size(entry.body)
        path = default_path if entry.path is None else entry.path
        out.append(Request(turn, entry.session, path, entry.body, now, chars, line=entry.line))
    return out


def _transcript_requests(t: Transcript, turn_seconds: float, path: str) -> list[Request]:
    key = CONVERSATION_KEY.get(t.dialect)
    items = t.body.get(key) if key else None
    if t.raw is not None or not isinstance(items, list):
        body: object = t.raw if t.raw is not None else t.body
        chars = len(t.raw) if t.raw is not None else _size(t.body)
        return [Request(1, "default", path, body, 0.0, chars)]
    assert key is not None
    is_answer, calls_in = _ANSWER_RULES.get(t.dialect, (_chat_answer, _chat_calls))
    runs = t.dialect == "openai_responses"  # one response = a run of output items
    base = _size({**t.body, key: []})
    sizes = [_size(item) for item in items]
    out: list[Request] = []
    total = 0  # characters of items[:i], with the commas between them
    for i, item in enumerate(items):
        if is_answer(item) and not (runs and i > 0 and is_answer(items[i - 1])):
            calls = _turn_calls(items, i, is_answer, calls_in, runs)
            chars = base + total
            out.append(
                Request(
                    turn=len(out) + 1,
                    session="default",
                    path=path,
                    body={**t.body, key: items[:i]},
                    time=len(out) * turn_seconds,
                    chars=chars,
                    tool_calls=calls,
                    message_index=i,
                )
            )
        total += sizes[i] + (1 if i else 0)
    if t.kind == "request":
        out.append(
            Request(len(out) + 1, "default", path, t.body, len(out) * turn_seconds, base + total)
        )
    return out


def _turn_calls(
    items: Sequence[object],
    start: int,
    is_answer: Callable[[object], bool],
    calls_in: Callable[[object], int],
    runs: bool,
) -> int:
    if not runs:
        return calls_in(items[start])
    calls = 0
    for item in items[start:]:
        if not is_answer(item):
            break
        calls += calls_in(item)
    return calls


def _size(value: object) -> int:
    try:
        return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
    except (TypeError, ValueError, RecursionError):
        return 0


def _role(item: object) -> object:
    return item.get("role") if isinstance(item, dict) else None


def _chat_answer(item: object) -> bool:
    return _role(item) == "assistant"


def _chat_calls(item: object) -> int:
    if not isinstance(item, dict):
        return 0
    calls = item.get("tool_calls")
    legacy = 1 if isinstance(item.get("function_call"), dict) else 0
    return (len(calls) if isinstance(calls, list) else 0) + legacy


def _anthropic_calls(item: object) -> int:
    content = item.get("content") if isinstance(item, dict) else None
    if not isinstance(content, list):
        return 0
    return sum(
        1
        for block in content
        if isinstance(block, dict)
        and block.get("type") in ("tool_use", "server_tool_use", "mcp_tool_use")
    )


def _gemini_answer(item: object) -> bool:
    return _role(item) == "model"


def _gemini_calls(item: object) -> int:
    parts = item.get("parts") if isinstance(item, dict) else None
    if not isinstance(parts, list):
        return 0
    return sum(
        1 for p in parts if isinstance(p, dict) and ("functionCall" in p or "function_call" in p)
    )


def _responses_answer(item: object) -> bool:
    if not isinstance(item, dict):
        return False
    kind = item.get("type")
    if isinstance(kind, str) and (kind == "reasoning" or kind.endswith("_call")):
        return True
    return item.get("role") == "assistant"


def _responses_calls(item: object) -> int:
    kind = item.get("type") if isinstance(item, dict) else None
    return 1 if isinstance(kind, str) and kind.endswith("_call") else 0


_ANSWER_RULES: Final[dict[str, tuple[Callable[[object], bool], Callable[[object], int]]]] = {
    "openai_chat": (_chat_answer, _chat_calls),
    "ollama": (_chat_answer, _chat_calls),
    "anthropic": (_chat_answer, _anthropic_calls),
    "gemini": (_gemini_answer, _gemini_calls),
    "openai_responses": (_responses_answer, _responses_calls),
}
