"""The C accelerator of loopfuse.intent (``_speedups``) changes speed, never a result.

Each C function is compared with its pure-Python reference: the canonical writer with
``_canonical.write``, the nesting check with ``_json._deeper``, and the whole pipeline
(fingerprints, canonical bytes, intents, dialects) with the extension on and off, under
both JSON backends.
"""

from __future__ import annotations

import collections
import enum
import json
import math
import os
import sysconfig
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest
from hypothesis import strategies as st

from conftest import TOO_SLOW, fast_and_full, json_backend, run_property
from loopfuse import intent
from loopfuse.errors import InvalidInputError
from loopfuse.intent import _canonical, _json, _native

T = TypeVar("T")

needs_c = pytest.mark.skipif(_native._BUILT is None, reason="C extension not built")


def test_extension_is_built() -> None:
    """CI and developer installs build the C extension; only an opt-out may skip it, and
    a free-threaded interpreter, for which it is not built (it needs a GIL)."""
    if os.environ.get("LOOPFUSE_NO_EXTENSIONS", "") not in ("", "0"):
        pytest.skip("LOOPFUSE_NO_EXTENSIONS is set: the pure-Python path is expected")
    free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    assert intent.c_extension_available() is not free_threaded


@contextmanager
def c_extension(enabled: bool) -> Iterator[None]:
    previous = _native.speedups is not None
    _native.set_c_extension(enabled)
    try:
        yield
    finally:
        _native.set_c_extension(previous)


def every_path(fn: Callable[[], T]) -> list[T]:
    """``fn()`` with the extension on and off, under each installed JSON backend."""
    backends = ["json"] + (["orjson"] if _json._orjson is not None else [])
    results = []
    extension = (True, False) if _native._BUILT is not None else (False,)
    for name in backends:
        for enabled in extension:
            with json_backend(name), c_extension(enabled):
                results.append(fn())
    return results


def reference(value: object, limit: int = intent.MAX_DEPTH) -> bytes | type[InvalidInputError]:
    """What the pure-Python writer gives, or the error it raises."""
    out: list[str] = []
    try:
        _canonical.write(value, out, limit)
    except InvalidInputError:
        return InvalidInputError
    return _canonical.utf8("".join(out))


class Color(enum.IntEnum):
    RED = 1


class MyFloat(float):
    def __repr__(self) -> str:
        return "not a number"


class MyStr(str):
    def __str__(self) -> str:
        return "overridden"


text = st.text(max_size=12) | st.sampled_from(
    ["", "é", "😀", "\x00\x1f\x7f", "\u2028", 'a\\b"c', "\ud800", "x\udfffy", "\b\f\n\r\t"]
)
numbers = (
    st.integers(min_value=-(2**1100), max_value=2**1100)
    | st.floats()
    | st.sampled_from(
        [0, -0.0, 1e-5, -1.5e-5, 1e-7, 9.99e-6, 1e16, 1e22, 2**63, 2**64 - 1, 2**64, -(2**63)]
    )
    | st.sampled_from([-(2**63) - 1, 10**400, -(10**400), 5e-324, 1.7976931348623157e308])
)
odd = st.sampled_from([Color.RED, MyFloat(1.5), MyStr("s"), True, False, None])
scalars = st.none() | st.booleans() | numbers | text | odd
keys = text | st.sampled_from([1, 2.5, None, True, MyStr("k")])
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=3).map(tuple)
        | st.dictionaries(keys, children, max_size=4)
        | st.dictionaries(text, children, max_size=4).map(collections.OrderedDict)
    ),
    max_leaves=25,
)


@needs_c
@pytest.mark.parametrize("examples", fast_and_full(300, 1500))
def test_c_writer_is_the_reference_or_declines(examples: int) -> None:
    limits = st.integers(min_value=0, max_value=6)
    run_property(examples, writer_property, values, limits, suppress_health_check=TOO_SLOW)


def writer_property(value: Any, limit: int) -> None:
    assert _native._BUILT is not None
    written = _native._BUILT.dumps(value, limit)
    expected = reference(value, limit)
    if written is not None:
        assert written == expected
    # Through the public function the result is always the reference's.
    with c_extension(True):
        try:
            got: bytes | type[InvalidInputError] = intent.canonical_json(value)
        except InvalidInputError:
            got = InvalidInputError
    assert got == reference(value)


