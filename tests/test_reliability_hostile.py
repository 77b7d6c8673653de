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

import gc
import json
import logging
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from blake3 import blake3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopfuse import LoopBreaker, LoopDecision, RequestKey, Verdict, intent, scan
from loopfuse.cli.readers import InputError, read_bytes
from loopfuse.errors import InvalidInputError, LoopfuseError
from loopfuse.intent import _json as json_impl

BACKENDS = ["json", "orjson"] if json_impl._orjson is not None else ["json"]
MiB = 1024 * 1024

# The documented bounds (docs/reliability.md, SECURITY.md).
SECONDS_PER_MB = 10.0  # parsed bodies; measured worst 3.8 s/MB (see docs/reliability.md)
SECONDS_FIXED = 1.0
RAW_SECONDS_PER_MB = 0.1  # bodies over MAX_BODY_BYTES, hashed raw; measured ~1 ms/MB
PEAK_BYTES_PER_BODY_BYTE = 300  # tracemalloc peak; measured worst ~150x, agent bodies ~17x
RAW_PEAK_BYTES_PER_BODY_BYTE = 3  # over MAX_BODY_BYTES; measured 1.0x (one copy)
PEAK_FIXED = 4 * MiB


@contextmanager
def using(name: str) -> Iterator[None]:
    original = json_impl.json_backend()
    json_impl._set_backend(name)
    try:
        yield
    finally:
        json_impl._set_backend(original)


class Records(logging.Handler):
    """Collects what is logged on the ``loopfuse`` logger (hypothesis-safe, unlike caplog)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def loopfuse_log() -> Iterator[Records]:
    logger = logging.getLogger("loopfuse")
    handler = Records()
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def check_body(body: bytes | str, path: str = "") -> tuple[object, ...]:
    """Every entry point on a bytes/str body: none raises, and they agree with each other."""
    value = intent.load(body)
    parsed = intent.parse(body)
    assert (parsed is None) == (value is intent.NOT_JSON or value is None)
    extracted = intent.extract_intent(body)
    if extracted is not None:
        assert isinstance(extracted, dict)
        assert isinstance(extracted["messages"], list)
        assert set(extracted) <= {"system", "messages", "tools"}
    fingerprint = intent.fingerprint(body, path)
    assert 0 <= fingerprint < 2**64
    analysis = intent.analyse(body)
    assert (analysis.intent is None) == (extracted is None)
    assert analysis.intent == intent.canonical_intent_bytes(body)
    assert analysis.dialect == intent.detect_dialect(body)
    assert (analysis.dialect in intent.DIALECTS) == (extracted is not None)
    with loopfuse_log() as log:
        breaker = LoopBreaker(clock=lambda: 0.0)
        decision = breaker.check_request("session", body, path)
    assert isinstance(decision, LoopDecision)
    assert decision.allowed
    assert decision.error is None
    assert decision.fingerprint == fingerprint
    assert breaker.internal_errors == 0
    assert not log.records
    verdict = scan(body)  # documented as never raising
    assert isinstance(verdict, Verdict)
    assert verdict.ok or (extracted is not None and verdict.message)
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    for as_log in (False, True):  # the CLI's reader: a source, or an InputError naming the file
        error = reader_error("body.json", raw, as_log)
        assert error is None or "body.json" in str(error)
    key = RequestKey.from_request(body, path)
    assert key.digest is not None
    assert len(key.digest) == 32
    assert key.value == int.from_bytes(key.digest[:8], "little")
    if type(value) is dict or type(value) is list:
        # The same request handed over already parsed is the same request.
        assert intent.fingerprint(value, path) == fingerprint
        assert RequestKey.from_request(value, path).digest == key.digest
        assert intent.analyse(value).intent == analysis.intent
    return fingerprint, key.digest, analysis.dialect, analysis.intent


def reader_error(name: str, data: bytes, as_log: bool) -> InputError | None:
    """The CLI reader's ``InputError`` for ``data``, or ``None`` when it read it."""
    try:
        read_bytes(name, data, log=as_log)
    except InputError as exc:
        return exc
    return None


def check_body_both_backends(body: bytes | str, path: str = "") -> None:
    results = []
    for name in BACKENDS:
        with using(name):
            results.append(check_body(body, path))
    assert all(result == results[0] for result in results), "backends disagree"


