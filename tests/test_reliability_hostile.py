"""Hostile input: every request-path entry point returns a verdict or a documented fallback,
or raises only a documented ``LoopfuseError``; time and memory stay linear in the input.

Entry points: ``intent.parse``, ``extract_intent``, ``fingerprint``, ``analyse`` (and
``detect_dialect``, ``canonical_intent_bytes``), ``LoopBreaker.check_request``,
``RequestKey.from_request``, ``loopfuse.scan`` (the LoopDetector's stateless walk) and the
CLI's reader (``loopfuse.cli.readers.read_bytes``).

The contract, from the docs:

- ``bytes``/``str`` bodies never raise anywhere: junk gets a raw-bytes fallback;
- already-parsed values raise :class:`InvalidInputError` (a ``LoopfuseError``) when JSON
  cannot express them or they nest deeper than ``MAX_DEPTH``, and nothing else;
  ``check_request`` turns that into a fail-open decision (one warning, one count);
- a parsed value and the bytes it was parsed from fingerprint and key alike, and both
  JSON backends give the same results.

Bounds asserted here are the documented ones (docs/reliability.md), which are several
times what was measured, so that a loaded 2-core CI machine does not flake: they catch a
quadratic walk or an unbounded copy, not a 30 % slowdown.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import TOO_SLOW, fast_and_full, run_property
from hostile import (
    BACKENDS,
    HYPOTHESIS,
    chars,
    chat_message,
    check_body_both_backends,
    check_parsed,
    dialect_bodies,
    json_values,
    maybe,
    mutated,
    paths,
    scalars,
    serialised,
    text,
    using,
)
from loopfuse import RequestKey, intent

# --- arbitrary input ------------------------------------------------------------------


@HYPOTHESIS
@given(st.binary(max_size=200), paths)
def test_arbitrary_bytes(body: bytes, path: str) -> None:
    check_body_both_backends(body, path)


@HYPOTHESIS
@given(st.text(chars, max_size=100), paths)
def test_arbitrary_str_with_lone_surrogates(body: str, path: str) -> None:
    check_body_both_backends(body, path)


@HYPOTHESIS
@given(serialised(json_values), paths)
def test_arbitrary_json_values_as_text(body: bytes | str, path: str) -> None:
    check_body_both_backends(body, path)


@pytest.mark.parametrize("examples", fast_and_full(50, 200))
def test_every_dialect_with_fields_of_the_wrong_type(examples: int) -> None:
    run_property(
        examples,
        check_every_dialect_with_fields_of_the_wrong_type,
        serialised(dialect_bodies),
        paths,
        suppress_health_check=TOO_SLOW,
    )


def check_every_dialect_with_fields_of_the_wrong_type(body: bytes | str, path: str) -> None:
    check_body_both_backends(body, path)


@pytest.mark.parametrize("examples", fast_and_full(40, 150))
def test_dialect_bodies_with_corrupted_bytes(examples: int) -> None:
    run_property(
        examples,
        check_dialect_bodies_with_corrupted_bytes,
        mutated(serialised(dialect_bodies)),
        paths,
        suppress_health_check=TOO_SLOW,
    )


def check_dialect_bodies_with_corrupted_bytes(body: bytes, path: str) -> None:
    check_body_both_backends(body, path)


@pytest.mark.parametrize("examples", fast_and_full(40, 150))
def test_parsed_json_values_never_raise(examples: int) -> None:
    run_property(
        examples,
        check_parsed_json_values_never_raise,
        dialect_bodies | json_values,
        paths,
        suppress_health_check=TOO_SLOW,
    )


def check_parsed_json_values_never_raise(value: Any, path: str) -> None:
    # A body is a mapping or a list (a str is body text); a bare number is not a body.
    is_body = isinstance(value, dict | list | str)
    for name in BACKENDS:
        with using(name):
            check_parsed(value, path, json_typed=is_body)


@pytest.mark.parametrize("text", ["0", "null", '"a"', "NaN", "1e999", "[]", "\ud800"])
def test_a_str_is_body_text_whatever_json_it_holds(text: str) -> None:
    # A top-level JSON value as text, as the fuzz once drew it ("0" parses to 0).
    check_parsed_json_values_never_raise(text, "")


not_json = st.sampled_from(
    [object(), {1, 2}, frozenset(), b"bytes", bytearray(b"x"), 1j, Ellipsis, int, print]
)
junk_values = st.recursive(
    scalars | not_json,
    lambda children: (
        st.lists(children, max_size=3)
        | st.tuples(children)
        | st.dictionaries(text | st.integers() | st.none() | st.booleans(), children, max_size=3)
    ),
    max_leaves=8,
)


@HYPOTHESIS
@given(
    st.one_of(
        junk_values,
        st.builds(lambda m: {"messages": [{"role": "user", "content": m}]}, junk_values),
        st.builds(lambda m: {"model": m, "messages": []}, junk_values),
        st.builds(lambda m: {"input": [m]}, junk_values),
        st.builds(lambda m: {"contents": [{"parts": [{"functionResponse": m}]}]}, junk_values),
    ),
    paths,
)
def test_parsed_values_json_cannot_express_raise_only_invalid_input(value: Any, path: str) -> None:
    check_parsed(value, path, json_typed=False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["messages", "model", "input", "system", "tools", "x"]),
            maybe(st.lists(chat_message, max_size=2)),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_duplicate_keys_last_one_wins(pairs: list[tuple[str, Any]]) -> None:
    text_ = "{" + ",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in pairs) + "}"
    check_body_both_backends(text_)
    last_wins = dict(pairs)
    assert intent.fingerprint(text_) == intent.fingerprint(json.dumps(last_wins))
    assert RequestKey.from_request(text_) == RequestKey.from_request(json.dumps(last_wins))