@needs_c
@pytest.mark.parametrize("examples", fast_and_full(500, 3000))
def test_c_writer_numbers(examples: int) -> None:
    numbers = st.floats() | st.integers(min_value=-(2**1100), max_value=2**1100)
    run_property(examples, number_property, numbers)


def number_property(number: float) -> None:
    assert _native._BUILT is not None
    assert _native._BUILT.dumps(number, 1) == reference(number)


@needs_c
@pytest.mark.parametrize(
    "value",
    [
        "plain ascii that is longer than eight bytes, twice over",
        '"quoted" and \\ back\\slashed, with \x01 control \x1f bytes \x7f',
        "é" * 9 + "\n" + "😀" * 3 + "\t",
        "x" * 7 + '"',  # an escape in the tail, after the last whole word
        "\x00" * 17,
        {"b": 1, "a": 2, "é": 3, "e": 4, "\U0001f600": 5, "\uffff": 6, "": 7},
        {str(i): i for i in range(40)},  # more keys than the insertion sort handles
    ],
)
def test_c_writer_strings_and_key_order(value: object) -> None:
    assert _native._BUILT is not None
    assert _native._BUILT.dumps(value, 4) == reference(value)


@needs_c
def test_c_writer_declines_what_only_python_handles() -> None:
    built = _native._BUILT
    assert built is not None
    for value in (
        "\ud800",
        {"\ud800": 1},
        {1: 2},
        MyStr("s"),
        Color.RED,
        MyFloat(2.0),
        collections.OrderedDict(a=1),
        {1.5},
        b"bytes",
        object(),
        [[[]]],  # deeper than the limit below
    ):
        assert built.dumps(value, 2) is None
    assert built.dumps([], 10**6) is None  # limits past MAX_LIMIT: the reference decides
    with pytest.raises(OverflowError):
        built.dumps([], 10**30)
    with pytest.raises(TypeError):
        built.dumps([])  # type: ignore[call-arg]


def _deep(depth: int, leaf: object = 1) -> object:
    value: object = leaf
    for index in range(depth):
        value = [value] if index % 2 else {"k": value}
    return value


@needs_c
@pytest.mark.parametrize("examples", fast_and_full(200, 1000))
def test_c_depth_check_is_the_reference_or_declines(examples: int) -> None:
    run_property(examples, depth_property, values, st.integers(min_value=0, max_value=6))


def depth_property(value: Any, limit: int) -> None:
    assert _native._BUILT is not None
    found = _native._BUILT.too_deep(value, limit)
    if found is not None:
        assert isinstance(value, dict | list)
        with c_extension(False):
            assert found == _json._too_deep(value, limit)


@needs_c
@pytest.mark.parametrize("depth", [1, 2, 253, 254, 255, 256, 1000])
def test_c_depth_check_at_the_limit(depth: int) -> None:
    assert _native._BUILT is not None
    value = _deep(depth)
    assert _native._BUILT.too_deep(value, intent.MAX_DEPTH) is (depth > intent.MAX_DEPTH)
    body = "[" * depth + "]" * depth  # json.dumps recurses too deep past ~990
    assert every_path(lambda: intent.load(body) is intent.NOT_JSON) == [
        depth > intent.MAX_DEPTH
    ] * len(every_path(lambda: None))


def test_c_extension_can_be_switched_off_and_on() -> None:
    if _native._BUILT is None:
        with pytest.raises(RuntimeError):
            _native.set_c_extension(True)
        return
    with c_extension(False):
        assert not intent.c_extension_available()
    assert intent.c_extension_available()


# ---------------------------------------------------------------- whole pipeline

