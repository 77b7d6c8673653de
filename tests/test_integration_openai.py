"""GuardTransport with the real `openai` SDK, over httpx2 (its default) and legacy httpx.

The network is replaced at the transport level: the library's own MockTransport serves
canned completions. Nothing of the SDK or of loopfuse is mocked.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

openai = pytest.importorskip("openai", reason="the openai extra is not installed")
httpx2 = pytest.importorskip("httpx2", reason="httpx2 is not installed")

from loopfuse import DedupCache, Guard, LoopBreaker  # noqa: E402
from loopfuse.errors import ConfigError  # noqa: E402
from loopfuse.integrations.httpx import (  # noqa: E402
    AsyncGuardTransport,
    GuardTransport,
    guard_client,
)

LIBRARIES = ["httpx2", "httpx"]


def library(name: str) -> ModuleType:
    return pytest.importorskip(name, reason=f"{name} is not installed")


class Upstream:
    """A fake OpenAI server: records each request body and answers with a tool call
    (always the same one: the agent is stuck) or with text."""

    def __init__(self, lib: ModuleType, *, tool_call: bool = False) -> None:
        self.lib = lib
        self.tool_call = tool_call
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        body = json.loads(request.content)
        self.bodies.append(body)
        n = len(self.bodies)
        if body.get("stream"):
            chunk = {
                "id": f"c{n}",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "delta": {"content": "streamed"}, "finish_reason": None}],
            }
            sse = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"
            headers = {"content-type": "text/event-stream"}
            return self.lib.Response(200, headers=headers, content=sse.encode())
        message: dict[str, Any] = {"role": "assistant", "content": f"answer {n}"}
        if self.tool_call:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{n}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"command": "cd fastjson/"}'},
                    }
                ],
            }
        completion = {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
        }
        return self.lib.Response(200, json=completion, headers={"x-request-id": f"req_{n}"})


class Counting:
    """The client's transport: counts the attempts the SDK makes, retries included."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.attempts = 0

    def handle_request(self, request: Any) -> Any:
        self.attempts += 1
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def refusing(options: dict[str, Any]) -> dict[str, Any]:
    """The tests below were written for ``mode="refuse"``; warn mode has its own tests."""
    if "guard" not in options:
        options.setdefault("mode", "refuse")
    return options


def sync_client(lib: ModuleType, upstream: Upstream, **options: Any) -> Any:
    transport = Counting(GuardTransport(lib.MockTransport(upstream), **refusing(options)))
    client = openai.OpenAI(
        api_key="sk-test", max_retries=2, http_client=lib.Client(transport=transport)
    )
    client.counting = transport
    return client


def async_client(lib: ModuleType, upstream: Upstream, **options: Any) -> Any:
    transport = AsyncGuardTransport(lib.MockTransport(upstream), **refusing(options))
    http = lib.AsyncClient(transport=transport)
    return openai.AsyncOpenAI(api_key="sk-test", max_retries=2, http_client=http)


QUESTION = [{"role": "user", "content": "What is Rust?"}]


