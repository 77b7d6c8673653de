"""Which conversation a request continues: the provider ids of the calls it holds.

The canonical intent drops provider call ids (``tool_calls[].id``, ``tool_use.id``,
Responses ``call_id``, Gemini ``functionCall.id``) on purpose: two sends of the same
request must fingerprint the same. But the ids are also the one thing that tells two
runs of the same agent on the same prompt apart when they loop the same way: a provider
gives every call of every run a fresh id, and each later request of a run carries the
ids of the calls it made. So a guard that wrote a note for one request knows a later
request belongs to the same run when it still holds the call ids of the noted one.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["call_ids"]

_MAX_IDS: Final = 4096  # enough for any real run; junk cannot make the set grow further


def call_ids(value: object) -> frozenset[str]:
    """The provider ids of the tool calls a parsed request body holds, in any dialect
    (empty for a dialect without ids, such as Ollama's). Never raises.

    >>> body = {"messages": [{"role": "assistant", "tool_calls": [{"id": "call_1"}]},
    ...                      {"role": "assistant", "content": [{"type": "tool_use", "id": "t"}]}]}
    >>> sorted(call_ids(body))
    ['call_1', 't']
    >>> sorted(call_ids({"input": [{"type": "function_call", "call_id": "c", "id": "fc"}]}))
    ['c']
    >>> sorted(call_ids({"contents": [{"parts": [{"functionCall": {"id": "g", "name": "x"}}]}]}))
    ['g']
    """
    found: set[str] = set()
    if type(value) is not dict:
        return frozenset()
    for key in ("messages", "input", "contents"):
        items = value.get(key)
        if type(items) is list:
            for item in items:
                if type(item) is dict:
                    _ids_of(item, found)
                if len(found) >= _MAX_IDS:
                    break
    return frozenset(found)


def _ids_of(item: dict[str, Any], found: set[str]) -> None:
    """Add the call ids one conversation item holds."""
    calls = item.get("tool_calls")  # OpenAI Chat
    if type(calls) is list:
        for call in calls:
            _add(call.get("id") if type(call) is dict else None, found)
    if item.get("type") == "function_call" or item.get("type") == "custom_tool_call":
        _add(item.get("call_id"), found)  # OpenAI Responses (its "id" is the item's own)
    for key in ("content", "parts"):  # Anthropic blocks, Gemini parts
        blocks = item.get(key)
        if type(blocks) is not list:
            continue
        for block in blocks:
            if type(block) is not dict:
                continue
            if block.get("type") == "tool_use":
                _add(block.get("id"), found)
            call = block.get("functionCall")
            if type(call) is dict:
                _add(call.get("id"), found)


def _add(call_id: object, found: set[str]) -> None:
    if type(call_id) is str and call_id:
        found.add(call_id)
