"""RequestKey.from_analysis: bit for bit the key from_request gives, from one parse."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopfuse import intent
from loopfuse.dedup import RequestKey
from loopfuse.dedup.request import IGNORED_PARAMS, analysis_material, request_material
from loopfuse.errors import InvalidInputError
from test_dedup_request import ANTHROPIC, CHAT, GEMINI, GEMINI_PATH, OLLAMA, RESPONSES

BODIES: list[tuple[Any, str]] = [
    (CHAT, "/v1/chat/completions"),
    (RESPONSES, "/v1/responses"),
    (ANTHROPIC, "/v1/messages"),
    (GEMINI, GEMINI_PATH),
    (GEMINI, "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse&key=secret"),
    (OLLAMA, "/api/chat"),
    # Ollama's keep_alive is not keyed: it must not flip the dialect the key names.
    ({"model": "llama3", "keep_alive": "5m", "messages": [{"role": "user", "content": "x"}]}, ""),
    ({**CHAT, "stream": True, "user": "u-1", "metadata": {"a": "b"}}, "/v1/chat/completions"),
    ({"messages": [{"role": "user", "content": "x"}]}, "/openai/deployments/prod/chat"),
    ({"prompt": "legacy", "max_tokens": 5}, "/v1/completions"),  # JSON, no dialect
    ([1, 2, 3], "/x"),
]


def both(body: Any, path: str) -> tuple[RequestKey, RequestKey]:
    analysis = intent.analyse(body, ignore=IGNORED_PARAMS)
    return RequestKey.from_request(body, path), RequestKey.from_analysis(analysis, path)


@pytest.mark.parametrize(("body", "path"), BODIES)
@pytest.mark.parametrize("form", ["dict", "bytes", "str"])
def test_the_same_key_bit_for_bit(body: Any, path: str, form: str) -> None:
    given_body: Any = body
    if form != "dict":
        text = json.dumps(body)
        given_body = text.encode() if form == "bytes" else text
    requested, analysed = both(given_body, path)
    assert requested == analysed
    assert requested.digest == analysed.digest
    analysis = intent.analyse(given_body, ignore=IGNORED_PARAMS)
    assert analysis_material(analysis, path) == request_material(given_body, path)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    extra=st.dictionaries(st.sampled_from(["keep_alive", "options", "system", "tools", "n"]), JSON),
    messages=st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]),
                                             "content": JSON}), max_size=3),
    path=st.sampled_from(["", "/api/chat", GEMINI_PATH, "/v1/messages"]),
)  # fmt: skip
def test_the_same_key_for_generated_bodies(
    extra: dict[str, Any], messages: list[Any], path: str
) -> None:
    body = {"model": "m", "messages": messages, **extra}
    requested, analysed = both(body, path)
    assert (requested, requested.digest) == (analysed, analysed.digest)


def test_the_key_dialect_ignores_what_the_key_ignores() -> None:
    body = {"model": "llama3", "keep_alive": "5m", "messages": [{"role": "user", "content": "x"}]}
    analysis = intent.analyse(body, ignore=IGNORED_PARAMS)
    assert (analysis.dialect, analysis.key_dialect) == ("ollama", "openai_chat")
    plain = intent.analyse(body)
    assert plain.key_dialect == plain.dialect == "ollama"
    assert plain.ignored == frozenset()


def test_an_analysis_made_otherwise_or_of_raw_bytes_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="ignore=IGNORED_PARAMS"):
        RequestKey.from_analysis(intent.analyse(json.dumps(CHAT)))
    with pytest.raises(InvalidInputError, match="not JSON"):
        RequestKey.from_analysis(intent.analyse(b"\xff not json", ignore=IGNORED_PARAMS))
    with pytest.raises(InvalidInputError, match=r"intent\.Analysis"):
        RequestKey.from_analysis(("not", "an", "analysis"))  # type: ignore[arg-type]
