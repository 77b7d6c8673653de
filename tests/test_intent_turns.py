"""`intent.conversation`: the request before each assistant turn holds a prefix of the intent.

The guarantee ``loopfuse scan`` builds on (it replays a recorded run in one walk instead of
re-reading every prefix): cutting the conversation list where a turn starts gives a body
whose intent is the whole intent's first ``messages`` messages and first ``system``
system parts. Checked here on random bodies of every dialect, junk included.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from conversation_bodies import bodies
from loopfuse import intent


def expected_intent(whole: dict[str, Any], turn: intent.Turn) -> dict[str, Any]:
    out: dict[str, Any] = {"messages": whole["messages"][: turn.messages]}
    system = whole.get("system", [])[: turn.system]
    if system:
        out["system"] = system
    if "tools" in whole:
        out["tools"] = whole["tools"]
    return out


def check_every_cut(body: dict[str, Any]) -> intent.Conversation | None:
    found = intent.conversation(body)
    if found is None:
        return None
    assert found.intent == intent.extract_intent(body)
    items = body[found.key]
    previous = -1
    for turn in found.turns:
        assert turn.start > previous
        previous = turn.start
        cut = intent.extract_intent({**body, found.key: items[: turn.start]})
        assert cut == expected_intent(found.intent, turn), turn
        assert turn.messages <= turn.end <= len(found.intent["messages"])
    return found


# --- the turns of each dialect ---------------------------------------------------------


def anthropic_body() -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(3):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "checking"},
                    {"type": "tool_use", "id": f"t{i}", "name": "ls", "input": {"p": "."}},
                    {"type": "tool_use", "id": f"u{i}", "name": "pwd", "input": {}},
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"t{i}", "content": "a.py"},
                    {"type": "tool_result", "tool_use_id": f"u{i}", "content": "/w"},
                ],
            }
        )
    return {"model": "claude", "max_tokens": 100, "system": "s", "messages": messages}


def gemini_body() -> dict[str, Any]:
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "go"}]}]
    for _ in range(2):
        contents.append({"role": "model", "parts": [{"functionCall": {"name": "ls", "args": {}}}]})
        contents.append(
            {"role": "user", "parts": [{"functionResponse": {"name": "ls", "response": {}}}]}
        )
    return {"contents": contents}


def responses_body() -> dict[str, Any]:
    items: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(2):
        items += [
            {"type": "reasoning", "summary": []},
            {"type": "function_call", "call_id": f"a{i}", "name": "ls", "arguments": "{}"},
            {"type": "function_call", "call_id": f"b{i}", "name": "pwd", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"a{i}", "output": "a.py"},
            {"type": "function_call_output", "call_id": f"b{i}", "output": "/w"},
        ]
    return {"model": "gpt-5", "input": items}


@pytest.mark.parametrize(
    ("body", "dialect", "starts", "calls"),
    [
        (anthropic_body(), "anthropic", [1, 3, 5], [2, 2, 2]),
        (gemini_body(), "gemini", [1, 3], [1, 1]),
        # Responses: one turn is a run of output items (reasoning + both calls).
        (responses_body(), "openai_responses", [1, 6], [2, 2]),
    ],
)
def test_turns_in_every_dialect(
    body: dict[str, Any], dialect: str, starts: list[int], calls: list[int]
) -> None:
    found = check_every_cut(body)
    assert found is not None
    assert found.dialect == dialect
    assert [turn.start for turn in found.turns] == starts
    assert [turn.calls for turn in found.turns] == calls


def test_the_answer_of_each_turn_is_its_slice_of_the_intent() -> None:
    found = intent.conversation(anthropic_body())
    assert found is not None
    for turn in found.turns:
        [answer] = found.intent["messages"][turn.messages : turn.end]
        assert answer["role"] == "assistant"
        assert [call["name"] for call in answer["tool_calls"]] == ["ls", "pwd"]


def test_no_conversation_list_no_turns() -> None:
    assert intent.conversation({"model": "m", "input": "hello"}) is None
    assert intent.conversation(b"not json") is None
    assert intent.conversation({"foo": 1}) is None
    assert intent.conversation([1, 2]) is None
    empty = intent.conversation(b'{"model": "m", "messages": []}')
    assert empty is not None
    assert empty.turns == ()


def test_a_reasoning_only_response_adds_nothing_to_the_intent() -> None:
    # Two requests of one conversation with the same intent: what lets a breaker or a
    # cache act on a recorded run at all.
    items = [
        {"role": "user", "content": "go"},
        {"type": "reasoning", "encrypted_content": "x"},
        {"role": "user", "content": "and?"},
        {"type": "reasoning", "encrypted_content": "y"},
        {"type": "reasoning", "encrypted_content": "z"},
    ]
    found = check_every_cut({"model": "m", "input": items})
    assert found is not None
    assert [(t.start, t.messages, t.end) for t in found.turns] == [(1, 1, 1), (3, 2, 2)]


# --- random bodies (tests/conversation_bodies.py) ----------------------------------


@settings(max_examples=400, deadline=None)
@given(bodies)
def test_every_cut_holds_a_prefix_of_the_intent(body: dict[str, Any]) -> None:
    check_every_cut(body)


@settings(max_examples=200, deadline=None)
@given(bodies)
def test_equal_marks_are_equal_intents(body: dict[str, Any]) -> None:
    found = intent.conversation(body)
    if found is None:
        return
    items = body[found.key]
    fingerprints = {}
    for turn in found.turns:
        cut = {**body, found.key: items[: turn.start]}
        fingerprints.setdefault((turn.messages, turn.system), set()).add(intent.fingerprint(cut))
    assert all(len(seen) == 1 for seen in fingerprints.values())
    assert len({next(iter(seen)) for seen in fingerprints.values()}) == len(fingerprints)
