"""OpenAI Responses API bodies: ``instructions`` and an ``input`` string or item list."""

from __future__ import annotations

from typing import Any

from loopfuse.intent._parts import (
    CallLinker,
    Part,
    Walk,
    assemble,
    content_parts,
    str_field,
    tool_call,
    without_volatile,
)

_CALL_TYPES = frozenset({"function_call", "custom_tool_call"})
_OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})
_SYSTEM_ROLES = frozenset({"system", "developer"})


def responses_intent(body: dict[str, Any], walk: Walk | None = None) -> dict[str, Any]:
    """The canonical intent of a Responses body.

    Consecutive ``function_call`` items join the assistant turn before them, so an
    assistant message followed by its calls has the same intent as the equivalent
    Chat Completions message with ``tool_calls``. ``reasoning`` items are dropped:
    they are encrypted or regenerated on every turn. ``previous_response_id`` is a
    provider id and not part of the intent.
    """
    system: list[Part] = content_parts(body.get("instructions"))
    messages: list[dict[str, Any]] = []
    raw_input = body["input"]
    items = [{"role": "user", "content": raw_input}] if isinstance(raw_input, str) else raw_input
    linker = CallLinker()
    ids: list[object] = []
    leading = True
    marks = walk.marks if walk is not None else None
    for item in items:
        if marks is not None:
            marks.append((len(messages), len(system)))
        if not isinstance(item, dict):
            messages.append({"role": "unknown", "value": item})
            leading = False
            continue
        kind = str_field(item, "type")
        if kind == "reasoning":
            continue
        if kind in _CALL_TYPES:
            leading = False
            turn = messages[-1] if messages else None
            if turn is None or turn["role"] != "assistant":
                turn = {"role": "assistant", "content": []}
                messages.append(turn)
                ids = []
            elif "tool_calls" not in turn:
                ids = []
            arguments = item.get("arguments", item.get("input"))
            call = tool_call(item.get("name"), arguments, walk)
            turn.setdefault("tool_calls", []).append(call)
            ids.append(item.get("call_id"))
            linker.start_turn(ids, turn["tool_calls"])
            continue
        if kind in _OUTPUT_TYPES:
            leading = False
            messages.append(
                {
                    "role": "tool",
                    "call": linker.link(item.get("call_id")),
                    "content": content_parts(item.get("output")),
                }
            )
            continue
        role = str_field(item, "role")
        if (kind is None or kind == "message") and role is not None:
            parts = content_parts(item.get("content"))
            if role in _SYSTEM_ROLES:
                if leading:
                    system.extend(parts)
                else:
                    messages.append({"role": "system", "content": parts})
                continue
            leading = False
            messages.append({"role": role, "content": parts})
            continue
        leading = False
        # Built-in tool calls (web_search_call, computer_call, ...) and item references.
        messages.append({"role": "unknown", "value": without_volatile(item)})
    return assemble(messages, system, body.get("tools"))
