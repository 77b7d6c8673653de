"""Production traffic through GuardTransport and the real `openai` SDK: end users apart, SDK
retries intact, deliberate re-sampling, warn-then-stop.

The network is replaced at the transport (httpx2's MockTransport); nothing of the SDK or
of loopfuse is mocked. Time is a fake clock that the upstream moves, as real latency would.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

openai = pytest.importorskip("openai", reason="the openai extra is not installed")
httpx2 = pytest.importorskip("httpx2", reason="httpx2 is not installed")

from conftest import FakeClock, laps  # noqa: E402
from loopfuse import Guard, GuardEvent, LoopBreaker  # noqa: E402
from loopfuse.integrations import loop_message  # noqa: E402
from loopfuse.integrations.httpx import AsyncGuardTransport, GuardTransport  # noqa: E402

QUESTION = [{"role": "user", "content": "hi"}]


class TickingClock(FakeClock):
    """A fake clock that moves a little each time it is read: the SDK really sleeps
    between retries (a millisecond here), and the guard must see that time pass."""

    def __call__(self) -> float:
        self.now += 0.01
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return TickingClock()


def completion(n: int, model: str = "gpt-4o", message: dict[str, Any] | None = None) -> Any:
    message = message or {"role": "assistant", "content": f"answer {n}"}
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
    }


class Upstream:
    """A fake OpenAI server: answers ``statuses`` in order (then 200s), each attempt
    taking ``latency`` seconds of the fake clock; records every body."""

    def __init__(self, clock: FakeClock, statuses: tuple[int, ...] = (), latency: float = 1.0):
        self.clock, self.statuses, self.latency = clock, list(statuses), latency
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        self.clock.advance(self.latency)
        self.bodies.append(json.loads(request.content))
        if self.statuses:
            status = self.statuses.pop(0)
            error = {"error": {"message": "slow down", "type": "rate_limit", "code": None}}
            return httpx2.Response(status, json=error, headers={"retry-after-ms": "1"})
        return httpx2.Response(200, json=completion(len(self.bodies)))


def client_for(
    upstream: Callable[[Any], Any], clock: FakeClock, max_retries: int = 2, **options: Any
) -> Any:
    options.setdefault("breaker", LoopBreaker(window=30, max_repeats=5, clock=clock))
    transport = GuardTransport(httpx2.MockTransport(upstream), **options)
    http = httpx2.Client(transport=transport)
    client = openai.OpenAI(api_key="sk-test", max_retries=max_retries, http_client=http)
    client.guard = transport.guard
    return client


def test_six_users_saying_hi_are_six_sessions_and_none_is_refused(clock: FakeClock) -> None:
    upstream = Upstream(clock)
    client = client_for(upstream, clock, mode="refuse")
    for user in range(6):  # no session header, one end user each
        client.chat.completions.create(model="gpt-4o", messages=QUESTION, user=f"u-{user}")
    for _ in range(6):  # nor any end user: not counted at all
        client.chat.completions.create(model="gpt-4o", messages=QUESTION)
    assert len(upstream.bodies) == 12
    for _ in range(5):  # one end user saying it again and again is counted
        client.chat.completions.create(model="gpt-4o", messages=QUESTION, safety_identifier="h")
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=QUESTION, safety_identifier="h")
    assert caught.value.code == "repeated_request"


def test_a_junk_end_user_falls_back_and_is_counted(clock: FakeClock) -> None:
    events: list[GuardEvent] = []
    upstream = Upstream(clock)
    client = client_for(upstream, clock, mode="refuse", on_event=events.append)
    for _ in range(7):
        client.chat.completions.create(model="gpt-4o", messages=QUESTION, user=42)  # type: ignore[arg-type]
    assert len(upstream.bodies) == 7  # no usable session: not counted, never refused
    assert client.guard.input_fallbacks == 7
    assert {e.action for e in events} == {"input_fallback", "request_forwarded"}
    assert events[0].reason == "user is a int, not a non-empty string"
    shared = client_for(Upstream(clock), clock, mode="refuse", shared_session="all")
    for _ in range(5):
        shared.chat.completions.create(model="gpt-4o", messages=QUESTION, user=42)  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError):  # the opted-in shared session counts them
        shared.chat.completions.create(model="gpt-4o", messages=QUESTION, user=42)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["refuse", "warn"])
def test_sdk_retries_of_429s_reach_the_upstream_and_the_call_succeeds(
    clock: FakeClock, mode: str
) -> None:
    events: list[GuardEvent] = []
    upstream = Upstream(clock, statuses=(429, 429, 429, 429, 429))
    client = client_for(upstream, clock, max_retries=6, mode=mode, on_event=events.append)
    answer = client.chat.completions.create(model="gpt-4o", messages=QUESTION, user="u-1")
    assert answer.choices[0].message.content == "answer 6"
    assert len(upstream.bodies) == 6  # every attempt reached the upstream, none noted
    assert all(body["messages"] == QUESTION for body in upstream.bodies)
    assert [e.action for e in events] == ["request_forwarded"] + [
        "retry_forgiven",
        "request_forwarded",
    ] * 5
    assert all(e.session == "u-1" for e in events)
    # The answered request, re-sent: counted again (1 was counted; 4 more are allowed),
    # then refused (in "warn" mode, after one more that goes out with a note).
    for _ in range(4 if mode == "refuse" else 5):
        client.chat.completions.create(model="gpt-4o", messages=QUESTION, user="u-1")
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=QUESTION, user="u-1")
    assert caught.value.code == "repeated_request"
    assert len(upstream.bodies) == (10 if mode == "refuse" else 11)


def test_a_client_hammering_an_answered_request_is_still_broken(clock: FakeClock) -> None:
    upstream = Upstream(clock)
    client = client_for(upstream, clock, mode="refuse")
    run = client.with_options(default_headers={"x-session-id": "run-1"})
    for _ in range(5):
        run.chat.completions.create(model="gpt-4o", messages=QUESTION)
    for _ in range(3):  # refused, and the refusals are recorded too
        with pytest.raises(openai.BadRequestError):
            run.chat.completions.create(model="gpt-4o", messages=QUESTION)
    assert len(upstream.bodies) == 5


def test_a_retry_that_ignores_its_backoff_is_counted(clock: FakeClock) -> None:
    def throttled(request: Any) -> Any:
        clock.advance(0.1)
        sent.append(request)
        return httpx2.Response(
            429, json={"error": {"message": "wait"}}, headers={"retry-after": "10"}
        )

    sent: list[Any] = []
    breaker = LoopBreaker(window=30, max_repeats=2, clock=clock)
    client = client_for(throttled, clock, max_retries=0, breaker=breaker, mode="refuse")
    for _ in range(2):  # re-sent at once, before the 10 s it was told to wait
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="gpt-4o", messages=QUESTION, user="u")
    with pytest.raises(openai.BadRequestError):  # the third in a row is a loop
        client.chat.completions.create(model="gpt-4o", messages=QUESTION, user="u")
    assert len(sent) == 2
    clock.advance(30)  # a new window; now a client that waits as told is not counted
    for _ in range(5):
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="gpt-4o", messages=QUESTION, user="u")
        clock.advance(10)
    assert len(sent) == 7


def test_connection_errors_are_failed_attempts_too(clock: FakeClock) -> None:
    attempts: list[int] = []

    def flaky(request: Any) -> Any:
        attempts.append(1)
        if len(attempts) <= 3:
            raise httpx2.ConnectTimeout("no route", request=request)
        return httpx2.Response(200, json={"ok": True})

    breaker = LoopBreaker(window=30, max_repeats=1, clock=clock)
    transport = GuardTransport(httpx2.MockTransport(flaky), breaker=breaker, mode="refuse")
    http = httpx2.Client(transport=transport)
    body = {"model": "m", "messages": QUESTION, "user": "u"}
    for _ in range(3):  # a client's own retry loop
        with pytest.raises(httpx2.ConnectTimeout):
            http.post("https://api.example/v1/chat/completions", json=body)
    assert http.post("https://api.example/v1/chat/completions", json=body).status_code == 200
    refused = http.post("https://api.example/v1/chat/completions", json=body)
    assert refused.status_code == 400  # answered once already: a repeat
    assert len(attempts) == 4


def test_async_sdk_retries_are_forgiven_too(clock: FakeClock) -> None:
    async def main() -> None:
        upstream = Upstream(clock, statuses=(503, 429, 500))
        breaker = LoopBreaker(window=30, max_repeats=1, clock=clock)
        transport = AsyncGuardTransport(httpx2.MockTransport(upstream), breaker=breaker)
        client = openai.AsyncOpenAI(
            api_key="sk-test", max_retries=4, http_client=httpx2.AsyncClient(transport=transport)
        )
        answer = await client.chat.completions.create(model="gpt-4o", messages=QUESTION, user="u")
        assert answer.choices[0].message.content == "answer 4"
        assert len(upstream.bodies) == 4
        await client.close()

    asyncio.run(main())


def test_another_seed_or_more_choices_is_another_request(clock: FakeClock) -> None:
    upstream = Upstream(clock)
    client = client_for(upstream, clock, mode="refuse")
    for seed in range(8):
        client.chat.completions.create(model="gpt-4o", messages=QUESTION, user="u", seed=seed)
    for n in range(1, 4):
        client.chat.completions.create(model="gpt-4o", messages=QUESTION, user="v", n=n)
    assert len(upstream.bodies) == 11
    for _ in range(5):
        client.chat.completions.create(model="gpt-4o", messages=QUESTION, user="w", seed=1)
    with pytest.raises(openai.BadRequestError):  # the same seed again and again is a loop
        client.chat.completions.create(model="gpt-4o", messages=QUESTION, user="w", seed=1)
    # The temperature is not a new request: the intent drops sampling parameters.
    for t in (0.1, 0.2, 0.3, 0.4, 0.5):
        client.chat.completions.create(model="gpt-4o", messages=QUESTION, user="x", temperature=t)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="gpt-4o", messages=QUESTION, user="x", temperature=0.6)


def stuck_agent(client: Any) -> Callable[[], None]:
    """An agent's lap: send the conversation, run the call that comes back, fail the
    same way ("Error 2") every time."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]

    def lap() -> None:
        reply = client.chat.completions.create(model="gpt-4o", messages=messages)
        call = reply.choices[0].message.tool_calls[0]
        messages.append(reply.choices[0].message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "Error 2"})

    return lap


