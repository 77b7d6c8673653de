"""The dialects (loopfuse.intent.dialect): one module per provider, and what each knows.

The registry; the dialect of a request (the path first, then the body); each provider's
end user, sampling fields, streaming, refusal body (read back by the provider's own SDK
where one is installed), note, intent fields and path rules. The notes' validity on
generated conversations is tests/test_intent_dialect_notes.py.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest

from loopfuse import intent
from loopfuse.errors import InvalidInputError
from loopfuse.intent import dialect
from loopfuse.intent._parts import Walk
from loopfuse.intent.anthropic import ANTHROPIC
from loopfuse.intent.dialect import (
    ALL_DIALECTS,
    ENDPOINTS,
    Dialect,
    add_note,
    dialect_for,
    dialect_named,
    is_sampled,
    is_streaming,
    model_from_path,
    sampling_identity,
)
from loopfuse.intent.gemini import GEMINI
from loopfuse.intent.ollama import OLLAMA
from loopfuse.intent.openai_chat import OPENAI_CHAT
from loopfuse.intent.openai_responses import OPENAI_RESPONSES

NOTE = "[loopfuse] change approach"
MESSAGE = 'Loop detected: "quotes", ünïcode and \n newlines'


def chat(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": list(messages), **extra}


# --- the registry ----------------------------------------------------------------------


def test_one_module_per_dialect_each_named_as_intent_names_them() -> None:
    assert tuple(each.name for each in ALL_DIALECTS) == intent.DIALECTS
    for each in ALL_DIALECTS:
        module = importlib.import_module(f"loopfuse.intent.{each.name}")
        assert getattr(module, each.name.upper()) is each
        assert dialect_named(each.name) is each
        assert repr(each) == f"<dialect {each.name}>"


@pytest.mark.parametrize("name", ["cohere", "", "OPENAI_CHAT", None, 3])
def test_an_unknown_dialect_is_a_clear_error(name: Any) -> None:
    with pytest.raises(InvalidInputError, match=r"unknown dialect .*one of openai_chat"):
        dialect_named(name)


def test_the_endpoints_are_every_dialects_path_endings() -> None:
    assert ENDPOINTS == (
        "/chat/completions",
        "/responses",
        "/messages",
        ":generateContent",
        ":streamGenerateContent",
        "/api/chat",
    )


BODIES: dict[str, dict[str, Any]] = {
    "openai_chat": chat({"role": "user", "content": "hi"}),
    "openai_responses": {"model": "m", "input": "hi"},
    "anthropic": chat({"role": "user", "content": "hi"}, system="Be brief."),
    "gemini": {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    "ollama": chat({"role": "user", "content": "hi"}, options={"seed": 1}),
}


@pytest.mark.parametrize("name", sorted(BODIES))
def test_the_body_is_read_by_its_dialects_walk_and_told_by_its_dialect(name: str) -> None:
    body = BODIES[name]
    walk = Walk()
    found = dialect.read(body, walk)
    assert found is not None
    assert found[0] is dialect_named(name)
    assert found[1] == intent.extract_intent(body)
    assert dialect.dialect_of(body, walk) is found[0]
    reader = dialect.reader_of(body)
    assert reader is not None
    assert reader.conversation == found[0].conversation
    assert reader.intent(body) == found[1]


@pytest.mark.parametrize("value", [None, [], "hi", {}, {"prompt": "hi"}, {"messages": "hi"}])
def test_what_no_dialect_reads(value: Any) -> None:
    assert dialect.reader_of(value) is None
    assert dialect.read(value, Walk()) is None
    assert dialect.dialect_of(value, Walk()) is None


def test_the_messages_dialects_share_one_walk() -> None:
    assert OPENAI_CHAT.intent is ANTHROPIC.intent is OLLAMA.intent
    assert {each.conversation for each in (OPENAI_CHAT, ANTHROPIC, OLLAMA)} == {"messages"}


# --- the dialect of a request: the path first, then the body ----------------------------


@pytest.mark.parametrize(
    ("path", "body_dialect", "expected"),
    [
        ("/v1/chat/completions", "openai_chat", "openai_chat"),
        ("/v1/responses", "openai_responses", "openai_responses"),
        ("/v1/messages", "openai_chat", "anthropic"),
        ("/anything", "anthropic", "anthropic"),
        ("/v1beta/models/x:streamGenerateContent", None, "gemini"),
        ("/api/chat", "openai_chat", "ollama"),
        ("/openai/deployments/d/chat/completions", "openai_chat", "openai_chat"),
        ("/v1/chat/completions", None, "openai_chat"),
        ("/v1/responses", "openai_chat", "openai_chat"),  # the path names no OpenAI API
        ("/api/chat", "gemini", "gemini"),
        ("/v1beta/models/x:generateContent", "anthropic", "anthropic"),
    ],
)
def test_dialect_for(path: str, body_dialect: str | None, expected: str) -> None:
    assert dialect_for(path, body_dialect) is dialect_named(expected)


# --- refusals ----------------------------------------------------------------------------


def test_error_bodies_are_json_in_each_shape() -> None:
    openai = json.loads(OPENAI_CHAT.error_body("cycle", MESSAGE))
    assert openai == {
        "error": {"message": MESSAGE, "type": "loop_detected", "param": None, "code": "cycle"}
    }
    assert OPENAI_RESPONSES.error_body("cycle", MESSAGE) == OPENAI_CHAT.error_body("cycle", MESSAGE)
    anthropic = json.loads(ANTHROPIC.error_body("cycle", MESSAGE))
    assert anthropic == {"type": "error", "error": {"type": "loop_detected", "message": MESSAGE}}
    gemini = json.loads(GEMINI.error_body("cycle", MESSAGE))["error"]
    assert gemini["message"] == MESSAGE
    assert (gemini["code"], gemini["status"]) == (400, "FAILED_PRECONDITION")
    assert gemini["details"] == [{"reason": "cycle", "domain": "loopfuse"}]
    assert json.loads(OLLAMA.error_body("cycle", MESSAGE)) == {"error": MESSAGE}


@pytest.mark.parametrize("each", ALL_DIALECTS, ids=lambda each: each.name)
def test_an_error_body_holds_a_lone_surrogate_as_its_escape(each: Dialect) -> None:
    written = each.error_body("repeat", "cut \ud83d")
    assert b"\\ud83d" in written
    assert "cut \ud83d" in json.dumps(json.loads(written), ensure_ascii=False)


def _refused(lib: Any, body: bytes) -> Any:
    headers = {"content-type": "application/json"}
    return lib.MockTransport(lambda request: lib.Response(400, content=body, headers=headers))


def test_each_sdk_raises_its_own_error_for_a_refusal_and_shows_the_message() -> None:
    """What tests/test_integration_dialects.py checks through the transport, here on the
    error bodies alone: each provider's client raises its ordinary 400 error."""
    httpx2 = pytest.importorskip("httpx2")
    openai = pytest.importorskip("openai")
    anthropic = pytest.importorskip("anthropic")
    ollama = pytest.importorskip("ollama")
    httpx = pytest.importorskip("httpx")

    def openai_client(each: Dialect) -> Any:
        http = httpx2.Client(transport=_refused(httpx2, each.error_body("repeat", MESSAGE)))
        return openai.OpenAI(api_key="k", max_retries=0, http_client=http)

    with pytest.raises(openai.BadRequestError) as chat_error:
        openai_client(OPENAI_CHAT).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
    assert (chat_error.value.code, chat_error.value.type) == ("repeat", "loop_detected")
    assert chat_error.value.message.endswith(MESSAGE)
    with pytest.raises(openai.BadRequestError) as responses_error:
        openai_client(OPENAI_RESPONSES).responses.create(model="m", input="hi")
    assert responses_error.value.code == "repeat"

    http = httpx2.Client(transport=_refused(httpx2, ANTHROPIC.error_body("repeat", MESSAGE)))
    claude = anthropic.Anthropic(api_key="k", max_retries=0, http_client=http)
    with pytest.raises(anthropic.BadRequestError) as anthropic_error:
        claude.messages.create(
            model="m", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        )
    assert anthropic_error.value.body["error"] == {"type": "loop_detected", "message": MESSAGE}

    transport = _refused(httpx, OLLAMA.error_body("repeat", MESSAGE))
    llm = ollama.Client(host="http://localhost:11434", transport=transport)
    with pytest.raises(ollama.ResponseError) as ollama_error:
        llm.chat(model="m", messages=[{"role": "user", "content": "hi"}], stream=False)
    assert (ollama_error.value.error, ollama_error.value.status_code) == (MESSAGE, 400)


