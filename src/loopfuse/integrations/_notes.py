"""Where a note for the model goes, in each dialect, so that the conversation stays valid.

The note is the latest user text: it joins the last user turn (so that providers that
want turns to alternate still accept the body; after the ``tool_result`` blocks of an
Anthropic user turn, which must come first), or becomes a new user turn after a tool
result or an answer. When the conversation ends where no user text may go — an
Anthropic assistant prefill, a tool call still waiting for its result, a Gemini
function-response turn (which holds function responses only, and may not be followed by
another user turn) — the note goes where the dialect wants system text instead: the
first system message (OpenAI Chat, Ollama), the Responses ``instructions``, Anthropic's
top-level ``system``, Gemini's ``systemInstruction``. Every tool call keeps its result.

The body itself is never changed: only the containers on the path to the note are copied.
"""

from __future__ import annotations

from typing import Any, Final

from loopfuse.integrations._shapes import ErrorFormat

__all__ = ["add_note"]

# Responses input items a client must answer with an output item of the same call_id.
_CLIENT_CALLS: Final = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "computer_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
    }
)


def add_note(value: object, fmt: ErrorFormat, note: str) -> dict[str, Any] | None:
    """A copy of request body ``value`` with ``note`` added for the model, or ``None``
    when the body has no place for one.

    >>> body = {"model": "m", "messages": [{"role": "tool", "tool_call_id": "1", "content": "x"}]}
    >>> add_note(body, "openai", "change approach")["messages"][-1]
    {'role': 'user', 'content': 'change approach'}
    >>> len(body["messages"])  # the original is untouched
    1
    >>> add_note({"input": "hi"}, "openai", "stop")["input"]
    'hi\\n\\nstop'
    >>> waiting = {"input": [{"type": "function_call", "call_id": "c", "name": "f"}]}
    >>> add_note(waiting, "openai", "stop")["instructions"]
    'stop'
    >>> add_note({"prompt": "hi"}, "openai", "stop") is None
    True
    """
    if not isinstance(value, dict):
        return None
    messages = value.get("messages")
    if isinstance(messages, list):
        if fmt == "anthropic":
            return _note_anthropic(value, messages, note)
        if _chat_call_waits(messages[-1] if messages else None):
            return {**value, "messages": _into_system_message(messages, note)}
        return {**value, "messages": _note_turns(messages, "content", note, _text_into)}
    contents = value.get("contents")
    if isinstance(contents, list):
        if _gemini_function_turn(contents[-1] if contents else None):
            return _into_system_instruction(value, note)
        return {**value, "contents": _note_turns(contents, "parts", note, _part_into)}
    given = value.get("input")
    if isinstance(given, str):
        return {**value, "input": f"{given}\n\n{note}" if given else note}
    if isinstance(given, list):
        last = given[-1] if given else None
        if isinstance(last, dict) and last.get("type") in _CLIENT_CALLS:
            instructions = value.get("instructions")
            text = (
                f"{instructions}\n\n{note}"
                if isinstance(instructions, str) and instructions
                else note
            )
            return {**value, "instructions": text}
        return {**value, "input": [*given, {"role": "user", "content": note}]}
    return None


def _chat_call_waits(last: object) -> bool:
    """Whether an OpenAI Chat / Ollama conversation ends on calls awaiting their results."""
    return (
        isinstance(last, dict)
        and last.get("role") == "assistant"
        and bool(last.get("tool_calls") or last.get("function_call"))
    )


def _gemini_function_turn(last: object) -> bool:
    """Whether a Gemini conversation ends on function calls (awaiting their responses)
    or on function responses: no user text may follow either."""
    if not isinstance(last, dict):
        return False
    parts = last.get("parts")
    field = "functionCall" if last.get("role") == "model" else "functionResponse"
    return isinstance(parts, list) and any(
        isinstance(part, dict) and field in part for part in parts
    )


def _text_into(content: object, note: str) -> object:
    """``content`` of a chat message with ``note`` appended, or ``None`` if it cannot take it."""
    if isinstance(content, str):
        return f"{content}\n\n{note}" if content else note
    if isinstance(content, list):
        return [*content, {"type": "text", "text": note}]
    if content is None:
        return note
    return None


def _part_into(parts: object, note: str) -> object:
    if isinstance(parts, list):
        return [*parts, {"text": note}]
    return None


def _note_turns(turns: list[Any], field: str, note: str, merge: Any) -> list[Any]:
    """Append ``note`` to the last user turn of ``turns``, or add a user turn for it."""
    last = turns[-1] if turns else None
    if isinstance(last, dict) and last.get("role", "user") == "user":
        merged = merge(last.get(field), note)
        if merged is not None:
            return [*turns[:-1], {**last, field: merged}]
    new: dict[str, Any] = {"role": "user", field: note if field == "content" else [{"text": note}]}
    return [*turns, new]


def _into_system_message(messages: list[Any], note: str) -> list[Any]:
    """``note`` in the first system (or developer) message, or a new one before the rest."""
    first = messages[0] if messages else None
    if isinstance(first, dict) and first.get("role") in ("system", "developer"):
        merged = _text_into(first.get("content"), note)
        if merged is not None:
            return [{**first, "content": merged}, *messages[1:]]
    return [{"role": "system", "content": note}, *messages]


def _into_system_instruction(value: dict[str, Any], note: str) -> dict[str, Any]:
    field = "system_instruction" if "system_instruction" in value else "systemInstruction"
    given = value.get(field)
    if isinstance(given, dict) and isinstance(given.get("parts"), list):
        return {**value, field: {**given, "parts": [*given["parts"], {"text": note}]}}
    if isinstance(given, str):  # the SDKs accept a bare string; keep its kind
        return {**value, field: f"{given}\n\n{note}" if given else note}
    return {**value, field: {"parts": [{"text": note}]}}


def _note_anthropic(value: dict[str, Any], messages: list[Any], note: str) -> dict[str, Any]:
    last = messages[-1] if messages else None
    if isinstance(last, dict) and last.get("role") == "assistant":
        # A prefill (or a tool_use awaiting its result) must stay last: system prompt.
        system = value.get("system")
        if isinstance(system, list):
            return {**value, "system": [*system, {"type": "text", "text": note}]}
        text = f"{system}\n\n{note}" if isinstance(system, str) and system else note
        return {**value, "system": text}
    if isinstance(last, dict) and last.get("role") == "user":
        content = last.get("content")
        if isinstance(content, str):
            blocks: object = [{"type": "text", "text": content}] if content else []
        else:
            blocks = content
        if isinstance(blocks, list):
            # Text after the tool_result blocks: Anthropic wants those first.
            new_last = {**last, "content": [*blocks, {"type": "text", "text": note}]}
            return {**value, "messages": [*messages[:-1], new_last]}
    return {**value, "messages": [*messages, {"role": "user", "content": note}]}
