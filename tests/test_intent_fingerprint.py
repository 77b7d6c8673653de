"""intent.fingerprint: pinned values, documented fallbacks, tolerance of junk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from blake3 import blake3
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import fast_and_full, run_property
from loopfuse.errors import InvalidInputError
from loopfuse.intent import canonical_json, extract_intent, fingerprint

CHAT = b'{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}'


def expected(path: str, data: bytes) -> int:
    """The documented definition, written out independently of the module."""
    return int.from_bytes(blake3(path.encode() + b"\n" + data).digest()[:8], "little")


# Pinned: these must never change across processes, machines or Python versions. A change
# here means every fingerprint shared through a store changes: treat it as a breaking change.
PINNED = [
    (CHAT, "", 7915524336615399434),
    (CHAT, "/v1/chat/completions", 2445903449250848895),
    (b'{"input": "hi", "temperature": 0.7}', "/v1/responses", 9444508836531232402),
    (b'{"not": "an llm request"}', "", 11394855066910815026),
    (b"\xff\xfe not json", "/raw", 13740426124802408795),
]


@pytest.mark.parametrize(("body", "path", "value"), PINNED)
def test_pinned_values(body: bytes, path: str, value: int) -> None:
    assert fingerprint(body, path) == value


def test_definition() -> None:
    assert fingerprint(CHAT) == expected("", b'{"messages":[{"content":["hi"],"role":"user"}]}')
    unknown = b'{"z": 1, "a": [1.0, 1e-5, 1e16]}'
    assert fingerprint(unknown, "/x") == expected("/x", b'{"a":[1.0,0.00001,1e+16],"z":1}')
    junk = b"\x00\x01 not json"
    assert fingerprint(junk, "/x") == expected("/x", junk)
    assert fingerprint("not json é", "") == expected("", "not json é".encode())


def test_stable_in_a_new_process_with_another_hash_seed() -> None:
    code = (
        "import sys; from loopfuse.intent import fingerprint; "
        "print(fingerprint(sys.stdin.buffer.read(), '/v1/chat/completions'))"
    )
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run(
            [sys.executable, "-c", code], input=CHAT, env=env, capture_output=True, check=True
        )
        assert int(out.stdout) == fingerprint(CHAT, "/v1/chat/completions")


def test_fits_in_64_bits_unsigned() -> None:
    values = {fingerprint(f'{{"input": "{i}"}}'.encode()) for i in range(200)}
    assert len(values) == 200
    assert all(0 <= v < 2**64 for v in values)
    assert max(values) >= 2**63  # the top bit is used: read as unsigned


def test_str_with_lone_surrogate_falls_back_to_raw_bytes() -> None:
    assert fingerprint("\ud800 not json") == expected("", "\ud800 not json".encode(
        "utf-8", "surrogatepass"))  # fmt: skip


def test_parsed_value_json_cannot_express_raises_a_typed_error() -> None:
    with pytest.raises(InvalidInputError):
        fingerprint({"messages": [{"role": "user", "content": object()}]})
    with pytest.raises(InvalidInputError):
        fingerprint(object())  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="path"):
        fingerprint(CHAT, path=None)  # type: ignore[arg-type]


def test_deep_or_huge_bodies_fall_back_quietly() -> None:
    deep = b'{"messages": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    assert fingerprint(deep) == expected("", deep)


# Hostile shapes: every dialect's fields with the wrong types. Nothing may raise.
junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
    max_leaves=10,
)
keys = st.sampled_from(
    ["messages", "role", "content", "tool_calls", "function", "arguments", "id", "tool_call_id",
     "type", "text", "tool_use_id", "tool_result", "tool_use", "input", "name", "system",
     "contents", "parts", "functionCall", "functionResponse", "args", "response", "tools",
     "instructions", "call_id", "output", "function_call", "thinking", "images", "tool_name"]
)  # fmt: skip
shaped = st.recursive(
    junk,
    lambda c: st.lists(c, max_size=4) | st.dictionaries(keys, c, max_size=5),
    max_leaves=25,
)
roots = st.fixed_dictionaries(
    {}, optional=dict.fromkeys(("messages", "contents", "input", "system", "tools"), shaped)
)


@pytest.mark.parametrize("examples", fast_and_full(100, 500))
def test_junk_in_every_dialect_never_raises(examples: int) -> None:
    run_property(examples, check_junk_in_every_dialect_never_raises, roots)


def check_junk_in_every_dialect_never_raises(body: dict[str, Any]) -> None:
    raw = json.dumps(body).encode()
    intent = extract_intent(raw)
    if intent is not None:
        canonical_json(intent)  # the intent is always JSON
    fp = fingerprint(raw, "/p")
    assert fp == fingerprint(raw, "/p")
    assert 0 <= fp < 2**64


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_raise(body: bytes) -> None:
    assert 0 <= fingerprint(body) < 2**64
    extract_intent(body)