# --- end users, sampling, streaming ------------------------------------------------------


def test_the_end_user_fields_of_each_dialect() -> None:
    body = {"user": "u-1", "safety_identifier": "h-9", "metadata": {"user_id": "m-3"}}
    assert OPENAI_CHAT.end_users(body) == (("safety_identifier", "h-9"), ("user", "u-1"))
    assert OPENAI_RESPONSES.end_users(body) == OPENAI_CHAT.end_users(body)
    assert ANTHROPIC.end_users(body) == (("metadata.user_id", "m-3"),)
    assert GEMINI.end_users(body) == OLLAMA.end_users(body) == ()
    assert OPENAI_CHAT.end_users({"user": 42}) == (("safety_identifier", None), ("user", 42))
    assert ANTHROPIC.end_users({"metadata": "junk"}) == (("metadata.user_id", None),)


def test_the_sampling_identity_reads_every_dialects_fields() -> None:
    assert sampling_identity({"seed": 7, "n": 2, "temperature": 1}) == {"seed": 7, "n": 2}
    gemini = {"generationConfig": {"seed": 3, "candidateCount": 2}}
    assert sampling_identity(gemini) == {
        "generationConfig.seed": 3,
        "generationConfig.candidateCount": 2,
    }
    assert sampling_identity({"options": {"seed": 5}}) == {"options.seed": 5}
    assert sampling_identity({"temperature": 0.2}) is None
    assert sampling_identity({"seed": True, "n": [2]}) is None  # junk is no identity
    # Another provider's spelling counts too (a gateway may take it): as before.
    assert sampling_identity({**BODIES["gemini"], "seed": 9}) == {"seed": 9}


