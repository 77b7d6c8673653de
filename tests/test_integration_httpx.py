"""GuardTransport at the HTTP level: plain httpx2 and httpx clients, ollama, junk, errors.

The upstream is the library's own MockTransport (or a small BaseTransport subclass):
real clients, real requests and responses, no network.
"""

from __future__ import annotations

import gzip
import json
import logging
import re
import subprocess
import sys
from types import ModuleType
from typing import Any

import pytest

httpx2 = pytest.importorskip("httpx2", reason="httpx2 is not installed")

from loopfuse import ConfigError, DedupCache, Guard, LoopBreaker  # noqa: E402
from loopfuse.integrations import MissingExtraError, _extras  # noqa: E402
from loopfuse.integrations._extras import install_command  # noqa: E402
from loopfuse.integrations.httpx import AsyncGuardTransport, GuardTransport  # noqa: E402

CHAT = "https://llm.example/v1/chat/completions"
BODY = {"model": "m", "messages": [{"role": "user", "content": "What is Rust?"}]}


def library(name: str) -> ModuleType:
    return pytest.importorskip(name, reason=f"{name} is not installed")


class Recorder:
    """An upstream handler: records requests, answers with a fixed status/body/headers."""

    def __init__(self, lib: ModuleType, status: int = 200, **response: Any) -> None:
        self.lib, self.status, self.response = lib, status, response
        self.requests: list[Any] = []

    def __call__(self, request: Any) -> Any:
        self.requests.append(request)
        if not self.response:
            return self.lib.Response(self.status, json={"answer": len(self.requests)})
        return self.lib.Response(self.status, **self.response)


def client(lib: ModuleType, upstream: Recorder, **options: Any) -> Any:
    """A client whose transport refuses at once and counts every request in one session:
    the tests using it are about the HTTP side, not about sessions or modes."""
    if "guard" not in options:
        options.setdefault("mode", "refuse")
        options.setdefault("shared_session", "default")
    return lib.Client(transport=GuardTransport(lib.MockTransport(upstream), **options))


def no_breaker() -> dict[str, Any]:
    return {"breaker": None, "detector": None}


@pytest.mark.parametrize("lib_name", ["httpx2", "httpx"])
def test_responses_are_of_the_requests_own_library(lib_name: str) -> None:
    lib = library(lib_name)
    upstream = Recorder(lib)
    http = client(lib, upstream, breaker=LoopBreaker(max_repeats=1, clock=lambda: 0.0))
    assert http.post(CHAT, json=BODY).json() == {"answer": 1}
    refused = http.post(CHAT, json=BODY)
    assert isinstance(refused, lib.Response)
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "repeated_request"
    assert len(upstream.requests) == 1


def test_a_compressed_answer_is_cached_decoded() -> None:
    payload = json.dumps({"text": "héllo"}).encode()
    headers = {"content-type": "application/json", "content-encoding": "gzip", "x-up": "1"}
    upstream = Recorder(httpx2, headers=headers, content=gzip.compress(payload))
    http = client(httpx2, upstream, cache=DedupCache(capacity=4), **no_breaker())
    first, second = http.post(CHAT, json=BODY), http.post(CHAT, json=BODY)
    assert first.json() == second.json() == {"text": "héllo"}
    assert "content-encoding" not in first.headers
    assert first.headers["x-up"] == "1"
    assert second.headers["x-loopfuse-cache"] == "hit"
    assert "x-up" not in second.headers
    assert len(upstream.requests) == 1


@pytest.mark.parametrize("status", [400, 429, 500])
def test_errors_from_upstream_pass_through_and_are_not_cached(status: int) -> None:
    upstream = Recorder(httpx2, status=status, json={"error": {"message": "upstream says no"}})
    http = client(httpx2, upstream, cache=DedupCache(capacity=4), **no_breaker())
    for _ in range(2):
        response = http.post(CHAT, json=BODY)
        assert response.status_code == status
        assert response.json()["error"]["message"] == "upstream says no"
    assert len(upstream.requests) == 2