leaf_text = st.text(max_size=30) | st.sampled_from(["", "\ud800", 'say "hi"\n', "é😀"])
json_leaf = st.none() | st.booleans() | numbers | leaf_text
json_value = st.recursive(
    json_leaf,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(leaf_text, c, max_size=3),
    max_leaves=12,
)
arguments = (
    json_value.map(lambda v: json.dumps(v, allow_nan=True))
    | st.sampled_from(["{", "", "[1,", '{"a": NaN}', '{"a": 1e400}'])
    | json_value
)
call = st.fixed_dictionaries(
    {"id": st.sampled_from(["c1", "c2", "c1", ""]) | st.none(), "type": st.just("function")},
    optional={
        "function": st.fixed_dictionaries(
            {"name": st.sampled_from(["ls", "cat", ""]) | json_leaf},
            optional={"arguments": arguments},
        )
    },
)
part = json_value | st.fixed_dictionaries(
    {
        "type": st.sampled_from(["text", "image_url", "tool_use", "tool_result", "thinking"]),
        "text": leaf_text,
    },
    optional={"id": leaf_text, "input": json_value, "content": json_value, "name": leaf_text},
)
content = st.none() | leaf_text | st.lists(part, max_size=3) | json_value
message = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool", "developer"]) | json_leaf},
    optional={
        "content": content,
        "tool_calls": st.lists(call, max_size=3) | json_value,
        "tool_call_id": st.sampled_from(["c1", "c2"]) | json_leaf,
        "name": leaf_text,
    },
)
chat_body = st.fixed_dictionaries(
    {"messages": st.lists(message | json_value, max_size=6)},
    optional={
        "model": leaf_text,
        "system": content,
        "tools": st.lists(json_value, max_size=2) | json_value,
        "temperature": numbers,
    },
)
other_body = st.fixed_dictionaries(
    {"input": leaf_text | st.lists(json_value, max_size=4)}, optional={"instructions": content}
) | st.fixed_dictionaries({"contents": st.lists(json_value, max_size=4)})


def _same(results: list[Any]) -> bool:
    first = results[0]
    return all(repr(result) == repr(first) for result in results)


@pytest.mark.parametrize("examples", fast_and_full(100, 400))
def test_every_path_gives_the_same_fingerprint(examples: int) -> None:
    bodies = chat_body | other_body | json_value
    paths = st.sampled_from(["", "/v1/chat/completions"])
    run_property(examples, same_on_every_path, bodies, paths, suppress_health_check=TOO_SLOW)


def same_on_every_path(body: Any, path: str) -> None:
    raw = json.dumps(body, allow_nan=True).encode()
    assert _same(every_path(lambda: intent.fingerprint(raw, path)))
    assert _same(every_path(lambda: intent.canonical_intent_bytes(raw)))
    assert _same(every_path(lambda: intent.detect_dialect(raw)))
    assert _same(every_path(lambda: intent.extract_intent(raw)))
    analyses = every_path(lambda: intent.analyse(raw))
    assert _same([(a.dialect, a.intent, a.parsed_intent) for a in analyses])


@pytest.mark.parametrize("examples", fast_and_full(60, 200))
def test_every_path_agrees_on_parsed_mappings(examples: int) -> None:
    run_property(
        examples,
        check_every_path_agrees_on_parsed_mappings,
        chat_body,
        suppress_health_check=TOO_SLOW,
    )


def check_every_path_agrees_on_parsed_mappings(body: Any) -> None:
    def outcome() -> object:
        try:
            return intent.fingerprint(body)
        except InvalidInputError:
            return InvalidInputError

    assert _same(every_path(outcome))


def test_non_finite_and_huge_numbers_in_an_intent() -> None:
    body = {
        "messages": [
            {"role": "user", "content": [{"type": "x", "v": [math.nan, 1e400, 2**70, 1e-7]}]}
        ]
    }
    results = every_path(lambda: intent.canonical_intent_bytes(body))
    assert _same(results)
    assert b'"v":[null,null,1.1805916207174113e+21,1e-7]' in results[0]  # type: ignore[operator]


@pytest.mark.parametrize(
    "arguments",
    [
        "[" * 300 + "]" * 300,  # long, too deep: kept as the string on every path
        "[" * 254 + "]" * 254,  # long, and exactly as deep as allowed
        "[" * 250 + "]" * 250,  # short enough for the fast parser
        '{"a": NaN}',  # orjson refuses; the standard library reads it
        '{"a": "\\ud800"}',  # a lone surrogate: orjson refuses
        '{"a": 18446744073709551616, "b": 1e400, "c": 1e-7}',
        '{"a": 1} trailing',
        "",
    ],
)
def test_tool_call_arguments_parse_alike_on_every_path(arguments: str) -> None:
    body = {
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": arguments}}],
            },
        ]
    }
    raw = json.dumps(body).encode()
    assert _same(every_path(lambda: intent.fingerprint(raw)))
    assert _same(every_path(lambda: intent.canonical_intent_bytes(body)))
    intents = every_path(lambda: intent.extract_intent(raw))
    assert _same(intents)
    parsed = intents[0]["messages"][1]["tool_calls"][0]["arguments"]  # type: ignore[index]
    assert (parsed == arguments) is (intent.load(arguments) is intent.NOT_JSON)
