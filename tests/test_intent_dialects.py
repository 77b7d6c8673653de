"""extract_intent / fingerprint per dialect: what must fingerprint equal, and what must differ."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable
from typing import Any

import pytest

from loopfuse.intent import detect_dialect, extract_intent, fingerprint

Body = dict[str, Any]


def openai_chat() -> Body:
    return {
        "model": "gpt-4o",
        "temperature": 0.2,
        "stream": False,
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Fix the failing test."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_abc",
                        "type": "function",
                        "function": {"name": "run", "arguments": '{"cmd": "pytest", "n": 1}'},
                    },
                    {
                        "id": "call_def",
                        "type": "function",
                        "function": {"name": "read", "arguments": '{"path": "a.py"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_def", "content": "print(1)"},
            {"role": "tool", "tool_call_id": "call_abc", "content": "1 failed"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "run",
                    "description": "Run a command",
                    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
                },
            }
        ],
    }


def openai_responses() -> Body:
    return {
        "model": "gpt-5",
        "instructions": "You are a coding agent.",
        "store": False,
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Fix the failing test."}]},
            {"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAA...", "summary": []},
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_abc",
                "name": "run",
                "arguments": '{"cmd": "pytest", "n": 1}',
            },
            {"type": "function_call_output", "call_id": "call_abc", "output": "1 failed"},
        ],
        "tools": [
            {
                "type": "function",
                "name": "run",
                "description": "Run a command",
                "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
            }
        ],
    }


def anthropic() -> Body:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": [
            {
                "type": "text",
                "text": "You are a coding agent.",
                "cache_control": {"type": "ephemeral"},
            }
        ],
        "messages": [
            {"role": "user", "content": "Fix the failing test."},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Run the tests.", "signature": "sig-1"},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "run",
                        "input": {"cmd": "pytest", "n": 1},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": "1 failed",
                        "cache_control": {"type": "ephemeral"},
                    }
                ],
            },
        ],
        "tools": [
            {
                "name": "run",
                "description": "Run a command",
                "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}},
            }
        ],
    }


def gemini() -> Body:
    return {
        "systemInstruction": {"parts": [{"text": "You are a coding agent."}]},
        "generationConfig": {"temperature": 0.2},
        "contents": [
            {"role": "user", "parts": [{"text": "Fix the failing test."}]},
            {
                "role": "model",
                "parts": [
                    {
                        "functionCall": {"name": "run", "args": {"cmd": "pytest", "n": 1}},
                        "thoughtSignature": "c2ln",
                    }
                ],
            },
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": "run", "response": {"out": "1 failed"}}}],
            },
        ],
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "run",
                        "description": "Run a command",
                        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
                    }
                ]
            }
        ],
    }


def ollama() -> Body:
    return {
        "model": "llama3.1",
        "stream": False,
        "options": {"temperature": 0.2},
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Fix the failing test."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"function": {"name": "run", "arguments": {"cmd": "pytest", "n": 1}}}
                ],
            },
            {"role": "tool", "tool_name": "run", "content": "1 failed"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "run",
                    "description": "Run a command",
                    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
                },
            }
        ],
    }


DIALECTS: dict[str, Callable[[], Body]] = {
    "openai_chat": openai_chat,
    "openai_responses": openai_responses,
    "anthropic": anthropic,
    "gemini": gemini,
    "ollama": ollama,
}


def shuffled(value: Any, rng: random.Random) -> Any:
    """The same JSON value with every object's keys in a random order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


def edit(body: Body, change: Callable[[Body], None]) -> Body:
    changed = copy.deepcopy(body)
    change(changed)
    return changed


