"""Cache controls through GuardTransport: x-loopfuse-cache on every guarded response,
Cache-Control no-cache / no-store, namespaces, the sampled-request policy, junk inputs,
and the events of all that. Real httpx2 and openai clients; the upstream is MockTransport.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

httpx2 = pytest.importorskip("httpx2", reason="httpx2 is not installed")
openai = pytest.importorskip("openai", reason="the openai extra is not installed")

from loopfuse import DedupCache, Guard, GuardEvent  # noqa: E402
from loopfuse.integrations.httpx import GuardTransport  # noqa: E402

CHAT = "https://llm.example/v1/chat/completions"
BODY = {"model": "m", "messages": [{"role": "user", "content": "What is Rust?"}]}


class Counter:
    """An upstream answering ``{"answer": n}`` for its n-th request."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, request: Any) -> Any:
        self.calls += 1
        return httpx2.Response(200, json={"answer": self.calls}, headers={"x-up": "1"})


def client(upstream: Counter, **options: Any) -> Any:
    options.setdefault("breaker", None)
    options.setdefault("detector", None)
    transport = GuardTransport(httpx2.MockTransport(upstream), **options)
    http = httpx2.Client(transport=transport)
    http.guard = transport.guard
    return http


def post(http: Any, body: dict[str, Any] = BODY, **headers: str) -> Any:
    return http.post(CHAT, json=body, headers={k.replace("_", "-"): v for k, v in headers.items()})


def where(response: Any) -> tuple[str, Any]:
    return response.headers["x-loopfuse-cache"], response.json()["answer"]


def test_every_guarded_response_says_where_its_answer_came_from() -> None:
    upstream = Counter()
    plain = client(upstream)  # no cache at all
    assert where(post(plain)) == ("bypass", 1)
    cached = client(upstream, cache=DedupCache(capacity=8))
    assert where(post(cached)) == ("miss", 2)
    assert where(post(cached)) == ("hit", 2)
    refusing = client(upstream, fail_closed=True, detector=Broken())
    refused = post(refusing)
    assert refused.status_code == 400
    assert refused.headers["x-loopfuse-cache"] == "bypass"
    # Not an LLM endpoint: not guarded, no header.
    other = plain.post("https://llm.example/v1/embeddings", json=BODY)
    assert "x-loopfuse-cache" not in other.headers


class Broken:
    def scan(self, body: object) -> Any:
        raise RuntimeError("boom")

    scan_intent = scan


def test_no_cache_skips_the_lookup_and_stores_the_fresh_answer() -> None:
    upstream = Counter()
    http = client(upstream, cache=DedupCache(capacity=8))
    assert where(post(http)) == ("miss", 1)
    assert where(post(http, cache_control="no-cache")) == ("miss", 2)
    assert where(post(http)) == ("hit", 2)  # the fresh answer replaced the old one
    assert where(post(http, cache_control="max-age=0, No-Cache")) == ("miss", 3)


def test_no_store_neither_looks_up_nor_stores() -> None:
    upstream = Counter()
    http = client(upstream, cache=DedupCache(capacity=8))
    assert where(post(http, cache_control="no-store")) == ("bypass", 1)
    assert where(post(http)) == ("miss", 2)  # nothing was stored
    assert where(post(http, cache_control="no-store, no-cache")) == ("bypass", 3)
    assert where(post(http)) == ("hit", 2)


def test_tenants_in_different_namespaces_never_share_an_answer() -> None:
    upstream = Counter()
    cache: DedupCache[Any] = DedupCache(capacity=8)
    http = client(upstream, cache=cache)
    a = {"x_loopfuse_cache_namespace": "tenant-a"}
    b = {"x_loopfuse_cache_namespace": "tenant-b"}
    assert where(post(http, **a)) == ("miss", 1)
    assert where(post(http, **b)) == ("miss", 2)
    assert where(post(http, **a)) == ("hit", 1)
    assert where(post(http)) == ("miss", 3)  # no namespace is a namespace of its own
    # The option sets a client's namespace; a request's header wins over it.
    tenant_a = client(upstream, cache=cache, cache_namespace="tenant-a")
    assert where(post(tenant_a)) == ("hit", 1)
    assert where(post(tenant_a, **b)) == ("hit", 2)


