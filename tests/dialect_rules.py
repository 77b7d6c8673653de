"""What each provider accepts as a conversation, as validators for the tests.

Each ``check_*`` raises :class:`Invalid` naming the broken rule. The rules are the ones the
providers document (and answer with a 400 when broken):

- OpenAI Chat Completions: "An assistant message with 'tool_calls' must be followed by
  tool messages responding to each 'tool_call_id'"; "messages with role 'tool' must be a
  response to a preceding message with 'tool_calls'"; system text is a ``system`` or
  ``developer`` message (there is no top-level ``system``).
- OpenAI Responses: every ``function_call`` item is answered by a
  ``function_call_output`` of its ``call_id``, after it; system text is ``instructions``
  (or a system/developer message item).
- Anthropic Messages: roles are ``user`` and ``assistant`` only (system text is the
  top-level ``system``), alternating, from a ``user`` turn; each ``tool_use`` is answered
  by a ``tool_result`` of its id in the very next (user) message, and the ``tool_result``
  blocks come first in that message's content; only the last turn may be an assistant
  prefill, and not one holding a ``tool_use``.
- Gemini ``generateContent``: roles ``user`` and ``model`` alternate; "function call turn
  comes immediately after a user turn or after a function response turn"; "function
  response turn comes immediately after a function call turn"; "the number of function
  response parts is equal to the number of function call parts of the function call
  turn"; a function response turn holds function responses only; the last turn is the
  user's; system text is ``systemInstruction``.
- Ollama ``/api/chat``: roles ``system``, ``user``, ``assistant``, ``tool``; the calls of an
  assistant message are answered by as many ``tool`` messages right after it.
"""

from __future__ import annotations

from typing import Any


class Invalid(AssertionError):
    """A body its provider would reject."""


def _require(condition: bool, rule: str) -> None:
    if not condition:
        raise Invalid(rule)


def check_openai_chat(body: dict[str, Any]) -> None:
    _require("system" not in body, "OpenAI Chat has no top-level system: use a system message")
    messages = body["messages"]
    _require(isinstance(messages, list) and bool(messages), "messages must be a non-empty list")
    pending: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        _require(
            role in ("system", "developer", "user", "assistant", "tool"),
            f"message {index}: unknown role {role!r}",
        )
        if pending and role != "tool":
            raise Invalid(f"message {index}: tool calls {sorted(pending)} have no tool message")
        if role == "assistant":
            pending = {call["id"] for call in message.get("tool_calls") or []}
        elif role == "tool":
            call = message.get("tool_call_id")
            _require(call in pending, f"message {index}: tool message answers no pending call")
            pending.discard(call)
    _require(not pending, f"tool calls {sorted(pending)} have no tool message")


def check_ollama(body: dict[str, Any]) -> None:
    _require("system" not in body, "Ollama has no top-level system: use a system message")
    messages = body["messages"]
    _require(isinstance(messages, list) and bool(messages), "messages must be a non-empty list")
    waiting = 0
    for index, message in enumerate(messages):
        role = message.get("role")
        _require(role in ("system", "user", "assistant", "tool"), f"message {index}: bad role")
        if waiting and role != "tool":
            raise Invalid(f"message {index}: {waiting} tool calls have no tool message")
        if role == "assistant":
            waiting = len(message.get("tool_calls") or [])
        elif role == "tool":
            _require(waiting > 0, f"message {index}: tool message answers no call")
            waiting -= 1
    _require(waiting == 0, "the last tool calls have no tool message")


def check_responses(body: dict[str, Any]) -> None:
    _require("system" not in body, "Responses has no top-level system: use instructions")
    instructions = body.get("instructions")
    _require(instructions is None or isinstance(instructions, str), "instructions is a string")
    items = body["input"]
    if isinstance(items, str):
        return
    calls: set[str] = set()
    answered: set[str] = set()
    for index, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "function_call":
            calls.add(item["call_id"])
        elif kind == "function_call_output":
            _require(item["call_id"] in calls, f"item {index}: output of an unknown call")
            answered.add(item["call_id"])
        else:
            role = item.get("role")
            _require(
                role in ("user", "assistant", "system", "developer"),
                f"item {index}: bad role {role!r}",
            )
    _require(calls == answered, f"calls {sorted(calls - answered)} have no output")


def _blocks(content: Any) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def check_anthropic(body: dict[str, Any]) -> None:
    system = body.get("system")
    _require(
        system is None
        or isinstance(system, str)
        or all(block.get("type") == "text" for block in system),
        "system is a string or a list of text blocks",
    )
    messages = body["messages"]
    _require(isinstance(messages, list) and bool(messages), "messages must be a non-empty list")
    _require(messages[0].get("role") == "user", "the first message is the user's")
    uses: list[str] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        _require(role in ("user", "assistant"), f"message {index}: role {role!r} (system?)")
        if index:
            _require(role != messages[index - 1]["role"], f"message {index}: turns alternate")
        blocks = _blocks(message["content"])
        results = [block for block in blocks if block.get("type") == "tool_result"]
        if role == "user":
            answered = [block["tool_use_id"] for block in results]
            _require(sorted(answered) == sorted(uses), f"message {index}: tool_use unanswered")
            _require(
                blocks[: len(results)] == results, f"message {index}: tool_result blocks first"
            )
            uses = []
        else:
            _require(not results, f"message {index}: tool_result in an assistant turn")
            uses = [block["id"] for block in blocks if block.get("type") == "tool_use"]
    _require(not uses, "the conversation ends on a tool_use without its result")


def check_gemini(body: dict[str, Any]) -> None:
    _require("system" not in body, "Gemini takes system text as systemInstruction")
    instruction = body.get("systemInstruction", body.get("system_instruction"))
    if isinstance(instruction, dict):
        _require(all("text" in part for part in instruction["parts"]), "text parts only")
    contents = body["contents"]
    _require(isinstance(contents, list) and bool(contents), "contents must be a non-empty list")
    calls = 0
    previous: str | None = None
    for index, content in enumerate(contents):
        role = content.get("role", "user")
        _require(role in ("user", "model"), f"content {index}: role {role!r}")
        _require(role != previous, f"content {index}: user and model turns alternate")
        parts = content["parts"]
        responses = [part for part in parts if "functionResponse" in part]
        if role == "user":
            if calls:
                _require(
                    len(responses) == calls,
                    f"content {index}: {len(responses)} function responses for {calls} calls",
                )
            else:
                _require(not responses, f"content {index}: a function response without a call")
            _require(
                not responses or len(responses) == len(parts),
                f"content {index}: a function response turn holds function responses only",
            )
            calls = 0
        else:
            calls = sum("functionCall" in part for part in parts)
        previous = role
    _require(previous == "user", "the last turn is the user's")