# (dialect, description, change): the changed body must fingerprint EQUAL to the original.
SAME: list[tuple[str, str, Callable[[Body], None]]] = [
    ("openai_chat", "temperature", lambda b: b.update(temperature=1.0, top_p=0.5, seed=3)),
    ("openai_chat", "stream flags", lambda b: b.update(stream=True, stream_options={"x": 1})),
    ("openai_chat", "user/metadata/store/service_tier", lambda b: b.update(
        user="u1", metadata={"run": "7"}, store=True, service_tier="flex")),
    ("openai_chat", "ids regenerated", lambda b: [
        b["messages"][2]["tool_calls"][0].update(id="call_X"),
        b["messages"][4].update(tool_call_id="call_X"),
        b["messages"][2]["tool_calls"][1].update(id="call_Y"),
        b["messages"][3].update(tool_call_id="call_Y")]),
    ("openai_chat", "model changed", lambda b: b.update(model="gpt-4.1")),
    ("openai_chat", "arguments re-serialised", lambda b: b["messages"][2]["tool_calls"][0][
        "function"].update(arguments='{ "n" : 1 ,"cmd":"pytest"}')),
    ("openai_chat", "string content vs text part", lambda b: b["messages"][1].update(
        content=[{"type": "text", "text": "Fix the failing test."}])),
    ("openai_responses", "reasoning item regenerated", lambda b: b["input"][1].update(
        id="rs_2", encrypted_content="gBBBB...")),
    ("openai_responses", "call ids regenerated", lambda b: [
        b["input"][2].update(id="fc_9", call_id="call_9"), b["input"][3].update(call_id="call_9")]),
    ("openai_responses", "previous_response_id", lambda b: b.update(previous_response_id="r_1")),
    ("anthropic", "cache_control moved", lambda b: [
        b["system"][0].pop("cache_control"),
        b["messages"][0].update(content=[{"type": "text", "text": "Fix the failing test.",
                                          "cache_control": {"type": "ephemeral"}}])]),
    ("anthropic", "thinking signature", lambda b: b["messages"][1]["content"][0].update(
        signature="sig-2")),
    ("anthropic", "tool_use id regenerated", lambda b: [
        b["messages"][1]["content"][1].update(id="toolu_9"),
        b["messages"][2]["content"][0].update(tool_use_id="toolu_9")]),
    ("anthropic", "system string vs block", lambda b: b.update(system="You are a coding agent.")),
    ("anthropic", "redacted thinking added", lambda b: b["messages"][1]["content"].insert(
        0, {"type": "redacted_thinking", "data": "opaque"})),
    ("gemini", "thought signature", lambda b: b["contents"][1]["parts"][0].update(
        thoughtSignature="b3RoZXI=")),
    ("gemini", "generationConfig", lambda b: b.update(generationConfig={"temperature": 1})),
    ("gemini", "volatile key beside the declarations", lambda b: b["tools"][0].update(id="t1")),
    ("gemini", "snake_case fields", lambda b: b.update(
        system_instruction=b.pop("systemInstruction"))),
    ("ollama", "options", lambda b: b.update(options={"temperature": 0.9, "seed": 1})),
    ("ollama", "keep_alive", lambda b: b.update(keep_alive="5m")),
]  # fmt: skip

# (dialect, description, change): the changed body must fingerprint DIFFERENT from the original.
DIFFERENT: list[tuple[str, str, Callable[[Body], None]]] = [
    ("openai_chat", "user content", lambda b: b["messages"][1].update(content="Fix it.")),
    ("openai_chat", "tool arguments", lambda b: b["messages"][2]["tool_calls"][0][
        "function"].update(arguments='{"cmd": "pytest -x", "n": 1}')),
    ("openai_chat", "tool result", lambda b: b["messages"][4].update(content="2 failed")),
    ("openai_chat", "tool result flagged failed (LangChain's status)", lambda b: b["messages"][
        4].update(is_error=True)),
    ("openai_chat", "system prompt", lambda b: b["messages"][0].update(content="Be brief.")),
    ("openai_chat", "result linked to the other call", lambda b: [
        b["messages"][3].update(tool_call_id="call_abc"),
        b["messages"][4].update(tool_call_id="call_def")]),
    ("openai_chat", "tools offered", lambda b: b.pop("tools")),
    ("openai_chat", "one more turn", lambda b: b["messages"].append(
        {"role": "user", "content": "again"})),
    ("openai_responses", "tool output", lambda b: b["input"][3].update(output="0 failed")),
    ("openai_responses", "instructions", lambda b: b.update(instructions="Be brief.")),
    ("openai_responses", "arguments", lambda b: b["input"][2].update(arguments='{"cmd": "ls"}')),
    ("anthropic", "system prompt", lambda b: b["system"][0].update(text="Be brief.")),
    ("anthropic", "tool input", lambda b: b["messages"][1]["content"][1].update(
        input={"cmd": "ls"})),
    ("anthropic", "tool result is an error", lambda b: b["messages"][2]["content"][0].update(
        is_error=True)),
    ("anthropic", "visible thinking text", lambda b: b["messages"][1]["content"][0].update(
        thinking="Read the file.")),
    ("gemini", "function args", lambda b: b["contents"][1]["parts"][0]["functionCall"].update(
        args={"cmd": "ls"})),
    ("gemini", "function response", lambda b: b["contents"][2]["parts"][0][
        "functionResponse"].update(response={"out": "ok"})),
    ("gemini", "system instruction", lambda b: b.update(
        systemInstruction={"parts": [{"text": "Be brief."}]})),
    ("ollama", "tool arguments", lambda b: b["messages"][2]["tool_calls"][0]["function"].update(
        arguments={"cmd": "ls"})),
    ("ollama", "tool result", lambda b: b["messages"][3].update(content="ok")),
]  # fmt: skip