def test_is_sampled() -> None:
    assert is_sampled({"temperature": 0.7})
    assert not is_sampled({"temperature": 0.7, "seed": 1})
    assert is_sampled({"generationConfig": {"temperature": 1}})
    assert not is_sampled({"generationConfig": {"temperature": 1, "seed": 0}})
    assert not is_sampled({"options": {"temperature": 0}})
    assert not is_sampled({"temperature": True})
    assert not is_sampled({})


def test_is_streaming() -> None:
    assert is_streaming({"stream": True}, "/v1/messages", ANTHROPIC)
    assert not is_streaming({"stream": "yes"}, "/v1/messages", ANTHROPIC)
    assert not is_streaming({"stream": False}, "/api/chat", OLLAMA)
    assert is_streaming({}, "/api/chat", OLLAMA)  # Ollama streams unless told not to
    assert not is_streaming({}, "/api/chat", OPENAI_CHAT)  # the body's dialect decides
    assert is_streaming({}, "/v1beta/models/m:streamGenerateContent", GEMINI)
    assert is_streaming({}, "/v1beta/models/m:streamGenerateContent", OPENAI_CHAT)  # the path
    assert not is_streaming({}, "/v1beta/models/m:generateContent", GEMINI)


# --- notes -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "each", "expected_last"),
    [
        # OpenAI Chat: joins the last user turn, or becomes one.
        (
            chat({"role": "user", "content": "hi"}),
            OPENAI_CHAT,
            {"role": "user", "content": f"hi\n\n{NOTE}"},
        ),
        (
            chat({"role": "user", "content": [{"type": "text", "text": "hi"}]}),
            OPENAI_CHAT,
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": NOTE}],
            },
        ),
        (
            chat({"role": "tool", "tool_call_id": "1", "content": "x"}),
            OPENAI_CHAT,
            {"role": "user", "content": NOTE},
        ),
        (chat(), OLLAMA, {"role": "user", "content": NOTE}),
        # Anthropic: after the tool_result blocks.
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}],
                    }
                ]
            },
            ANTHROPIC,
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t", "content": "x"},
                    {"type": "text", "text": NOTE},
                ],
            },
        ),
        (
            {"messages": [{"role": "user", "content": "hi"}]},
            ANTHROPIC,
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": NOTE}],
            },
        ),
        # Gemini: a text part of the last user content.
        (
            {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
            GEMINI,
            {"role": "user", "parts": [{"text": "hi"}, {"text": NOTE}]},
        ),
        (
            {"contents": [{"role": "model", "parts": [{"text": "a"}]}]},
            GEMINI,
            {"role": "user", "parts": [{"text": NOTE}]},
        ),
        # Responses: a new input item.
        (
            {"input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]},
            OPENAI_RESPONSES,
            {"role": "user", "content": NOTE},
        ),
    ],
)
def test_add_note(body: dict[str, Any], each: Dialect, expected_last: dict[str, Any]) -> None:
    snapshot = json.dumps(body)
    for noted in (each.add_note(body, NOTE), add_note(body, NOTE, each)):
        assert noted is not None
        turns = noted.get("messages", noted.get("contents", noted.get("input")))
        assert turns[-1] == expected_last
    assert json.dumps(body) == snapshot


