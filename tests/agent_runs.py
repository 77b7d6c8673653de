"""Agent runs written as OpenAI Chat request bodies, for the detector's tests."""

from __future__ import annotations

import json
from typing import Any

Step = tuple[str, Any, str]  # (tool name, arguments, answer)


def openai_run(steps: list[Step]) -> dict[str, Any]:
    """The request an agent sends after ``steps``: one tool call and its answer each."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Get the build green."},
    ]
    for i, (name, arguments, answer) in enumerate(steps):
        call = {"name": name, "arguments": json.dumps(arguments)}
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"call_{i}", "type": "function", "function": call}],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": answer})
    return {"model": "gpt-4o", "messages": messages}
