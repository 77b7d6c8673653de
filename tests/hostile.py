"""Shared pieces of the hostile-input tests: the entry-point checks, the documented
bounds and the hypothesis strategies (see test_reliability_hostile.py)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from conftest import json_backend as using
from loopfuse import LoopBreaker, LoopDecision, RequestKey, Verdict, intent, scan
from loopfuse.cli.config import Settings
from loopfuse.cli.decisions import scan_file
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
    """The CLI's ``InputError`` for ``data`` (read, then replayed: a log is read line by
    line as it is replayed), or ``None`` when every request in it was replayed. A bad
    line of a log that also holds requests is a problem naming its line."""
    try:
        source = read_bytes(name, data, log=as_log)
        _, problems = scan_file(source, Settings())
    except InputError as exc:
        return exc
    if problems:
        return InputError(name, problems[0])
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
    parsed = intent.parse(value)
    if isinstance(value, str):
        # A str is body text: parsed as its UTF-8 bytes are ("0" is the number 0).
        try:
            encoded = value.encode()
        except UnicodeEncodeError:
            pass  # a lone surrogate: no bytes to compare with
        else:
            assert repr(parsed) == repr(intent.parse(encoded))
    else:
        assert parsed is value or parsed is None
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