@pytest.mark.parametrize(
    "content",
    [
        b"not json at all",
        b"\xff\xfe\x00",
        b"[" * 5000 + b"]" * 5000,  # deeper than intent.MAX_DEPTH
        b'{"prompt": "a legacy completion"}',  # JSON, but no dialect loopfuse knows
        b'{"messages": "not a list"}',
        b"null",
    ],
)
def test_junk_bodies_go_through_untouched(content: bytes) -> None:
    upstream = Recorder(httpx2)
    breaker = LoopBreaker(max_repeats=1, clock=lambda: 0.0)
    http = client(httpx2, upstream, breaker=breaker, cache=DedupCache(capacity=4))
    for _ in range(3):
        response = http.post(CHAT, content=content, headers={"content-type": "application/json"})
        assert response.status_code == 200
    assert [r.content for r in upstream.requests] == [content] * 3


def test_only_json_posts_to_llm_paths_are_checked() -> None:
    upstream = Recorder(httpx2)
    breaker = LoopBreaker(max_repeats=1, clock=lambda: 0.0)
    http = client(httpx2, upstream, breaker=breaker)
    for _ in range(3):
        assert http.get(CHAT).status_code == 200
        assert http.post("https://llm.example/v1/embeddings", json=BODY).status_code == 200
        form = http.post(CHAT, content=json.dumps(BODY), headers={"content-type": "text/plain"})
        assert form.status_code == 200
    assert len(upstream.requests) == 9
    custom = client(httpx2, upstream, breaker=breaker, paths=["/generate"])
    assert custom.post("https://llm.example/generate", json=BODY).status_code == 200
    assert custom.post("https://llm.example/generate", json=BODY).status_code == 400


def test_a_body_over_the_size_limit_is_forwarded_unchecked() -> None:
    from loopfuse.intent import MAX_BODY_BYTES

    upstream = Recorder(httpx2)
    http = client(httpx2, upstream, breaker=LoopBreaker(max_repeats=1, clock=lambda: 0.0))
    huge = json.dumps({**BODY, "pad": "x" * MAX_BODY_BYTES}).encode()
    for _ in range(2):
        response = http.post(CHAT, content=huge, headers={"content-type": "application/json"})
        assert response.status_code == 200
    assert len(upstream.requests) == 2


def test_gemini_and_ollama_paths_get_their_own_error_shapes() -> None:
    upstream = Recorder(httpx2)
    http = client(httpx2, upstream, breaker=LoopBreaker(max_repeats=1, clock=lambda: 0.0))
    gemini = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    url = "https://g.example/v1beta/models/gemini-2.5-pro:generateContent?key=secret"
    http.post(url, json=gemini)
    error = http.post(url, json=gemini).json()["error"]
    assert (error["code"], error["status"]) == (400, "FAILED_PRECONDITION")
    assert error["details"] == [{"reason": "repeated_request", "domain": "loopfuse"}]
    ollama_body = {"model": "llama3", "messages": BODY["messages"], "stream": False}
    http.post("http://localhost:11434/api/chat", json=ollama_body)
    refused = http.post("http://localhost:11434/api/chat", json=ollama_body)
    assert isinstance(refused.json()["error"], str)


def test_note_mode_on_the_responses_api() -> None:
    upstream = Recorder(httpx2)
    breaker = LoopBreaker(max_repeats=1, clock=lambda: 0.0)
    http = client(httpx2, upstream, breaker=breaker, detector=None, mode="note")
    body = {"model": "m", "input": [{"role": "user", "content": "Run the build."}]}
    for _ in range(2):
        assert http.post("https://api.example/v1/responses", json=body).status_code == 200
    sent = [json.loads(r.content) for r in upstream.requests]
    assert sent[0] == body
    assert sent[1]["input"][:1] == body["input"]
    assert sent[1]["input"][1]["content"].startswith("[loopfuse] Loop detected: this exact request")
    assert int(upstream.requests[1].headers["content-length"]) == len(upstream.requests[1].content)


def test_a_session_resolver_that_fails_fails_open(caplog: pytest.LogCaptureFixture) -> None:
    def resolver(request: Any) -> Any:
        return 42 if request.headers.get("x-kind") == "int" else 1 / 0

    upstream = Recorder(httpx2)
    transport = GuardTransport(httpx2.MockTransport(upstream), session_id=resolver)
    http = httpx2.Client(transport=transport)
    with caplog.at_level(logging.WARNING, logger="loopfuse"):
        assert http.post(CHAT, json=BODY).status_code == 200
        assert http.post(CHAT, json=BODY, headers={"x-kind": "int"}).status_code == 200
    assert transport.guard.internal_errors == 2
    messages = [record.getMessage() for record in caplog.records]
    assert "ZeroDivisionError" in messages[0]
    assert "not a str" in messages[1]


