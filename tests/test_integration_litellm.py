"""LoopfuseHandler through LiteLLM's own classes: the hook as the proxy calls it, and the
proxy's own pre-call and error handling when its dependencies are installed."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from typing import Any

import pytest

# LiteLLM fetches a model price map from the network at import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
litellm = pytest.importorskip("litellm", reason="the litellm extra is not installed")

from litellm.caching.dual_cache import DualCache  # noqa: E402
from litellm.proxy._types import UserAPIKeyAuth  # noqa: E402

from dialect_rules import check_openai_chat  # noqa: E402
from loopfuse import ConfigError, DedupCache, Guard, LoopBreaker  # noqa: E402
from loopfuse.integrations import MissingExtraError, _extras, loop_message  # noqa: E402
from loopfuse.integrations._extras import install_command  # noqa: E402
from loopfuse.integrations.httpx import GuardTransport  # noqa: E402
from loopfuse.integrations.litellm import LoopfuseHandler, LoopRefusedError  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")  # LiteLLM's own

KEY = UserAPIKeyAuth(token="hashed-key-1")


def stuck(n: int, **extra: Any) -> dict[str, Any]:
    """The proxy's ``data`` for an agent that ran the same failing command ``n`` times."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]
    for i in range(n):
        call = {"id": f"c{i}", "type": "function"}
        call["function"] = {"name": "bash", "arguments": '{"command": "make"}'}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "make: Error 2"})
    url = "http://proxy.local/v1/chat/completions"
    return {
        "model": "gpt-4o",
        "messages": messages,
        "metadata": {"user_api_key_hash": "hashed-key-1"},
        "proxy_server_request": {"url": url, "method": "POST", "headers": {}},
        "litellm_call_id": f"call-{n}",
        **extra,
    }


def hook(handler: LoopfuseHandler, data: dict[str, Any], call_type: str = "acompletion") -> Any:
    return asyncio.run(
        handler.async_pre_call_hook(
            user_api_key_dict=KEY, cache=DualCache(), data=data, call_type=call_type
        )
    )


def first_refusal(handler: LoopfuseHandler) -> tuple[int, LoopRefusedError]:
    for n in range(1, 12):
        try:
            assert hook(handler, stuck(n)) is None
        except LoopRefusedError as exc:
            return n, exc
    raise AssertionError("never refused")


def test_a_looping_request_is_refused_with_a_400() -> None:
    n, exc = first_refusal(LoopfuseHandler(mode="refuse"))
    assert n > 1
    assert isinstance(exc, litellm.BadRequestError)
    assert exc.status_code == 400
    assert exc.type == "loop_detected"
    assert exc.code == "repeat"
    assert str(exc).startswith("Loop detected: you called `bash` with the same arguments")
    assert exc.decision.count == n


def test_other_call_types_and_progress_pass() -> None:
    handler = LoopfuseHandler()
    assert hook(handler, stuck(8), call_type="aembedding") is None
    assert hook(handler, stuck(8), call_type="aimage_generation") is None
    # A user turn after the loop: the agent was told something new.
    data = stuck(8)
    data["messages"].append({"role": "user", "content": "Use cmake."})
    assert hook(handler, data) is None


def test_the_breaker_counts_per_session_and_per_end_user_and_never_without() -> None:
    def handler(**options: Any) -> LoopfuseHandler:
        breaker = LoopBreaker(max_repeats=2, clock=lambda: 0.0)
        return LoopfuseHandler(breaker=breaker, mode="refuse", **options)

    plain = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    for marked in (
        {"litellm_session_id": "s1"},  # LiteLLM's own session (x-litellm-session-id)
        {"metadata": {"session_id": "s2"}},
        {"user": "customer-7"},  # the end user, as LiteLLM tracks it
        {"litellm_metadata": {"user": "customer-8"}},
        {"metadata": {"user_id": "customer-9"}},
        {"safety_identifier": "hash-1"},
    ):
        guarded = handler()
        assert hook(guarded, {**plain, **marked}) is None
        assert hook(guarded, {**plain, **marked}) is None
        with pytest.raises(LoopRefusedError) as caught:
            hook(guarded, {**plain, **marked})
        assert caught.value.code == "repeated_request"
    # No session and no end user: many users behind one key are never refused for
    # each other, unless the proxy opts into one shared session or counts per key.
    unscoped = handler()
    for _ in range(6):
        assert hook(unscoped, dict(plain)) is None
    per_key = handler(session_id=lambda data, key: key.token)
    assert hook(per_key, dict(plain)) is None
    assert hook(per_key, dict(plain)) is None
    with pytest.raises(LoopRefusedError):
        hook(per_key, dict(plain))
    shared = handler(shared_session="everyone")
    hook(shared, dict(plain))
    hook(shared, dict(plain))
    with pytest.raises(LoopRefusedError):
        hook(shared, dict(plain))
    # A junk end user falls back (to no session here) and is counted.
    junk = handler()
    for _ in range(4):
        assert hook(junk, {**plain, "user": {"id": 7}}) is None
    assert junk.guard.input_fallbacks == 4


