"""Anthropic Messages (``anthropic``): top-level ``system``, ``messages`` of blocks.

Its intent is the ``messages`` walk of :mod:`._chat`, shared with OpenAI Chat and
Ollama (``tool_use`` / ``tool_result`` blocks are read there). A ``messages`` body is
Anthropic's when it has a top-level ``system`` or ``anthropic_version`` (Amazon
Bedrock and Vertex AI bodies), or the walk met ``tool_use``, ``tool_result`` or
``thinking`` blocks; otherwise only the path (``/v1/messages``) tells it from an
OpenAI Chat body. The end user is ``metadata.user_id``; a refusal is Anthropic's
``{"type": "error", "error": {...}}``. A note is text after the last user turn's
``tool_result`` blocks (Anthropic wants those first), or goes into ``system`` while
the conversation ends on an assistant turn (a prefill, or a ``tool_use`` awaiting its
result), which must stay last. A Bedrock path (``…/model/ID/…``) names the model.

>>> from loopfuse.intent.anthropic import ANTHROPIC
>>> prefill = {"system": "Be brief.", "messages": [
...     {"role": "user", "content": "hi"}, {"role": "assistant", "content": "{"}]}
>>> ANTHROPIC.add_note(prefill, "stop")["system"]
'Be brief.\\n\\nstop'
>>> ANTHROPIC.end_users({"metadata": {"user_id": "u-1"}})
(('metadata.user_id', 'u-1'),)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from loopfuse.intent._chat import chat_fields, chat_intent, is_chat_answer
from loopfuse.intent._json import json_bytes
from loopfuse.intent._parts import Walk
from loopfuse.intent._wire import (
    ERROR_TYPE,
    dialect_repr,
    named_fields,
    never,
    path_group,
    stream_asked,
)

__all__ = ["ANTHROPIC", "Anthropic"]

_END_USER_FIELDS: Final = (("metadata", "user_id"),)
_BEDROCK_MODEL: Final = re.compile(r"(?:^|/)(model/[^/?#]+)")


class Anthropic:
    """The Anthropic Messages dialect (see :class:`~loopfuse.intent.dialect.Dialect`)."""

    __slots__ = ()
    __repr__ = dialect_repr

    name: Final = "anthropic"
    conversation: Final = "messages"
    text_conversation: Final = False
    endpoints: Final = ("/messages",)
    seed_fields: Final = ()
    choice_fields: Final = ()
    temperature_fields: Final = (("temperature",),)
    answers_run: Final = False

    intent = staticmethod(chat_intent)
    intent_fields = staticmethod(chat_fields)
    is_answer = staticmethod(is_chat_answer)
    streams = staticmethod(stream_asked)
    path_streams = staticmethod(never)

    @staticmethod
    def detect(value: Mapping[str, Any], walk: Walk) -> bool:
        """A top-level ``system`` or ``anthropic_version``, or Anthropic blocks in the walk."""
        return "system" in value or "anthropic_version" in value or walk.anthropic

    @staticmethod
    def end_users(value: Mapping[str, Any]) -> tuple[tuple[str, object], ...]:
        """``metadata.user_id``."""
        return named_fields(value, _END_USER_FIELDS)

    @staticmethod
    def claims_path(path: str) -> bool:
        """A path ending in ``/messages``."""
        return path.endswith("/messages")

    @staticmethod
    def path_model(path: str) -> str | None:
        """The Amazon Bedrock model a path names (``model/ID``), or ``None``."""
        return path_group(_BEDROCK_MODEL, path)

    @staticmethod
    def error_body(kind: str, message: str) -> bytes:
        """``{"type": "error", "error": {"type": "loop_detected", "message": ...}}``."""
        value = {"type": "error", "error": {"type": ERROR_TYPE, "message": message}}
        return json_bytes(value, compact=False)

    @staticmethod
    def add_note(value: object, note: str) -> dict[str, Any] | None:
        """``note`` after the last user turn's blocks, or in a new user turn; in
        ``system`` when the conversation ends on an assistant turn."""
        messages = value.get("messages") if isinstance(value, dict) else None
        if not isinstance(value, dict) or not isinstance(messages, list):
            return None
        last = messages[-1] if messages else None
        if isinstance(last, dict) and last.get("role") == "assistant":
            # A prefill (or a tool_use awaiting its result) must stay last: system prompt.
            system = value.get("system")
            if isinstance(system, list):
                return {**value, "system": [*system, {"type": "text", "text": note}]}
            text = f"{system}\n\n{note}" if isinstance(system, str) and system else note
            return {**value, "system": text}
        if isinstance(last, dict) and last.get("role") == "user":
            content = last.get("content")
            if isinstance(content, str):
                blocks: object = [{"type": "text", "text": content}] if content else []
            else:
                blocks = content
            if isinstance(blocks, list):
                # Text after the tool_result blocks: Anthropic wants those first.
                new_last = {**last, "content": [*blocks, {"type": "text", "text": note}]}
                return {**value, "messages": [*messages[:-1], new_last]}
        return {**value, "messages": [*messages, {"role": "user", "content": note}]}


ANTHROPIC: Final = Anthropic()
"""The Anthropic Messages dialect."""
