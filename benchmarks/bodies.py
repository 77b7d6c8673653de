"""Deterministic, realistic agent request bodies for the benchmarks.

``agent_request()`` is an OpenAI Chat Completions request as a coding agent sends it
after 20 tool turns: a long system prompt, 15 tools with JSON schemas, and tool
results of file listings, source code and test output. About 50 KB of JSON.
"""

from __future__ import annotations

import json
import random
from typing import Any

_WORDS = (
    "agent",
    "repository",
    "function",
    "module",
    "test",
    "failure",
    "error",
    "file",
    "path",
    "value",
    "config",
    "request",
    "response",
    "token",
    "cache",
    "window",
    "session",
    "loop",
    "result",
    "build",
    "compile",
    "import",
    "class",
    "method",
    "return",
    "string",
    "number",
    "list",
    "dict",
    "parse",
    "format",
    "output",
    "input",
)


def _prose(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words)).capitalize() + "."


def _code(rng: random.Random, lines: int) -> str:
    out = []
    for i in range(lines):
        name = rng.choice(_WORDS)
        out.append(f"{i + 1:4d}    def {name}_{i}(self, {rng.choice(_WORDS)}: int = {i}):")
        out.append(f"        return self.{rng.choice(_WORDS)}({name!r}, {rng.random():.4f})")
    return "\n".join(out)


def _tool(rng: random.Random, index: int) -> dict[str, Any]:
    properties = {
        f"{rng.choice(_WORDS)}_{k}": {
            "type": rng.choice(["string", "integer", "boolean"]),
            "description": _prose(rng, 8),
        }
        for k in range(4)
    }
    return {
        "type": "function",
        "function": {
            "name": f"{rng.choice(_WORDS)}_tool_{index}",
            "description": _prose(rng, 25),
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": sorted(properties)[:2],
                "additionalProperties": False,
            },
        },
    }


def agent_request(turns: int = 20, tools: int = 15, seed: int = 7) -> dict[str, Any]:
    """The request dict; ``turns`` assistant tool calls, each answered by a tool message."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "\n".join(_prose(rng, 30) for _ in range(20))},
        {"role": "user", "content": _prose(rng, 60)},
    ]
    for turn in range(turns):
        call_id = f"call_{rng.getrandbits(64):016x}"
        arguments = {"path": f"src/pkg/{rng.choice(_WORDS)}_{turn}.py", "start": turn * 10}
        messages.append(
            {
                "role": "assistant",
                "content": _prose(rng, 20),
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "read_file", "arguments": json.dumps(arguments)},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": _code(rng, 14)})
    return {
        "model": "gpt-4o",
        "temperature": 0.2,
        "stream": True,
        "messages": messages,
        "tools": [_tool(rng, i) for i in range(tools)],
    }


def agent_request_bytes(turns: int = 20, tools: int = 15, seed: int = 7) -> bytes:
    """The same request serialised as the HTTP body a client sends."""
    return json.dumps(agent_request(turns, tools, seed)).encode()


if __name__ == "__main__":
    print(len(agent_request_bytes()), "bytes")