def is_noted(body: dict[str, Any]) -> bool:
    """Whether a Chat body the agent sent carries a note: it ends on a user turn after
    the first (the agent's own turns end on tool results)."""
    return body["messages"][-1]["role"] == "user" and len(body["messages"]) > 1


def stuck_upstream(bodies: list[dict[str, Any]]) -> Callable[[Any], Any]:
    def answer(request: Any) -> Any:
        bodies.append(json.loads(request.content))
        n = len(bodies)
        function = {"name": "bash", "arguments": '{"command": "make"}'}
        call = {"id": f"call_{n}", "type": "function", "function": function}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return httpx2.Response(200, json=completion(n, message=message))

    return answer


def test_warn_is_the_default_a_note_first_then_a_refusal(clock: FakeClock) -> None:
    events: list[GuardEvent] = []
    bodies: list[dict[str, Any]] = []
    client = client_for(stuck_upstream(bodies), clock, breaker=None, on_event=events.append)
    assert client.guard.mode == "warn"
    with pytest.raises(openai.BadRequestError) as caught:
        laps(stuck_agent(client))
    noted = [body for body in bodies if is_noted(body)]
    assert len(noted) == 1  # one note, on the last request that went out
    assert noted[0] is bodies[-1]
    assert noted[0]["messages"][-1]["content"].startswith("[loopfuse] Loop detected: you called")
    message = loop_message(caught.value)
    assert message is not None
    assert message.startswith("Loop detected: you called `bash`")
    assert message.endswith("This loop went on after loopfuse's note about it, so it was stopped.")
    loops = [e for e in events if e.action != "request_forwarded"]
    assert [e.action for e in loops] == ["loop_noted", "loop_refused"]
    assert loops[0].tool_names == ("bash",)
    assert loops[1].count == loops[0].count + 1
    assert [e.action for e in events].count("request_forwarded") == len(bodies) - 1


