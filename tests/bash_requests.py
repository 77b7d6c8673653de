"""An OpenAI Chat request after a run of ``bash`` calls, for the guard's tests."""

from __future__ import annotations

import json
from typing import Any


def bash_request(steps: list[tuple[str, str]], run: str = "a") -> dict[str, Any]:
    """An OpenAI Chat request after one ``bash`` call per ``(command, answer)``; ``run``
    tells conversations apart, as providers' call ids do."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Make the report script work."}]
    for i, (command, answer) in enumerate(steps):
        call = {"name": "bash", "arguments": json.dumps({"command": command})}
        tool_call = {"id": f"call_{run}{i}", "type": "function", "function": call}
        messages.append({"role": "assistant", "content": None, "tool_calls": [tool_call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{run}{i}", "content": answer})
    return {"model": "gpt-4o", "messages": messages}
