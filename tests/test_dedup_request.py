"""RequestKey.from_request: what changes the key of a whole LLM request, and what does not."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopfuse.dedup import RequestKey
from loopfuse.dedup.request import IGNORED_PARAMS, request_material
from loopfuse.errors import InvalidInputError
from loopfuse.intent import canonical_json
from loopfuse.intent.dialect import model_from_path

CHAT: dict[str, Any] = {
    "model": "gpt-4o",
    "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "List the files."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "ls", "arguments": '{"path": "."}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a.py b.py"},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "ls",
                "description": "List a directory.",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        }
    ],
}

RESPONSES: dict[str, Any] = {
    "model": "gpt-4o",
    "instructions": "You are terse.",
    "input": [{"role": "user", "content": "List the files."}],
}

ANTHROPIC: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
    "max_tokens": 1024,
    "messages": [{"role": "user", "content": "List the files."}],
}

GEMINI: dict[str, Any] = {
    "systemInstruction": {"parts": [{"text": "You are terse."}]},
    "contents": [{"role": "user", "parts": [{"text": "List the files."}]}],
}
GEMINI_PATH = "/v1beta/models/gemini-2.0-flash:generateContent"

OLLAMA: dict[str, Any] = {
    "model": "llama3.2",
    "messages": [{"role": "user", "content": "List the files."}],
    "options": {"temperature": 0.1},
}


def key(body: object, path: str = "") -> RequestKey:
    return RequestKey.from_request(body, path)


def same(a: RequestKey, b: RequestKey) -> bool:
    return a == b and a.digest == b.digest


def with_fields(body: dict[str, Any], **fields: Any) -> dict[str, Any]:
    changed = copy.deepcopy(body)
    changed.update(fields)
    return changed


# -- the same request, sent differently, shares a key -------------------------------------


def test_stream_true_and_false_share_a_key() -> None:
    assert same(key(with_fields(CHAT, stream=True)), key(with_fields(CHAT, stream=False)))
    assert same(key(with_fields(CHAT, stream=True)), key(CHAT))


@pytest.mark.parametrize("field", sorted(IGNORED_PARAMS))
def test_ignored_fields_do_not_change_the_key(field: str) -> None:
    assert same(key(with_fields(CHAT, **{field: {"any": "value"}})), key(CHAT))


def test_user_metadata_store_service_tier_stream_options_are_ignored() -> None:
    noisy = with_fields(
        CHAT,
        user="u-42",
        metadata={"trace": "abc"},
        store=True,
        service_tier="flex",
        stream_options={"include_usage": True},
    )
    assert same(key(noisy), key(CHAT))


def test_regenerated_provider_ids_share_a_key() -> None:
    renamed = json.loads(json.dumps(CHAT).replace("call_1", "call_zz9"))
    assert same(key(renamed), key(CHAT))


def test_bytes_str_and_dict_bodies_share_a_key() -> None:
    raw = json.dumps(CHAT)
    assert same(key(raw), key(CHAT))
    assert same(key(raw.encode()), key(CHAT))
    assert same(key(bytearray(raw.encode())), key(CHAT))


def test_key_order_and_whitespace_do_not_matter() -> None:
    a = with_fields(CHAT, temperature=0.5, max_tokens=100)
    b = json.loads(json.dumps(a, indent=2))
    b = dict(reversed(list(b.items())))
    assert same(key(a), key(json.dumps(b, indent=2)))
    assert same(key(a), key(b))


def test_numbers_follow_the_intent_modules_canonical_json() -> None:
    # Whatever loopfuse.intent.canonical_json makes of 1 and 1.0, the key agrees with it.
    one, one_float = with_fields(CHAT, temperature=1), with_fields(CHAT, temperature=1.0)
    assert (key(one) == key(one_float)) == (canonical_json({"t": 1}) == canonical_json({"t": 1.0}))


def test_anthropic_cache_breakpoints_do_not_matter() -> None:
    moved = with_fields(
        ANTHROPIC,
        system=[{"type": "text", "text": "You are terse."}],
        cache_control={"type": "ephemeral"},
    )
    assert same(key(moved), key(ANTHROPIC))


def test_path_is_ignored_when_the_body_names_the_model() -> None:
    assert same(key(CHAT, "/v1/chat/completions"), key(CHAT))
    assert same(key(CHAT, "/openai/v1/chat/completions?x=1"), key(CHAT))


# -- anything that can change the answer changes the key ----------------------------------


def test_the_same_messages_to_two_models_never_share_a_key() -> None:
    assert key(with_fields(CHAT, model="gpt-4o-mini")) != key(CHAT)
    assert key(with_fields(ANTHROPIC, model="claude-opus-4-1")) != key(ANTHROPIC)
    assert key(with_fields(OLLAMA, model="qwen3")) != key(OLLAMA)


ANSWER_CHANGING: list[tuple[str, Any]] = [
    ("temperature", 0.7),
    ("top_p", 0.9),
    ("top_k", 40),
    ("seed", 7),
    ("max_tokens", 64),
    ("max_completion_tokens", 64),
    ("max_output_tokens", 64),
    ("stop", ["\n"]),
    ("stop_sequences", ["END"]),
    ("tool_choice", "required"),
    ("tool_choice", {"type": "function", "function": {"name": "ls"}}),
    ("response_format", {"type": "json_object"}),
    ("text", {"format": {"type": "json_schema", "name": "x", "schema": {}}}),
    ("reasoning_effort", "high"),
    ("reasoning", {"effort": "low"}),
    ("thinking", {"type": "enabled", "budget_tokens": 2048}),
    ("n", 3),
    ("logit_bias", {"50256": -100}),
    ("presence_penalty", 0.5),
    ("frequency_penalty", 0.5),
    ("logprobs", True),
    ("parallel_tool_calls", False),
    ("previous_response_id", "resp_123"),
    ("some_future_knob", 1),
]


@pytest.mark.parametrize(("field", "value"), ANSWER_CHANGING)
@pytest.mark.parametrize("body", [CHAT, RESPONSES, ANTHROPIC], ids=["chat", "responses", "anth"])
def test_answer_changing_parameters_change_the_key(
    body: dict[str, Any], field: str, value: Any
) -> None:
    base = key(body)
    changed = key(with_fields(body, **{field: value}))
    assert changed != base
    assert key(with_fields(body, **{field: value})) == changed  # and deterministically


def test_tools_change_the_key() -> None:
    no_tools = {k: v for k, v in CHAT.items() if k != "tools"}
    assert key(no_tools) != key(CHAT)
    strict = copy.deepcopy(CHAT)
    strict["tools"][0]["function"]["strict"] = True
    assert key(strict) != key(CHAT)
    described = copy.deepcopy(CHAT)
    described["tools"][0]["function"]["description"] = "List a folder."
    assert key(described) != key(CHAT)


def test_legacy_functions_count_even_beside_tools() -> None:
    functions = [{"name": "cat", "parameters": {"type": "object"}}]
    with_both = with_fields(CHAT, functions=functions)
    assert key(with_both) != key(CHAT)
    only_functions = {k: v for k, v in CHAT.items() if k != "tools"}
    assert key(with_fields(only_functions, functions=functions)) != key(only_functions)


def test_conversation_content_changes_the_key() -> None:
    changed = copy.deepcopy(CHAT)
    changed["messages"][-1]["content"] = "a.py c.py"
    assert key(changed) != key(CHAT)
    system = copy.deepcopy(CHAT)
    system["messages"][0]["content"] = "You are verbose."
    assert key(system) != key(CHAT)


def test_dialect_is_part_of_the_key() -> None:
    # The same conversation asked through Chat Completions and through Responses.
    chat = {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "List the files."},
        ],
    }
    assert key(chat) != key(RESPONSES)


def test_gemini_model_comes_from_the_path() -> None:
    flash = key(GEMINI, GEMINI_PATH)
    pro = key(GEMINI, "/v1beta/models/gemini-2.5-pro:generateContent")
    assert flash != pro
    assert key(GEMINI) not in (flash, pro)
    streamed = key(GEMINI, "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse")
    assert same(streamed, flash)
    assert same(key(GEMINI, GEMINI_PATH + "?key=SECRET"), flash)
    tuned = key(GEMINI, "/v1beta/tunedModels/gemini-2.0-flash:generateContent")
    assert tuned != flash


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("generationConfig", {"temperature": 0.3}),
        ("generationConfig", {"maxOutputTokens": 100}),
        ("generationConfig", {"responseMimeType": "application/json"}),
        ("safetySettings", [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}]),
        ("toolConfig", {"functionCallingConfig": {"mode": "ANY"}}),
        ("cachedContent", "cachedContents/abc"),
    ],
)
def test_gemini_parameters_change_the_key(field: str, value: Any) -> None:
    assert key(with_fields(GEMINI, **{field: value}), GEMINI_PATH) != key(GEMINI, GEMINI_PATH)


def test_gemini_snake_case_system_instruction_is_keyed() -> None:
    snake = {k: v for k, v in GEMINI.items() if k != "systemInstruction"}
    snake["system_instruction"] = {"parts": [{"text": "You are terse."}]}
    other = copy.deepcopy(snake)
    other["system_instruction"]["parts"][0]["text"] = "You are verbose."
    assert key(snake, GEMINI_PATH) != key(other, GEMINI_PATH)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("options", {"temperature": 0.9}),
        ("options", {"temperature": 0.1, "num_predict": 10}),
        ("options", {"temperature": 0.1, "seed": 3}),
        ("format", "json"),
        ("think", True),
    ],
)
def test_ollama_parameters_change_the_key(field: str, value: Any) -> None:
    assert key(with_fields(OLLAMA, **{field: value})) != key(OLLAMA)


def test_ollama_keep_alive_is_ignored() -> None:
    assert same(key(with_fields(OLLAMA, keep_alive="10m")), key(OLLAMA))


def test_model_from_known_paths() -> None:
    assert model_from_path(GEMINI_PATH) == "models/gemini-2.0-flash"
    vertex = (
        "/v1/projects/p/locations/us-central1/publishers/google/models/"
        "gemini-2.0-flash:generateContent"
    )
    assert model_from_path(vertex) == "models/gemini-2.0-flash"
    assert model_from_path("/openai/deployments/prod-4o/chat/completions") == "deployments/prod-4o"
    assert model_from_path("/model/anthropic.claude-3/invoke") == "model/anthropic.claude-3"
    assert model_from_path("") is None
    assert model_from_path("/v1/messages") is None


def test_no_model_anywhere_keys_on_the_endpoint() -> None:
    body = {"messages": [{"role": "user", "content": "hi"}]}
    assert key(body, "/a/v1/chat/completions") != key(body, "/b/v1/chat/completions")
    assert same(key(body, "/a/v1/chat/completions?x=1"), key(body, "/a/v1/chat/completions"))
    assert key(body, "/openai/deployments/x/chat/completions") != key(body)


# -- fallbacks: every bytes/str body gets a key -------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"\xff\xfe\x00 bad utf-8",
        "plain text prompt",
        "lone \ud800 surrogate",
        b"[" * 5000 + b"]" * 5000,
        b'{"unclosed": ',
        b"NaN",
        b"null",
        b"[1, 2, 3]",
        b'{"foo": "bar"}',
        b'{"messages": "not a list"}',
        b'{"contents": {"not": "a list"}}',
        b'{"input": 42}',
    ],
)
def test_any_bytes_or_str_body_gets_a_key(body: bytes | str) -> None:
    first = key(body, "/x")
    assert first.digest is not None
    assert same(key(body, "/x"), first)


def test_fallback_keys_still_separate_different_bodies() -> None:
    assert key(b"not json") != key(b"not json!")
    assert key(b'{"foo": 1}') != key(b'{"foo": 2}')
    assert same(key(b'{"foo": 1, "bar": 2}'), key(b'{"bar":2,"foo":1}'))
    assert key(b"not json", "/a") != key(b"not json", "/b")
    assert key(b'{"foo": 1}', "/a") != key(b'{"foo": 1}', "/b")
    # Unknown dialect: nothing is known to be ignorable, so the whole value counts.
    assert key(b'{"foo": 1, "stream": true}') != key(b'{"foo": 1}')
    # A non-JSON body can never pass for the canonical JSON of a request.
    assert not request_material(b"x").startswith(b"{")


@given(st.binary(max_size=300))
def test_random_bytes_never_raise(body: bytes) -> None:
    assert isinstance(key(body).value, int)


@given(st.text(max_size=300))
def test_random_text_never_raises(body: str) -> None:
    assert isinstance(key(body).value, int)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)


@given(
    st.dictionaries(
        st.sampled_from(["model", "messages", "contents", "input", "system", "tools", "stream"]),
        json_values,
    )
)
def test_junk_shaped_like_requests_never_raises(body: dict[str, Any]) -> None:
    raw = json.dumps(body).encode()
    assert key(raw).value == key(raw).value


@pytest.mark.parametrize(
    "body",
    [
        {"model": "m", "messages": [{"role": "user", "content": object()}]},
        {"model": "m", "messages": [{"role": "user", "content": {1, 2}}]},
        42,
        None,
        object(),
    ],
)
def test_parsed_values_json_cannot_express_raise_a_typed_error(body: object) -> None:
    with pytest.raises(InvalidInputError):
        key(body)


@pytest.mark.parametrize("path", [None, b"/v1", 42])
def test_path_must_be_a_str(path: object) -> None:
    with pytest.raises(InvalidInputError):
        RequestKey.from_request(CHAT, path)  # type: ignore[arg-type]


def test_huge_body_gets_a_key() -> None:
    body = b'{"messages": [{"role": "user", "content": "' + b"x" * (17 * 1024 * 1024) + b'"}]}'
    assert key(body).digest is not None


def test_a_model_in_the_path_is_keyed_even_when_the_body_names_one() -> None:
    """Two Azure deployments (or Gemini URLs) asked with the same body never share."""
    body = b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}'
    a = RequestKey.from_request(body, "/openai/deployments/prod-a/chat/completions")
    b = RequestKey.from_request(body, "/openai/deployments/prod-b/chat/completions")
    assert a != b
    plain = RequestKey.from_request(body, "/v1/chat/completions")
    assert plain == RequestKey.from_request(body, "/v2/chat/completions")  # no model in path
