"""intent.parse / load / canonical_json: tolerant parsing and one canonical form."""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopfuse.errors import InvalidInputError, LoopfuseError
from loopfuse.intent import MAX_BODY_BYTES, MAX_DEPTH, NOT_JSON, canonical_json, load, parse
from loopfuse.intent import _json as backend
from loopfuse.intent import _textdepth as textdepth
from loopfuse.intent._textdepth import STDLIB_SAFE_DEPTH, json_loads, nesting, nests_deeper

BACKENDS = ["json", "orjson"] if backend._orjson is not None else ["json"]


@pytest.fixture(params=BACKENDS)
def json_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    original = backend.json_backend()
    backend._set_backend(request.param)
    yield request.param
    backend._set_backend(original)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.usefixtures("json_backend")
class TestParse:
    def test_bytes_str_and_parsed_values(self) -> None:
        assert parse(b'{"a": [1, 2]}') == {"a": [1, 2]}
        assert parse('{"a": [1, 2]}') == {"a": [1, 2]}
        assert parse(bytearray(b"[1]")) == [1]
        assert parse(memoryview(b"[1]")) == [1]
        value = {"already": "parsed"}
        assert parse(value) is value

    @pytest.mark.parametrize(
        "body",
        [
            b"",
            b"   ",
            b"{",
            b'{"a": 1,}',
            b"[1, 2",
            b"\xff\xfe\x00{",  # not UTF-8 (UTF-16 BOM): never guessed
            b"\xef\xbb\xbf{}",  # UTF-8 BOM
            b'{"a": "\x01"}',  # raw control character in a string
            b'{"a": "\xc3"}',  # truncated UTF-8 sequence
            "\ud800",  # a lone surrogate outside a string
            b"\x00" * 100,
            b"undefined",
            b"1" * 5000,  # an integer over the int-to-str digit limit
        ],
    )
    def test_not_json_gives_none(self, body: bytes | str) -> None:
        assert parse(body) is None
        assert load(body) is NOT_JSON

    def test_null_is_told_apart_from_not_json(self) -> None:
        assert parse(b"null") is None
        assert load(b"null") is None
        assert load(b"nul") is NOT_JSON
        assert not NOT_JSON
        assert repr(NOT_JSON) == "NOT_JSON"

    def test_non_body_types_are_not_json(self) -> None:
        for junk in (42, 4.2, None, object(), {1, 2}):
            assert parse(junk) is None

    def test_depth_limit_is_exact_and_backend_independent(self) -> None:
        assert parse(nested(MAX_DEPTH)) is not None
        assert parse(nested(MAX_DEPTH + 1)) is None
        # Deep enough to break either backend's own parser: still a quiet None.
        assert parse(nested(100_000)) is None
        assert parse(b'{"a":' * 50_000 + b"1" + b"}" * 50_000) is None

    def test_depth_limit_applies_to_parsed_values(self) -> None:
        deep: list[object] = []
        cursor = deep
        for _ in range(MAX_DEPTH):
            inner: list[object] = []
            cursor.append(inner)
            cursor = inner
        assert parse(deep) is None
        assert parse(deep[0]) is not None

    def test_size_limit(self) -> None:
        big = b'"' + b"a" * MAX_BODY_BYTES + b'"'
        assert parse(big) is None
        assert parse(big.decode()) is None

    def test_nan_and_infinity_are_accepted(self) -> None:
        value = parse(b"[NaN, Infinity, -Infinity]")
        assert isinstance(value, list)
        assert math.isnan(value[0])
        assert value[1:] == [math.inf, -math.inf]

    def test_lone_surrogate_escape_inside_a_string(self) -> None:
        assert parse(b'["\\ud800"]') == ["\ud800"]

    def test_duplicate_keys_last_wins(self) -> None:
        assert parse(b'{"a": 1, "a": 2}') == {"a": 2}


