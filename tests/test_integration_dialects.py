"""Warn-then-stop through GuardTransport in every dialect, with each provider's own client
where one is installed: each body that reaches the upstream is valid for its provider
(tests/dialect_rules.py), one carries the note, the next lap is refused, and
``loop_message`` gets the clean message out of that client's error.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

httpx2 = pytest.importorskip("httpx2", reason="httpx2 is not installed")

from conftest import laps  # noqa: E402
from dialect_rules import (  # noqa: E402
    check_anthropic,
    check_gemini,
    check_ollama,
    check_openai_chat,
    check_responses,
)
from loopfuse.integrations import loop_message  # noqa: E402
from loopfuse.integrations.httpx import GuardTransport  # noqa: E402

NOTE = "[loopfuse] Loop detected"
ENDING = "This loop went on after loopfuse's note about it, so it was stopped."


class Recorder:
    """The upstream: validates and records each body, answers with ``reply(n, body)``."""

    def __init__(self, lib: Any, check: Callable[[dict[str, Any]], None], reply: Any) -> None:
        self.lib, self.check, self.reply = lib, check, reply
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        body = json.loads(request.content)
        self.check(body)
        self.bodies.append(body)
        return self.lib.Response(200, json=self.reply(len(self.bodies), body))

    def noted(self) -> list[dict[str, Any]]:
        return [body for body in self.bodies if NOTE in json.dumps(body)]


def transport(lib: Any, upstream: Recorder) -> GuardTransport:
    return GuardTransport(lib.MockTransport(upstream), breaker=None)  # default mode: warn


def assert_warned_then_stopped(upstream: Recorder, error: BaseException) -> None:
    assert len(upstream.noted()) == 1
    assert upstream.noted()[0] is upstream.bodies[-1]  # the note went out last; then a stop
    message = loop_message(error)
    assert message is not None
    assert message.startswith("Loop detected: you called `bash`")
    assert message.endswith(ENDING)


def assert_refused_by_loopfuse(error: Any) -> None:
    """What loopfuse sent, read off the SDK's error: the status, our header and our body.

    Never the SDK's own wording of the error (``str(error)``), which changes between
    releases the extras' ranges allow: ``loop_message`` reads the body, not that text.
    """
    response = error.response
    assert response.status_code == 400
    assert "x-loopfuse-refused" in response.headers
    assert json.dumps(response.json()).count('"loop_detected"') == 1
    assert loop_message(error) is not None


def test_openai_chat() -> None:
    openai = pytest.importorskip("openai")

    def reply(n: int, body: Any) -> Any:
        call = {"id": f"c{n}", "type": "function"}
        call["function"] = {"name": "bash", "arguments": '{"command": "make"}'}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        choice = {"index": 0, "finish_reason": "tool_calls", "message": message}
        return {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [choice],
        }

    upstream = Recorder(httpx2, check_openai_chat, reply)
    client = openai.OpenAI(
        api_key="k", http_client=httpx2.Client(transport=transport(httpx2, upstream))
    )
    messages: list[Any] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Fix it."},
    ]

    def lap() -> None:
        done = client.chat.completions.create(model="m", messages=messages)
        messages.append(done.choices[0].message.model_dump(exclude_none=True))
        call_id = done.choices[0].message.tool_calls[0].id
        messages.append({"role": "tool", "tool_call_id": call_id, "content": "Error 2"})

    with pytest.raises(openai.BadRequestError) as caught:
        laps(lap)
    assert_refused_by_loopfuse(caught.value)
    assert_warned_then_stopped(upstream, caught.value)


def test_openai_responses() -> None:
    openai = pytest.importorskip("openai")

    def reply(n: int, body: Any) -> Any:
        call = {"type": "function_call", "id": f"fc{n}", "call_id": f"c{n}", "name": "bash"}
        call |= {"arguments": '{"command": "make"}', "status": "completed"}
        return {
            "id": f"r{n}",
            "object": "response",
            "created_at": 0,
            "model": "m",
            "output": [call],
            "status": "completed",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }

    upstream = Recorder(httpx2, check_responses, reply)
    client = openai.OpenAI(
        api_key="k", http_client=httpx2.Client(transport=transport(httpx2, upstream))
    )
    items: list[Any] = [{"role": "user", "content": "Fix it."}]

    def lap() -> None:
        done = client.responses.create(model="m", instructions="Be brief.", input=items)
        call = done.output[0]
        items.append(call.model_dump(exclude_none=True))
        items.append({"type": "function_call_output", "call_id": call.call_id, "output": "Error 2"})

    with pytest.raises(openai.BadRequestError) as caught:
        laps(lap)
    assert_refused_by_loopfuse(caught.value)
    assert_warned_then_stopped(upstream, caught.value)


def test_anthropic() -> None:
    anthropic = pytest.importorskip("anthropic")

    def reply(n: int, body: Any) -> Any:
        use = {"type": "tool_use", "id": f"t{n}", "name": "bash", "input": {"command": "make"}}
        return {
            "id": f"m{n}",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [use],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }

    upstream = Recorder(httpx2, check_anthropic, reply)
    client = anthropic.Anthropic(
        api_key="k", http_client=httpx2.Client(transport=transport(httpx2, upstream))
    )
    messages: list[Any] = [{"role": "user", "content": "Fix it."}]

    def lap() -> None:
        done = client.messages.create(
            model="m", max_tokens=64, system="Be brief.", messages=messages
        )
        messages.append({"role": "assistant", "content": [b.model_dump() for b in done.content]})
        result = {
            "type": "tool_result",
            "tool_use_id": done.content[0].id,
            "content": "Error 2",
        }
        messages.append({"role": "user", "content": [result]})

    with pytest.raises(anthropic.BadRequestError) as caught:
        laps(lap)
    assert_refused_by_loopfuse(caught.value)
    assert caught.value.response.json()["type"] == "error"  # Anthropic's envelope
    assert_warned_then_stopped(upstream, caught.value)


def test_gemini() -> None:
    def reply(n: int, body: Any) -> Any:
        call = {"functionCall": {"name": "bash", "args": {"command": "make"}}}
        return {
            "candidates": [{"content": {"role": "model", "parts": [call]}, "finishReason": "STOP"}]
        }

    upstream = Recorder(httpx2, check_gemini, reply)
    http = httpx2.Client(transport=transport(httpx2, upstream))
    url = "https://g.example/v1beta/models/gemini-2.5-pro:generateContent"
    contents: list[Any] = [{"role": "user", "parts": [{"text": "Fix it."}]}]
    for _ in range(20):
        body = {"contents": contents, "systemInstruction": {"parts": [{"text": "Be brief."}]}}
        response = http.post(url, json=body)
        if response.status_code != 200:
            break
        contents.append(response.json()["candidates"][0]["content"])
        answer = {"functionResponse": {"name": "bash", "response": {"output": "Error 2"}}}
        contents.append({"role": "user", "parts": [answer]})
    error = response.json()["error"]
    assert error["status"] == "FAILED_PRECONDITION"
    assert upstream.noted()[0]["systemInstruction"]["parts"][-1]["text"].startswith(NOTE)

    class GeminiError(Exception):  # what the google-genai client keeps of a response
        details = response.json()

    assert_warned_then_stopped(upstream, GeminiError())


def test_ollama() -> None:
    ollama = pytest.importorskip("ollama")
    httpx = pytest.importorskip("httpx")

    def reply(n: int, body: Any) -> Any:
        call = {"function": {"name": "bash", "arguments": {"command": "make"}}}
        message = {"role": "assistant", "content": "", "tool_calls": [call]}
        return {
            "model": "llama3",
            "created_at": "2025-01-01T00:00:00Z",
            "done": True,
            "message": message,
        }

    upstream = Recorder(httpx, check_ollama, reply)
    llm = ollama.Client(host="http://localhost:11434", transport=transport(httpx, upstream))
    messages: list[Any] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Fix it."},
    ]

    def lap() -> None:
        done = llm.chat(model="llama3", messages=messages, stream=False)
        messages.append(done.message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "content": "Error 2", "tool_name": "bash"})

    with pytest.raises(ollama.ResponseError) as caught:
        laps(lap)
    assert_warned_then_stopped(upstream, caught.value)