def test_add_note_to_an_anthropic_prefill_goes_to_the_system_prompt() -> None:
    prefill = {"role": "assistant", "content": "{"}
    for system, expected in [
        (None, NOTE),
        ("Be brief.", f"Be brief.\n\n{NOTE}"),
        (
            [{"type": "text", "text": "Be brief."}],
            [{"type": "text", "text": "Be brief."}, {"type": "text", "text": NOTE}],
        ),
    ]:
        body: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}, prefill]}
        if system is not None:
            body["system"] = system
        noted = ANTHROPIC.add_note(body, NOTE)
        assert noted is not None
        assert noted["system"] == expected
        assert noted["messages"][-1] == prefill


def test_a_gemini_note_after_a_function_turn_goes_to_the_system_instruction() -> None:
    call = {"role": "model", "parts": [{"functionCall": {"name": "f"}}]}
    for given, field, expected in [
        ({}, "systemInstruction", {"parts": [{"text": NOTE}]}),
        ({"system_instruction": "Be brief."}, "system_instruction", f"Be brief.\n\n{NOTE}"),
        (
            {"systemInstruction": {"parts": [{"text": "Be brief."}]}},
            "systemInstruction",
            {"parts": [{"text": "Be brief."}, {"text": NOTE}]},
        ),
    ]:
        noted = GEMINI.add_note({"contents": [call], **given}, NOTE)
        assert noted is not None
        assert noted[field] == expected
        assert noted["contents"] == [call]


@pytest.mark.parametrize("body", [None, [], "text", {"prompt": "x"}, {"input": 5}])
@pytest.mark.parametrize("each", ALL_DIALECTS, ids=lambda each: each.name)
def test_add_note_without_a_place_for_it(body: Any, each: Dialect) -> None:
    assert add_note(body, NOTE, each) is None
    assert each.add_note(body, NOTE) is None


