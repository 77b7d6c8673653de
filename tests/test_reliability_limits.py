"""Hostile input, part two: specific traps (numbers, surrogates, exact nesting),
fail-open on injected failures, time and memory bounds, and the CLI reader.

Shared checks and the documented bounds live in ``hostile.py``; the contract is in
test_reliability_hostile.py's docstring.
"""

from __future__ import annotations

import gc
import json
import logging
import time
import tracemalloc
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest
from blake3 import blake3
from hypothesis import given
from hypothesis import strategies as st

from conftest import fast_and_full
from hostile import (
    BACKENDS,
    HYPOTHESIS,
    PEAK_BYTES_PER_BODY_BYTE,
    PEAK_FIXED,
    RAW_PEAK_BYTES_PER_BODY_BYTE,
    RAW_SECONDS_PER_MB,
    SECONDS_FIXED,
    SECONDS_PER_MB,
    MiB,
    check_body,
    check_body_both_backends,
    check_parsed,
    loopfuse_log,
    reader_error,
    using,
)
from loopfuse import LoopBreaker, RequestKey, intent, scan
from loopfuse.cli.readers import InputError
from loopfuse.errors import InvalidInputError, LoopfuseError

# --- specific traps -------------------------------------------------------------------


def test_wrong_argument_types_raise_invalid_input() -> None:
    body = b'{"input": "hi"}'
    for call in (
        lambda: intent.fingerprint(body, path=None),  # type: ignore[arg-type]
        lambda: RequestKey.from_request(body, path=b"/x"),  # type: ignore[arg-type]
        lambda: LoopBreaker().check_request(None, body),  # type: ignore[arg-type]
        lambda: LoopBreaker().check_request(b"s", body),  # type: ignore[arg-type]
        # A path of the wrong type is the caller's bug, not a guard failure to let through.
        lambda: LoopBreaker().check_request("s", body, path=None),  # type: ignore[arg-type]
        lambda: LoopBreaker().enforce_request("s", body, path=b"/v1"),  # type: ignore[arg-type]
        lambda: intent.fingerprint(42),
        lambda: RequestKey.from_request(None),
    ):
        with pytest.raises(InvalidInputError):
            call()


