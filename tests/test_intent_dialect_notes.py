"""A dialect's note keeps every conversation valid for its provider (tests/dialect_rules.py).

Valid conversations of each dialect, hand-written and generated, get a note from their
dialect; the noted body must pass the provider's rules, carry the note, and leave the
original untouched.
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
from loopfuse.intent.dialect import Dialect, add_note, dialect_for, dialect_named

NOTE = "[loopfuse] Loop detected: change approach."

Builder = Callable[..., dict[str, Any]]
CONVERSATIONS: dict[str, tuple[Builder, Callable[[dict[str, Any]], None], str]] = {
    "openai_chat": (openai_chat, check_openai_chat, "/v1/chat/completions"),
    "openai_responses": (responses, check_responses, "/v1/responses"),
    "anthropic": (anthropic, check_anthropic, "/v1/messages"),
    "gemini": (gemini, check_gemini, "/v1beta/models/gemini-2.5-pro:generateContent"),
    "ollama": (ollama, check_ollama, "/api/chat"),
}


def noted_and_valid(name: str, body: dict[str, Any]) -> dict[str, Any]:
    _, check, path = CONVERSATIONS[name]
    each: Dialect = dialect_named(name)
    assert dialect_for(path, name) is each
    check(body)  # the conversation was valid to begin with
    snapshot = copy.deepcopy(body)
    noted = each.add_note(body, NOTE)
    assert noted is not None
    assert add_note(body, NOTE, each) == noted
    check(noted)
    assert NOTE in json.dumps(noted)
    assert body == snapshot  # the original is untouched
    return noted


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
@settings(max_examples=150, deadline=None)
@given(steps=STEPS)
def test_every_noted_conversation_stays_valid(name: str, steps: list[tuple[str, int]]) -> None:
    noted_and_valid(name, CONVERSATIONS[name][0](steps))


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
def test_a_note_after_tool_results_goes_where_the_dialect_wants_it(name: str) -> None:
    noted = noted_and_valid(name, CONVERSATIONS[name][0]([("call", 2)]))
    if name in ("openai_chat", "ollama"):
        assert noted["messages"][-1] == {"role": "user", "content": NOTE}
    elif name == "openai_responses":
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
    noted = noted_and_valid("anthropic", anthropic([("call", 1)], prefill=True))
    assert noted["messages"][-1] == {"role": "assistant", "content": "{"}
    assert noted["system"] == f"Be brief.\n\n{NOTE}"


def test_openai_chat_without_a_system_message_gets_one_only_when_it_must() -> None:
    asked = openai_chat([], system=False)
    assert noted_and_valid("openai_chat", asked)["messages"][-1]["content"].endswith(NOTE)
    waiting = openai_chat([("call", 1)], system=False)
    waiting["messages"] = waiting["messages"][:-1]  # the tool result has not come back yet
    noted = dialect_named("openai_chat").add_note(waiting, NOTE)
    assert noted is not None
    assert noted["messages"][0] == {"role": "system", "content": NOTE}
    assert noted["messages"][1:] == waiting["messages"]  # nothing after the pending call


def test_a_responses_call_waiting_for_its_output_gets_the_note_in_instructions() -> None:
    waiting = responses([("call", 1)])
    waiting["input"] = waiting["input"][:-1]  # the call's output has not come back yet
    noted = dialect_named("openai_responses").add_note(waiting, NOTE)
    assert noted is not None
    assert noted["instructions"] == f"Be brief.\n\n{NOTE}"
    assert noted["input"] == waiting["input"]


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
