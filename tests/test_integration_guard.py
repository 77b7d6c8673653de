"""The guard every integration shares: decisions, provider shapes, notes. No third party."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FakeClock
from loopfuse import ConfigError, DedupCache, LoopBreaker, RequestKey, intent
from loopfuse.integrations import DEFAULT, Guard, MissingExtraError
from loopfuse.integrations._extras import require
from loopfuse.integrations._facts import is_streaming
from loopfuse.integrations._guard import build_guard
from loopfuse.integrations._notes import add_note
from loopfuse.integrations._shapes import error_body, error_format

CHAT = "/v1/chat/completions"


def chat(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": list(messages), **extra}


def stuck_turns(n: int) -> list[dict[str, Any]]:
    """``n`` identical failing tool calls, as an OpenAI Chat history."""
    turns: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]
    for i in range(n):
        call = {"id": f"c{i}", "type": "function"}
        call["function"] = {"name": "bash", "arguments": '{"command": "make"}'}
        turns.append({"role": "assistant", "content": None, "tool_calls": [call]})
        turns.append({"role": "tool", "tool_call_id": f"c{i}", "content": "make: *** Error 2"})
    return turns


def test_default_guard_has_a_breaker_and_the_loop_detector_and_no_cache() -> None:
    from loopfuse.detector import LoopDetector

    guard = Guard()
    assert isinstance(guard.breaker, LoopBreaker)
    assert isinstance(guard.detector, LoopDetector)
    assert guard.cache is None
    assert repr(DEFAULT) == "DEFAULT"


def test_the_detector_refuses_a_conversation_that_ends_in_a_loop() -> None:
    guard = Guard(breaker=None)
    for n in range(1, 10):
        decision = guard.check(json.dumps(chat(*stuck_turns(n))).encode(), path=CHAT)
        if decision.refused:
            break
    else:
        pytest.fail("never refused")
    assert n > 1
    assert decision.code == "repeat"
    assert decision.count == n
    assert decision.signature is not None
    assert decision.signature.startswith("bash:")
    assert decision.fmt == "openai"
    assert decision.message is not None
    assert "`make`" not in decision.message
    assert "`bash`" in decision.message
    # A user turn after the loop ends it: the same history plus a new question passes.
    later = chat(*stuck_turns(n), {"role": "user", "content": "Try cmake instead."})
    assert guard.check(later, path=CHAT).action == "forward"


def test_the_breaker_counts_per_session_and_can_be_skipped(clock: FakeClock) -> None:
    guard = Guard(breaker=LoopBreaker(window=10, max_repeats=2, clock=clock), detector=None)
    body = chat({"role": "user", "content": "hi"})
    decisions = [guard.check(body, session_id="a") for _ in range(3)]
    assert [d.action for d in decisions] == ["forward", "forward", "refuse"]
    assert decisions[2].count == 3
    assert decisions[2].signature == f"{intent.fingerprint(body):016x}"
    assert guard.check(body, session_id="b").action == "forward"
    assert guard.check(body, session_id=None).action == "forward"  # no session: no breaker
    clock.advance(10)
    assert guard.check(body, session_id="a").action == "forward"


def test_note_mode_returns_the_noted_body_and_leaves_the_original_alone() -> None:
    guard = Guard(breaker=LoopBreaker(max_repeats=1, clock=lambda: 0.0), mode="note")
    body = chat({"role": "user", "content": "hi"})
    snapshot = json.dumps(body)
    guard.check(body, session_id="s")
    decision = guard.check(body, session_id="s")
    assert decision.action == "note"
    assert decision.code == "repeated_request"
    assert isinstance(decision.value, dict)
    assert decision.value["messages"][-1]["content"].startswith("hi\n\n[loopfuse] Loop detected")
    assert json.dumps(body) == snapshot


def test_the_cache_key_keeps_streams_endpoints_and_parameters_apart() -> None:
    guard = Guard(
        breaker=None, detector=None, cache=DedupCache(), cache_streams=True, cache_sampled=True
    )
    body = chat({"role": "user", "content": "hi"})

    def key(value: dict[str, Any], scope: str = "https://a:") -> RequestKey | None:
        return guard.check(value, path=CHAT, scope=scope).cache_key

    assert key(body) is not None
    assert key(body) == key({**body, "user": "u-1"})  # not a parameter of the answer
    assert key(body) != key({**body, "stream": True})  # SSE is another answer
    assert key(body) != key(body, scope="https://b:")
    assert key(body) != key({**body, "temperature": 0.5})
    no_streams = Guard(breaker=None, detector=None, cache=DedupCache())
    assert no_streams.check({**body, "stream": True}).cache_key is None
    assert Guard(breaker=None, detector=None).check(body).cache_key is None


@pytest.mark.parametrize(
    "body",
    [
        None,
        42,
        "text",
        b"\x00\xff",
        [],
        {"messages": None},
        {"a": float("nan")},
        {"nested": [[[[[[]]]]]] * 3},
        {1: "non-str key"},
        {"messages": [{"role": "user", "content": object()}]},
    ],
)
def test_junk_is_forwarded_or_fails_open(body: Any, caplog: pytest.LogCaptureFixture) -> None:
    guard = Guard(breaker=LoopBreaker(max_repeats=0), cache=DedupCache())
    with caplog.at_level(logging.WARNING, logger="loopfuse"):
        decision = guard.check(body, path=CHAT)
    assert decision.action == "forward"
    assert guard.internal_errors == len(caplog.records)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(JSON_VALUES)
def test_any_json_value_gives_a_decision(value: Any) -> None:
    guard = Guard(cache=DedupCache(), fail_closed=True)
    for body in (value, {"messages": value}, {"model": "m", "messages": [value]}, {"input": value}):
        decision = guard.check(body, path=CHAT)
        assert decision.action in ("forward", "refuse")
        assert decision.code != "guard_failed", decision.error


def test_a_failing_guard_fails_closed_when_asked(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def scan(self, body: object) -> Any:
            raise RuntimeError("boom")

        scan_intent = scan  # the guard reads the parsed intent

    body = chat({"role": "user", "content": "hi"})
    with caplog.at_level(logging.WARNING, logger="loopfuse"):
        opened = Guard(detector=Broken()).check(body, path="/v1/messages")
        closed = Guard(detector=Broken(), fail_closed=True).check(body, path="/v1/messages")
    assert opened.action == "forward"
    assert opened.error == "RuntimeError('boom')"
    assert closed.refused
    assert closed.code == "guard_failed"
    assert closed.fmt == "anthropic"
    assert len(caplog.records) == 2


def test_configuration_errors() -> None:
    with pytest.raises(ConfigError):
        Guard(mode="silent")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        Guard(cache={})  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        build_guard("guard", {})  # type: ignore[arg-type]
    assert build_guard(None, {"breaker": None}).breaker is None
    with pytest.raises(MissingExtraError, match=r"pip install 'loopfuse\[langchain\]'"):
        require("no_such_module_anywhere", "nor.this.one", extra="langchain", what="X")


# --- provider shapes -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "dialect", "fmt"),
    [
        ("/v1/chat/completions", "openai_chat", "openai"),
        ("/v1/responses", "openai_responses", "openai"),
        ("/v1/messages", "openai_chat", "anthropic"),
        ("/anything", "anthropic", "anthropic"),
        ("/v1beta/models/x:streamGenerateContent", None, "gemini"),
        ("/api/chat", "openai_chat", "ollama"),
        ("/openai/deployments/d/chat/completions", "openai_chat", "openai"),
    ],
)
def test_error_format(path: str, dialect: str | None, fmt: str) -> None:
    assert error_format(path, dialect) == fmt


def test_error_bodies_are_json_in_each_shape() -> None:
    message = 'Loop detected: "quotes", ünïcode and \n newlines'
    openai = json.loads(error_body("openai", "cycle", message))
    assert openai == {
        "error": {"message": message, "type": "loop_detected", "param": None, "code": "cycle"}
    }
    anthropic = json.loads(error_body("anthropic", "cycle", message))
    assert anthropic == {"type": "error", "error": {"type": "loop_detected", "message": message}}
    assert json.loads(error_body("gemini", "cycle", message))["error"]["message"] == message
    assert json.loads(error_body("ollama", "cycle", message)) == {"error": message}


NOTE = "[loopfuse] change approach"


@pytest.mark.parametrize(
    ("body", "fmt", "expected_last"),
    [
        # OpenAI Chat: joins the last user turn, or becomes one.
        (
            chat({"role": "user", "content": "hi"}),
            "openai",
            {"role": "user", "content": f"hi\n\n{NOTE}"},
        ),
        (
            chat({"role": "user", "content": [{"type": "text", "text": "hi"}]}),
            "openai",
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": NOTE}],
            },
        ),
        (
            chat({"role": "tool", "tool_call_id": "1", "content": "x"}),
            "openai",
            {"role": "user", "content": NOTE},
        ),
        (chat(), "ollama", {"role": "user", "content": NOTE}),
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
            "anthropic",
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
            "anthropic",
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": NOTE}],
            },
        ),
        # Gemini: a text part of the last user content.
        (
            {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
            "gemini",
            {"role": "user", "parts": [{"text": "hi"}, {"text": NOTE}]},
        ),
        (
            {"contents": [{"role": "model", "parts": [{"text": "a"}]}]},
            "gemini",
            {"role": "user", "parts": [{"text": NOTE}]},
        ),
        # Responses: a new input item.
        (
            {"input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]},
            "openai",
            {"role": "user", "content": NOTE},
        ),
    ],
)
def test_add_note(body: dict[str, Any], fmt: Any, expected_last: dict[str, Any]) -> None:
    snapshot = json.dumps(body)
    noted = add_note(body, fmt, NOTE)
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
        noted = add_note(body, "anthropic", NOTE)
        assert noted is not None
        assert noted["system"] == expected
        assert noted["messages"][-1] == prefill


@pytest.mark.parametrize("body", [None, [], "text", {"prompt": "x"}, {"input": 5}])
def test_add_note_without_a_place_for_it(body: Any) -> None:
    assert add_note(body, "openai", NOTE) is None


def test_is_streaming() -> None:
    assert is_streaming({"stream": True}, "/v1/messages", "anthropic")
    assert not is_streaming({"stream": "yes"}, "/v1/messages", "anthropic")
    assert not is_streaming({"stream": False}, "/api/chat", "ollama")
    assert is_streaming({}, "/v1beta/models/m:streamGenerateContent", "gemini")
