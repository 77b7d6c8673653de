"""``loop_message(exc)``: the clean loop message out of any SDK's exception.

Each SDK wraps a refusal its own way: ``openai`` prefixes its message
(``Error code: 400 - {...}``), ``anthropic``'s holds the repr of a dict, ``ollama`` keeps
the text in ``error``, LiteLLM adds ``litellm.BadRequestError:``. The message loopfuse
wrote for the model is the same in all of them; this finds it, so that you can hand it
back to the model or show it, and tells a loop refusal from any other error (``None``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["loop_message"]

_ERROR_TYPE: Final = "loop_detected"
_PREFIXES: Final = ("Loop detected", "loopfuse:")


def loop_message(exc: BaseException) -> str | None:
    """The message loopfuse wrote for a refused request, or ``None`` if ``exc`` is not a
    loopfuse refusal.

    Works on :class:`loopfuse.detector.LoopDetected`, :class:`loopfuse.LoopBroken`,
    LiteLLM's ``LoopRefusedError``, and on the errors the ``openai``, ``anthropic``,
    ``ollama`` and Gemini clients raise for the refusals of
    :mod:`loopfuse.integrations.httpx` (and of a LiteLLM proxy running ``LoopfuseHandler``).

    >>> from loopfuse.detector import LoopDetected
    >>> loop_message(LoopDetected("Loop detected: stop.", signature="s", kind="repeat", count=3))
    'Loop detected: stop.'
    >>> class SDKError(Exception):  # what openai raises for a refusal, in short
    ...     body = {"message": "Loop detected: stop.", "type": "loop_detected", "code": "repeat"}
    >>> loop_message(SDKError("Error code: 400 - {...}"))
    'Loop detected: stop.'
    >>> loop_message(ValueError("something else")) is None
    True
    """
    from loopfuse.errors import LoopfuseError

    if isinstance(exc, LoopfuseError):  # LoopDetected, LoopBroken, LoopRefusedError
        message = getattr(exc, "message", None)
        return message if isinstance(message, str) else str(exc)
    for found in (getattr(exc, "body", None), _response_json(exc), getattr(exc, "details", None)):
        message = _from_error_body(found)
        if message is not None:
            return message
    error = getattr(exc, "error", None)  # ollama.ResponseError: the text of {"error": ...}
    if isinstance(error, str) and error.startswith(_PREFIXES):
        return error
    return None


def _response_json(exc: BaseException) -> object:
    """The JSON body of the HTTP response an exception carries, if loopfuse wrote it."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None or "x-loopfuse-refused" not in headers:
        return None
    try:
        return json.loads(response.content)  # type: ignore[union-attr]
    except Exception:  # a body that is gone or not JSON: nothing to read
        return None


def _from_error_body(body: object) -> str | None:
    """The message of a refusal body in any provider's shape (or its inner error)."""
    if not isinstance(body, Mapping):
        return None
    inner: Any = body.get("error")
    for candidate in (body, inner):
        if not isinstance(candidate, Mapping):
            continue
        message = candidate.get("message")
        if not isinstance(message, str):
            continue
        if candidate.get("type") == _ERROR_TYPE or _names_loopfuse(candidate.get("details")):
            return message
    return None


def _names_loopfuse(details: object) -> bool:
    """Whether a Google RPC status's ``details`` name loopfuse as the error's domain."""
    if not isinstance(details, list):
        return False
    return any(isinstance(item, Mapping) and item.get("domain") == "loopfuse" for item in details)