def test_junk_controls_fall_back_and_are_counted() -> None:
    events: list[GuardEvent] = []
    upstream = Counter()
    http = client(upstream, cache=DedupCache(capacity=8), on_event=events.append)
    assert where(post(http, x_loopfuse_cache_namespace="  ")) == ("bypass", 1)  # never shared
    assert where(post(http, cache_control="no-cache, ===")) == ("miss", 2)  # the rest applies
    assert where(post(http, cache_control='"junk"')) == ("hit", 2)  # nothing valid: default
    assert http.guard.input_fallbacks == 3
    fallbacks = [e for e in events if e.action == "input_fallback"]
    assert [e.reason for e in fallbacks] == [
        "the cache namespace is empty",
        "Cache-Control member '===' is not a directive",
        "Cache-Control member '\"junk\"' is not a directive",
    ]


def test_sampled_requests_bypass_the_cache_unless_asked() -> None:
    upstream = Counter()
    sampled = {**BODY, "temperature": 0.8}
    seeded = {**sampled, "seed": 7}
    http = client(upstream, cache=DedupCache(capacity=8))
    assert [where(post(http, sampled))[0] for _ in range(2)] == ["bypass", "bypass"]
    assert [where(post(http, seeded))[0] for _ in range(2)] == ["miss", "hit"]
    assert [where(post(http, {**BODY, "temperature": 0}))[0] for _ in range(2)] == ["miss", "hit"]
    always = client(Counter(), cache=DedupCache(capacity=8), cache_sampled=True)
    assert [where(post(always, sampled))[0] for _ in range(2)] == ["miss", "hit"]


def test_cache_events_and_a_callback_that_raises(caplog: pytest.LogCaptureFixture) -> None:
    events: list[GuardEvent] = []
    upstream = Counter()
    http = client(upstream, cache=DedupCache(capacity=8), on_event=events.append)
    post(http)
    post(http)
    post(http, cache_control="no-store")
    cached = [e for e in events if e.guard == "cache"]
    assert [(e.action, e.guard, e.integration) for e in cached] == [
        ("cache_miss", "cache", "httpx"),
        ("cache_hit", "cache", "httpx"),
        ("cache_bypass", "cache", "httpx"),
    ]
    assert cached[2].reason == "Cache-Control: no-store"
    assert [e.action for e in events].count("request_forwarded") == 3

    def broken(event: GuardEvent) -> None:
        raise RuntimeError("metrics down")

    guard = Guard(breaker=None, detector=None, cache=DedupCache(capacity=8), on_event=broken)
    noisy = httpx2.Client(transport=GuardTransport(httpx2.MockTransport(upstream), guard))
    with caplog.at_level(logging.WARNING, logger="loopfuse"):
        answers = [post(noisy).status_code for _ in range(3)]
    assert answers == [200, 200, 200]  # the requests never noticed
    assert guard.events.errors == 6  # each request's request_forwarded and cache event
    assert len(caplog.records) == 1  # logged once, counted every time
    assert "metrics down" in caplog.records[0].getMessage()


def test_the_openai_sdk_sees_the_header_and_sends_the_controls() -> None:
    upstream = Counter()

    def answer(request: Any) -> Any:
        upstream(request)
        message = {"role": "assistant", "content": f"answer {upstream.calls}"}
        choice = {"index": 0, "finish_reason": "stop", "message": message}
        body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m"}
        return httpx2.Response(200, json={**body, "choices": [choice]})

    transport = GuardTransport(httpx2.MockTransport(answer), cache=DedupCache(capacity=8))
    client_ = openai.OpenAI(api_key="sk-test", http_client=httpx2.Client(transport=transport))
    question = [{"role": "user", "content": "What is Rust?"}]
    raw = client_.chat.completions.with_raw_response
    assert raw.create(model="m", messages=question).headers["x-loopfuse-cache"] == "miss"
    assert raw.create(model="m", messages=question).headers["x-loopfuse-cache"] == "hit"
    fresh = raw.create(model="m", messages=question, extra_headers={"Cache-Control": "no-cache"})
    assert fresh.headers["x-loopfuse-cache"] == "miss"
    assert fresh.parse().choices[0].message.content == "answer 2"
    assert upstream.calls == 2