@pytest.mark.parametrize("name", BACKENDS)
def test_non_finite_numbers_are_written_as_null(name: str) -> None:
    with using(name):
        for literal in (b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e999"):
            body = b'{"input":[{"role":"user","content":[' + literal + b', "x"]}]}'
            null = body.replace(literal, b"null")
            check_body(body)
            assert intent.fingerprint(body) == intent.fingerprint(null)
            assert RequestKey.from_request(body) == RequestKey.from_request(null)


@pytest.mark.parametrize("name", BACKENDS)
def test_integers_beyond_64_bits_are_read_as_doubles(name: str) -> None:
    with using(name):
        for big, double in (
            (b"18446744073709551616", b"1.8446744073709552e19"),
            (b"-9223372036854775809", b"-9.223372036854776e18"),
            (b"1" * 400, b"1e999"),
            (b"-" + b"1" * 4300, b"-1e999"),
        ):
            body = b'{"model":"m","messages":[{"role":"user","content":[' + big + b"]}]}"
            same = body.replace(big, double)
            check_body(body)
            assert intent.fingerprint(body) == intent.fingerprint(same)
            assert RequestKey.from_request(body) == RequestKey.from_request(same)
        # Within range, exact: 2**64 - 1 and 2**64 - 2 are different requests.
        a = b'{"input":[{"role":"user","content":[18446744073709551615]}]}'
        b = b'{"input":[{"role":"user","content":[18446744073709551614]}]}'
        assert intent.fingerprint(a) != intent.fingerprint(b)


@pytest.mark.parametrize("name", BACKENDS)
def test_lone_surrogates_and_invalid_utf8(name: str) -> None:
    with using(name):
        escaped = b'{"input":"\\ud800 \\udfff\\ud800"}'
        check_body(escaped)
        assert intent.extract_intent(escaped) == {
            "messages": [{"role": "user", "content": ["\ud800 \udfff\ud800"]}]
        }
        as_str = '{"input":"\ud800 \udfff\ud800"}'  # raw lone surrogates in a str body
        check_body(as_str)
        assert intent.fingerprint(as_str) == intent.fingerprint(escaped)
        raw = as_str.encode("utf-8", "surrogatepass")  # the same, as bytes: not UTF-8
        check_body(raw)
        assert intent.parse(raw) is None
        assert intent.fingerprint(raw) == int.from_bytes(blake3(b"\n" + raw).digest(8), "little")


class ReprFloat(float):
    """A float subclass whose repr is not a number, as numpy's float64 (numpy >= 2)."""

    def __repr__(self) -> str:
        return f"np.float64({float.__repr__(self)})"


class StrStr(str):
    """A str subclass whose str() is not its value."""

    def __str__(self) -> str:
        return "something else"


def test_subclasses_of_json_types_are_written_as_their_base_type() -> None:
    """A parsed body may hold numpy floats or str subclasses (enums); the canonical JSON
    is still JSON, and the same as for the plain values."""
    assert intent.canonical_json(ReprFloat(0.7)) == b"0.7"
    assert intent.canonical_json([ReprFloat(1e-7), ReprFloat(2.0)]) == b"[1e-7,2.0]"
    assert intent.canonical_json({StrStr("k"): 1, ReprFloat(0.5): 2}) == b'{"0.5":2,"k":1}'
    plain = {"model": "m", "messages": [{"role": "user", "content": [0.7, "hi"]}], "top_p": 0.5}
    odd = {
        "model": "m",
        "messages": [{"role": "user", "content": [ReprFloat(0.7), StrStr("hi")]}],
        "top_p": ReprFloat(0.5),
    }
    check_parsed(odd, json_typed=True)
    assert intent.canonical_intent_bytes(odd) == intent.canonical_intent_bytes(plain)
    assert intent.fingerprint(odd) == intent.fingerprint(plain)
    assert RequestKey.from_request(odd).digest == RequestKey.from_request(plain).digest
    not_a_request = RequestKey.from_request({"x": odd})  # the fallback writes the whole value
    assert not_a_request.digest == RequestKey.from_request({"x": plain}).digest


def nested_list(depth: int, leaf: object = "x") -> object:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


# Where a client can put a value in each dialect, and how deep that slot sits.
SLOTS: dict[str, tuple[Callable[[object], dict[str, Any]], int]] = {
    "chat content": (lambda v: {"messages": [{"role": "user", "content": [v]}]}, 4),
    "chat param": (lambda v: {"messages": [], "temperature": v}, 1),
    "chat tools": (lambda v: {"messages": [], "tools": v}, 1),
    "chat junk message": (lambda v: {"messages": [v]}, 2),
    "anthropic input": (
        lambda v: {
            "system": "s",
            "messages": [{"role": "assistant", "content": [{"type": "tool_use", "input": v}]}],
        },
        5,
    ),
    "ollama arguments": (
        lambda v: {
            "messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": v}}]}]
        },
        6,
    ),
    "responses output": (
        lambda v: {"input": [{"type": "function_call_output", "output": [v]}]},
        4,
    ),
    "gemini response": (
        lambda v: {"contents": [{"parts": [{"functionResponse": {"name": "f", "response": v}}]}]},
        6,
    ),
    "gemini part": (lambda v: {"contents": [{"parts": v}]}, 3),
    "no dialect": (lambda v: {"anything": v}, 1),
    "top level": (lambda v: v, 0),  # type: ignore[dict-item,return-value]
}


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("slot", list(SLOTS))
def test_nesting_at_exactly_max_depth_in_every_slot(slot: str, name: str) -> None:
    """The deepest valid JSON is JSON everywhere: no entry point raises on it."""
    build, depth = SLOTS[slot]
    for total in (intent.MAX_DEPTH, intent.MAX_DEPTH + 1):
        value = build(nested_list(total - depth))
        body = json.dumps(value).encode()
        with using(name):
            check_body(body)
            assert (intent.parse(body) is None) == (total > intent.MAX_DEPTH)
            check_parsed(value, json_typed=total <= intent.MAX_DEPTH)


