"""What a fake OpenAI Chat Completions server answers, for tests that run a real agent
framework against it (the network replaced at the transport level)."""

from __future__ import annotations

import json
from typing import Any


def tool_call_message(n: int, name: str, arguments: object) -> dict[str, Any]:
    """An assistant message making one tool call, with the ``n``-th fresh call id."""
    call = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": f"call_{n}", "type": "function", "function": call}],
    }


def completion(model: str, n: int, message: dict[str, Any]) -> dict[str, Any]:
    """The ``n``-th chat completion, carrying ``message``."""
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
