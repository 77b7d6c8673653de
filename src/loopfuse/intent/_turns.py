"""Where the requests of a recorded conversation begin: one before each assistant turn.

A proxy sees one request before each assistant turn, carrying the conversation so far.
:func:`loopfuse.intent.conversation` tells, for a recorded body, where each of those
requests cuts the body's conversation list and how much of the whole body's canonical
intent it holds, in one walk of the body.

A turn starts at:

- ``messages`` bodies (OpenAI Chat, Anthropic, Ollama): each ``assistant`` message;
- Gemini ``contents``: each ``model`` content;
- OpenAI Responses ``input``: each run of consecutive output items (``assistant``
  messages, ``reasoning``, ``function_call`` and every other ``*_call`` item): one
  response.

Why a cut there holds a prefix of the whole intent: the walk that builds an intent is
one pass, left to right, whose state after ``items[:i]`` is the state of a walk of
``items[:i]`` alone; and a cut at a turn start never splits what one canonical message
is built from (the one item that changes a message before it, a Responses
``function_call`` joining the assistant message it follows, belongs to a turn, and a
turn starts after an item that is not an answer). ``tests/test_intent_turns.py``
checks it on random bodies of every dialect.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from loopfuse.intent._json import load
from loopfuse.intent._parts import Walk
from loopfuse.intent.dialect import Dialect, read

__all__ = ["Conversation", "Turn", "conversation", "turns_of"]


class Turn(NamedTuple):
    """One assistant turn of a recorded conversation, and the request sent before it.

    The turn starts at ``conversation[start]``; the request before it is the body with
    its conversation list cut to ``[:start]``. Its intent
    is ``{"messages": intent["messages"][:messages], "system":
    intent["system"][:system], "tools": intent["tools"]}`` of the whole body's intent
    (``system`` and ``tools`` left out when empty, as always). So two requests of one
    conversation have the same intent exactly when their ``(messages, system)`` are
    equal. The turn's own items are ``conversation[start:stop]`` (one, except for a
    Responses run), its messages (the answer the request got)
    ``intent["messages"][messages:end]``; ``calls`` counts its tool calls.
    """

    start: int
    stop: int
    messages: int
    system: int
    end: int
    calls: int


def turns_of(
    dialect: Dialect,
    items: Sequence[object],
    messages: Sequence[dict[str, Any]],
    marks: Sequence[tuple[int, int]],
) -> tuple[Turn, ...]:
    """The turns of ``items`` (a body's conversation list of ``dialect``, walked into
    ``messages`` with ``marks``: the messages and system parts held before each item)."""
    is_answer = dialect.is_answer
    runs = dialect.answers_run  # one Responses response = a run of output items
    turns: list[Turn] = []
    count = len(items)
    i = 0
    while i < count:
        if not is_answer(items[i]):
            i += 1
            continue
        end_item = i + 1
        if runs:
            while end_item < count and is_answer(items[end_item]):
                end_item += 1
        held, system = marks[i]
        end = marks[end_item][0] if end_item < count else len(messages)
        calls = 0
        for message in messages[held:end]:
            found = message.get("tool_calls") if message.get("role") == "assistant" else None
            if type(found) is list:
                calls += len(found)
        turns.append(Turn(i, end_item, held, system, end, calls))
        i = end_item
    return tuple(turns)


class Conversation(NamedTuple):
    """A recorded conversation, turn by turn (see :func:`conversation`)."""

    dialect: str
    key: str
    """Where the body keeps the conversation: ``messages``, ``contents`` or ``input``."""
    intent: dict[str, Any]
    """The canonical intent of the whole body (what :func:`extract_intent` returns)."""
    turns: tuple[Turn, ...]


def conversation(body: object) -> Conversation | None:
    """The assistant turns of the conversation in ``body``, with the request before each.

    A proxy sees one request before each assistant turn; each :class:`Turn` says where
    that request cuts the conversation list and which part of the whole intent it holds,
    so a recorded run can be replayed request by request in one walk (see
    ``_turns.py`` for the turn of each dialect). ``None`` when ``body`` is not an LLM
    request with a conversation list (a Responses ``input`` string has none). Never
    raises on ``bytes``/``str``.

    >>> call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    >>> body = {"model": "m", "messages": [
    ...     {"role": "system", "content": "Be terse."},
    ...     {"role": "user", "content": "List files."},
    ...     {"role": "assistant", "content": None, "tool_calls": [call]},
    ...     {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
    ...     {"role": "assistant", "content": "a.py"}]}
    >>> from loopfuse.intent import extract_intent
    >>> found = conversation(body)
    >>> found.dialect, found.key, [(t.start, t.messages, t.system, t.calls) for t in found.turns]
    ('openai_chat', 'messages', [(2, 1, 1, 1), (4, 3, 1, 0)])
    >>> cut = extract_intent({**body, "messages": body["messages"][:4]})
    >>> cut["messages"] == found.intent["messages"][:3]
    True
    """
    value = load(body)
    marks: list[tuple[int, int]] = []
    read_body = read(value, Walk(marks=marks))
    if read_body is None or not isinstance(value, dict):
        return None
    dialect, found = read_body
    key = dialect.conversation
    items = value[key]
    if not isinstance(items, list):
        return None  # a Responses ``input`` string: one request, no turns
    turns = turns_of(dialect, items, found["messages"], marks)
    return Conversation(dialect.name, key, found, turns)