def test_deep_tool_arguments_string_stays_a_string() -> None:
    deep_args = "[" * 100_000 + "]" * 100_000
    body = json.dumps(
        {
            "model": "m",
            "messages": [
                {
                    "role": "assistant",
                    "tool_calls": [{"function": {"name": "f", "arguments": deep_args}}],
                }
            ],
        }
    ).encode()
    check_body_both_backends(body)
    extracted = intent.extract_intent(body)
    assert extracted is not None
    assert extracted["messages"][0]["tool_calls"][0]["arguments"] == deep_args


def cyclic() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


@pytest.mark.parametrize(
    "value",
    [
        nested_list(100_000),
        {"messages": [{"role": "user", "content": nested_list(100_000)}]},
        cyclic(),
        {"messages": cyclic()},
    ],
    ids=["list", "in-messages", "cyclic", "cyclic-messages"],
)
def test_parsed_values_100000_deep_or_cyclic(value: object) -> None:
    """Too deep (or endless): InvalidInputError, never a RecursionError or a hang."""
    check_parsed(value, json_typed=False)
    with pytest.raises(InvalidInputError):
        intent.fingerprint(value)
    with pytest.raises(InvalidInputError):
        RequestKey.from_request(value)


# --- fail-open: an unexpected internal error ------------------------------------------