def test_note_mode_returns_the_request_with_a_note() -> None:
    handler = LoopfuseHandler(mode="note")
    for n in range(1, 12):
        data = stuck(n)
        changed = hook(handler, data)
        if changed is not None:
            break
    else:
        pytest.fail("never noted")
    assert changed["messages"][:-1] == data["messages"]
    assert changed["messages"][-1]["role"] == "user"
    assert changed["messages"][-1]["content"].startswith("[loopfuse] Loop detected")
    assert changed["metadata"] is data["metadata"]  # LiteLLM's own fields are kept as they are
    assert changed["litellm_call_id"] == data["litellm_call_id"]


def waiting_responses(n: int) -> dict[str, Any]:
    """A Responses request after ``n`` identical failing calls, the next one still waiting
    for its output: a note for it can only go into ``instructions``."""
    items: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]
    call = {"type": "function_call", "name": "bash", "arguments": '{"command": "make"}'}
    for i in range(n):
        items.append({**call, "call_id": f"c{i}"})
        items.append({"type": "function_call_output", "call_id": f"c{i}", "output": "Error 2"})
    items.append({**call, "call_id": "waiting"})
    return {"model": "gpt-4o", "input": items, "instructions": "Be brief.", "litellm_call_id": n}


def test_a_note_in_the_instructions_reaches_the_request() -> None:
    handler = LoopfuseHandler(mode="note")
    for n in range(1, 12):
        data = waiting_responses(n)
        changed = hook(handler, data, call_type="aresponses")
        if changed is not None:
            break
    else:
        pytest.fail("never noted")
    assert changed["input"] == data["input"]  # the waiting call stays last
    assert changed["instructions"].startswith("Be brief.\n\n[loopfuse] Loop detected")
    assert data["instructions"] == "Be brief."  # the caller's dict is untouched


def test_a_failing_guard_fails_open_or_refuses_when_closed() -> None:
    class Broken:
        def scan(self, body: object) -> Any:
            raise RuntimeError("boom")

        scan_intent = scan  # the guard reads the parsed intent

    assert hook(LoopfuseHandler(detector=Broken()), stuck(8)) is None
    with pytest.raises(LoopRefusedError) as caught:
        hook(LoopfuseHandler(detector=Broken(), fail_closed=True), stuck(1))
    assert caught.value.code == "guard_failed"

    def resolver(data: Any, key: Any) -> str:
        raise KeyError("no session")

    handler = LoopfuseHandler(session_id=resolver)
    assert hook(handler, stuck(8)) is None
    assert handler.guard.internal_errors == 1


def test_configuration() -> None:
    with pytest.raises(ConfigError, match="cache"):
        LoopfuseHandler(cache=DedupCache())
    with pytest.raises(ConfigError, match="either guard"):
        LoopfuseHandler(Guard(), mode="note")
    with pytest.raises(ConfigError, match="session_id"):
        LoopfuseHandler(session_id="x-session-id")  # type: ignore[arg-type]


def test_the_ready_made_proxy_handler_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import loopfuse.integrations.litellm as module

    monkeypatch.delitem(module.__dict__, "proxy_handler", raising=False)
    monkeypatch.setenv("LOOP_MAX_REPEATS", "7")
    handler = module.proxy_handler
    assert isinstance(handler, LoopfuseHandler)
    assert handler.guard.breaker is not None
    assert handler.guard.breaker.max_repeats == 7
    assert module.proxy_handler is handler
    with pytest.raises(AttributeError):
        _ = module.no_such_name


def test_a_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_extras, "find_spec", lambda name: None)
    with pytest.raises(MissingExtraError, match=re.escape(install_command("litellm"))):
        LoopfuseHandler()


@pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")  # LiteLLM's own, at import
def test_through_the_proxy_pre_call_hook_and_its_error_handling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The proxy's own code path: `ProxyLogging.pre_call_hook` calls the handler from
    `litellm.callbacks`, and the chat endpoint's exception handling turns the refusal into
    the HTTP error the client receives."""
    proxy_utils = pytest.importorskip("litellm.proxy.utils", reason="LiteLLM proxy deps missing")
    from litellm.proxy._types import ProxyException
    from litellm.proxy.common_request_processing import ProxyBaseLLMRequestProcessing

    handler = LoopfuseHandler()
    register(monkeypatch, handler)
    proxy_logging = proxy_utils.ProxyLogging(user_api_key_cache=DualCache())

    async def run() -> ProxyException:
        for n in range(1, 12):
            data = stuck(n)
            try:
                await proxy_logging.pre_call_hook(
                    user_api_key_dict=KEY, data=data, call_type="acompletion"
                )
            except LoopRefusedError as refused:
                processing = ProxyBaseLLMRequestProcessing(data=data)
                try:
                    await processing.handle_llm_api_exception(refused, KEY, proxy_logging)
                except ProxyException as answered:
                    return answered
        raise AssertionError("never refused")

    answered = asyncio.run(run())
    assert str(answered.code) == "400"
    assert answered.type == "loop_detected"
    assert answered.message.startswith("Loop detected: you called `bash`")
    body = answered.to_dict()  # what the proxy sends the client, under "error"
    assert (body["type"], str(body["code"])) == ("loop_detected", "400")


# --- the LiteLLM SDK: handler in litellm.callbacks, the OpenAI client on a MockTransport ---


class StuckOpenAI:
    """A fake OpenAI server answering every chat call with the same tool call."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        import httpx2

        body = json.loads(request.content)
        check_openai_chat(body)  # every body LiteLLM sends, noted ones included, is valid
        self.bodies.append(body)
        n = len(self.bodies)
        function = {"name": "bash", "arguments": '{"command": "make"}'}
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": f"c{n}", "type": "function", "function": function}],
        }
        choice = {"index": 0, "finish_reason": "tool_calls", "message": message}
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        completion = {"id": "x", "object": "chat.completion", "created": 0, "model": "gpt-4o"}
        return httpx2.Response(200, json={**completion, "choices": [choice], "usage": usage})


_CALLBACK_LISTS = (
    "callbacks",
    "input_callback",
    "success_callback",
    "failure_callback",
    "_async_input_callback",
    "_async_success_callback",
    "_async_failure_callback",
)


def register(monkeypatch: pytest.MonkeyPatch, *handlers: LoopfuseHandler) -> None:
    """``litellm.callbacks = handlers`` for one test: LiteLLM copies callbacks into its
    other global lists on first use, so those are put back afterwards too."""
    for name in _CALLBACK_LISTS:
        monkeypatch.setattr(litellm, name, [])
    litellm.callbacks = list(handlers)


async def stuck_agent(client: Any, laps: int = 20) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]
    for _ in range(laps):
        reply = await litellm.acompletion(model="gpt-4o", messages=messages, client=client)
        call = reply.choices[0].message.tool_calls[0]
        function = {"name": call.function.name, "arguments": call.function.arguments}
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call.id, "type": "function", "function": function}],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "Error 2"})
    raise AssertionError("never stopped")


def test_the_async_sdk_is_guarded_a_note_first_then_a_refusal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    openai = pytest.importorskip("openai")
    httpx2 = pytest.importorskip("httpx2")
    upstream = StuckOpenAI()
    handler = LoopfuseHandler()
    register(monkeypatch, handler)
    client = openai.AsyncOpenAI(
        api_key="sk-test", http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(upstream))
    )
    with pytest.raises(LoopRefusedError) as caught:
        asyncio.run(stuck_agent(client))
    assert caught.value.code == "repeat"
    assert loop_message(caught.value) == str(caught.value)
    assert str(caught.value).endswith("so it was stopped.")
    noted = [
        b for b in upstream.bodies if b["messages"][-1]["role"] == "user" and len(b["messages"]) > 1
    ]
    assert len(noted) == 1
    assert noted[0] is upstream.bodies[-1]
    assert noted[0]["messages"][-1]["content"].startswith("[loopfuse] Loop detected")


def test_a_call_checked_by_the_proxy_is_not_checked_again_by_the_deployment_hook() -> None:
    handler = LoopfuseHandler(mode="refuse", breaker=LoopBreaker(max_repeats=1, clock=lambda: 0.0))
    data = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "hi"}],
        "user": "u",
        "litellm_call_id": "call-1",
    }
    assert hook(handler, dict(data)) is None
    # The router's deployment hook for the same call (and its retries) lets it be.
    for _ in range(3):
        assert (
            asyncio.run(handler.async_pre_call_deployment_hook(dict(data), "acompletion")) is None
        )
    with pytest.raises(LoopRefusedError):  # a new call of the same request is a repeat
        hook(handler, {**data, "litellm_call_id": "call-2"})


