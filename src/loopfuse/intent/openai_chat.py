"""OpenAI Chat Completions (``openai_chat``): ``messages``, ``tools``, legacy ``functions``.

The ``messages`` dialect every OpenAI-compatible server speaks, and the one a
``messages`` body is when nothing says Anthropic or Ollama. Its intent is the tolerant
``messages`` walk of :mod:`._chat`, shared with Anthropic and Ollama. The end user is
``safety_identifier``, then ``user``; the sampling identity ``seed`` and ``n``; a
refusal is OpenAI's ``{"error": {...}}``; a note joins the last user turn, or goes into
the first system message while a tool call still waits for its result. An Azure
deployment path (``…/deployments/NAME/…``) names the model.

>>> from loopfuse.intent.openai_chat import OPENAI_CHAT
>>> body = {"messages": [{"role": "tool", "tool_call_id": "1", "content": "x"}]}
>>> OPENAI_CHAT.add_note(body, "change approach")["messages"][-1]
{'role': 'user', 'content': 'change approach'}
>>> OPENAI_CHAT.end_users({"user": "u-1", "safety_identifier": "h-9"})
(('safety_identifier', 'h-9'), ('user', 'u-1'))
>>> OPENAI_CHAT.path_model("/openai/deployments/gpt4o-prod/chat/completions")
'deployments/gpt4o-prod'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from loopfuse.intent._chat import chat_fields, chat_intent, is_chat_answer
from loopfuse.intent._json import json_bytes
from loopfuse.intent._wire import (
    ERROR_TYPE,
    always,
    dialect_repr,
    named_fields,
    never,
    note_turns,
    path_group,
    stream_asked,
)

__all__ = ["OPENAI_CHAT", "OpenAIChat"]

_END_USER_FIELDS: Final = (("safety_identifier",), ("user",))
_DEPLOYMENT: Final = re.compile(r"(?:^|/)(deployments/[^/?#]+)")  # Azure OpenAI
_SYSTEM_ROLES: Final = ("system", "developer")


class OpenAIChat:
    """The OpenAI Chat Completions dialect (see :class:`~loopfuse.intent.dialect.Dialect`)."""

    __slots__ = ()
    __repr__ = dialect_repr

    name: Final = "openai_chat"
    conversation: Final = "messages"
    text_conversation: Final = False
    endpoints: Final = ("/chat/completions",)
    seed_fields: Final = (("seed",),)
    choice_fields: Final = (("n",),)
    temperature_fields: Final = (("temperature",),)
    answers_run: Final = False

    intent = staticmethod(chat_intent)
    intent_fields = staticmethod(chat_fields)
    is_answer = staticmethod(is_chat_answer)
    detect = staticmethod(always)  # a messages body neither Anthropic's nor Ollama's
    streams = staticmethod(stream_asked)
    path_streams = staticmethod(never)
    # Every OpenAI-compatible server (Ollama's, Gemini's too) answers on OpenAI's paths:
    # only the body tells an OpenAI request apart.
    claims_path = staticmethod(never)

    @staticmethod
    def end_users(value: Mapping[str, Any]) -> tuple[tuple[str, object], ...]:
        """``safety_identifier``, then ``user`` (Chat Completions and Responses alike)."""
        return named_fields(value, _END_USER_FIELDS)

    @staticmethod
    def path_model(path: str) -> str | None:
        """The Azure OpenAI deployment a path names (``deployments/NAME``), or ``None``."""
        return path_group(_DEPLOYMENT, path)

    @staticmethod
    def error_body(kind: str, message: str) -> bytes:
        """``{"error": {"message", "type": "loop_detected", "param": null, "code": kind}}``."""
        value = {"error": {"message": message, "type": ERROR_TYPE, "param": None, "code": kind}}
        return json_bytes(value, compact=False)

    @staticmethod
    def add_note(value: object, note: str) -> dict[str, Any] | None:
        """``note`` in the last user turn, or a new one after a tool result or an answer;
        in the first system message while tool calls still wait for their results."""
        messages = value.get("messages") if isinstance(value, dict) else None
        if not isinstance(value, dict) or not isinstance(messages, list):
            return None
        if _call_waits(messages[-1] if messages else None):
            return {**value, "messages": _into_system_message(messages, note)}
        return {**value, "messages": note_turns(messages, "content", note, _text_into, note)}


OPENAI_CHAT: Final = OpenAIChat()
"""The OpenAI Chat Completions dialect."""


def _call_waits(last: object) -> bool:
    """Whether a conversation ends on calls awaiting their results."""
    return (
        isinstance(last, dict)
        and last.get("role") == "assistant"
        and bool(last.get("tool_calls") or last.get("function_call"))
    )


def _text_into(content: object, note: str) -> object:
    """``content`` of a chat message with ``note`` appended, or ``None`` if it cannot take it."""
    if isinstance(content, str):
        return f"{content}\n\n{note}" if content else note
    if isinstance(content, list):
        return [*content, {"type": "text", "text": note}]
    if content is None:
        return note
    return None


def _into_system_message(messages: list[Any], note: str) -> list[Any]:
    """``note`` in the first system (or developer) message, or a new one before the rest."""
    first = messages[0] if messages else None
    if isinstance(first, dict) and first.get("role") in _SYSTEM_ROLES:
        merged = _text_into(first.get("content"), note)
        if merged is not None:
            return [{**first, "content": merged}, *messages[1:]]
    return [{"role": "system", "content": note}, *messages]
