"""Canonical bytes and fingerprints are identical with and without orjson (the ``fast`` extra)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import TOO_SLOW, fast_and_full, run_property
from conftest import json_backend as using
from loopfuse import intent
from loopfuse.intent import _json as backend

pytestmark = pytest.mark.skipif(backend._orjson is None, reason="orjson is not installed")

T = TypeVar("T")


def both(fn: Callable[[], T]) -> tuple[T, T]:
    with using("json"):
        plain = fn()
    with using("orjson"):
        fast = fn()
    return plain, fast


text = st.text(st.characters(codec="utf-8"), max_size=20) | st.sampled_from(
    ["", "é", "😀", "\x00\x1f", "\u2028", 'a\\b"c', "1.5e-7"]
)
numbers = (
    st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0, -0.0, 1e-5, 1e-7, 1e16, 1e22, 2**53, 2**53 + 1, 2**64, -(2**63) - 1])
)
scalars = st.none() | st.booleans() | numbers | text
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(text, children, max_size=5),
    max_leaves=30,
)


@pytest.mark.parametrize("examples", fast_and_full(100, 400))
def test_canonical_json_is_backend_independent(examples: int) -> None:
    run_property(
        examples,
        check_canonical_json_is_backend_independent,
        json_values,
        suppress_health_check=TOO_SLOW,
    )


def check_canonical_json_is_backend_independent(value: Any) -> None:
    plain, fast = both(lambda: intent.canonical_json(value))
    assert plain == fast


@pytest.mark.parametrize("examples", fast_and_full(80, 300))
def test_parse_then_canonicalise_is_backend_independent(examples: int) -> None:
    run_property(examples, check_parse_then_canonicalise_is_backend_independent, json_values)


def check_parse_then_canonicalise_is_backend_independent(value: Any) -> None:
    body = json.dumps(value).encode()  # NaN/Infinity written as the stdlib writes them
    plain, fast = both(lambda: intent.canonical_json(intent.load(body)))
    assert plain == fast


@pytest.mark.parametrize("examples", fast_and_full(80, 300))
def test_fingerprint_is_backend_independent(examples: int) -> None:
    run_property(
        examples,
        check_fingerprint_is_backend_independent,
        json_values,
        st.sampled_from(["", "/v1/chat/completions", "/api/chat"]),
    )


def check_fingerprint_is_backend_independent(value: Any, path: str) -> None:
    request = {"model": "m", "messages": [{"role": "user", "content": [value, "x"]}]}
    for body in (json.dumps(request).encode(), json.dumps(value).encode()):
        plain, fast = both(lambda body=body: intent.fingerprint(body, path))  # type: ignore[misc]
        assert plain == fast


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_are_backend_independent(body: bytes) -> None:
    plain, fast = both(lambda: (intent.load(body), intent.fingerprint(body)))
    assert plain[1] == fast[1]
    if plain[0] is intent.NOT_JSON:
        assert fast[0] is intent.NOT_JSON


@pytest.mark.parametrize(
    "body",
    [
        b'{"a": 18446744073709551616}',  # orjson reads this as a float, the stdlib as an int
        b'{"a": 123456789012345678901234567890}',
        b'{"a": NaN, "b": -Infinity}',  # orjson refuses; the stdlib reads them
        b'{"a": 1e400}',
        b'{"a": "\\ud800"}',  # lone surrogate
        b'{"a": 1.0, "b": 1e-7, "c": 0.00001}',
        b"[" * 200 + b"]" * 200,
    ],
)
def test_edge_bodies_are_backend_independent(body: bytes) -> None:
    plain, fast = both(lambda: intent.fingerprint(body, "/p"))
    assert plain == fast


@pytest.mark.parametrize("examples", fast_and_full(100, 500))
def test_fast_path_equals_the_reference_writer(examples: int) -> None:
    run_property(examples, check_fast_path_equals_the_reference_writer, json_values)


def check_fast_path_equals_the_reference_writer(value: Any) -> None:
    """Whatever a C serialiser writes for a parsed body must be what `_write` writes."""
    body = json.dumps(value).encode()
    for name in ("json", "orjson"):
        with using(name):
            parsed, trusted = backend.load_trusted(body)
            assert backend.dumps_trusted(parsed, trusted) == intent.canonical_json(parsed)


@pytest.mark.parametrize("examples", fast_and_full(400, 2000))
def test_format_float_is_what_a_conforming_orjson_writes(examples: int) -> None:
    run_property(
        examples,
        check_format_float_is_what_a_conforming_orjson_writes,
        st.floats(allow_nan=False, allow_infinity=False),
    )


def check_format_float_is_what_a_conforming_orjson_writes(value: float) -> None:
    if not backend._ORJSON_WRITES:
        pytest.skip("this orjson formats floats differently: it is only used for parsing")
    assert backend._orjson is not None
    assert backend._orjson.dumps(value).decode() == intent.format_float(value)
    assert float(intent.format_float(value)) == value  # and it round-trips


def test_installed_orjson_follows_the_rules() -> None:
    # The test extra pins a version that does; if this fails, the fast path is off.
    assert backend._ORJSON_WRITES
