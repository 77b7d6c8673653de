"""A lone surrogate in a request body never turns into an exception on the request path.

JSON may escape half of a surrogate pair (``"\\ud83d"``: a tool output cut in the middle
of an emoji). Python parses it into a ``str`` that UTF-8 cannot encode, so every place
that writes such a value back to bytes must say how. Tested through the real transports
(httpx2 and httpx clients over the library's own MockTransport: no network) in the
default ``warn`` mode and in ``note`` mode, and through every other request-path entry
point.
"""

from __future__ import annotations

import asyncio
import json
from types import ModuleType
from typing import Any

import pytest

from loopfuse import Guard, LoopBreaker, RequestContext, RequestKey, intent, scan
from loopfuse.integrations.httpx import AsyncGuardTransport, GuardTransport

CHAT = "https://llm.example/v1/chat/completions"
# A tool output cut in the middle of an emoji: the high half of a surrogate pair alone.
CUT = "build log: \\ud83d"
BODY = (
    '{"model": "m", "messages": [{"role": "user", "content": "Fix the build."},'
    ' {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",'
    ' "function": {"name": "bash", "arguments": "{\\"cmd\\": \\"make\\"}"}}]},'
    ' {"role": "tool", "tool_call_id": "c1", "content": "' + CUT + '"}]}'
).encode()
LIBRARIES = ["httpx2", "httpx"]


def library(name: str) -> ModuleType:
    return pytest.importorskip(name, reason=f"{name} is not installed")


class Upstream:
    """Records what reaches the provider and answers 200."""

    def __init__(self, lib: ModuleType) -> None:
        self.lib = lib
        self.bodies: list[bytes] = []

    def __call__(self, request: Any) -> Any:
        self.bodies.append(request.read())
        return self.lib.Response(200, json={"ok": len(self.bodies)})


def options(mode: str) -> dict[str, Any]:
    """A guard that sees the second identical request as a loop."""
    breaker = LoopBreaker(max_repeats=1, clock=lambda: 0.0)
    return {"breaker": breaker, "detector": None, "shared_session": "s", "mode": mode}


def check_sent(upstream: Upstream, statuses: list[int], mode: str) -> None:
    assert upstream.bodies[0] == BODY  # the first request goes as the client sent it
    noted = json.loads(upstream.bodies[1])
    # The note went out, and the cut emoji with it, escaped as the client escaped it.
    assert noted["messages"][2]["content"] == json.loads(BODY)["messages"][2]["content"]
    assert noted["messages"][-1]["content"].startswith("[loopfuse] Loop detected")
    assert statuses[:2] == [200, 200]
    # Then warn refuses the loop that went on (as documented); note notes again.
    assert statuses[2] == (400 if mode == "warn" else 200)
    assert len(upstream.bodies) == (2 if mode == "warn" else 3)


@pytest.mark.parametrize("lib_name", LIBRARIES)
@pytest.mark.parametrize("mode", ["warn", "note"])
def test_a_looping_request_with_a_lone_surrogate_is_noted_not_raised(
    lib_name: str, mode: str
) -> None:
    lib = library(lib_name)
    upstream = Upstream(lib)
    transport = GuardTransport(lib.MockTransport(upstream), **options(mode))
    with lib.Client(transport=transport) as http:
        headers = {"content-type": "application/json"}
        statuses = [http.post(CHAT, content=BODY, headers=headers).status_code for _ in range(3)]
    check_sent(upstream, statuses, mode)


@pytest.mark.parametrize("lib_name", LIBRARIES)
@pytest.mark.parametrize("mode", ["warn", "note"])
def test_the_async_transport_notes_a_lone_surrogate_too(lib_name: str, mode: str) -> None:
    lib = library(lib_name)
    upstream = Upstream(lib)

    async def main() -> list[int]:
        transport = AsyncGuardTransport(lib.MockTransport(upstream), **options(mode))
        async with lib.AsyncClient(transport=transport) as http:
            headers = {"content-type": "application/json"}
            return [
                (await http.post(CHAT, content=BODY, headers=headers)).status_code for _ in range(3)
            ]

    check_sent(upstream, asyncio.run(main()), mode)


