"""Determinism: the same input gives the same fingerprint, key and verdict in any process.

Fingerprints and request keys are state shared across workers and hosts (a breaker
window or a cached answer may be looked up by another process), so they must not depend
on anything but the input: not on ``PYTHONHASHSEED``, not on whether orjson or the C
FNV extension is installed, not on the interpreter's integer-to-string digit limit
(``PYTHONINTMAXSTRDIGITS`` / ``sys.set_int_max_str_digits``), not on call order.

One script (:data:`COMPUTE`) computes everything for a corpus of hostile bodies; this
process runs it with each JSON backend, and fresh interpreters run it under varied
environments. All results must be identical.
"""

from __future__ import annotations

import base64
import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from loopfuse.intent import _json as json_impl

GUARD = 120.0  # seconds a child interpreter may take; only reached when something hangs

COMPUTE = r"""
import base64, json, sys
from loopfuse import LoopBreaker, RequestKey, intent
from loopfuse.dedup import fnv


def decode(item):
    kind, data, path = item
    raw = base64.b64decode(data)
    return (raw if kind == "b" else raw.decode("utf-8", "surrogatepass")), path


def compute(corpus, strings, conversations):
    out = {"bodies": [], "parsed": [], "strings": [], "messages": [], "verdicts": []}
    bodies = [decode(item) for item in corpus]
    for body, path in bodies:
        key = RequestKey.from_request(body, path)
        analysis = intent.analyse(body)
        canon = intent.canonical_intent_bytes(body)
        out["bodies"].append([
            intent.fingerprint(body, path), key.value, key.digest.hex(), analysis.dialect,
            None if canon is None else canon.hex(), intent.detect_dialect(body),
            intent.parse(body) is None,
        ])
        value = intent.load(body)
        if type(value) in (dict, list):  # the same body, handed over already parsed
            parsed_key = RequestKey.from_request(value, path)
            out["parsed"].append([intent.fingerprint(value, path), parsed_key.digest.hex()])
    for text in strings:
        a = RequestKey.from_str(text)
        b = RequestKey.from_bytes(text.encode("utf-8", "surrogatepass"))
        out["strings"].append([a.value, a.digest.hex(), b.value, b.digest.hex()])
    for pairs in conversations:
        key = RequestKey.from_messages([tuple(pair) for pair in pairs])
        out["messages"].append([key.value, key.digest.hex()])
    now = [0.0]
    breaker = LoopBreaker(window=30, max_repeats=2, clock=lambda: now[0])
    for round_ in range(3):
        for index, (body, path) in enumerate(bodies):
            now[0] += 0.001
            decision = breaker.check_request(f"session-{index % 7}", body, path)
            out["verdicts"].append([decision.allowed, decision.repeats, decision.fingerprint])
    out["env"] = [intent.json_backend(), fnv.backend(), sys.get_int_max_str_digits()]
    return out
"""

PRELUDE = {
    "no_orjson": "import sys; sys.modules['orjson'] = None\n",
    "no_c_fnv": "import sys; sys.modules['loopfuse.dedup._fnv'] = None\n",
}

CHILD = "import json, sys\n{compute}\nprint(json.dumps(compute(*json.load(sys.stdin))))\n"


def _nested(depth: int) -> bytes:
    return b"[" * depth + b'"x"' + b"]" * depth


