"""``messages``-style bodies: OpenAI Chat Completions, Anthropic Messages and Ollama.

The three share one walk: each knows a superset of the same message shapes (string or
block content, ``tool_calls`` with string or object arguments, ``tool_use`` /
``tool_result`` blocks), so one tolerant normaliser serves all of them and a body that
mixes spellings still has one well-defined intent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from loopfuse.intent._parts import (
    CallLinker,
    Part,
    Walk,
    add_part,
    assemble,
    content_parts,
    parse_arguments,
    tool_call,
)
from loopfuse.intent._written import has_written_calls, written_messages

_SYSTEM_ROLES = frozenset({"system", "developer"})
_TEXT_TYPES = frozenset({"text", "input_text"})
_FIELDS: Final = frozenset({"messages", "system", "tools"})
_LEGACY_FIELDS: Final = _FIELDS | {"functions"}


def chat_fields(body: Mapping[str, Any]) -> frozenset[str]:
    """The top-level fields :func:`chat_intent` reads: ``messages``, Anthropic's
    ``system``, ``tools``, and legacy OpenAI ``functions`` when there is no ``tools``.

    >>> sorted(chat_fields({"messages": [], "functions": []}))
    ['functions', 'messages', 'system', 'tools']
    """
    return _FIELDS if "tools" in body else _LEGACY_FIELDS


def is_chat_answer(item: object) -> bool:
    """Whether a ``messages`` item is the model's: an ``assistant`` message."""
    return type(item) is dict and item.get("role") == "assistant"


def chat_intent(body: dict[str, Any], walk: Walk | None = None) -> dict[str, Any]:
    """The canonical intent of a body with a ``messages`` list."""
    system: list[Part] = content_parts(body.get("system"))  # Anthropic's top-level system
    messages: list[dict[str, Any]] = []
    linker = CallLinker()
    leading = True  # system/developer messages before the first other one are the prompt
    waiting = False  # the last turn wrote its calls as text: a user turn may answer them
    marks = walk.marks if walk is not None else None
    for message in body["messages"]:
        if marks is not None:
            marks.append((len(messages), len(system)))
        if type(message) is not dict and not isinstance(message, dict):
            messages.append({"role": "unknown", "value": message})
            leading = False
            continue
        role = message.get("role")
        if type(role) is not str:
            role = None  # junk roles may be unhashable
        if role in _SYSTEM_ROLES:
            parts = content_parts(message.get("content"))
            if leading:
                system.extend(parts)
            else:
                messages.append({"role": "system", "content": parts})
            continue
        leading = False
        if role == "assistant":
            canon = _assistant(message, linker, walk)
            waiting = False
            if "tool_calls" in canon:  # the common case, kept cheap
                messages.append(canon)
                continue
            content = canon["content"]
            written = None
            if len(content) != 1 or type(content[0]) is not str or has_written_calls(content[0]):
                written = written_messages("assistant", content, linker, walk)
            if written is None:
                messages.append(canon)
            else:
                messages.extend(written[0])
                waiting = written[1]
        elif role == "tool":
            messages.append(_tool_result(message, linker))
            if walk is not None and "tool_name" in message:
                walk.ollama = True
        elif role == "user":
            content = message.get("content")
            if not waiting and type(content) is str and not has_written_calls(content):
                _user(message, linker, messages, walk)  # the common case, kept cheap
            else:
                waiting = _user_turn(message, linker, messages, walk, waiting)
        elif role == "function":  # legacy OpenAI function result
            name = message.get("name")
            result: dict[str, Any] = {
                "role": "tool",
                "call": linker.link(None, name if isinstance(name, str) else ""),
                "content": content_parts(message.get("content")),
            }
            if isinstance(name, str):
                result["name"] = name
            messages.append(result)
        elif role is not None:
            messages.append({"role": role, "content": content_parts(message.get("content"))})
        else:
            messages.append({"role": "unknown", "value": message})
    return assemble(messages, system, body.get("tools", body.get("functions")))