def test_the_transport_enters_and_closes_its_inner_transport() -> None:
    events: list[str] = []

    class Inner(httpx2.BaseTransport):
        def __enter__(self) -> Inner:
            events.append("enter")
            return self

        def handle_request(self, request: Any) -> Any:
            return httpx2.Response(200, json={})

        def close(self) -> None:
            events.append("close")

    guard_transport = GuardTransport(Inner())
    assert isinstance(guard_transport, httpx2.BaseTransport)
    with httpx2.Client(transport=guard_transport) as http:
        http.post(CHAT, json=BODY)
    assert events == ["enter", "close"]


def test_bad_configuration_is_a_config_error() -> None:
    inner = httpx2.MockTransport(Recorder(httpx2))
    with pytest.raises(ConfigError, match="either guard= or"):
        GuardTransport(inner, Guard(), mode="note")
    with pytest.raises(ConfigError, match="mode"):
        GuardTransport(inner, mode="shout")  # type: ignore[typeddict-item]
    with pytest.raises(ConfigError, match="paths"):
        GuardTransport(inner, paths="/chat/completions")
    with pytest.raises(ConfigError, match="session_header"):
        GuardTransport(inner, session_header="")
    with pytest.raises(ConfigError, match="guard must be a Guard"):
        AsyncGuardTransport(inner, guard="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="breaker"):
        GuardTransport(inner, breaker=5)  # type: ignore[typeddict-item]
    with pytest.raises(ConfigError, match="detector"):
        GuardTransport(inner, detector=object())  # type: ignore[typeddict-item]


def test_an_inner_that_is_not_a_transport_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"GuardTransport needs the transport .*handle_request"):
        GuardTransport(None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"handle_request\(\)\), not 'https://llm.example'"):
        GuardTransport("https://llm.example")  # type: ignore[arg-type]

    class SyncOnly:
        def handle_request(self, request: Any) -> Any:
            raise AssertionError("never called")

    with pytest.raises(ConfigError, match="handle_async_request"):
        AsyncGuardTransport(SyncOnly())  # type: ignore[arg-type]
    assert GuardTransport(SyncOnly()).inner is not None  # type: ignore[arg-type]


def test_a_missing_http_library_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_extras, "find_spec", lambda name: None)
    with pytest.raises(MissingExtraError, match=re.escape(install_command("openai"))) as caught:
        GuardTransport(httpx2.MockTransport(Recorder(httpx2)))
    assert isinstance(caught.value, ImportError)


def test_importing_the_integrations_package_imports_no_third_party_package() -> None:
    code = (
        "import sys, loopfuse, loopfuse.integrations\n"
        "heavy = {'httpx', 'httpx2', 'openai', 'anthropic', 'langchain', 'litellm', 'agents'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_ollama_client_over_legacy_httpx() -> None:
    ollama = pytest.importorskip("ollama", reason="ollama is not installed")
    httpx = library("httpx")
    answers: list[Any] = []

    def upstream(request: Any) -> Any:
        answers.append(json.loads(request.content))
        reply = {"model": "llama3", "created_at": "2025-01-01T00:00:00Z", "done": True}
        reply["message"] = {"role": "assistant", "content": f"answer {len(answers)}"}
        return httpx.Response(200, json=reply)

    breaker = LoopBreaker(max_repeats=2, clock=lambda: 0.0)
    transport = GuardTransport(httpx.MockTransport(upstream), breaker=breaker, mode="refuse")
    headers = {"x-session-id": "run-1"}  # an Ollama body names no end user
    llm = ollama.Client(host="http://localhost:11434", transport=transport, headers=headers)
    question = [{"role": "user", "content": "What is Rust?"}]
    assert llm.chat(model="llama3", messages=question)["message"]["content"] == "answer 1"
    llm.chat(model="llama3", messages=question)
    with pytest.raises(ollama.ResponseError) as caught:
        llm.chat(model="llama3", messages=question)
    assert caught.value.status_code == 400
    assert caught.value.error.startswith("Loop detected: this exact request has been sent 3")
    assert len(answers) == 2