def hostile_bodies() -> list[tuple[bytes | str, str]]:
    """Hand-written hostile bodies: one of each trap the parsers and the intent can fall in."""
    chat = b'{"model":"gpt-4o","messages":[{"role":"user","content":%s}]}'
    bodies: list[bytes | str] = [
        b"",
        b"\xff\xfe\x00junk",
        b"\xed\xa0\x80",  # a surrogate encoded in UTF-8: not valid UTF-8
        b'\xef\xbb\xbf{"input":"bom"}',
        b'{"input":"trailing"} x',
        b'  {"input":"spaces"}  ',
        b"null",
        b"12345678901234567890123",
        b'"just a string"',
        chat % b"NaN",
        chat % b"[Infinity, -Infinity, NaN, 1e400, -1e400]",
        chat % b"[1e-7, 1e16, -0.0, 5e-324, 1.7976931348623157e308, 0.1, 1.0]",
        chat % (b"[" + b"7" * 25 + b", -" + b"9" * 20 + b", 18446744073709551616]"),
        chat % (b"[" + b"1" * 700 + b"]"),  # over a 640-digit int limit, under the default
        chat % (b"[" + b"3" * 5000 + b"]"),  # over the default 4300-digit int limit
        b'{"input":"x","temperature":' + b"9" * 5000 + b"}",
        chat % b'"\\ud800 lone \\udfff surrogates \\udc00\\ud800"',
        chat % b'"\\u0000\\u001f\\u2028\\u2029 \xc3\xa9 \xf0\x9f\x98\x80"',
        b'{"input":"first","input":"second","input":"dup wins"}',
        b'{"messages":[{"role":"user","content":"a","content":"b"}],"model":"m","model":"n"}',
        chat % _nested(240),
        _nested(250),
        _nested(253),  # root array + 253 = MAX_DEPTH: the deepest JSON
        _nested(254),  # one too deep: raw bytes
        b"[" * 100_000 + b"]" * 100_000,
        b'{"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function",'
        b'"function":{"name":"run","arguments":"' + b"[" * 300 + b"]" * 300 + b'"}}]},'
        b'{"role":"tool","tool_call_id":"c1","content":"ok"}]}',
        b'{"messages":[{"role":["not","a","role"],"content":{"x":1}},7,null,'
        b'{"role":"assistant","tool_calls":"junk","function_call":[1]}],"tools":{"no":"list"}}',
        b'{"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],'
        b'"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":5}]}]}',
        b'{"contents":[{"role":"model","parts":{"functionCall":{"name":1,"args":"x"}}},'
        b'{"parts":[{"functionResponse":{"name":"f","response":[NaN]}},{"text":7}]}],'
        b'"systemInstruction":{"parts":"s"}}',
        b'{"input":[{"type":"function_call","call_id":[],"name":"f","arguments":"{\\"a\\":1}"},'
        b'{"type":"function_call_output","call_id":"x","output":[1,2]},{"type":"reasoning"},'
        b'"junk"],"instructions":7}',
        b'{"model":"llama3","messages":[{"role":"user","content":"hi","images":["aGk="]}],'
        b'"options":{"num_predict":5},"keep_alive":-1}',
        "str body with a lone surrogate \ud800 and é",
        '{"input":"str body \ud83d\ude00 \udfff"}',
    ]
    paths = ["", "/v1/chat/completions", "/v1beta/models/gemini-2.0-flash:generateContent?key=k"]
    return [(body, paths[index % len(paths)]) for index, body in enumerate(bodies)]


def random_bodies(count: int, seed: int) -> list[tuple[bytes | str, str]]:
    """Random JSON-ish bodies and byte mutations of them, reproducible from ``seed``."""
    rng = random.Random(seed)
    words = ["user", "assistant", "tool", "system", "model", "text", "tool_use", "é", "\ud800"]

    def value(depth: int) -> Any:
        roll = rng.random()
        if depth > 3 or roll < 0.4:
            return rng.choice(
                [
                    rng.choice(words),
                    rng.randint(-(2**70), 2**70),
                    rng.uniform(-1e20, 1e20),
                    rng.choice([0.0, -0.0, 1e-7, float("nan"), float("inf")]),
                    None,
                    rng.random() < 0.5,
                ]
            )
        if roll < 0.7:
            return [value(depth + 1) for _ in range(rng.randint(0, 4))]
        return {rng.choice(words): value(depth + 1) for _ in range(rng.randint(0, 4))}

    shapes: list[Callable[[], Any]] = [
        lambda: {"model": "m", "messages": [{"role": rng.choice(words), "content": value(1)}]},
        lambda: {"input": [value(1), {"type": "function_call", "arguments": json.dumps(value(1))}]},
        lambda: {"contents": [{"role": rng.choice(words), "parts": value(1)}]},
        lambda: value(0),
    ]
    out: list[tuple[bytes | str, str]] = []
    for _ in range(count):
        text = json.dumps(rng.choice(shapes)(), ensure_ascii=rng.random() < 0.5)
        body: bytes | str = text
        if rng.random() < 0.6:
            raw = bytearray(text.encode("utf-8", "surrogatepass"))
            for _ in range(rng.randint(0, 3)):  # flip, drop or insert a byte
                at = rng.randrange(len(raw) + 1)
                op = rng.random()
                if op < 0.33 and at < len(raw):
                    raw[at] = rng.randrange(256)
                elif op < 0.66 and at < len(raw):
                    del raw[at]
                else:
                    raw.insert(at, rng.randrange(256))
            body = bytes(raw)
        out.append((body, rng.choice(["", "/v1/responses", "/api/chat"])))
    return out


def encode_corpus(items: list[tuple[bytes | str, str]]) -> list[list[str]]:
    # base64 both ways: JSON would turn a str's adjacent lone surrogates into one character.
    return [
        ["b", base64.b64encode(body).decode(), path]
        if isinstance(body, bytes)
        else ["s", base64.b64encode(body.encode("utf-8", "surrogatepass")).decode(), path]
        for body, path in items
    ]


STRINGS = ["", "a", "foobar", "\ud800", "é\x00\x01", "ZeBy0peECuI", "XD3ym_8xz-J", "x" * 10_000]
CONVERSATIONS = [
    [],
    [["user", "What is Rust?"]],
    [["u", "x\x01y\x00z"]],
    [["u", "x"], ["y", "z"]],
    [["system", "\ud83d"], ["user", ""]],
]
CORPUS = encode_corpus(hostile_bodies() + random_bodies(150, seed=20240607))
ARGS = [CORPUS, STRINGS, CONVERSATIONS]