def _assistant(message: dict[str, Any], linker: CallLinker, walk: Walk | None) -> dict[str, Any]:
    parts: list[Part] = []
    calls: list[dict[str, Any]] = []
    ids: list[object] = []
    content = message.get("content")
    if type(content) is str:  # the common case, kept cheap
        if content:
            parts.append(content)
    elif isinstance(content, list):
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_use":  # Anthropic
                calls.append(tool_call(block.get("name"), block.get("input"), walk))
                ids.append(block.get("id"))
                if walk is not None:
                    walk.anthropic = True
            else:
                if walk is not None and kind in ("thinking", "redacted_thinking"):
                    walk.anthropic = True
                add_part(parts, block)
    elif content is not None:
        add_part(parts, content)
    thinking = message.get("thinking")  # Ollama keeps reasoning beside the content
    if isinstance(thinking, str):
        if thinking:
            parts.insert(0, {"type": "thinking", "text": thinking})
        if walk is not None:
            walk.ollama = True
    raw_calls = message.get("tool_calls")
    if isinstance(raw_calls, list):
        for raw in raw_calls:
            if not isinstance(raw, dict):
                calls.append({"name": "", "arguments": raw})
                ids.append(None)
                continue
            function = raw.get("function")
            if function is None:
                function = raw.get("custom")  # OpenAI custom tools: {"name", "input"}
            if isinstance(function, dict):
                name = function.get("name")
                arguments = function.get("arguments")
                if arguments is None:
                    arguments = function.get("input")
                elif walk is not None and type(arguments) is dict:
                    walk.ollama = True  # Ollama sends arguments as an object
            else:
                name = raw.get("name")
                arguments = raw.get("arguments")
            # tool_call(name, arguments, walk), inline: once per call of every turn
            if not isinstance(name, str):
                name = ""
            parsed = {} if arguments is None else parse_arguments(arguments, walk)
            calls.append({"name": name, "arguments": parsed})
            ids.append(raw.get("id"))
    elif raw_calls is not None:
        calls.append({"name": "", "arguments": raw_calls})
        ids.append(None)
    function_call = message.get("function_call")  # legacy OpenAI
    if isinstance(function_call, dict):
        calls.append(tool_call(function_call.get("name"), function_call.get("arguments"), walk))
        ids.append(None)
    canon: dict[str, Any] = {"role": "assistant", "content": parts}
    if calls:
        canon["tool_calls"] = calls
        linker.start_turn(ids, calls)
    return canon


def _user_turn(
    message: dict[str, Any],
    linker: CallLinker,
    messages: list[dict[str, Any]],
    walk: Walk | None,
    waiting: bool,
) -> bool:
    """Append a user message: the answer to calls written as text, a prompt holding a
    written scratchpad of calls, or a plain user turn. Whether calls still wait for an
    answer after it."""
    content = message.get("content")
    if type(content) is str or (
        isinstance(content, list)
        and all(isinstance(b, dict) and _text_type(b.get("type")) for b in content)
    ):
        parts = content_parts(content)
        written = written_messages("user", parts, linker, walk, waiting) if parts else None
        if written is not None:
            messages.extend(written[0])
            return written[1]
    _user(message, linker, messages, walk)
    return False


def _text_type(kind: object) -> bool:
    """Whether a block ``type`` is a text block's (junk types may be unhashable)."""
    return type(kind) is str and kind in _TEXT_TYPES


def _tool_result(message: dict[str, Any], linker: CallLinker) -> dict[str, Any]:
    name = message.get("tool_name", message.get("name"))
    content = message.get("content")
    result: dict[str, Any] = {
        "role": "tool",
        "call": linker.link(message.get("tool_call_id"), name),
        # content_parts(content), with its common case (a non-empty string) inline
        "content": [content] if type(content) is str and content else content_parts(content),
    }
    if isinstance(name, str):
        result["name"] = name
    if message.get("is_error") is True:  # the framework's own flag (LangChain's status)
        result["is_error"] = True
    return result


def _user(
    message: dict[str, Any],
    linker: CallLinker,
    messages: list[dict[str, Any]],
    walk: Walk | None,
) -> None:
    """A user message; Anthropic ``tool_result`` blocks become ``tool`` messages first."""
    content = message.get("content")
    if walk is not None and "images" in message:
        walk.ollama = True
    if not isinstance(content, list):
        messages.append({"role": "user", "content": content_parts(content)})
        _images(message, messages[-1])
        return
    parts: list[Part] = []
    answered = False  # a tool_result block was met
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_result":
            answered = True
            if walk is not None:
                walk.anthropic = True
            result: dict[str, Any] = {
                "role": "tool",
                "call": linker.link(block.get("tool_use_id")),
                "content": content_parts(block.get("content")),
            }
            flag = block.get("is_error")
            if type(flag) is bool:  # said either way: a structured failure, or success
                result["is_error"] = flag
            messages.append(result)
        else:
            if walk is not None and kind in ("thinking", "redacted_thinking"):
                walk.anthropic = True
            add_part(parts, block)
    if parts or not answered:
        messages.append({"role": "user", "content": parts})


def _images(message: dict[str, Any], canon: dict[str, Any]) -> None:
    images = message.get("images")  # Ollama: base64 strings beside the text
    if isinstance(images, list):
        canon["content"].extend({"type": "image", "data": image} for image in images)