def test_a_dialect_notes_only_its_own_conversation() -> None:
    gemini, responses = BODIES["gemini"], {"input": "hi"}
    assert OPENAI_CHAT.add_note(gemini, NOTE) is None
    assert ANTHROPIC.add_note(responses, NOTE) is None
    assert GEMINI.add_note(chat({"role": "user", "content": "hi"}), NOTE) is None
    assert OPENAI_RESPONSES.add_note(gemini, NOTE) is None


def test_a_body_of_another_conversation_gets_the_note_where_its_own_dialect_wants_it() -> None:
    """An OpenAI Chat body on a Gemini path (LiteLLM's proxy hands the guard OpenAI
    messages whatever the route), a Gemini or Responses body on an Anthropic path: the
    note fits the body, as before the dialects."""
    body = chat({"role": "user", "content": "hi"})
    noted = add_note(body, NOTE, dialect_for("/v1beta/models/m:generateContent", "openai_chat"))
    assert noted == OPENAI_CHAT.add_note(body, NOTE)
    gemini = add_note(BODIES["gemini"], NOTE, ANTHROPIC)
    assert gemini == GEMINI.add_note(BODIES["gemini"], NOTE)
    assert add_note({"input": "hi"}, NOTE, ANTHROPIC) == {"input": f"hi\n\n{NOTE}"}
    both = {"messages": [{"role": "user", "content": "hi"}], "contents": []}  # messages first
    assert add_note(both, NOTE, GEMINI) == OPENAI_CHAT.add_note(both, NOTE)


def test_a_responses_item_of_junk_type_takes_a_note() -> None:
    body = {"input": [{"type": ["function_call"], "call_id": "c"}]}  # unhashable type
    noted = OPENAI_RESPONSES.add_note(body, NOTE)
    assert noted is not None
    assert noted["input"][-1] == {"role": "user", "content": NOTE}


# --- what a cache key and a path need -----------------------------------------------------


def test_the_fields_each_intent_reads() -> None:
    assert OPENAI_CHAT.intent_fields({"tools": []}) == {"messages", "system", "tools"}
    assert ANTHROPIC.intent_fields({}) == {"messages", "system", "tools", "functions"}
    assert OLLAMA.intent_fields({}) == ANTHROPIC.intent_fields({})
    assert OPENAI_RESPONSES.intent_fields({}) == {"input", "instructions", "tools"}
    assert GEMINI.intent_fields({"system_instruction": {}}) == {
        "contents",
        "tools",
        "system_instruction",
    }
    both = {"systemInstruction": {}, "system_instruction": {}}
    assert GEMINI.intent_fields(both) == {"contents", "tools", "systemInstruction"}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/v1beta/models/gemini-2.0-flash:generateContent", "models/gemini-2.0-flash"),
        ("/v1/projects/p/locations/l/endpoints/openapi/chat/completions", "endpoints/openapi"),
        ("/v1beta/tunedModels/t1:generateContent", "tunedModels/t1"),
        ("/openai/deployments/prod-4o/chat/completions", "deployments/prod-4o"),
        ("/model/anthropic.claude-3/invoke", "model/anthropic.claude-3"),
        ("/openai/deployments/d/models/m", "models/m"),  # names two: Vertex's scheme first
        ("/model/b/deployments/d", "deployments/d"),  # then Azure's, then Bedrock's
        ("/v1/chat/completions", None),
        ("", None),
    ],
)
def test_model_from_path(path: str, expected: str | None) -> None:
    assert model_from_path(path) == expected


def test_each_path_model_is_its_providers() -> None:
    assert GEMINI.path_model("/v1beta/models/g:generateContent") == "models/g"
    assert OPENAI_CHAT.path_model("/openai/deployments/d/chat/completions") == "deployments/d"
    assert ANTHROPIC.path_model("/model/m/invoke") == "model/m"
    for each in (OPENAI_RESPONSES, OLLAMA):
        assert each.path_model("/v1beta/models/g:generateContent") is None
