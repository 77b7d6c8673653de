"""Gemini ``generateContent`` (``gemini``): ``contents``, ``systemInstruction``, ``tools``.

The REST API accepts both camelCase and snake_case field names; both are read.
The model is not in the body but in the URL path (``…/models/NAME:generateContent``,
Vertex AI's ``tunedModels/`` and ``endpoints/`` too), which is why fingerprints and
request keys take the path; ``:streamGenerateContent`` asks for a stream whatever the
body says. The sampling identity is ``generationConfig.seed`` and ``candidateCount``;
there is no end-user field. A refusal is a Google RPC status. A note joins the last
user turn as a text part; after a function call or a function response (a turn that
holds function responses only, and may not be followed by another user turn) it goes
into ``systemInstruction``.

>>> from loopfuse.intent.gemini import GEMINI
>>> GEMINI.path_model("/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse")
'models/gemini-2.0-flash'
>>> body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
>>> GEMINI.add_note(body, "stop")["contents"][-1]
{'role': 'user', 'parts': [{'text': 'hi'}, {'text': 'stop'}]}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from loopfuse.intent._json import json_bytes
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
from loopfuse.intent._wire import always, dialect_repr, note_turns, path_group, stream_asked

__all__ = ["GEMINI", "Gemini", "gemini_intent"]

_CAMEL_FIELDS: Final = frozenset({"contents", "tools", "systemInstruction"})
_SNAKE_FIELDS: Final = frozenset({"contents", "tools", "system_instruction"})
_MODEL: Final = re.compile(r"(?:^|/)((?:models|tunedModels|endpoints)/[^/:?#]+)")
_STREAM: Final = ":streamGenerateContent"


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
            answer = response.get("response")
            result: dict[str, Any] = {
                "role": "tool",
                "call": linker.link(response.get("id"), name),
                "content": [{"type": "json", "value": answer}],
            }
            if isinstance(name, str):
                result["name"] = name
            if type(answer) is dict and "error" in answer and "output" not in answer:
                # The Gemini API's own convention: a failed call answers {"error": ...}
                # (Gemini CLI's refused calls say no error word at all).
                result["is_error"] = True
            messages.append(result)
        else:
            others.append(part)
    parts = _parts(others)
    if parts or not answered:
        messages.append({"role": "user", "content": parts})


class Gemini:
    """The Gemini dialect (see :class:`~loopfuse.intent.dialect.Dialect`)."""

    __slots__ = ()
    __repr__ = dialect_repr

    name: Final = "gemini"
    conversation: Final = "contents"
    text_conversation: Final = False
    endpoints: Final = (":generateContent", _STREAM)
    seed_fields: Final = (("generationConfig", "seed"),)
    choice_fields: Final = (("generationConfig", "candidateCount"),)
    temperature_fields: Final = (("generationConfig", "temperature"),)
    answers_run: Final = False

    intent = staticmethod(gemini_intent)
    detect = staticmethod(always)  # a contents body is a Gemini body
    streams = staticmethod(stream_asked)  # Gemini streams by its path (path_streams)

    @staticmethod
    def intent_fields(value: Mapping[str, Any]) -> frozenset[str]:
        """``contents``, ``tools`` and ``systemInstruction`` (``system_instruction`` when
        the camelCase field is absent)."""
        return _CAMEL_FIELDS if "systemInstruction" in value else _SNAKE_FIELDS

    @staticmethod
    def is_answer(item: object) -> bool:
        """A ``model`` content."""
        return type(item) is dict and item.get("role") == "model"

    @staticmethod
    def end_users(value: Mapping[str, Any]) -> tuple[tuple[str, object], ...]:
        """None: a Gemini body names no end user."""
        return ()

    @staticmethod
    def path_streams(path: str) -> bool:
        """``:streamGenerateContent``."""
        return _STREAM in path

    @staticmethod
    def claims_path(path: str) -> bool:
        """``:generateContent`` or ``:streamGenerateContent``."""
        return ":generateContent" in path or _STREAM in path

    @staticmethod
    def path_model(path: str) -> str | None:
        """``models/NAME``, ``tunedModels/NAME`` or ``endpoints/ID``, or ``None``."""
        return path_group(_MODEL, path)

    @staticmethod
    def error_body(kind: str, message: str) -> bytes:
        """A Google RPC status: ``FAILED_PRECONDITION``, ``kind`` as the reason."""
        value = {
            "error": {
                "code": 400,
                "message": message,
                "status": "FAILED_PRECONDITION",
                "details": [{"reason": kind, "domain": "loopfuse"}],
            }
        }
        return json_bytes(value, compact=False)

    @staticmethod
    def add_note(value: object, note: str) -> dict[str, Any] | None:
        """``note`` as a text part of the last user turn, or a new user turn; in
        ``systemInstruction`` after a function call or a function response."""
        contents = value.get("contents") if isinstance(value, dict) else None
        if not isinstance(value, dict) or not isinstance(contents, list):
            return None
        if _function_turn(contents[-1] if contents else None):
            return _into_system_instruction(value, note)
        notes = note_turns(contents, "parts", note, _part_into, [{"text": note}])
        return {**value, "contents": notes}


GEMINI: Final = Gemini()
"""The Gemini dialect."""


def _function_turn(last: object) -> bool:
    """Whether a conversation ends on function calls (awaiting their responses) or on
    function responses: no user text may follow either."""
    if not isinstance(last, dict):
        return False
    parts = last.get("parts")
    key = "functionCall" if last.get("role") == "model" else "functionResponse"
    return isinstance(parts, list) and any(isinstance(part, dict) and key in part for part in parts)


def _part_into(parts: object, note: str) -> object:
    if isinstance(parts, list):
        return [*parts, {"text": note}]
    return None


def _into_system_instruction(value: dict[str, Any], note: str) -> dict[str, Any]:
    key = "system_instruction" if "system_instruction" in value else "systemInstruction"
    given = value.get(key)
    if isinstance(given, dict) and isinstance(given.get("parts"), list):
        return {**value, key: {**given, "parts": [*given["parts"], {"text": note}]}}
    if isinstance(given, str):  # the SDKs accept a bare string; keep its kind
        return {**value, key: f"{given}\n\n{note}" if given else note}
    return {**value, key: {"parts": [{"text": note}]}}