def compute_here() -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(COMPUTE, "COMPUTE", "exec"), namespace)
    # A JSON round trip, as the children's output takes, so that NaN-free results compare.
    result: dict[str, Any] = json.loads(json.dumps(namespace["compute"](*ARGS)))
    return result


def without_env(result: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in result.items() if name != "env"}


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    """The results in this process, with the default backend."""
    return compute_here()


def test_both_json_backends_agree_in_this_process(reference: dict[str, Any]) -> None:
    if json_impl._orjson is None:
        pytest.skip("orjson is not installed")
    original = json_impl.json_backend()
    results = {}
    try:
        for name in ("json", "orjson"):
            json_impl._set_backend(name)
            results[name] = compute_here()
    finally:
        json_impl._set_backend(original)
    assert results["json"]["env"][0] == "json"
    assert results["orjson"]["env"][0] == "orjson"
    assert without_env(results["json"]) == without_env(results["orjson"])
    assert without_env(results["orjson"]) == without_env(reference)


def test_the_same_call_twice_gives_the_same_result(reference: dict[str, Any]) -> None:
    assert without_env(compute_here()) == without_env(reference)


# Each child varies several things at once; together they cover every variable twice.
CHILDREN = {
    "seed0": ({"PYTHONHASHSEED": "0"}, []),
    "seed1-stdlib-json": ({"PYTHONHASHSEED": "1"}, ["no_orjson"]),
    "seed4242-unlimited-int-digits-pure-fnv": (
        {"PYTHONHASHSEED": "4242", "PYTHONINTMAXSTRDIGITS": "0"},
        ["no_c_fnv"],
    ),
    "random-seed-stdlib-json-640-int-digits": (
        {"PYTHONHASHSEED": "random", "PYTHONINTMAXSTRDIGITS": "640"},
        ["no_orjson"],
    ),
    "seed123-640-int-digits": ({"PYTHONHASHSEED": "123", "PYTHONINTMAXSTRDIGITS": "640"}, []),
}


def run_child(env_changes: dict[str, str], preludes: list[str]) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONINTMAXSTRDIGITS",)}
    env.update(env_changes)
    code = "".join(PRELUDE[name] for name in preludes) + CHILD.format(compute=COMPUTE)
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(ARGS),
        env=env,
        capture_output=True,
        text=True,
        timeout=GUARD,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("name", list(CHILDREN))
def test_a_new_process_gives_the_same_results(name: str, reference: dict[str, Any]) -> None:
    env_changes, preludes = CHILDREN[name]
    child = run_child(env_changes, preludes)
    backend, fnv_backend, int_digits = child["env"]
    # The child really ran in the environment it was meant to (else the test proves nothing).
    assert backend == ("json" if "no_orjson" in preludes else json_impl.json_backend())
    if "no_c_fnv" in preludes:
        assert fnv_backend == "python"
    if "PYTHONINTMAXSTRDIGITS" in env_changes:
        assert int_digits == int(env_changes["PYTHONINTMAXSTRDIGITS"])
    for part in ("bodies", "parsed", "strings", "messages", "verdicts"):
        assert child[part] == reference[part], part


def test_the_corpus_exercises_every_outcome(reference: dict[str, Any]) -> None:
    """Guards the corpus itself: fallbacks, every dialect and refusals all occur."""
    dialects = {row[3] for row in reference["bodies"]}
    assert {"openai_chat", "openai_responses", "anthropic", "gemini", "ollama", None} <= dialects
    assert any(row[6] for row in reference["bodies"])  # some bodies are not JSON
    assert len(reference["parsed"]) > 50
    assert any(not allowed for allowed, _, _ in reference["verdicts"])


def test_the_integer_digit_limit_is_fixed_not_the_process_setting() -> None:
    """Integers of up to 4300 digits (CPython's default limit) are numbers, read as the
    double they round to, whatever ``sys.set_int_max_str_digits`` says; longer ones make
    the body "not JSON" (raw-bytes fallback), also whatever it says."""
    from loopfuse import RequestKey, intent

    at_limit = b"[" + b"3" * 4300 + b", -" + b"3" * 4300 + b", " + b"7" * 700 + b"]"
    past_limit = b"[" + b"3" * 4301 + b"]"
    body = b'{"input":"x","n":' + b"1" * 700 + b"}"
    same = b'{"input":"x","n":1e999}'
    previous = sys.get_int_max_str_digits()
    try:
        for limit in (previous, 640, 0):
            sys.set_int_max_str_digits(limit)
            for name in ("json", "orjson") if json_impl._orjson is not None else ("json",):
                with_backend(name)
                assert intent.parse(at_limit) == [float("inf"), float("-inf"), float("inf")]
                assert intent.parse(past_limit) is None
                assert intent.canonical_json(intent.parse(at_limit)) == b"[null,null,null]"
                assert RequestKey.from_request(body) == RequestKey.from_request(same)
    finally:
        sys.set_int_max_str_digits(previous)
        with_backend(ORIGINAL_BACKEND)


ORIGINAL_BACKEND = json_impl.json_backend()


def with_backend(name: str) -> None:
    json_impl._set_backend(name)