def test_a_retry_of_a_noted_request_is_noted_again_not_refused(clock: FakeClock) -> None:
    bodies: list[dict[str, Any]] = []
    answer = stuck_upstream(bodies)
    failures = [0]

    def flaky(request: Any) -> Any:
        body = json.loads(request.content)
        if is_noted(body) and failures[0] < 2:  # the noted request meets a 429, twice
            failures[0] += 1
            bodies.append(body)
            clock.advance(1)
            return httpx2.Response(
                429, json={"error": {"message": "busy"}}, headers={"retry-after-ms": "1"}
            )
        return answer(request)

    client = client_for(flaky, clock, max_retries=3, breaker=None)
    with pytest.raises(openai.BadRequestError):
        laps(stuck_agent(client))
    noted = [body for body in bodies if is_noted(body)]
    assert len(noted) == 3  # the noted request and its two retries, all with the note
    assert noted[0] == noted[1] == noted[2]


def test_a_guard_used_by_many_clients_keeps_one_memory(clock: FakeClock) -> None:
    guard = Guard(breaker=LoopBreaker(window=30, max_repeats=1, clock=clock), mode="refuse")
    upstream = Upstream(clock)
    first = openai.OpenAI(
        api_key="k",
        http_client=httpx2.Client(transport=GuardTransport(httpx2.MockTransport(upstream), guard)),
    )
    second = openai.OpenAI(
        api_key="k",
        http_client=httpx2.Client(transport=GuardTransport(httpx2.MockTransport(upstream), guard)),
    )
    first.chat.completions.create(model="gpt-4o", messages=QUESTION, user="u")
    with pytest.raises(openai.BadRequestError):
        second.chat.completions.create(model="gpt-4o", messages=QUESTION, user="u")
