"""Provider shapes: how a refusal looks to each SDK, and where a note for the model goes.

Pure functions over parsed JSON values, shared by every integration. Nothing here knows
about HTTP libraries or frameworks.

Provider wire formats are told apart by the request path first (an Anthropic body with
no system prompt reads like an OpenAI Chat body) and by the body's dialect second.
"""

from __future__ import annotations

import json
from typing import Any, Final, Literal

__all__ = ["ErrorFormat", "add_note", "error_body", "error_format"]

ErrorFormat = Literal["openai", "anthropic", "gemini", "ollama"]

ERROR_TYPE: Final = "loop_detected"
"""The ``type`` of every refusal loopfuse writes (OpenAI and Anthropic shapes)."""


def error_format(path: str, dialect: str | None) -> ErrorFormat:
    """Which provider's error shape a refusal of a request to ``path`` should take.

    >>> error_format("/v1/messages", "openai_chat")  # a plain Anthropic body
    'anthropic'
    >>> error_format("/v1beta/models/gemini-2.0-flash:generateContent", "gemini")
    'gemini'
    >>> error_format("/api/chat", "ollama"), error_format("/v1/chat/completions", None)
    ('ollama', 'openai')
    """
    if path.endswith("/messages") or dialect == "anthropic":
        return "anthropic"
    if ":generateContent" in path or ":streamGenerateContent" in path or dialect == "gemini":
        return "gemini"
    if path.endswith("/api/chat") or dialect == "ollama":
        return "ollama"
    return "openai"


def error_body(fmt: ErrorFormat, code: str, message: str) -> bytes:
    """The JSON body of an HTTP 400 refusal in provider format ``fmt``.

    OpenAI-style APIs get ``{"error": {"type": "loop_detected", "code": ..., ...}}``,
    Anthropic its ``{"type": "error", "error": {...}}`` envelope, Gemini a Google RPC
    status, Ollama ``{"error": "<message>"}``. Each SDK then raises its ordinary
    error for a 400 and shows ``message``.

    >>> json.loads(error_body("openai", "repeat", "stop"))["error"]["type"]
    'loop_detected'
    >>> json.loads(error_body("anthropic", "repeat", "stop"))["error"]
    {'type': 'loop_detected', 'message': 'stop'}
    >>> json.loads(error_body("ollama", "repeat", "stop"))
    {'error': 'stop'}
    """
    value: dict[str, Any]
    if fmt == "anthropic":
        value = {"type": "error", "error": {"type": ERROR_TYPE, "message": message}}
    elif fmt == "gemini":
        value = {
            "error": {
                "code": 400,
                "message": message,
                "status": "FAILED_PRECONDITION",
                "details": [{"reason": code, "domain": "loopfuse"}],
            }
        }
    elif fmt == "ollama":
        value = {"error": message}
    else:
        value = {"error": {"message": message, "type": ERROR_TYPE, "param": None, "code": code}}
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


def add_note(value: object, fmt: ErrorFormat, note: str) -> dict[str, Any] | None:
    """A copy of request body ``value`` with ``note`` added as the latest user text.

    The note joins the last user turn when there is one (so providers that want turns
    to alternate still accept the body), else becomes a new user turn; an Anthropic
    conversation that ends on an assistant prefill gets it in the system prompt
    instead. ``value`` itself is never changed (only the containers on the path to the
    note are copied). ``None`` when the body has no place for a note.

    >>> body = {"model": "m", "messages": [{"role": "tool", "tool_call_id": "1", "content": "x"}]}
    >>> add_note(body, "openai", "change approach")["messages"][-1]
    {'role': 'user', 'content': 'change approach'}
    >>> len(body["messages"])  # the original is untouched
    1
    >>> add_note({"input": "hi"}, "openai", "stop")["input"]
    'hi\\n\\nstop'
    >>> add_note({"prompt": "hi"}, "openai", "stop") is None
    True
    """
    if not isinstance(value, dict):
        return None
    messages = value.get("messages")
    if isinstance(messages, list):
        if fmt == "anthropic":
            return _note_anthropic(value, messages, note)
        return {**value, "messages": _note_turns(messages, "content", note, _text_into)}
    contents = value.get("contents")
    if isinstance(contents, list):
        return {**value, "contents": _note_turns(contents, "parts", note, _part_into)}
    given = value.get("input")
    if isinstance(given, str):
        return {**value, "input": f"{given}\n\n{note}" if given else note}
    if isinstance(given, list):
        return {**value, "input": [*given, {"role": "user", "content": note}]}
    return None


def _text_into(content: object, note: str) -> object:
    """``content`` of a chat message with ``note`` appended, or ``None`` if it cannot take it."""
    if isinstance(content, str):
        return f"{content}\n\n{note}" if content else note
    if isinstance(content, list):
        return [*content, {"type": "text", "text": note}]
    if content is None:
        return note
    return None


def _part_into(parts: object, note: str) -> object:
    if isinstance(parts, list):
        return [*parts, {"text": note}]
    return None


def _note_turns(turns: list[Any], field: str, note: str, merge: Any) -> list[Any]:
    """Append ``note`` to the last user turn of ``turns``, or add a user turn for it."""
    last = turns[-1] if turns else None
    if isinstance(last, dict) and last.get("role", "user") == "user":
        merged = merge(last.get(field), note)
        if merged is not None:
            return [*turns[:-1], {**last, field: merged}]
    new: dict[str, Any] = {"role": "user", field: note if field == "content" else [{"text": note}]}
    return [*turns, new]


def _note_anthropic(value: dict[str, Any], messages: list[Any], note: str) -> dict[str, Any]:
    last = messages[-1] if messages else None
    if isinstance(last, dict) and last.get("role") == "assistant":
        # A prefilled assistant turn must stay last: the note goes to the system prompt.
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