def test_the_sync_sdk_cannot_be_guarded_by_a_callback_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    openai = pytest.importorskip("openai")
    httpx2 = pytest.importorskip("httpx2")
    upstream = StuckOpenAI()
    handler = LoopfuseHandler(mode="refuse", breaker=LoopBreaker(max_repeats=1, clock=lambda: 0.0))
    register(monkeypatch, handler)
    client = openai.OpenAI(
        api_key="sk-test", http_client=httpx2.Client(transport=httpx2.MockTransport(upstream))
    )
    question = [{"role": "user", "content": "hi"}]
    with caplog.at_level(logging.WARNING, logger="loopfuse"):
        for _ in range(3):
            litellm.completion(model="gpt-4o", messages=question, client=client, user="u")
    assert len(upstream.bodies) == 3  # LiteLLM runs no hook that could have stopped them
    assert handler.unguarded_calls == 3
    assert handler.guard.internal_errors == 1
    [record] = [r for r in caplog.records if r.name == "loopfuse"]
    assert "cannot guard LiteLLM's sync 'completion' call" in record.getMessage()
    assert "handler.guarded(litellm.completion)" in record.getMessage()  # the fix
    # The fix the message names: the SDK client on GuardTransport.
    register(monkeypatch)
    guarded = GuardTransport(
        httpx2.MockTransport(upstream), breaker=LoopBreaker(max_repeats=1), mode="refuse"
    )
    client = openai.OpenAI(
        api_key="sk-test", max_retries=0, http_client=httpx2.Client(transport=guarded)
    )
    litellm.completion(model="gpt-4o", messages=question, client=client, user="u")
    with pytest.raises(litellm.BadRequestError) as caught:
        litellm.completion(model="gpt-4o", messages=question, client=client, user="u")
    message = loop_message(caught.value)
    assert message is not None
    assert message.startswith("Loop detected: this exact request has been sent 2 times")


def sync_stuck_agent(completion: Any, client: Any, laps: int = 20) -> None:
    """:func:`stuck_agent` on LiteLLM's sync SDK."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]
    for _ in range(laps):
        reply = completion(model="gpt-4o", messages=messages, client=client)
        call = reply.choices[0].message.tool_calls[0]
        function = {"name": call.function.name, "arguments": call.function.arguments}
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call.id, "type": "function", "function": function}],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "Error 2"})
    raise AssertionError("never stopped")


def test_the_sync_sdk_is_guarded_by_one_line_a_note_first_then_a_refusal(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    openai = pytest.importorskip("openai")
    httpx2 = pytest.importorskip("httpx2")
    upstream = StuckOpenAI()
    handler = LoopfuseHandler()
    register(monkeypatch, handler)  # registered too: it must not call these unguarded
    completion = handler.guarded(litellm.completion)
    client = openai.OpenAI(
        api_key="sk-test", http_client=httpx2.Client(transport=httpx2.MockTransport(upstream))
    )
    with (
        caplog.at_level(logging.WARNING, logger="loopfuse"),
        pytest.raises(LoopRefusedError) as caught,
    ):
        sync_stuck_agent(completion, client)
    assert caught.value.code == "repeat"
    assert isinstance(caught.value, litellm.BadRequestError)
    assert loop_message(caught.value) == str(caught.value)
    noted = [b for b in upstream.bodies if "[loopfuse]" in json.dumps(b["messages"][-1])]
    assert len(noted) == 1  # the lap before the refusal went out with the note
    assert noted[0] is upstream.bodies[-1]
    assert handler.unguarded_calls == 0
    assert handler.guard.internal_errors == 0
    assert not [r for r in caplog.records if r.name == "loopfuse"]


def test_the_guarded_sync_call_counts_repeats_and_not_retries() -> None:
    openai = pytest.importorskip("openai")
    httpx2 = pytest.importorskip("httpx2")
    upstream = StuckOpenAI()
    failing = [True]

    def flaky(request: Any) -> Any:
        if failing[0]:
            failing[0] = False
            return httpx2.Response(503, json={"error": {"message": "overloaded"}})
        return upstream(request)

    handler = LoopfuseHandler(mode="refuse", breaker=LoopBreaker(max_repeats=2, clock=lambda: 0.0))
    completion = handler.guarded(litellm.completion)
    client = openai.OpenAI(
        api_key="sk-test",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(flaky)),
    )
    question = [{"role": "user", "content": "hi"}]
    with pytest.raises(litellm.ServiceUnavailableError):
        completion("gpt-4o", question, client=client, user="u", num_retries=0)
    completion("gpt-4o", question, client=client, user="u")  # a retry after a failure
    completion(model="gpt-4o", messages=question, client=client, user="u")
    with pytest.raises(LoopRefusedError) as caught:
        completion(model="gpt-4o", messages=question, client=client, user="u")
    assert caught.value.code == "repeated_request"
    assert len(upstream.bodies) == 2  # the refused call never reached the provider


def test_guarded_takes_litellms_sync_calls_only() -> None:
    handler = LoopfuseHandler()
    assert handler.guarded(litellm.responses).__name__ == "responses"
    for wrong in (litellm.embedding, litellm.acompletion, print, "completion"):
        with pytest.raises(ConfigError):
            handler.guarded(wrong)