@pytest.mark.parametrize(("dialect", "what", "change"), SAME, ids=[f"{d}:{w}" for d, w, _ in SAME])
def test_same_intent_same_fingerprint(
    dialect: str, what: str, change: Callable[[Body], None]
) -> None:
    body = DIALECTS[dialect]()
    changed = edit(body, change)
    assert changed != body, "the table entry must change the body"
    assert extract_intent(changed) == extract_intent(body), what
    assert fingerprint(json.dumps(changed)) == fingerprint(json.dumps(body)), what


@pytest.mark.parametrize(
    ("dialect", "what", "change"), DIFFERENT, ids=[f"{d}:{w}" for d, w, _ in DIFFERENT]
)
def test_different_intent_different_fingerprint(
    dialect: str, what: str, change: Callable[[Body], None]
) -> None:
    body = DIALECTS[dialect]()
    changed = edit(body, change)
    assert fingerprint(json.dumps(changed)) != fingerprint(json.dumps(body)), what


@pytest.mark.parametrize("empty", [None, []])
def test_tools_null_or_empty_is_the_same_as_absent(empty: object) -> None:
    body = openai_chat()
    del body["tools"]
    with_empty = dict(body, tools=empty)
    assert fingerprint(with_empty) == fingerprint(body)
    assert "tools" not in (extract_intent(with_empty) or {})


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_key_order_shuffled(dialect: str) -> None:
    body = DIALECTS[dialect]()
    rng = random.Random(dialect)
    for _ in range(5):
        assert fingerprint(json.dumps(shuffled(body, rng))) == fingerprint(json.dumps(body))


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_dialect_detected_and_path_matters(dialect: str) -> None:
    body = DIALECTS[dialect]()
    assert detect_dialect(body) == dialect
    assert fingerprint(body, "/a") != fingerprint(body, "/b")
    assert (
        fingerprint(body) == fingerprint(json.dumps(body).encode()) == fingerprint(json.dumps(body))
    )


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_every_dialect_has_the_same_canonical_conversation(dialect: str) -> None:
    """The five sample bodies ask the same thing; their intents share one shape."""
    intent = extract_intent(DIALECTS[dialect]())
    assert intent is not None
    assert intent["system"] == ["You are a coding agent."]
    assert intent["messages"][0] == {"role": "user", "content": ["Fix the failing test."]}
    assistant = intent["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["tool_calls"][0] == {"name": "run", "arguments": {"cmd": "pytest", "n": 1}}
    result = next(m for m in intent["messages"] if m["role"] == "tool" and m["call"] == 0)
    assert result["content"] in (["1 failed"], [{"type": "json", "value": {"out": "1 failed"}}])
    tool = intent["tools"][0]
    assert tool == {
        "name": "run",
        "description": "Run a command",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    }


def test_openai_chat_and_anthropic_of_one_conversation_share_an_intent() -> None:
    chat = openai_chat()
    chat["messages"][2]["tool_calls"].pop()  # keep the one call both bodies make
    chat["messages"].pop(3)
    claude = anthropic()
    claude["messages"][1]["content"].pop(0)  # no visible thinking in the chat body
    assert extract_intent(chat) == extract_intent(claude)


def test_results_link_to_calls_by_position() -> None:
    intent = extract_intent(openai_chat())
    assert intent is not None
    results = [m for m in intent["messages"] if m["role"] == "tool"]
    assert [r["call"] for r in results] == [1, 0]


@pytest.mark.parametrize(
    ("tool_call_id", "expected"),
    [("call_abc", None), ("nope", None), (None, None), (7, None)],
    ids=["duplicated id", "unknown id", "missing id", "non-string id"],
)
def test_unlinkable_results_link_to_none(tool_call_id: object, expected: object) -> None:
    body = openai_chat()
    body["messages"][2]["tool_calls"][1]["id"] = "call_abc"  # both calls now share an id
    if tool_call_id != "call_abc":
        body["messages"][2]["tool_calls"][1]["id"] = "call_def"
    body["messages"][4]["tool_call_id"] = tool_call_id
    intent = extract_intent(body)
    assert intent is not None
    assert intent["messages"][-1]["call"] is expected


def test_ollama_links_by_tool_name_then_order() -> None:
    body = ollama()
    body["messages"][2]["tool_calls"].append({"function": {"name": "read", "arguments": {}}})
    body["messages"][3] = {"role": "tool", "tool_name": "read", "content": "x"}
    body["messages"].append({"role": "tool", "content": "y"})
    intent = extract_intent(body)
    assert intent is not None
    assert [m["call"] for m in intent["messages"] if m["role"] == "tool"] == [1, 0]
    body["messages"].append({"role": "tool", "content": "z"})  # more results than calls
    intent = extract_intent(body)
    assert intent is not None
    assert [m["call"] for m in intent["messages"] if m["role"] == "tool"] == [1, 0, None]


def test_gemini_links_by_id_when_present() -> None:
    body = gemini()
    body["contents"][1]["parts"].append({"functionCall": {"id": "b", "name": "run", "args": {}}})
    body["contents"][1]["parts"][0]["functionCall"]["id"] = "a"
    body["contents"][2]["parts"] = [
        {"functionResponse": {"id": "b", "name": "run", "response": {}}},
        {"functionResponse": {"id": "a", "name": "run", "response": {}}},
    ]
    intent = extract_intent(body)
    assert intent is not None
    assert [m["call"] for m in intent["messages"] if m["role"] == "tool"] == [1, 0]


def test_anthropic_tool_result_only_message_is_not_a_user_turn() -> None:
    intent = extract_intent(anthropic())
    assert intent is not None
    assert [m["role"] for m in intent["messages"]] == ["user", "assistant", "tool"]
    body = anthropic()
    body["messages"][2]["content"].append({"type": "text", "text": "Also check b.py"})
    intent = extract_intent(body)
    assert intent is not None
    assert [m["role"] for m in intent["messages"]] == ["user", "assistant", "tool", "user"]


def test_legacy_function_call() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "weather", "arguments": '{"city": "Oslo"}'},
            },
            {"role": "function", "name": "weather", "content": "rain"},
        ],
        "functions": [{"name": "weather", "parameters": {"type": "object"}}],
    }
    intent = extract_intent(body)
    assert intent is not None
    assert intent["messages"][1]["tool_calls"] == [
        {"name": "weather", "arguments": {"city": "Oslo"}}
    ]
    assert intent["messages"][2] == {
        "role": "tool",
        "call": 0,
        "content": ["rain"],
        "name": "weather",
    }
    # Legacy `functions` are plain declarations: kept as sent.
    assert intent["tools"] == [{"name": "weather", "parameters": {"type": "object"}}]