def outcome(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, or the ``LoopfuseError`` it raised (anything else propagates)."""
    try:
        return fn(*args)
    except LoopfuseError as exc:
        return exc


def check_parsed(value: object, path: str = "", *, json_typed: bool) -> None:
    """Every entry point on an already-parsed value: a result or an ``InvalidInputError``.

    ``json_typed``: the value holds only JSON types (NaN, big integers and lone
    surrogates included), nested within MAX_DEPTH, so nothing may raise at all.
    """
    assert intent.parse(value) is value or intent.parse(value) is None
    extracted = intent.extract_intent(value)  # documented as never raising
    intent.detect_dialect(value)
    assert isinstance(scan(value), Verdict)  # never raises, whatever the value holds
    results = {
        "fingerprint": outcome(intent.fingerprint, value, path),
        "analyse": outcome(intent.analyse, value),
        "from_request": outcome(RequestKey.from_request, value, path),
    }
    for name, result in results.items():
        if isinstance(result, LoopfuseError):
            assert isinstance(result, InvalidInputError), name
            assert not json_typed, f"{name} raised {result!r} on a JSON value"
    if extracted is not None and not isinstance(results["analyse"], LoopfuseError):
        assert results["analyse"].intent is not None
    failed = isinstance(results["fingerprint"], LoopfuseError)
    for fail_closed in (False, True):
        with loopfuse_log() as log:
            breaker = LoopBreaker(clock=lambda: 0.0, fail_closed=fail_closed)
            decision = breaker.check_request("session", value, path)
        assert isinstance(decision, LoopDecision)
        assert breaker.internal_errors == int(failed)
        if failed:
            assert decision.allowed is not fail_closed
            assert decision.error is not None
            assert decision.fingerprint is None
            assert [r.levelno for r in log.records] == [logging.WARNING]
        else:
            assert decision.allowed
            assert decision.error is None
            assert decision.fingerprint == results["fingerprint"]
            assert not log.records


# --- strategies ---------------------------------------------------------------------

WORDS = [
    "",
    "user",
    "assistant",
    "tool",
    "system",
    "developer",
    "function",
    "model",
    "text",
    "input_text",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "image_url",
    "input_image",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "reasoning",
    "message",
    "call_1",
    "\ud800",
    "\udfff\ud800",
    "é\x00\u2028",
]
# Lone surrogates included: a Python str may hold them, JSON text may escape them.
chars = st.characters(codec=None, exclude_categories=())
text = st.sampled_from(WORDS) | st.text(chars, max_size=8)
numbers = (
    st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([2**64, -(2**63) - 1, 10**400, 5e-324, 1e-7, 1e16, -0.0])
)
scalars = st.none() | st.booleans() | numbers | text
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(text, children, max_size=4),
    max_leaves=12,
)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The right shape, or junk of any JSON type in its place."""
    return strategy | json_values


def obj(required: dict[str, Any], optional: dict[str, Any]) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries(
        {k: maybe(v) for k, v in required.items()},
        optional={k: maybe(v) for k, v in optional.items()},
    )


arguments = st.builds(json.dumps, json_values) | text
part = maybe(
    obj(
        {"type": st.sampled_from(WORDS)},
        {
            "text": text,
            "thinking": text,
            "signature": text,
            "image_url": text | st.fixed_dictionaries({"url": text}),
            "input": json_values,
            "id": text,
            "tool_use_id": text,
            "content": text | st.lists(json_values, max_size=2),
            "is_error": st.booleans(),
            "name": text,
            "cache_control": json_values,
        },
    )
    | text
)
content = text | st.lists(part, max_size=3)
chat_call = obj(
    {"id": text, "type": st.just("function")},
    {"function": obj({"name": text}, {"arguments": arguments | json_values, "input": text})},
)
chat_message = obj(
    {"role": st.sampled_from(WORDS)},
    {
        "content": content,
        "tool_calls": st.lists(chat_call, max_size=2),
        "tool_call_id": text,
        "name": text,
        "function_call": obj({"name": text}, {"arguments": arguments}),
        "thinking": text,
        "images": st.lists(text, max_size=2),
        "tool_name": text,
    },
)
tool = obj(
    {"type": st.just("function")},
    {
        "function": obj({"name": text}, {"parameters": json_values, "description": text}),
        "name": text,
        "input_schema": json_values,
        "functionDeclarations": st.lists(obj({"name": text}, {"parameters": json_values})),
    },
)
chat_body = obj(
    {"messages": st.lists(chat_message, max_size=5)},
    {
        "model": text,
        "system": content,
        "tools": st.lists(tool, max_size=2),
        "functions": st.lists(tool, max_size=1),
        "temperature": numbers,
        "stream": st.booleans(),
        "options": json_values,
        "keep_alive": json_values,
        "anthropic_version": text,
    },
)
responses_item = obj(
    {"type": st.sampled_from(WORDS)},
    {
        "role": st.sampled_from(WORDS),
        "content": content,
        "call_id": text,
        "name": text,
        "arguments": arguments,
        "output": content,
        "input": text,
        "id": text,
    },
)
responses_body = obj(
    {"input": text | st.lists(responses_item, max_size=5)},
    {"instructions": content, "tools": st.lists(tool, max_size=2), "model": text},
)
gemini_part = obj(
    {},
    {
        "text": text,
        "thought": st.booleans(),
        "thoughtSignature": text,
        "functionCall": obj({"name": text}, {"args": json_values, "id": text}),
        "functionResponse": obj({"name": text}, {"response": json_values, "id": text}),
        "inlineData": json_values,
    },
)
gemini_body = obj(
    {"contents": st.lists(obj({}, {"role": text, "parts": st.lists(gemini_part) | gemini_part}))},
    {
        "systemInstruction": obj({}, {"parts": st.lists(gemini_part, max_size=2)}),
        "system_instruction": content,
        "tools": st.lists(tool, max_size=2),
        "generationConfig": json_values,
    },
)
dialect_bodies = chat_body | responses_body | gemini_body


@st.composite
def serialised(draw: st.DrawFn, values: st.SearchStrategy[Any]) -> bytes | str:
    """A value written as JSON text the ways clients write it, valid UTF-8 or not."""
    value = draw(values)
    ascii_only = draw(st.booleans())
    try:
        text_ = json.dumps(value, ensure_ascii=ascii_only)  # NaN/Infinity as the stdlib writes
    except ValueError:  # an integer over this process's int/str digit limit
        text_ = json.dumps(str(value))
    form = draw(st.sampled_from(["str", "bytes"]))
    if form == "str":
        return text_
    return text_.encode("utf-8", "surrogatepass")  # lone surrogates: invalid UTF-8


@st.composite
def mutated(draw: st.DrawFn, bodies: st.SearchStrategy[bytes | str]) -> bytes:
    """A serialised body with a few bytes flipped, dropped or inserted."""
    body = draw(bodies)
    raw = bytearray(body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(raw)))
        op = draw(st.sampled_from(["flip", "drop", "insert"]))
        if op == "flip" and at < len(raw):
            raw[at] = draw(st.integers(0, 255))
        elif op == "drop" and at < len(raw):
            del raw[at]
        else:
            raw.insert(at, draw(st.sampled_from(b'{}[]",:\\\x00\xff\xc3\xed0-eE')))
    return bytes(raw)