def run_stuck_agent(create: Callable[[list[dict[str, Any]]], Any], turns: int = 20) -> int:
    """An agent loop whose tool always fails the same way; returns the turn it was stopped."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]
    for _turn in range(1, turns + 1):
        completion = create(messages)  # raises BadRequestError once loopfuse stops it
        call = completion.choices[0].message.tool_calls[0]
        messages.append(completion.choices[0].message.model_dump(exclude_none=True))
        messages.append(
            {"role": "tool", "tool_call_id": call.id, "content": "cd: fastjson/: No such file"}
        )
    raise AssertionError(f"the agent was never stopped in {turns} turns")


@pytest.mark.parametrize("lib_name", LIBRARIES)
def test_a_looping_agent_ends_in_bad_request_error(lib_name: str) -> None:
    lib = library(lib_name)
    upstream = Upstream(lib, tool_call=True)
    client = sync_client(lib, upstream, breaker=None)
    with pytest.raises(openai.BadRequestError) as caught:
        run_stuck_agent(lambda m: client.chat.completions.create(model="gpt-4o", messages=m))
    err = caught.value
    assert err.status_code == 400
    assert err.code == "repeat"
    assert err.type == "loop_detected"
    assert "you called `bash` with the same arguments" in err.message
    assert err.response.headers["x-should-retry"] == "false"
    # The refused request never reached the upstream, and was not retried (max_retries=2).
    stopped_at = len(upstream.bodies) + 1
    assert client.counting.attempts == stopped_at
    assert stopped_at > 2  # a loop needs repeats before it is one
    refused_history = upstream.bodies[-1]["messages"]
    assert len(refused_history) == 1 + 2 * (stopped_at - 2)


@pytest.mark.parametrize("lib_name", LIBRARIES)
def test_an_identical_second_request_is_served_from_the_cache(lib_name: str) -> None:
    lib = library(lib_name)
    upstream = Upstream(lib)
    client = sync_client(lib, upstream, cache=DedupCache(capacity=16))
    first = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=QUESTION)
    second = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=QUESTION)
    assert len(upstream.bodies) == 1
    assert first.headers["x-loopfuse-cache"] == "miss"
    assert first.headers["x-request-id"] == "req_1"  # the first caller sees upstream's headers
    assert second.headers["x-loopfuse-cache"] == "hit"
    assert second.parse().choices[0].message.content == "answer 1"
    assert first.parse().choices[0].message.content == "answer 1"
    # A different question, or another model, is not the same request.
    client.chat.completions.create(model="gpt-4o-mini", messages=QUESTION)
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Go?"}])
    assert len(upstream.bodies) == 3


@pytest.mark.parametrize("lib_name", LIBRARIES)
def test_the_breaker_refuses_a_request_hammered_in_one_session(lib_name: str) -> None:
    lib = library(lib_name)
    upstream = Upstream(lib)
    breaker = LoopBreaker(window=30, max_repeats=3, clock=lambda: 0.0)
    client = sync_client(lib, upstream, breaker=breaker)
    run_a = client.with_options(default_headers={"x-session-id": "run-a"})
    run_b = client.with_options(default_headers={"x-session-id": "run-b"})
    for _ in range(3):
        run_a.chat.completions.create(model="gpt-4o", messages=QUESTION)
    with pytest.raises(openai.BadRequestError) as caught:
        run_a.chat.completions.create(model="gpt-4o", messages=QUESTION)
    assert caught.value.code == "repeated_request"
    assert "sent 4 times within 30s" in caught.value.message
    run_b.chat.completions.create(model="gpt-4o", messages=QUESTION)  # sessions are isolated
    assert len(upstream.bodies) == 4


def test_a_session_resolver_names_the_session_when_the_header_does_not() -> None:
    upstream = Upstream(httpx2)
    breaker = LoopBreaker(max_repeats=1, clock=lambda: 0.0)
    seen: list[str] = []

    def session(request: Any) -> str | None:
        seen.append(request.url.path)
        return request.headers.get("x-run")

    client = sync_client(httpx2, upstream, breaker=breaker, session_id=session)
    for run in ("a", "b", "c"):
        client.chat.completions.create(
            model="gpt-4o", messages=QUESTION, extra_headers={"x-run": run}
        )
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(
            model="gpt-4o", messages=QUESTION, extra_headers={"x-run": "a"}
        )
    assert seen == ["/v1/chat/completions"] * 4


def test_note_mode_forwards_the_looping_request_with_a_note_for_the_model() -> None:
    upstream = Upstream(httpx2, tool_call=True)
    client = sync_client(httpx2, upstream, breaker=None, mode="note")
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]
    for _ in range(8):
        completion = client.chat.completions.create(model="gpt-4o", messages=messages)
        call = completion.choices[0].message.tool_calls[0]
        messages.append(completion.choices[0].message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "No such file"})
    assert len(upstream.bodies) == 8  # nothing refused
    # Turn 1 ends on the user's question; later turns end on a tool result unless noted.
    ends = [body["messages"][-1]["role"] for body in upstream.bodies[1:]]
    first = ends.index("user") if "user" in ends else len(ends)
    assert 0 < first < len(ends), "the loop was never noted"
    assert ends[first:] == ["user"] * (len(ends) - first)  # and from then on, every turn
    note = upstream.bodies[1 + first]["messages"][-1]["content"]
    assert note.startswith("[loopfuse] Loop detected: you called `bash`")
    assert upstream.bodies[0]["messages"] == [{"role": "user", "content": "Fix the build."}]
    # The note is for the model only: the agent's own history never carries it.
    assert all(m.get("content") != note for m in messages)


def test_streamed_answers_pass_through_uncached_unless_configured() -> None:
    upstream = Upstream(httpx2)
    client = sync_client(httpx2, upstream, cache=DedupCache(capacity=8))
    for _ in range(2):
        stream = client.chat.completions.create(model="gpt-4o", messages=QUESTION, stream=True)
        assert [c.choices[0].delta.content for c in stream] == ["streamed"]
    assert len(upstream.bodies) == 2

    upstream = Upstream(httpx2)
    client = sync_client(httpx2, upstream, cache=DedupCache(capacity=8), cache_streams=True)
    for _ in range(2):
        stream = client.chat.completions.create(model="gpt-4o", messages=QUESTION, stream=True)
        assert [c.choices[0].delta.content for c in stream] == ["streamed"]
    # The same question without streaming is another answer (JSON, not SSE).
    plain = client.chat.completions.create(model="gpt-4o", messages=QUESTION)
    assert plain.choices[0].message.content == "answer 2"
    assert len(upstream.bodies) == 2


def test_a_guard_that_fails_lets_the_request_through_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken:
        def scan(self, body: object) -> Any:
            raise RuntimeError("detector bug")

        scan_intent = scan  # the guard reads the parsed intent

    upstream = Upstream(httpx2)
    guard = Guard(breaker=None, detector=Broken())
    client = sync_client(httpx2, upstream, guard=guard)
    with caplog.at_level(logging.WARNING, logger="loopfuse"):
        answer = client.chat.completions.create(model="gpt-4o", messages=QUESTION)
    assert answer.choices[0].message.content == "answer 1"
    assert guard.internal_errors == 1
    assert [r.name for r in caplog.records] == ["loopfuse"]
    assert "detector bug" in caplog.records[0].getMessage()

    closed = sync_client(httpx2, upstream, breaker=None, detector=Broken(), fail_closed=True)
    with pytest.raises(openai.BadRequestError) as caught:
        closed.chat.completions.create(model="gpt-4o", messages=QUESTION)
    assert caught.value.code == "guard_failed"
    assert len(upstream.bodies) == 1


def test_embeddings_and_other_endpoints_are_not_guarded() -> None:
    calls: list[str] = []

    def handler(request: Any) -> Any:
        calls.append(request.url.path)
        vector = {"object": "embedding", "index": 0, "embedding": [0.5, 0.25]}
        usage = {"prompt_tokens": 1, "total_tokens": 1}
        return httpx2.Response(
            200, json={"object": "list", "model": "e", "data": [vector], "usage": usage}
        )

    transport = GuardTransport(
        httpx2.MockTransport(handler), breaker=LoopBreaker(max_repeats=1, clock=lambda: 0.0)
    )
    client = openai.OpenAI(api_key="sk-test", http_client=httpx2.Client(transport=transport))
    for _ in range(5):
        got = client.embeddings.create(model="text-embedding-3-small", input="What is Rust?")
        assert got.data[0].embedding == [0.5, 0.25]
    assert calls == ["/v1/embeddings"] * 5


@pytest.mark.parametrize("lib_name", LIBRARIES)
def test_async_client_loop_and_cache(lib_name: str) -> None:
    lib = library(lib_name)

    async def main() -> None:
        upstream = Upstream(lib, tool_call=True)
        client = async_client(lib, upstream, breaker=None)

        async def stuck_agent() -> None:
            messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]
            for _ in range(20):
                done = await client.chat.completions.create(model="gpt-4o", messages=messages)
                call = done.choices[0].message.tool_calls[0]
                messages.append(done.choices[0].message.model_dump(exclude_none=True))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": "nope"})

        with pytest.raises(openai.BadRequestError) as caught:
            await stuck_agent()
        assert caught.value.code == "repeat"
        assert len(upstream.bodies) > 2

        upstream = Upstream(lib)
        client = async_client(lib, upstream, cache=DedupCache(capacity=8))
        answers = await asyncio.gather(
            *(client.chat.completions.create(model="gpt-4o", messages=QUESTION) for _ in range(5))
        )
        assert {a.choices[0].message.content for a in answers} == {"answer 1"}
        assert len(upstream.bodies) == 1  # concurrent identical requests: one upstream call
        await client.close()

    asyncio.run(main())


# --- guard_client: the one line ------------------------------------------------------


def test_guard_client_guards_the_openai_client_you_made_in_one_line() -> None:
    upstream = Upstream(httpx2, tool_call=True)
    made = openai.OpenAI(api_key="sk-test", max_retries=2, base_url="https://llm.example/v1")
    client = guard_client(made, transport=httpx2.MockTransport(upstream), breaker=None)
    # The SDK's own copy: what the client was made with is kept.
    assert isinstance(client, openai.OpenAI)
    assert (client.api_key, client.max_retries) == ("sk-test", 2)
    assert str(client.base_url) == "https://llm.example/v1/"
    with pytest.raises(openai.BadRequestError) as caught:
        run_stuck_agent(lambda m: client.chat.completions.create(model="gpt-4o", messages=m))
    assert caught.value.code == "repeat"
    assert caught.value.response.headers["x-should-retry"] == "false"
    # The default mode warns first: the request before the refusal carried the note.
    assert "[loopfuse]" in json.dumps(upstream.bodies[-1]["messages"][-1])


def test_guard_client_takes_the_guards_options_a_cache_among_them() -> None:
    upstream = Upstream(httpx2)
    client = guard_client(
        openai.OpenAI(api_key="sk-test"),
        transport=httpx2.MockTransport(upstream),
        cache=DedupCache(capacity=16),
    )
    first = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=QUESTION)
    second = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=QUESTION)
    assert (first.headers["x-loopfuse-cache"], second.headers["x-loopfuse-cache"]) == (
        "miss",
        "hit",
    )
    assert len(upstream.bodies) == 1


def test_guard_client_guards_an_async_openai_client() -> None:
    upstream = Upstream(httpx2, tool_call=True)
    made = openai.AsyncOpenAI(api_key="sk-test", max_retries=2)
    client = guard_client(made, transport=httpx2.MockTransport(upstream), breaker=None)
    assert isinstance(client, openai.AsyncOpenAI)

    async def agent() -> None:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]
        for _ in range(20):
            completion = await client.chat.completions.create(model="gpt-4o", messages=messages)
            call = completion.choices[0].message.tool_calls[0]
            messages.append(completion.choices[0].message.model_dump(exclude_none=True))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "No such file"})

    with pytest.raises(openai.BadRequestError) as caught:
        asyncio.run(agent())
    assert caught.value.code == "repeat"


def test_guard_client_sends_over_the_network_with_the_sdks_own_library() -> None:
    """Without ``transport=``: a real connection (to a server on loopback)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import fake_openai

    bodies: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            bodies.append(body)
            message = {"role": "assistant", "content": "hi"}
            answer = json.dumps(fake_openai.completion(body["model"], 1, message)).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_port}/v1"
        breaker = LoopBreaker(max_repeats=1, clock=lambda: 0.0)
        made = openai.OpenAI(api_key="sk-test", base_url=base, max_retries=0)
        client = guard_client(made, breaker=breaker, mode="refuse")
        session = client.with_options(default_headers={"x-session-id": "run-1"})
        answer = session.chat.completions.create(model="gpt-4o", messages=QUESTION)
        assert answer.choices[0].message.content == "hi"
        with pytest.raises(openai.BadRequestError) as caught:
            session.chat.completions.create(model="gpt-4o", messages=QUESTION)
        assert caught.value.code == "repeated_request"
        assert len(bodies) == 1  # the refusal never left the process
    finally:
        server.shutdown()
        server.server_close()


def test_guard_client_refuses_what_is_not_an_sdk_client() -> None:
    for wrong in (object(), httpx2.Client(), "openai"):
        with pytest.raises(ConfigError, match="guard_client takes an OpenAI or Anthropic"):
            guard_client(wrong)
