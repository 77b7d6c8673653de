"""Conversations whose tool calls are written as text, and their native twins.

The oracle of the written-calls tests: a conversation read from text must be judged as
the same conversation written with native tool calls is.
"""

from __future__ import annotations

from typing import Any

from loopfuse.intent import extract_intent


def native_body(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with its written laps as native tool calls: an Anthropic body, whose
    ``tool_result`` carries the error flag as smolagents' ``Error:`` does."""
    intent = extract_intent(body)
    messages: list[dict[str, Any]] = []
    for n, message in enumerate(intent["messages"]):
        text = "\n".join(part for part in message.get("content", []) if isinstance(part, str))
        if message["role"] == "assistant":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
            for k, call in enumerate(message.get("tool_calls", [])):
                use = {"type": "tool_use", "id": f"c{n}_{k}", "name": call["name"]}
                blocks.append({**use, "input": call["arguments"]})
            messages.append({"role": "assistant", "content": blocks})
        elif message["role"] == "tool":
            result = {"type": "tool_result", "tool_use_id": f"c{n - 1}_0", "content": text}
            if message.get("is_error"):
                result["is_error"] = True
            messages.append({"role": "user", "content": [result]})
        else:
            messages.append({"role": message["role"], "content": text})
    return {"model": body["model"], "max_tokens": 100, "messages": messages}
