"""How many tool calls a JSON value seems to hold, whatever its format.

``scan`` never reports clean a file whose calls it did not read: a file in a shape no
reader knows, or one read without a single call while it plainly holds some, is
"format not understood" (:class:`~loopfuse.cli.readers.NotUnderstood`), with the count
given here so that the user sees what was left unjudged.

>>> seeming_calls({"messages": [{"parts": [{"type": "tool", "callID": "c1"}]}]})
1
>>> seeming_calls({"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "b"}]})
2
>>> seeming_calls({"messages": [{"role": "user", "content": "hi"}]})
0
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

__all__ = ["seeming_calls", "seeming_calls_in"]

# What a tool call is called in the formats seen (and likely new ones): a ``type``
# that names one (Anthropic ``tool_use``, Responses ``*_call``, OpenCode ``tool``,
# Copilot CLI ``tool.execution_start``, Vercel AI ``tool-call``, pi ``toolCall``), a key
# that holds one (Gemini ``functionCall``, legacy OpenAI ``function_call``) or a list of
# them (OpenAI ``tool_calls``, Gemini CLI ``toolCalls``, Copilot CLI ``toolRequests``).
_CALL_TYPES: Final = frozenset(
    {
        "tool_use",
        "server_tool_use",
        "tool",
        "tool_call",
        "tool-call",
        "tool.execution_start",
        "toolCall",
    }
)
_CALL_KEYS: Final = ("functionCall", "function_call")
_CALL_LISTS: Final = frozenset({"tool_calls", "toolCalls", "toolRequests"})
_MAX_NODES: Final = 2_000_000  # a bound on the walk; past it the count is a lower bound


def seeming_calls(value: object) -> int:
    """How many tool calls a parsed JSON value seems to hold (a lower bound past a
    couple of million nodes)."""
    return seeming_calls_in((value,))


def seeming_calls_in(values: Iterable[object]) -> int:
    """:func:`seeming_calls` summed over ``values`` (the records of a JSON Lines file)."""
    count = 0
    nodes = 0
    stack: list[object] = list(values)
    while stack and nodes < _MAX_NODES:
        item = stack.pop()
        nodes += 1
        if isinstance(item, dict):
            kind = item.get("type")
            if isinstance(kind, str) and (kind in _CALL_TYPES or kind.endswith("_call")):
                count += 1
            count += sum(isinstance(item.get(key), dict) for key in _CALL_KEYS)
            for key, value in item.items():
                if key in _CALL_LISTS and isinstance(value, list):
                    count += len(value)  # each item is a call: not walked again
                elif isinstance(value, dict | list):
                    stack.append(value)
        elif isinstance(item, list):
            stack.extend(value for value in item if isinstance(value, dict | list))
    return count
