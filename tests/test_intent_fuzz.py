"""Differential fuzzing of the C accelerator against the pure-Python reference.

Generated request texts (every JSON oddity, nesting at and around the limits, then
corrupted byte by byte) go through every public function with the C accelerator on
and off, under both JSON backends: the results must be the same. Whatever parses is
also handed to the C functions directly: each must return the reference's answer or
decline. ``.ci/sanitize`` runs this file with the extensions built under AddressSanitizer
and UBSan, with more examples (``LOOPFUSE_FUZZ_EXAMPLES``); the default run keeps a few.

Also here: every allocation of a C call failing in turn, and memory over many calls.
"""

from __future__ import annotations

import gc
import json
import math
import os
import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopfuse import RequestKey, intent
from loopfuse.intent import _json, _native
from test_intent_speedups import c_extension, every_path, reference

EXAMPLES = int(os.environ.get("LOOPFUSE_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
needs_c = pytest.mark.skipif(_native._BUILT is None, reason="C extension not built")

text = st.text(max_size=10) | st.sampled_from(
    ["", "\ud800", "x\udfffy", "\x00\x1f\x7f", "\u2028é😀", 'a\\b"c', "[{", "}]"]
)
number = (
    st.integers(-(2**70), 2**70)
    | st.floats()
    | st.sampled_from([0, -0.0, 1e-5, 9.99e-6, 1e16, 2**64, 2**64 - 1, -(2**63) - 1, 10**30])
)
leaf = st.none() | st.booleans() | number | text
value = st.recursive(
    leaf,
    lambda c: st.lists(c, max_size=4) | st.dictionaries(text, c, max_size=4),
    max_leaves=16,
)
message = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool"]) | leaf},
    optional={
        "content": value,
        "tool_calls": st.lists(
            st.fixed_dictionaries(
                {"id": text, "function": st.fixed_dictionaries({"name": text})},
                optional={"arguments": value.map(lambda v: json.dumps(v, allow_nan=True))},
            ),
            max_size=2,
        ),
    },
)
request = (
    st.fixed_dictionaries(
        {"messages": st.lists(message | value, max_size=4)},
        optional={"model": text, "tools": value, "temperature": number},
    )
    | st.fixed_dictionaries({"input": value})
    | st.fixed_dictionaries({"contents": value})
)


def nest(inner: Any, depth: int) -> Any:
    for level in range(depth):
        inner = [inner] if level % 2 else {"k": inner}
    return inner


@st.composite
def texts(draw: st.DrawFn) -> bytes | str:
    """A request or any JSON value, maybe nested near the limits, written one of several
    ways, maybe corrupted."""
    body = draw(request | value)
    depth = draw(st.sampled_from([0, 0, 0, 200, 248, 249, 250, 254, 255, 600]))
    if depth:
        body = {"messages": [{"role": "user", "content": [nest(body, depth - 4)]}]}
    ascii_only = draw(st.booleans())
    written = json.dumps(body, allow_nan=True, ensure_ascii=ascii_only)
    data = written.encode("utf-8", "surrogatepass")
    for _ in range(draw(st.integers(0, 2))):
        spot = draw(st.integers(0, max(len(data) - 1, 0)))
        junk = draw(st.binary(max_size=3))
        data = data[:spot] + junk + data[spot + draw(st.integers(0, 3)) :]
    if draw(st.booleans()):
        return data.decode("utf-8", "surrogateescape")
    return data


def outcome(fn: Any) -> str:
    try:
        return repr(fn())
    except Exception as error:  # the same error on every path is agreement too
        return f"raised {type(error).__name__}"


PUBLIC = {
    "fingerprint": lambda b: intent.fingerprint(b, "/v1/chat/completions"),
    "canonical_intent_bytes": intent.canonical_intent_bytes,
    "extract_intent": intent.extract_intent,
    "analyse": lambda b: intent.analyse(b)[1:],
    "from_request": lambda b: RequestKey.from_request(b).value,
}


@FUZZ
@given(texts())
def test_every_public_function_agrees_on_every_path(body: bytes | str) -> None:
    for name, call in PUBLIC.items():
        results = every_path(lambda call=call: outcome(lambda: call(body)))
        assert len(set(results)) == 1, (name, results)


@needs_c
@FUZZ
@given(texts(), st.sampled_from([0, 1, 5, 250, 254, 262, 1000]))
def test_the_c_functions_on_what_parses(body: bytes | str, limit: int) -> None:
    built = _native._BUILT
    assert built is not None
    parsed = _json.load(body)
    if type(parsed) not in (dict, list):
        return
    written = built.dumps(parsed, limit)
    if written is not None:
        assert written == reference(parsed, limit)
    deep = built.too_deep(parsed, limit)
    if deep is not None:
        with c_extension(False):
            assert deep == _json._too_deep(parsed, limit)


# --- allocation failures and memory ---------------------------------------------------

SAMPLES: list[Any] = [
    {"b": [1, 2.5, None, True, "é\n"], "a": {str(i): i for i in range(40)}},
    nest([math.nan, 1e-7, 2**70, -(2**63)], 300),
    [{"k": "v" * 5000}] * 20,
    {"x": ("tuple", 1), "y": 1},  # a tuple is written as an array
    {1: "a non-str key: declined"},
]


@needs_c
@pytest.mark.parametrize("sample", range(len(SAMPLES)))
def test_a_failed_allocation_anywhere_raises_memory_error(sample: int) -> None:
    """Each allocation of a call fails in turn: MemoryError or the right answer, no crash."""
    testcapi = pytest.importorskip("_testcapi")
    built = _native._BUILT
    assert built is not None
    value = SAMPLES[sample]
    expected = (built.dumps(value, 1000), built.too_deep(value, 1000), built.too_deep(value, 9))
    seen: set[str] = set()
    for start in range(400):
        testcapi.set_nomemory(start, start + 1)
        try:
            got = (built.dumps(value, 1000), built.too_deep(value, 1000), built.too_deep(value, 9))
        except MemoryError:
            seen.add("MemoryError")
        else:
            seen.add("same" if got == expected else repr(got)[:200])
        finally:
            testcapi.remove_mem_hooks()
    assert seen == {"MemoryError", "same"}  # some allocations failed, none went wrong


@needs_c
def test_no_memory_grows_over_many_calls() -> None:
    built = _native._BUILT
    assert built is not None

    def calls(times: int) -> None:
        for _ in range(times):
            for sample in SAMPLES:
                built.dumps(sample, 1000)
                built.dumps(sample, 3)  # declines part-way, deep inside
                built.too_deep(sample, 1000)
                built.too_deep(sample, 2)

    calls(20)
    gc.collect()
    tracemalloc.start()
    try:
        calls(20)
        gc.collect()
        start, _ = tracemalloc.get_traced_memory()
        calls(1000)
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # A buffer leaked per call would be 4,000 buffers of at least 16 bytes.
    assert end - start < 16 * 1024