def test_responses_string_input_and_developer_message() -> None:
    assert extract_intent({"input": "hi", "instructions": "sys"}) == {
        "system": ["sys"],
        "messages": [{"role": "user", "content": ["hi"]}],
    }
    body = {"input": [{"role": "developer", "content": "sys"}, {"role": "user", "content": "hi"}]}
    assert extract_intent(body) == {"system": ["sys"], "messages": [
        {"role": "user", "content": ["hi"]}]}  # fmt: skip


def test_late_system_message_stays_in_place() -> None:
    body = {"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "b"}]}
    intent = extract_intent(body)
    assert intent == {
        "messages": [{"role": "user", "content": ["a"]}, {"role": "system", "content": ["b"]}]
    }


def test_not_a_known_dialect() -> None:
    for body in ({"prompt": "hi"}, [1, 2], "text", {"messages": "not a list"}, {"input": 5}):
        assert extract_intent(body) is None
        assert detect_dialect(body) is None


def test_the_repr_shape_of_an_intent() -> None:
    """The documented shape, key order included: it is what extract_intent shows users."""
    intent = extract_intent(openai_chat())
    assert intent is not None
    assert list(intent) == ["messages", "system", "tools"]
    assert list(intent["messages"][1]) == ["role", "content", "tool_calls"]
    assert list(intent["messages"][2]) == ["role", "call", "content"]


@pytest.mark.parametrize(
    ("dialect", "change"),
    [(d, None) for d in sorted(DIALECTS)] + [(d, c) for d, _, c in SAME + DIFFERENT],
)
def test_extraction_leaves_the_body_unchanged(
    dialect: str, change: Callable[[Body], None] | None
) -> None:
    body = DIALECTS[dialect]()
    if change is not None:
        body = edit(body, change)
    before = copy.deepcopy(body)
    extract_intent(body)
    fingerprint(body)
    assert body == before


def test_an_openai_chat_tool_message_flagged_is_error_keeps_its_flag() -> None:
    """How the LangChain middleware passes ``ToolMessage.status == "error"`` on."""
    body = openai_chat()
    body["messages"][4]["is_error"] = True
    intent = extract_intent(body)
    assert intent is not None
    assert intent["messages"][3]["is_error"] is True  # the system prompt is not a message
    body["messages"][4]["is_error"] = "yes"  # only a real true counts
    flagged = extract_intent(body)
    assert flagged is not None
    assert "is_error" not in flagged["messages"][3]