paths = st.sampled_from(
    ["", "/v1/chat/completions", "/v1beta/models/gemini-2.0-flash:generateContent?key=k"]
) | st.text(chars, max_size=10)

HYPOTHESIS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


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


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(serialised(dialect_bodies), paths)
def test_every_dialect_with_fields_of_the_wrong_type(body: bytes | str, path: str) -> None:
    check_body_both_backends(body, path)


@HYPOTHESIS
@given(mutated(serialised(dialect_bodies)), paths)
def test_dialect_bodies_with_corrupted_bytes(body: bytes, path: str) -> None:
    check_body_both_backends(body, path)


@HYPOTHESIS
@given(dialect_bodies | json_values, paths)
def test_parsed_json_values_never_raise(value: Any, path: str) -> None:
    # A body is a mapping or a list (a str is body text); a bare number is not a body.
    is_body = isinstance(value, dict | list | str)
    for name in BACKENDS:
        with using(name):
            check_parsed(value, path, json_typed=is_body)


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


def test_a_50_mb_body_is_hashed_raw_in_linear_time_and_memory() -> None:
    message = b'{"role":"user","content":"' + b"x" * 90 + b'"},'
    body = b'{"model":"m","messages":[' + message * (50 * MiB // len(message)) + b"{}]}"
    assert len(body) > 3 * intent.MAX_BODY_BYTES
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


@pytest.mark.parametrize("name", BACKENDS)
def test_100000_messages_in_linear_time_and_memory(name: str) -> None:
    body = messages_body(100_000)
    with using(name):
        analysis = intent.analyse(body)
        assert analysis.dialect == "openai_chat"
        assert analysis.intent is not None
        assert analysis.intent.count(b'"role":"tool"') == 33_333
        assert_within_bounds(body, raw=False, timed=REQUEST_PATH, traced=())
        # Under tracemalloc a parse of 100,000 messages takes 3-5 s, so memory is traced
        # on a tenth of the body: the cost per byte is the same.
        assert_within_bounds(messages_body(10_000), raw=False, timed=(), traced=REQUEST_PATH)


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
    # Python object (and, as messages, a canonical message each).
    "empty objects as messages": b'{"messages":[' + b"{}," * 100_000 + b"{}]}",
    "empty strings as messages": b'{"messages":[' + b'"",' * 100_000 + b'""]}',
    "empty lists": b"[" + b"[]," * 100_000 + b"[]]",
    "zeros": b"[" + b"0," * 150_000 + b"0]",
}


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("shape", list(DENSE))
def test_dense_bodies_stay_within_the_bound(shape: str, name: str) -> None:
    """A third of a megabyte of the worst bodies per byte: a walk quadratic in the
    number of values would take minutes here; the bound allows seconds."""
    body = DENSE[shape]
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
        with pytest.raises(InputError, match=r"bad\.json"):
            read_bytes("bad.json", data, log=as_log)


@HYPOTHESIS
@given(st.binary(max_size=300))
def test_cli_reader_on_arbitrary_bytes(data: bytes) -> None:
    for as_log in (False, True):
        error = reader_error("junk.bin", data, as_log)
        assert error is None or "junk.bin" in str(error)