@pytest.mark.usefixtures("json_backend")
class TestCanonicalJson:
    def test_sorted_compact_utf8(self) -> None:
        assert canonical_json({"b": 1, "a": {"d": [True, None], "c": "é"}}) == (
            '{"a":{"c":"é","d":[true,null]},"b":1}'.encode()
        )

    def test_key_order_does_not_matter(self) -> None:
        assert canonical_json({"x": 1, "y": 2}) == canonical_json(OrderedDict(y=2, x=1))

    def test_number_rule(self) -> None:
        assert canonical_json([1.0, -0.0, 2.5, 1e-4, 1e-5, 1.5e-5, 1e-6, 1e15, 1e16, 1e300]) == (
            b"[1.0,-0.0,2.5,0.0001,0.00001,0.000015,1e-6,1000000000000000.0,1e+16,1e+300]"
        )
        assert canonical_json([1, 1.0]) == b"[1,1.0]"  # an integer and a float stay apart
        assert canonical_json([math.nan, math.inf, -math.inf]) == b"[null,null,null]"
        # Integers orjson cannot read exactly are read as doubles, whichever the backend.
        exact = canonical_json([2**64 - 1, -(2**63)])
        assert exact == b"[18446744073709551615,-9223372036854775808]"
        assert canonical_json(2**64) == b"1.8446744073709552e+19"
        assert canonical_json(2**70 + 1) == canonical_json(float(2**70))
        assert canonical_json(10**400) == b"null"
        assert canonical_json(True) == b"true"  # bool is not a number

    def test_parsed_numbers_follow_the_rule(self) -> None:
        body = (
            b"[1, 1.0, 1e-5, 1e-7, 18446744073709551616, NaN, -Infinity, 1e400, 1"
            + (b"0" * 400)
            + b"]"
        )
        assert canonical_json(parse(body)) == (
            b"[1,1.0,0.00001,1e-7,1.8446744073709552e+19,null,null,null,null]"
        )

    def test_strings_escape_like_the_standard_library(self) -> None:
        text = "".join(chr(i) for i in range(0x20)) + '"\\/\x7f\u2028é😀'
        assert canonical_json(text) == json.dumps(text, ensure_ascii=False).encode()

    def test_lone_surrogate_written_as_escape(self) -> None:
        assert canonical_json(["\ud800x"]) == b'["\\ud800x"]'
        assert canonical_json({"\udfff": 1}) == b'{"\\udfff":1}'

    def test_tuples_and_subclasses(self) -> None:
        class Text(str):
            pass

        class Number(int):
            pass

        assert canonical_json((1, Text("a"), Number(3))) == b'[1,"a",3]'

    def test_non_string_keys_written_as_json_dumps_would(self) -> None:
        assert canonical_json({2: "a", True: "b", None: "c", 1.5: "d"}) == (
            b'{"1.5":"d","2":"a","null":"c","true":"b"}'
        )

    @pytest.mark.parametrize("junk", [object(), {1, 2}, b"bytes", {"k": object()}, {(1, 2): 3}])
    def test_values_json_cannot_express(self, junk: object) -> None:
        with pytest.raises(InvalidInputError) as caught:
            canonical_json(junk)
        assert isinstance(caught.value, LoopfuseError)
        assert isinstance(caught.value, TypeError)

    def test_too_deep(self) -> None:
        deep: list[object] = []
        cursor = deep
        for _ in range(MAX_DEPTH + 5):
            inner: list[object] = []
            cursor.append(inner)
            cursor = inner
        with pytest.raises(InvalidInputError, match="MAX_DEPTH"):
            canonical_json(deep)


def test_backend_switch_is_validated() -> None:
    with pytest.raises(ValueError, match="unknown JSON backend"):
        backend._set_backend("simdjson")


# --- nesting measured on the text (_textdepth): what keeps the stdlib parser shallow ---

brackety_text = st.text(alphabet='[]{}"\\:,1 a\u00e9', max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | brackety_text,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(brackety_text, c, max_size=3),
    max_leaves=20,
)


def containers_depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max(map(containers_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(containers_depth, value), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(json_values, st.booleans(), st.booleans())
def test_text_nesting_is_the_depth_of_the_containers(
    value: object, ascii_only: bool, as_str: bool
) -> None:
    """Strings full of brackets, quotes and backslashes do not count."""
    text = json.dumps(value, ensure_ascii=ascii_only, indent=1 if ascii_only else None)
    assert nesting(text if as_str else text.encode()) == containers_depth(value)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet='[]{}"\\:,1 ', max_size=40))
def test_text_nesting_bounds_what_a_parser_builds_from_any_text(text: str) -> None:
    try:
        value = json.loads(text)
    except ValueError:
        return
    assert containers_depth(value) <= nesting(text)


def test_a_text_past_the_safe_depth_never_reaches_the_stdlib_parser(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []

    def spy(text: str) -> object:
        calls.append(text)
        return json.loads(text)

    monkeypatch.setattr(backend, "_TOLERANT", type("Spy", (), {"decode": staticmethod(spy)}))
    monkeypatch.setattr(backend, "_STRICT", type("Spy", (), {"decode": staticmethod(spy)}))
    deep = "[" * (STDLIB_SAFE_DEPTH + 1) + "NaN" + "]" * (STDLIB_SAFE_DEPTH + 1)
    in_strings = '["' + "[" * 2000 + '", NaN]'  # many brackets, but inside a string
    for name in BACKENDS:
        backend._set_backend(name)
        calls.clear()
        assert load(deep) is NOT_JSON
        assert calls == []
        value = load(in_strings)
        assert isinstance(value, list)
        assert value[0] == "[" * 2000
        assert calls == [in_strings]
    assert nests_deeper(deep, STDLIB_SAFE_DEPTH)
    assert not nests_deeper(in_strings, STDLIB_SAFE_DEPTH)
    with pytest.raises(RecursionError):
        json_loads(deep)
    assert json_loads(in_strings)[0] == "[" * 2000


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='[]{}"\\1', max_size=60), st.integers(0, 8), st.integers(1, 5))
def test_the_chunked_measure_is_the_whole_measure(text: str, limit: int, chunk: int) -> None:
    """nests_deeper measures chunk by chunk and stops early: the same answer as nesting()."""
    original = textdepth._CHUNK
    textdepth._CHUNK = chunk
    try:
        assert nests_deeper(text, limit) is (nesting(text) > limit)
    finally:
        textdepth._CHUNK = original


def test_a_peak_in_a_later_chunk_is_found() -> None:
    text = "[]" * 3000 + "[" * 600 + "]" * 600
    assert nests_deeper(text, 599)
    assert not nests_deeper(text, 600)