def test_every_request_path_entry_point_takes_a_lone_surrogate() -> None:
    text = BODY.decode()
    value = json.loads(BODY)
    raw = text.replace("\\ud83d", "\ud83d")  # the surrogate itself in the str, unescaped
    for body in (BODY, text, raw, value):
        assert 0 <= intent.fingerprint(body, "/v1/chat/completions") < 2**64
        assert intent.extract_intent(body) is not None
        assert intent.canonical_intent_bytes(body) is not None
        assert LoopBreaker(clock=lambda: 0.0).check_request("s", body).allowed
        assert RequestKey.from_request(body, "/v1/chat/completions") is not None
        assert scan(body).ok
    guard = Guard(breaker=LoopBreaker(max_repeats=1, clock=lambda: 0.0), detector=None)
    first = guard.check(BODY, RequestContext(path="/v1/chat/completions", session_id="s"))
    second = guard.check(BODY, RequestContext(path="/v1/chat/completions", session_id="s"))
    assert first.action == "forward"
    assert second.action in ("note", "refuse")


def erring_body(turns: int) -> bytes:
    """A run whose every variant of a command fails with the same error, cut mid-emoji:
    the detector quotes that error in its message, surrogate and all."""
    # Written as JSON text: json.dumps would not let a str with a lone surrogate through
    # to the transport unchanged, and a client may well send one.
    cut = "ModuleNotFoundError: No module named 'yaml\\ud83d'"
    messages = ['{"role": "user", "content": "Fix the build."}']
    for n in range(turns):
        arguments = json.dumps(json.dumps({"cmd": f"python -m tool{n}"}))
        function = f'{{"name": "bash", "arguments": {arguments}}}'
        call = f'{{"id": "c{n}", "type": "function", "function": {function}}}'
        messages.append(f'{{"role": "assistant", "content": null, "tool_calls": [{call}]}}')
        messages.append(f'{{"role": "tool", "tool_call_id": "c{n}", "content": "{cut}"}}')
    return ('{"model": "m", "messages": [' + ", ".join(messages) + "]}").encode()


@pytest.mark.parametrize("lib_name", LIBRARIES)
@pytest.mark.parametrize("mode", ["refuse", "warn"])
def test_a_loop_message_quoting_a_lone_surrogate_is_written(lib_name: str, mode: str) -> None:
    lib = library(lib_name)
    upstream = Upstream(lib)
    body = erring_body(6)
    transport = GuardTransport(
        lib.MockTransport(upstream), breaker=None, shared_session="s", mode=mode
    )
    with lib.Client(transport=transport) as http:
        headers = {"content-type": "application/json"}
        answers = [http.post(CHAT, content=body, headers=headers) for _ in range(2)]
    refused = answers[0] if mode == "refuse" else answers[1]
    assert refused.status_code == 400
    message = refused.json()["error"]["message"]
    assert "yaml\ud83d" in message  # quoted as it came, escaped as JSON escapes it
    if mode == "warn":
        noted = json.loads(upstream.bodies[0])
        assert "yaml\ud83d" in noted["messages"][-1]["content"]


def test_a_note_that_cannot_be_written_sends_the_body_as_sent() -> None:
    from dataclasses import replace

    httpx2 = library("httpx2")

    guard = Guard(breaker=LoopBreaker(max_repeats=1, clock=lambda: 0.0), detector=None, mode="warn")
    guard.check(BODY, RequestContext(path="/v1/chat/completions", session_id="s"))
    noted = guard.check(BODY, RequestContext(path="/v1/chat/completions", session_id="s"))
    assert noted.action == "note"
    request = httpx2.Request("POST", CHAT, content=BODY)
    unwritable = replace(noted, value={"messages": [{"content": {1, 2}}]})  # no JSON for a set
    assert GuardTransport.outgoing(request, unwritable) is request
    assert json.loads(GuardTransport.outgoing(request, noted).content) == noted.value
