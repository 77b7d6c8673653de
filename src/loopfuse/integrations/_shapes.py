"""Provider shapes: how a refusal looks to each SDK.

Pure functions over parsed JSON values, shared by every integration. Nothing here knows
about HTTP libraries or frameworks (where a note for the model goes: :mod:`._notes`).

Provider wire formats are told apart by the request path first (an Anthropic body with
no system prompt reads like an OpenAI Chat body) and by the body's dialect second.
"""

from __future__ import annotations

import json
from typing import Any, Final, Literal

__all__ = ["ErrorFormat", "error_body", "error_format", "json_bytes"]

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
    return json_bytes(value, compact=False)


def json_bytes(value: object, *, compact: bool = True) -> bytes:
    """``value`` as JSON in UTF-8, non-ASCII text as it is.

    Text that UTF-8 cannot hold — a lone surrogate, which JSON may escape and so a
    parsed body may carry (a tool output cut in the middle of an emoji) — is written
    as the escape the client sent (``\\ud83d``): the whole value is then written
    ASCII-only, rather than the write raising on the request path. Raises what
    ``json.dumps`` raises for a value JSON cannot express.

    >>> json_bytes({"a": "é"}).decode()
    '{"a":"é"}'
    >>> json_bytes({"a": "cut " + chr(0xD83D)})
    b'{"a":"cut \\\\ud83d"}'
    """
    separators = (",", ":") if compact else None
    text = json.dumps(value, ensure_ascii=False, separators=separators)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, separators=separators).encode("ascii")
