"""A note for the model keeps every conversation valid for its provider (tests/dialect_rules.py).

Valid conversations of each dialect, hand-written and generated, get a note; the noted
body must pass the provider's rules, carry the note, and leave the original untouched.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings

from dialect_conversations import STEPS, anthropic, gemini, ollama, openai_chat, responses
from dialect_rules import (
    Invalid,
    check_anthropic,
    check_gemini,
    check_ollama,
    check_openai_chat,
    check_responses,
)
from loopfuse.integrations._notes import add_note

NOTE = "[loopfuse] Loop detected: change approach."

DIALECTS: dict[str, tuple[Callable[..., dict[str, Any]], Callable[[dict[str, Any]], None], Any]] = {
    "openai_chat": (openai_chat, check_openai_chat, "openai"),
    "responses": (responses, check_responses, "openai"),
    "anthropic": (anthropic, check_anthropic, "anthropic"),
    "gemini": (gemini, check_gemini, "gemini"),
    "ollama": (ollama, check_ollama, "ollama"),
}


def assert_noted_and_valid(name: str, body: dict[str, Any]) -> dict[str, Any]:
    _, check, fmt = DIALECTS[name]
    check(body)  # the conversation was valid to begin with
    snapshot = copy.deepcopy(body)
    noted = add_note(body, fmt, NOTE)
    assert noted is not None
    check(noted)
    assert NOTE in json.dumps(noted)
    assert body == snapshot  # the original is untouched
    return noted


@pytest.mark.parametrize("name", sorted(DIALECTS))
@settings(max_examples=150, deadline=None)
@given(steps=STEPS)
def test_every_noted_conversation_stays_valid(name: str, steps: list[tuple[str, int]]) -> None:
    assert_noted_and_valid(name, DIALECTS[name][0](steps))


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_a_note_after_tool_results_goes_where_the_dialect_wants_it(name: str) -> None:
    noted = assert_noted_and_valid(name, DIALECTS[name][0]([("call", 2)]))
    if name in ("openai_chat", "ollama"):
        assert noted["messages"][-1] == {"role": "user", "content": NOTE}
    elif name == "responses":
        assert noted["input"][-1] == {"role": "user", "content": NOTE}
    elif name == "anthropic":
        assert [b["type"] for b in noted["messages"][-1]["content"]] == [
            "tool_result",
            "tool_result",
            "text",
        ]
    else:  # a Gemini function-response turn holds function responses only
        assert noted["systemInstruction"]["parts"][-1] == {"text": NOTE}


def test_an_anthropic_prefill_keeps_its_place_and_gets_the_note_as_system_text() -> None:
    noted = assert_noted_and_valid("anthropic", anthropic([("call", 1)], prefill=True))
    assert noted["messages"][-1] == {"role": "assistant", "content": "{"}
    assert noted["system"] == f"Be brief.\n\n{NOTE}"


def test_openai_chat_without_a_system_message_gets_one_only_when_it_must() -> None:
    asked = openai_chat([], system=False)
    assert assert_noted_and_valid("openai_chat", asked)["messages"][-1]["content"].endswith(NOTE)
    waiting = openai_chat([("call", 1)], system=False)
    waiting["messages"] = waiting["messages"][:-1]  # the tool result has not come back yet
    noted = add_note(waiting, "openai", NOTE)
    assert noted is not None
    assert noted["messages"][0] == {"role": "system", "content": NOTE}
    assert noted["messages"][1:] == waiting["messages"]  # nothing after the pending call


@pytest.mark.parametrize(
    ("check", "body"),
    [
        (check_openai_chat, {"messages": [{"role": "assistant", "tool_calls": [{"id": "c"}]},
                                          {"role": "user", "content": "x"}]}),
        (check_openai_chat, {"system": "x", "messages": [{"role": "user", "content": "x"}]}),
        (check_anthropic, {"messages": [{"role": "user", "content": "a"},
                                        {"role": "user", "content": "b"}]}),
        (check_anthropic, {"messages": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "input": {}}]},
            {"role": "user", "content": [{"type": "text", "text": "b"},
                                         {"type": "tool_result", "tool_use_id": "t"}]}]}),
        (check_anthropic, {"messages": [{"role": "system", "content": "x"}]}),
        (check_gemini, {"contents": [
            {"role": "user", "parts": [{"text": "a"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "f"}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "f"}}, {"text": "b"}]}]}),
        (check_gemini, {"contents": [{"role": "user", "parts": [{"text": "a"}]},
                                     {"role": "user", "parts": [{"text": "b"}]}]}),
        (check_responses, {"input": [{"type": "function_call", "call_id": "c", "name": "f"},
                                     {"role": "user", "content": "x"}]}),
        (check_ollama, {"messages": [{"role": "assistant", "tool_calls": [{}, {}]},
                                     {"role": "tool", "content": "x"}]}),
    ],
)  # fmt: skip
def test_the_validators_reject_what_the_providers_reject(check: Any, body: Any) -> None:
    with pytest.raises(Invalid):
        check(body)
