"""OpenAI Responses (``openai_responses``): ``instructions`` and an ``input`` string or items.

The intent joins consecutive ``function_call`` items to the assistant turn before them
(the shape Chat Completions gives the same turn) and drops ``reasoning`` items. The end
user and a refusal are OpenAI's, as in :mod:`.openai_chat`; a temperature is the only
sampling field. A note joins a string ``input``, or becomes a user item after the
others; while the last item is a call the client must answer, it goes into
``instructions`` instead. In a recorded conversation one response (a turn) is a run of
output items.

>>> from loopfuse.intent.openai_responses import OPENAI_RESPONSES
>>> OPENAI_RESPONSES.add_note({"input": "hi"}, "stop")["input"]
'hi\\n\\nstop'
>>> waiting = {"input": [{"type": "function_call", "call_id": "c", "name": "f"}]}
>>> OPENAI_RESPONSES.add_note(waiting, "stop")["instructions"]
'stop'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

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
from loopfuse.intent._wire import always, dialect_repr, never, no_model, stream_asked
from loopfuse.intent.openai_chat import OPENAI_CHAT

__all__ = ["OPENAI_RESPONSES", "OpenAIResponses", "responses_intent"]

_CALL_TYPES = frozenset({"function_call", "custom_tool_call"})
_OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})
_SYSTEM_ROLES = frozenset({"system", "developer"})
_FIELDS: Final = frozenset({"input", "instructions", "tools"})

# Input items a client must answer with an output item of the same call_id.
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


class OpenAIResponses:
    """The OpenAI Responses dialect (see :class:`~loopfuse.intent.dialect.Dialect`)."""

    __slots__ = ()
    __repr__ = dialect_repr

    name: Final = "openai_responses"
    conversation: Final = "input"
    text_conversation: Final = True
    endpoints: Final = ("/responses",)
    seed_fields: Final = ()
    choice_fields: Final = ()
    temperature_fields: Final = (("temperature",),)
    answers_run: Final = True

    intent = staticmethod(responses_intent)
    detect = staticmethod(always)  # an input body is a Responses body
    end_users = staticmethod(OPENAI_CHAT.end_users)
    streams = staticmethod(stream_asked)
    path_streams = staticmethod(never)
    claims_path = staticmethod(never)  # OpenAI paths name no API (see openai_chat)
    path_model = staticmethod(no_model)
    error_body = staticmethod(OPENAI_CHAT.error_body)

    @staticmethod
    def intent_fields(value: Mapping[str, Any]) -> frozenset[str]:
        """``input``, ``instructions`` and ``tools``."""
        return _FIELDS

    @staticmethod
    def is_answer(item: object) -> bool:
        """Output items: ``assistant`` messages, ``reasoning`` and every ``*_call``."""
        if type(item) is not dict:
            return False
        kind = item.get("type")
        if type(kind) is str and (kind == "reasoning" or kind.endswith("_call")):
            return True
        return item.get("role") == "assistant"

    @staticmethod
    def add_note(value: object, note: str) -> dict[str, Any] | None:
        """``note`` after a string ``input``, or as a user item after the others; in
        ``instructions`` while the last item is a call the client must answer."""
        given = value.get("input") if isinstance(value, dict) else None
        if not isinstance(value, dict):
            return None
        if isinstance(given, str):
            return {**value, "input": f"{given}\n\n{note}" if given else note}
        if not isinstance(given, list):
            return None
        last = given[-1] if given else None
        kind = last.get("type") if isinstance(last, dict) else None
        if type(kind) is str and kind in _CLIENT_CALLS:  # junk types may be unhashable
            instructions = value.get("instructions")
            text = (
                f"{instructions}\n\n{note}"
                if isinstance(instructions, str) and instructions
                else note
            )
            return {**value, "instructions": text}
        return {**value, "input": [*given, {"role": "user", "content": note}]}


OPENAI_RESPONSES: Final = OpenAIResponses()
"""The OpenAI Responses dialect."""
