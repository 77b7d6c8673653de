"""Ollama ``/api/chat`` (``ollama``): ``messages``, ``tools``, ``options``.

Its intent is the ``messages`` walk of :mod:`._chat`, shared with OpenAI Chat and
Anthropic. A ``messages`` body is Ollama's when it has one of Ollama's own top-level
fields (``options``, ``keep_alive``, ``think``, ``format``) or the walk met a shape
only Ollama sends (tool-call arguments as an object, ``images``, ``tool_name``,
``thinking`` beside the content); otherwise only the path (``/api/chat``) tells it from
an OpenAI Chat body. The sampling identity is ``options.seed``; there is no end-user
field. Ollama streams unless the body says ``stream: false``. A refusal is
``{"error": "<message>"}``; a note goes where OpenAI Chat puts it.

>>> from loopfuse.intent.ollama import OLLAMA
>>> OLLAMA.streams({"model": "llama3"}), OLLAMA.streams({"stream": False})
(True, False)
>>> OLLAMA.error_body("repeat", "stop")
b'{"error": "stop"}'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from loopfuse.intent._chat import chat_fields, chat_intent, is_chat_answer
from loopfuse.intent._json import json_bytes
from loopfuse.intent._parts import Walk
from loopfuse.intent._wire import dialect_repr, never, no_model
from loopfuse.intent.openai_chat import OPENAI_CHAT

__all__ = ["OLLAMA", "Ollama"]

_OLLAMA_FIELDS: Final = frozenset({"options", "keep_alive", "think", "format"})


class Ollama:
    """The Ollama chat dialect (see :class:`~loopfuse.intent.dialect.Dialect`)."""

    __slots__ = ()
    __repr__ = dialect_repr

    name: Final = "ollama"
    conversation: Final = "messages"
    text_conversation: Final = False
    endpoints: Final = ("/api/chat",)
    seed_fields: Final = (("options", "seed"),)
    choice_fields: Final = ()
    temperature_fields: Final = (("options", "temperature"),)
    answers_run: Final = False

    intent = staticmethod(chat_intent)
    intent_fields = staticmethod(chat_fields)
    is_answer = staticmethod(is_chat_answer)
    add_note = staticmethod(OPENAI_CHAT.add_note)
    path_streams = staticmethod(never)
    path_model = staticmethod(no_model)

    @staticmethod
    def detect(value: Mapping[str, Any], walk: Walk) -> bool:
        """One of Ollama's top-level fields, or an Ollama-only shape in the walk."""
        return walk.ollama or not value.keys().isdisjoint(_OLLAMA_FIELDS)

    @staticmethod
    def end_users(value: Mapping[str, Any]) -> tuple[tuple[str, object], ...]:
        """None: an Ollama body names no end user."""
        return ()

    @staticmethod
    def streams(value: Mapping[str, Any]) -> bool:
        """Unless the body says otherwise (``stream`` absent, ``null`` or ``true``)."""
        stream = value.get("stream")
        return stream is None or stream is True

    @staticmethod
    def claims_path(path: str) -> bool:
        """A path ending in ``/api/chat``."""
        return path.endswith("/api/chat")

    @staticmethod
    def error_body(kind: str, message: str) -> bytes:
        """``{"error": "<message>"}``."""
        return json_bytes({"error": message}, compact=False)


OLLAMA: Final = Ollama()
"""The Ollama chat dialect."""