@pytest.mark.parametrize(
    "failure", [RuntimeError("bug"), MemoryError(), RecursionError(), KeyError("x")]
)
def test_check_request_fails_open_on_any_internal_error(
    failure: Exception, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(body: object, path: str = "") -> int:
        raise failure

    monkeypatch.setattr("loopfuse.breaker.intent_fingerprint", broken)
    body = b'{"input": "hi"}'
    with loopfuse_log() as log:
        breaker = LoopBreaker(max_repeats=1, clock=lambda: 0.0)
        decisions = [breaker.enforce_request("s", body) for _ in range(3)]  # never LoopBroken
    assert all(d.allowed and d.error == repr(failure) for d in decisions)
    assert breaker.internal_errors == 3
    assert [(r.name, r.levelno) for r in log.records] == [("loopfuse", logging.WARNING)] * 3
    assert repr(failure) in log.records[0].getMessage()

    closed = LoopBreaker(max_repeats=1, clock=lambda: 0.0, fail_closed=True)
    with loopfuse_log(), pytest.raises(LoopfuseError) as refused:
        closed.enforce_request("s", body)
    assert refused.value.decision.error == repr(failure)  # type: ignore[attr-defined]
    assert closed.internal_errors == 1


@pytest.mark.parametrize("reading", [float("nan"), float("inf"), -float("inf"), "5", None, True])
def test_a_clock_returning_junk_is_a_counted_failure_not_a_silent_one(reading: object) -> None:
    """A NaN clock made every session look idle, so the breaker forgot them all on every
    check and never refused anything, with no warning and no count."""
    body = b'{"input": "hi"}'
    with loopfuse_log() as log:
        breaker = LoopBreaker(max_repeats=1, clock=lambda: reading)  # type: ignore[arg-type,return-value]
        decisions = [breaker.check_request("s", body) for _ in range(3)]
    assert all(d.allowed and d.error is not None for d in decisions)
    assert breaker.internal_errors == 3
    assert len(log.records) == 3
    closed = LoopBreaker(max_repeats=1, clock=lambda: reading, fail_closed=True)  # type: ignore[arg-type,return-value]
    with loopfuse_log():
        assert not closed.check_request("s", body).allowed


class FloatSubclass(float):
    """A float subclass, as ``numpy.float64`` is."""


@pytest.mark.parametrize("reading", [Fraction(7, 2), 3, FloatSubclass(2.5)])
def test_a_clock_may_return_any_finite_real_number(reading: object) -> None:
    """As the cache's clock may: an int, a Fraction, a float subclass (numpy's)."""
    body = b'{"input": "hi"}'
    breaker = LoopBreaker(max_repeats=1, clock=lambda: reading)  # type: ignore[arg-type,return-value]
    assert breaker.check_request("s", body).allowed
    refused = breaker.check_request("s", body)
    assert not refused.allowed
    assert refused.error is None
    assert breaker.internal_errors == 0


def test_check_request_does_not_swallow_keyboard_interrupt(monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(body: object, path: str = "") -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr("loopfuse.breaker.intent_fingerprint", interrupted)
    breaker = LoopBreaker(clock=lambda: 0.0)
    with pytest.raises(KeyboardInterrupt):
        breaker.check_request("s", b"{}")
    assert breaker.internal_errors == 0


# --- size: time and memory ------------------------------------------------------------


def seconds_of(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def peak_of(fn: Callable[[], object]) -> int:
    """tracemalloc's peak while ``fn()`` runs: every Python-level allocation, including
    buffers orjson reserves but may never touch (so resident memory is lower)."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def entry_points(body: bytes | str) -> dict[str, Callable[[], object]]:
    breaker = LoopBreaker(clock=lambda: 0.0)
    return {
        "parse": lambda: intent.parse(body),
        "extract_intent": lambda: intent.extract_intent(body),
        "analyse": lambda: intent.analyse(body),
        "fingerprint": lambda: intent.fingerprint(body, "/v1/chat/completions"),
        "check_request": lambda: breaker.check_request("s", body, "/v1/chat/completions"),
        "from_request": lambda: RequestKey.from_request(body, "/v1/chat/completions"),
        "scan": lambda: scan(body),
    }


ALL = tuple(entry_points(b""))
# The request-path entry points; the others (parse, extract_intent, analyse) do a
# subset of their work.
REQUEST_PATH = ("fingerprint", "check_request", "from_request")


def assert_within_bounds(
    body: bytes | str,
    *,
    raw: bool,
    timed: tuple[str, ...] = ALL,
    traced: tuple[str, ...] = ("fingerprint", "from_request"),
) -> None:
    """Time ``timed`` and tracemalloc ``traced`` (tracemalloc slows allocation-heavy code
    several times over, so big bodies trace only the entry point that does the most)."""
    megabytes = len(body) / MiB
    per_mb, per_byte = (
        (RAW_SECONDS_PER_MB, RAW_PEAK_BYTES_PER_BODY_BYTE)
        if raw
        else (SECONDS_PER_MB, PEAK_BYTES_PER_BODY_BYTE)
    )
    calls = entry_points(body)
    gc.collect()  # once: a collection costs more than most calls here
    for name in timed:
        seconds = seconds_of(calls[name])
        assert seconds <= SECONDS_FIXED + per_mb * megabytes, (name, seconds, megabytes)
    for name in traced:
        peak = peak_of(calls[name])
        assert peak <= PEAK_FIXED + per_byte * len(body), (name, peak / len(body))


@pytest.mark.parametrize("megabytes", fast_and_full(17, 50))
def test_a_body_over_the_limit_is_hashed_raw_in_linear_time_and_memory(megabytes: int) -> None:
    message = b'{"role":"user","content":"' + b"x" * 90 + b'"},'
    body = b'{"model":"m","messages":[' + message * (megabytes * MiB // len(message)) + b"{}]}"
    assert len(body) > intent.MAX_BODY_BYTES
    assert intent.parse(body) is None  # over MAX_BODY_BYTES: not parsed at all
    assert intent.fingerprint(body) == int.from_bytes(blake3(b"\n" + body).digest(8), "little")
    assert_within_bounds(body, raw=True)
    as_str = body.decode()
    assert intent.fingerprint(as_str) == intent.fingerprint(body)
    assert RequestKey.from_request(as_str) == RequestKey.from_request(body)
    assert_within_bounds(as_str, raw=True, timed=("fingerprint", "from_request"))
    assert RequestKey.from_request(memoryview(body)) == RequestKey.from_request(body)


def messages_body(count: int) -> bytes:
    """A chat body of ``count`` short messages: user turns, tool calls and their results."""
    messages: list[dict[str, Any]] = []
    for i in range(count):
        if i % 3 == 0:
            messages.append({"role": "user", "content": f"go {i}"})
        elif i % 3 == 1:
            call = {"id": f"c{i}", "function": {"name": "run", "arguments": '{"n":1}'}}
            messages.append({"role": "assistant", "tool_calls": [call]})
        else:
            messages.append({"role": "tool", "tool_call_id": f"c{i - 1}", "content": "no"})
    return json.dumps({"model": "m", "messages": messages}).encode()


@pytest.mark.parametrize("count", fast_and_full(10_000, 100_000))
@pytest.mark.parametrize("name", BACKENDS)
def test_many_messages_in_linear_time_and_memory(name: str, count: int) -> None:
    body = messages_body(count)
    with using(name):
        analysis = intent.analyse(body)
        assert analysis.dialect == "openai_chat"
        assert analysis.intent is not None
        assert analysis.intent.count(b'"role":"tool"') == count // 3
        assert_within_bounds(body, raw=False, timed=REQUEST_PATH, traced=())
        # Under tracemalloc a parse of 100,000 messages takes 3-5 s, so memory is traced
        # on a tenth of the body: the cost per byte is the same.
        traced = messages_body(count // 10)
        assert_within_bounds(traced, raw=False, timed=(), traced=REQUEST_PATH)


@pytest.mark.parametrize("name", BACKENDS)
def test_100000_deep_nesting_is_rejected_quickly(name: str) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    in_messages = b'{"messages":[' + deep + b"]}"
    with using(name):
        for body in (deep, in_messages, deep.decode()):
            check_body(body)
            assert intent.parse(body) is None
            assert_within_bounds(body, raw=False)


DENSE = {
    # The bodies that cost most per byte: hundreds of thousands of tiny values, each a
    # Python object (and, as messages, a canonical message each). Per 100,000 values.
    "empty objects as messages": (b'{"messages":[', b"{},", b"{}]}"),
    "empty strings as messages": (b'{"messages":[', b'"",', b'""]}'),
    "empty lists": (b"[", b"[],", b"[]]"),
    "zeros": (b"[", b"0,", b"0]"),  # half as many bytes per value: 1.5 times the values
}


@pytest.mark.parametrize("values", fast_and_full(20_000, 100_000))
@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("shape", list(DENSE))
def test_dense_bodies_stay_within_the_bound(shape: str, name: str, values: int) -> None:
    """A third of a megabyte (full size) of the worst bodies per byte: a walk quadratic
    in the number of values would take minutes there; the bound allows seconds."""
    head, value, tail = DENSE[shape]
    body = head + value * (values * 3 // 2 if shape == "zeros" else values) + tail
    with using(name):
        assert_within_bounds(body, raw=False, timed=REQUEST_PATH, traced=("fingerprint",))


# --- the CLI's reader ---------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b"1" * 5000,  # over the int/str digit limit: a ValueError that is not a JSONDecodeError
        b'{"messages": [' + b"1" * 5000 + b"]}",
        b'{"messages": []}\n' + b"1" * 5000,  # the same, on a JSON Lines line
        b"[" * 100_000,
        b"\xff\xfe{}",
        b"",
    ],
)
def test_cli_reader_turns_every_bad_file_into_an_input_error(data: bytes) -> None:
    for as_log in (False, True):
        error = reader_error("bad.json", data, as_log)
        assert isinstance(error, InputError)
        assert "bad.json" in str(error)


@HYPOTHESIS
@given(st.binary(max_size=300))
def test_cli_reader_on_arbitrary_bytes(data: bytes) -> None:
    for as_log in (False, True):
        error = reader_error("junk.bin", data, as_log)
        assert error is None or "junk.bin" in str(error)
