"""GuardTransport with the real `anthropic` SDK (which takes an httpx2 client).

The network is replaced at the transport level by httpx2's MockTransport serving canned
Messages API answers. Nothing of the SDK or of loopfuse is mocked.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic", reason="the anthropic extra is not installed")
httpx2 = pytest.importorskip("httpx2", reason="httpx2 is not installed")

from loopfuse import DedupCache, LoopBreaker  # noqa: E402
from loopfuse.integrations.httpx import (  # noqa: E402
    AsyncGuardTransport,
    GuardTransport,
    guard_client,
)

MODEL = "claude-test"  # not a real model: no deprecation warning, ever


class Upstream:
    """A fake Anthropic server: records each body; answers with the same tool call each
    time (a stuck agent), with text, or with a text stream."""

    def __init__(self, *, tool_use: bool = False) -> None:
        self.tool_use = tool_use
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        body = json.loads(request.content)
        self.bodies.append(body)
        n = len(self.bodies)
        if body.get("stream"):
            return httpx2.Response(
                200, headers={"content-type": "text/event-stream"}, content=stream_of(n)
            )
        block: dict[str, Any] = {"type": "text", "text": f"answer {n}"}
        if self.tool_use:
            block = {"type": "tool_use", "id": f"toolu_{n}", "name": "bash"}
            block["input"] = {"command": "cd fastjson/"}
        message = {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": [block],
            "stop_reason": "tool_use" if self.tool_use else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
        return httpx2.Response(200, json=message, headers={"request-id": f"req_{n}"})


def stream_of(n: int) -> bytes:
    message = {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    events = [
        ("message_start", {"type": "message_start", "message": message}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": f"streamed {n}"},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 3},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in events).encode()


def client_for(upstream: Upstream, **options: Any) -> Any:
    options.setdefault("mode", "refuse")  # written for refusals; warn mode has its own tests
    transport = GuardTransport(httpx2.MockTransport(upstream), **options)
    return anthropic.Anthropic(
        api_key="sk-ant-test", max_retries=2, http_client=httpx2.Client(transport=transport)
    )


QUESTION = [{"role": "user", "content": "What is Rust?"}]


def tool_turn(message: Any) -> list[dict[str, Any]]:
    """The assistant turn and the user turn carrying the (always failing) tool result."""
    use = message.content[0]
    result = {"type": "tool_result", "tool_use_id": use.id, "content": "No such file"}
    return [
        {"role": "assistant", "content": [block.model_dump() for block in message.content]},
        {"role": "user", "content": [result]},
    ]


def run_stuck_agent(client: Any, messages: list[dict[str, Any]], turns: int = 20) -> None:
    """An agent loop whose tool always fails the same way, until loopfuse stops it."""
    for _ in range(turns):
        messages += tool_turn(
            client.messages.create(model=MODEL, max_tokens=256, messages=messages)
        )
    raise AssertionError(f"the agent was never stopped in {turns} turns")


def test_a_looping_agent_ends_in_bad_request_error_in_anthropic_shape() -> None:
    upstream = Upstream(tool_use=True)
    client = client_for(upstream, breaker=None)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]
    with pytest.raises(anthropic.BadRequestError) as caught:
        run_stuck_agent(client, messages)
    err = caught.value
    assert err.status_code == 400
    assert err.body == {
        "type": "error",
        "error": {"type": "loop_detected", "message": err.api_message},
    }
    assert err.api_message.startswith("Loop detected: you called `bash` with the same arguments")
    assert err.response.headers["x-loopfuse-refused"] == "repeat"
    assert err.response.headers["x-should-retry"] == "false"
    assert len(messages) == 1 + 2 * len(upstream.bodies)  # the refused request never left


def test_an_identical_second_request_is_served_from_the_cache() -> None:
    upstream = Upstream()
    client = client_for(upstream, cache=DedupCache(capacity=8))
    first = client.messages.with_raw_response.create(model=MODEL, max_tokens=64, messages=QUESTION)
    second = client.messages.with_raw_response.create(model=MODEL, max_tokens=64, messages=QUESTION)
    assert len(upstream.bodies) == 1
    assert second.headers["x-loopfuse-cache"] == "hit"
    assert first.parse().content[0].text == second.parse().content[0].text == "answer 1"
    # max_tokens changes the answer: another request.
    client.messages.create(model=MODEL, max_tokens=65, messages=QUESTION)
    assert len(upstream.bodies) == 2


def test_a_cached_stream_replays_through_the_sdk() -> None:
    upstream = Upstream()
    client = client_for(upstream, cache=DedupCache(capacity=8), cache_streams=True)
    texts = []
    for _ in range(2):
        with client.messages.stream(model=MODEL, max_tokens=64, messages=QUESTION) as stream:
            texts.append("".join(stream.text_stream))
    assert texts == ["streamed 1", "streamed 1"]
    assert len(upstream.bodies) == 1


def test_note_mode_puts_the_note_after_the_tool_results() -> None:
    upstream = Upstream(tool_use=True)
    client = client_for(upstream, breaker=None, mode="note")
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]
    for _ in range(8):
        messages += tool_turn(
            client.messages.create(model=MODEL, max_tokens=256, messages=messages)
        )
    last_blocks = [body["messages"][-1]["content"] for body in upstream.bodies[1:]]
    noted = [blocks for blocks in last_blocks if blocks[-1]["type"] == "text"]
    assert noted, "the loop was never noted"
    assert [b["type"] for b in noted[0]] == ["tool_result", "text"]
    assert noted[0][-1]["text"].startswith("[loopfuse] Loop detected:")
    assert all(len(body["messages"]) % 2 == 1 for body in upstream.bodies)  # turns alternate


def test_the_breaker_and_the_async_client() -> None:
    async def main() -> None:
        upstream = Upstream()
        breaker = LoopBreaker(max_repeats=2, clock=lambda: 0.0)
        transport = AsyncGuardTransport(
            httpx2.MockTransport(upstream), breaker=breaker, mode="refuse"
        )
        client = anthropic.AsyncAnthropic(
            api_key="sk-ant-test", http_client=httpx2.AsyncClient(transport=transport)
        )
        user = {"user_id": "u-1"}  # Anthropic's end-user field is the breaker session
        for _ in range(2):
            await client.messages.create(
                model=MODEL, max_tokens=64, messages=QUESTION, metadata=user
            )
        with pytest.raises(anthropic.BadRequestError) as caught:
            await client.messages.create(
                model=MODEL, max_tokens=64, messages=QUESTION, metadata=user
            )
        assert caught.value.type == "loop_detected"
        assert caught.value.response.headers["x-loopfuse-refused"] == "repeated_request"
        other = client.with_options(default_headers={"x-session-id": "another-run"})
        reply = await other.messages.create(model=MODEL, max_tokens=64, messages=QUESTION)
        assert reply.content[0].text == "answer 3"
        for _ in range(3):  # no session and no end user: never counted
            await client.messages.create(model=MODEL, max_tokens=64, messages=QUESTION)
        await client.close()

    asyncio.run(main())


# --- guard_client: the one line ------------------------------------------------------


def test_guard_client_guards_the_anthropic_client_you_made_in_one_line() -> None:
    upstream = Upstream(tool_use=True)
    made = anthropic.Anthropic(api_key="sk-ant-test", max_retries=2)
    client = guard_client(made, transport=httpx2.MockTransport(upstream), breaker=None)
    assert isinstance(client, anthropic.Anthropic)
    assert (client.api_key, client.max_retries) == ("sk-ant-test", 2)
    with pytest.raises(anthropic.BadRequestError) as caught:
        run_stuck_agent(client, [{"role": "user", "content": "Fix the build."}])
    assert caught.value.status_code == 400
    assert caught.value.response.headers["x-loopfuse-refused"] == "repeat"
    # The default mode warns first: the request before the refusal carried the note.
    assert "[loopfuse]" in json.dumps(upstream.bodies[-1]["messages"][-1])


def test_guard_client_guards_an_async_anthropic_client() -> None:
    upstream = Upstream(tool_use=True)
    made = anthropic.AsyncAnthropic(api_key="sk-ant-test", max_retries=2)
    client = guard_client(made, transport=httpx2.MockTransport(upstream), breaker=None)
    assert isinstance(client, anthropic.AsyncAnthropic)

    async def agent() -> None:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]
        for _ in range(20):
            message = await client.messages.create(model=MODEL, max_tokens=256, messages=messages)
            messages += tool_turn(message)

    with pytest.raises(anthropic.BadRequestError) as caught:
        asyncio.run(agent())
    assert caught.value.response.headers["x-loopfuse-refused"] == "repeat"


def test_guard_client_builds_what_the_anthropic_sdk_accepts() -> None:
    """The SDK refuses an ``httpx`` transport in its default client; the guarded client is
    made with its own library, so it is accepted (and a cache answers the repeat)."""
    upstream = Upstream()
    client = guard_client(
        anthropic.Anthropic(api_key="sk-ant-test"),
        transport=httpx2.MockTransport(upstream),
        cache=DedupCache(capacity=4),
    )
    for _ in range(2):
        answer = client.messages.with_raw_response.create(
            model=MODEL, max_tokens=64, messages=QUESTION
        )
    assert answer.headers["x-loopfuse-cache"] == "hit"
    assert len(upstream.bodies) == 1
