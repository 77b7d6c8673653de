"""Gemini ``generateContent`` bodies: ``contents``, ``systemInstruction``, ``tools``.

The REST API accepts both camelCase and snake_case field names; both are read.
The model is not in the body (it is in the URL path), which is why fingerprints and
request keys take the path.
"""

from __future__ import annotations

from typing import Any

from loopfuse.intent._parts import (
    CallLinker,
    Part,
    Walk,
    add_part,
    assemble,
    content_parts,
    tool_call,
    without_volatile,
)


def _field(value: dict[str, Any], camel: str, snake: str) -> Any:
    return value.get(camel, value.get(snake))


def gemini_intent(body: dict[str, Any], walk: Walk | None = None) -> dict[str, Any]:
    """The canonical intent of a body with a ``contents`` list."""
    instruction = _field(body, "systemInstruction", "system_instruction")
    if isinstance(instruction, dict):
        system = _parts(instruction.get("parts"))
    else:
        system = content_parts(instruction)
    messages: list[dict[str, Any]] = []
    linker = CallLinker()
    marks = walk.marks if walk is not None else None
    for content in body["contents"]:
        if marks is not None:
            marks.append((len(messages), len(system)))
        if not isinstance(content, dict):
            messages.append({"role": "unknown", "value": content})
            continue
        role = content.get("role", "user")
        raw_parts = content.get("parts")
        if role == "model":
            messages.append(_model_turn(raw_parts, linker, walk))
        elif role in ("user", "function", "tool"):
            _user_turn(raw_parts, linker, messages)
        else:
            messages.append(
                {"role": role if isinstance(role, str) else "unknown", "content": _parts(raw_parts)}
            )
    return assemble(messages, system, body.get("tools"))


def _parts(raw_parts: object) -> list[Part]:
    """Text and data parts; ``thought`` parts become thinking, signatures are dropped."""
    out: list[Part] = []
    for part in raw_parts if isinstance(raw_parts, list) else [raw_parts]:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            text = part["text"]
            if part.get("thought") is True:
                if text:
                    out.append({"type": "thinking", "text": text})
            elif text:
                out.append(text)
        elif isinstance(part, dict):
            rest = without_volatile(part)
            if rest:
                out.append(rest)
        elif part is not None:
            add_part(out, part)
    return out


def _model_turn(raw_parts: object, linker: CallLinker, walk: Walk | None) -> dict[str, Any]:
    calls: list[dict[str, Any]] = []
    ids: list[object] = []
    others: list[object] = []
    for part in raw_parts if isinstance(raw_parts, list) else [raw_parts]:
        call = _field(part, "functionCall", "function_call") if isinstance(part, dict) else None
        if isinstance(call, dict):
            calls.append(tool_call(call.get("name"), call.get("args"), walk))
            ids.append(call.get("id"))
        else:
            others.append(part)
    turn: dict[str, Any] = {"role": "assistant", "content": _parts(others)}
    if calls:
        turn["tool_calls"] = calls
        linker.start_turn(ids, calls)
    return turn


def _user_turn(raw_parts: object, linker: CallLinker, messages: list[dict[str, Any]]) -> None:
    others: list[object] = []
    answered = False
    for part in raw_parts if isinstance(raw_parts, list) else [raw_parts]:
        response = (
            _field(part, "functionResponse", "function_response")
            if isinstance(part, dict)
            else None
        )
        if isinstance(response, dict):
            answered = True
            name = response.get("name")
            result: dict[str, Any] = {
                "role": "tool",
                "call": linker.link(response.get("id"), name),
                "content": [{"type": "json", "value": response.get("response")}],
            }
            if isinstance(name, str):
                result["name"] = name
            messages.append(result)
        else:
            others.append(part)
    parts = _parts(others)
    if parts or not answered:
        messages.append({"role": "user", "content": parts})
