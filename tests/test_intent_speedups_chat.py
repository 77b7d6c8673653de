"""The C ``chat_intent`` (loopfuse.intent._speedups) against the Python reference.

Whenever the C function does not decline (return ``None``), its intent must equal what
``_chat.chat_intent`` builds -- with the same key order in every dict and the same types
-- and its three flags must equal the ``Walk``'s. It may decline only where a value is
not of an exact JSON type (a subclass, a tuple, ...): every body below made of JSON
values must be handled in C.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import sys
import tracemalloc
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hostile
import test_intent_dialects as dialects
import test_intent_fingerprint as fingerprints
from loopfuse.intent import _chat, _json, _parts

speedups = pytest.importorskip("loopfuse.intent._speedups")

Body = dict[str, Any]
ROOT = Path(__file__).resolve().parent.parent


# What the intent module passes the C walk for tool-call argument strings.
parse_arguments = _parts.parse_argument_string


def c_intent(body: object, parse: Callable[[str], Any] = parse_arguments) -> Any:
    """The C walk as ``intent`` calls it: with orjson as the backend, short argument
    strings go to orjson first (``trusted_loader``), the rest to ``parse``."""
    if parse is not parse_arguments:
        return speedups.chat_intent(body, parse, _json.NOT_JSON)
    loader = _json.trusted_loader()
    return speedups.chat_intent(body, parse, _json.NOT_JSON, loader, _parts.SHORT_ARGUMENTS)


def keys_of(value: object) -> object:
    """Every dict's keys, in order, and every value's exact type, recursively."""
    if type(value) is dict:
        return ("dict", [(k, keys_of(v)) for k, v in value.items()])
    if type(value) is list:
        return ("list", [keys_of(v) for v in value])
    return type(value).__name__


def assert_same(c: object, py: object) -> None:
    assert repr(c) == repr(py)
    assert keys_of(c) == keys_of(py)
    if "nan" not in repr(py):  # parsed NaNs are distinct objects, never equal
        assert c == py


def check(body: Body) -> bool:
    """Run both; True when C declined. Neither may change the body."""
    before = repr(body)
    walk = _parts.Walk()
    py = _chat.chat_intent(body, walk)
    result = c_intent(body)
    assert repr(body) == before, "the body changed"
    if result is None:
        return True
    assert type(result) is tuple
    assert len(result) == 4
    intent, anthropic, ollama, trusted = result
    assert_same(intent, py)
    assert (anthropic, ollama, trusted) == (walk.anthropic, walk.ollama, walk.ok)
    return False


def check_handled(body: Body) -> None:
    assert not check(body), "C declined a body of JSON values"


# --- explicit cases: every branch of _chat.py and of the _parts.py helpers it uses ----

CALL = {"id": "call_1", "type": "function", "function": {"name": "run", "arguments": "{}"}}
LONG_ARGUMENTS = json.dumps({"text": "x" * 600, "n": [1, 2.5, None, True]})
DEEP_ARGUMENTS = "[" * 300 + "]" * 300  # deeper than MAX_DEPTH: kept as a string


def user(content: object, **extra: object) -> Body:
    return {"role": "user", "content": content, **extra}


def assistant(content: object = None, **extra: object) -> Body:
    return {"role": "assistant", "content": content, **extra}


def call(call_id: object, name: object = "run", arguments: object = "{}") -> Body:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def tool(call_id: object, content: object = "ok", **extra: object) -> Body:
    return {"role": "tool", "tool_call_id": call_id, "content": content, **extra}


def chat(*messages: object, **extra: object) -> Body:
    return {"model": "m", "messages": list(messages), **extra}


PARTS: list[object] = [
    "plain",
    "",
    {"type": "text", "text": "t", "cache_control": {"type": "ephemeral"}},
    {"type": "text", "text": ""},
    {"type": "input_text", "text": "in"},
    {"type": "output_text", "text": "out", "annotations": []},
    {"type": "text", "text": None, "id": "x", "status": "done"},
    {"type": "text", "text": 5},
    {"type": "text"},
    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
    {"type": "thinking", "thinking": ""},
    {"type": "thinking", "thinking": 3},
    {"type": "thinking"},
    {"type": "redacted_thinking", "data": "opaque"},
    {"type": "reasoning", "encrypted_content": "x", "summary": []},
    {"type": "image_url", "image_url": {"url": "data:x", "detail": "low"}},
    {"type": "image_url", "image_url": {"url": "https://a/b.png"}},
    {"type": "image_url", "image_url": {"url": "u", "detail": None}},
    {"type": "image_url", "image_url": {"detail": "high"}},
    {"type": "image_url", "image_url": "https://a/b.png"},
    {"type": "image_url", "image_url": None},
    {"type": "image_url", "image_url": [1, 2]},
    {"type": "image_url"},
    {"type": "input_image", "image_url": "u", "detail": "auto"},
    {"type": "input_image", "file_id": "file_1"},
    {"type": "input_image", "image_url": None, "file_id": None, "detail": None},
    {"type": "input_image", "image_url": "u", "file_id": "f", "detail": "low", "id": "x"},
    {"type": "image", "source": {"type": "base64", "data": "AAAA"}, "cache_control": {}},
    {"type": "document", "id": "d", "call_id": "c", "tool_call_id": "t", "tool_use_id": "u",
     "cache_control": 1, "signature": 2, "thoughtSignature": 3, "thought_signature": 4,
     "encrypted_content": 5, "status": 6, "kept": 7, "idx": 8},
    {"type": 7, "text": "not a text part"},
    {"type": None},
    {"type": ["text"], "text": "x"},
    {"text": "no type"},
    {},
    {1: "int key", None: "none key", 2.5: "float key", "id": "dropped"},
    {True: "bool key", "type": "text"},
    None,
    0,
    1.5,
    True,
    [1, "x"],
    "é\u2603\U0001f600\ud800",
]  # fmt: skip

CASES: dict[str, Body] = {
    "empty": chat(),
    "string content": chat(user("hi"), assistant("hello")),
    "parts as user content": chat(user(PARTS)),
    "parts as assistant content": chat(assistant(PARTS)),
    "parts as system content": chat({"role": "system", "content": PARTS}),
    "parts as tool content": chat(assistant(None, tool_calls=[CALL]), tool("call_1", PARTS)),
    "each part alone": chat(*(user(part) for part in PARTS)),
    "each part as a list": chat(*(user([part]) for part in PARTS)),
    "each part as top-level system": chat(user("x"), system=PARTS),
    "system string": chat(user("x"), system="be brief"),
    "system dict": chat(user("x"), system={"type": "text", "text": "s"}),
    "system junk": chat(user("x"), system=5),
    "system null": chat(user("x"), system=None),
    "leading system and developer": chat(
        {"role": "system", "content": "a"},
        {"role": "developer", "content": [{"type": "text", "text": "b"}]},
        {"role": "system", "content": None},
        user("q"),
        {"role": "system", "content": "late"},
        {"role": "developer", "content": ["later", 5]},
        system=["top"],
    ),
    "system after a junk message": chat(5, {"role": "system", "content": "late"}),
    "system after an unknown role": chat({"role": 7}, {"role": "system", "content": "s"}),
    "openai chat": dialects.openai_chat(),
    "anthropic": dialects.anthropic(),
    "ollama": dialects.ollama(),
    "legacy function_call": chat(
        user("weather?"),
        assistant(None, function_call={"name": "weather", "arguments": '{"city": "Oslo"}'}),
        {"role": "function", "name": "weather", "content": "rain"},
        {"role": "function", "name": None, "content": "no name"},
        {"role": "function", "content": ["x"]},
        {"role": "function", "name": 5},
        functions=[{"name": "weather", "parameters": {"type": "object"}}],
    ),
    "function_call junk": chat(
        assistant("a", function_call="not a dict"),
        assistant("b", function_call={"arguments": None}),
        assistant("c", function_call={"name": 3, "arguments": [1]}),
        assistant("d", function_call={}),
    ),
    "function results by name": chat(
        assistant(None, function_call={"name": "a", "arguments": "{}"},
                  tool_calls=[{"function": {"name": "b", "arguments": {}}}]),
        {"role": "function", "name": "a", "content": "1"},
        {"role": "function", "name": "b", "content": "2"},
        {"role": "function", "name": "b", "content": "3"},
        {"role": "function", "name": "", "content": "4"},
    ),
    "custom tool calls": chat(
        assistant(None, tool_calls=[
            {"id": "c1", "type": "custom", "custom": {"name": "apply_patch", "input": "*** Begin"}},
            {"id": "c2", "type": "custom", "custom": {"name": "p", "input": '{"a": 1}'}},
            {"id": "c3", "function": None, "custom": {"name": "q"}},
            {"id": "c4", "function": None, "custom": None, "name": "flat", "arguments": "[1]"},
        ]),
        tool("c2", "done"),
    ),
    "tool call shapes": chat(
        assistant("x", tool_calls=[
            call("a", "run", '{"cmd": "ls"}'),
            call("b", "run", "not json"),
            call("c", "run", ""),
            call("d", "run", "{"),
            call("e", None, None),
            call("f", 5, [1, 2]),
            call("g", "run", {"ollama": "object"}),
            call("h", "run", 7),
            call("i", "run", LONG_ARGUMENTS),
            call("j", "run", DEEP_ARGUMENTS),
            call("k", "run", '"just a string"'),
            call("l", "run", "null"),
            {"function": {"name": "no_id", "arguments": "{}"}},
            {"function": {"name": "input_only", "input": '{"x": 1}'}},
            {"function": {"name": "both", "arguments": None, "input": None}},
            {"function": "not a dict", "name": "flat", "arguments": '{"y": 2}'},
            {"function": [1], "name": None},
            {"name": "flat only", "arguments": {"z": 3}, "id": "m"},
            {},
            "junk call",
            None,
            7,
            ["a", "list"],
        ]),
    ),
    "tool_calls junk": chat(
        assistant("a", tool_calls={"name": "x"}),
        assistant("b", tool_calls="x"),
        assistant("c", tool_calls=None),
        assistant("d", tool_calls=[]),
        assistant("e", tool_calls=5),
    ),
    "arguments not trusted": chat(
        assistant(None, tool_calls=[call("a", "run", '{"x": NaN}')]),
        assistant(None, tool_calls=[call("b", "run", "[1e-7, 1e400]")]),
        assistant(None, tool_calls=[call("c", "run", "123456789012345678901234567890")]),
    ),
    "ollama thinking, images and tool_name": chat(
        user("look", images=["aGk=", "b2s="]),
        user(["a list", {"type": "text", "text": "b"}], images=["ignored with list content"]),
        user(None, images=None),
        user("x", images="not a list"),
        user("y", images=[None, 1, {"a": 1}]),
        assistant("", thinking="Let me see.", tool_calls=[
            {"function": {"name": "run", "arguments": {"cmd": "ls"}}},
            {"function": {"name": "read", "arguments": {}}},
        ]),
        {"role": "tool", "tool_name": "read", "content": "r"},
        {"role": "tool", "tool_name": "read", "content": "r again"},
        {"role": "tool", "content": "by order"},
        {"role": "tool", "name": "run", "content": "by name"},
        {"role": "tool", "tool_name": None, "name": "run", "content": "tool_name wins"},
        {"role": "tool", "tool_name": 5, "content": "junk name"},
        assistant("t", thinking=""),
        assistant(None, thinking=5),
        assistant([{"type": "text", "text": "x"}], thinking="first"),
    ),
    "anthropic blocks": chat(
        user([{"type": "text", "text": "q", "cache_control": {"type": "ephemeral"}}]),
        assistant([
            {"type": "thinking", "thinking": "hmm", "signature": "s"},
            {"type": "redacted_thinking", "data": "x"},
            {"type": "text", "text": "calling"},
            {"type": "tool_use", "id": "toolu_1", "name": "run", "input": {"cmd": "ls"}},
            {"type": "tool_use", "id": "toolu_2", "name": "read", "input": None},
            {"type": "tool_use", "id": "toolu_3", "name": None, "input": '{"s": 1}'},
            {"type": "tool_use", "id": "toolu_4", "input": [1]},
        ]),
        user([
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "file"},
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                {"type": "text", "text": "out"}, {"type": "image", "source": {}}],
             "is_error": True},
            {"type": "tool_result", "tool_use_id": "toolu_3", "is_error": 1},
            {"type": "tool_result", "tool_use_id": "toolu_4", "is_error": "true"},
            {"type": "tool_result", "tool_use_id": "nope", "is_error": False},
            {"type": "tool_result"},
        ]),
        user([{"type": "tool_result", "tool_use_id": "toolu_1"}, "and text",
              {"type": "thinking", "thinking": "user thinking?"},
              {"type": "redacted_thinking"}]),
        user([{"type": "tool_result", "tool_use_id": "toolu_1"}, ""]),
        user([]),
        user([{"type": "redacted_thinking", "data": "x"}]),
        user([None, 5, {"type": None}, {"type": 3}]),
        assistant([None, 5, "s", {"type": None}, {"type": "thinking"}, {"no": "type"}]),
        assistant({"type": "text", "text": "dict content"}),
        assistant(5),
        user({"type": "tool_result", "tool_use_id": "toolu_1"}),
        system=[{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
    ),
    "results link by id": chat(
        assistant(None, tool_calls=[call("a"), call("b"), call("a"), call(None), call(7)]),
        tool("b"), tool("a"), tool("c"), tool(None), tool(""), tool(7), tool(["a"]),
    ),
    "results without ids link by name then order": chat(
        assistant(None, tool_calls=[{"function": {"name": n, "arguments": {}}}
                                    for n in ("x", "y", "x", "")]),
        tool(None, name="x"), tool(None, name="x"), tool(None), tool(None, name="z"),
        tool(None, name=""), tool(None), tool(None), tool(None),
    ),
    "results before any call": chat(tool("a"), tool(None, name="x"), tool(None)),
    "results after a turn without calls": chat(
        assistant(None, tool_calls=[call("a")]), assistant("no calls"), tool("a"),
    ),
    "calls mixing ids and none": chat(
        assistant(None, tool_calls=[call("a"), {"function": {"name": "b", "arguments": {}}}],
                  function_call={"name": "c", "arguments": "{}"}),
        tool(None, name="b"), tool("a"), tool("b"),
    ),
    "messages that are not dicts": chat(None, 5, "text", ["list"], {"a": 1}, 2.5, True),
    "roles that are not known": chat(
        {"role": "model", "content": "gemini-ish"},
        {"role": "", "content": ["x"]},
        {"role": "USER", "content": None},
        {"role": None, "content": "x"},
        {"role": 5, "content": "x"},
        {"role": ["user"], "content": "x"},
        {"role": {"a": 1}},
        {"content": "no role"},
        {},
    ),
    "tools: openai, anthropic, flat, gemini, built-in": chat(
        user("x"),
        tools=[
            {"type": "function", "function": {"name": "a", "description": "d",
                                              "parameters": {"type": "object"}, "strict": True}},
            {"type": "function", "function": {"name": "b", "description": None,
                                              "parameters": None, "strict": None}},
            {"type": "function", "function": {"name": "c",
                                              "parametersJsonSchema": {"type": "object"}}},
            {"type": "function", "function": {"name": "d", "parameters_json_schema": {}}},
            {"type": "function", "function": {"parametersJsonSchema": None,
                                              "parameters_json_schema": {"x": 1}}},
            {"type": "function", "function": {}},
            {"name": "e", "description": "anthropic", "input_schema": {"type": "object"},
             "cache_control": {"type": "ephemeral"}},
            {"name": "f", "input_schema": None, "parameters": {"not": "used"}},
            {"type": "function", "name": "g", "parameters": {"type": "object"}, "strict": False},
            {"type": "function", "name": "h", "parametersJsonSchema": {"p": 1}},
            {"type": "function", "description": "no name"},
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 5, "id": "x"},
            {"type": "code_interpreter", "container": {"type": "auto"}},
            {"functionDeclarations": [{"name": "i", "parameters": {}},
                                      {"name": "j", "description": "d"}, "junk", None]},
            {"function_declarations": [{"name": "k"}], "codeExecution": {}},
            {"functionDeclarations": None, "function_declarations": [{"name": "not used"}]},
            {"functionDeclarations": [], "id": "only volatile keys beside"},
            {"functionDeclarations": [], "googleSearch": {}, "id": "x"},
            {"functionDeclarations": "not a list", "type": "x"},
            {"function": "not a dict", "type": "function", "name": "l"},
            {"function": None, "input_schema": {"s": 1}, "name": "m"},
            {"type": ["function"], "name": "n"},
            {},
            None,
            "a string tool",
            5,
            [1],
        ],
    ),
    "tools null, functions present": chat(user("x"), tools=None, functions=[{"name": "f"}]),
    "tools empty": chat(user("x"), tools=[]),
    "tools a dict": chat(user("x"), tools={"type": "function"}),
    "tools a string": chat(user("x"), tools="all"),
    "functions only": chat(user("x"), functions=[{"name": "f", "parameters": {}}]),
    "functions junk": chat(user("x"), functions=5),
    "unicode": chat(
        {"role": "system", "content": "\u00e9\u2603\U0001f600"},
        user("\ud800 lone surrogate"),
        assistant("\x00", tool_calls=[call("\u2603", "\u00e9", '{"\u00e9": "\\ud800"}')]),
        tool("\u2603", "\U0001f600"),
    ),
    "nested junk copied as is": chat(
        user([[[[[[{"deep": [[[1]]]}]]]]]]), {"role": "unknown", "value": [[[[[]]]]]},
        tools=[[[[{}]]]],
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("backend", hostile.BACKENDS)
def test_explicit_case(name: str, backend: str) -> None:
    with hostile.using(backend):
        check_handled(CASES[name])


def test_explicit_cases_reach_every_flag() -> None:
    flags = set()
    for body in CASES.values():
        _, anthropic, ollama, trusted = c_intent(body)
        flags |= {("anthropic", anthropic), ("ollama", ollama), ("trusted", trusted)}
    assert flags == {(f, b) for f in ("anthropic", "ollama", "trusted") for b in (False, True)}


def test_the_repr_shape_of_an_intent() -> None:
    """The doctested shape: key order included."""
    intent, *_ = c_intent(dialects.openai_chat())
    assert repr(intent) == repr(_chat.chat_intent(dialects.openai_chat()))
    assert list(intent) == ["messages", "system", "tools"]
    assert list(intent["messages"][1]) == ["role", "content", "tool_calls"]
    assert list(intent["messages"][2]) == ["role", "call", "content"]


# --- the existing tables --------------------------------------------------------------


def existing_bodies() -> list[tuple[str, Body]]:
    out = []
    for name, make in dialects.DIALECTS.items():
        out.append((name, make()))
        for table in (dialects.SAME, dialects.DIFFERENT):
            for dialect, what, change in table:
                if dialect == name:
                    out.append((f"{name}: {what}", dialects.edit(make(), change)))
    out.append(("fingerprint CHAT", json.loads(fingerprints.CHAT)))
    return [(name, body) for name, body in out if isinstance(body.get("messages"), list)]


EXISTING = existing_bodies()


@pytest.mark.parametrize(("name", "body"), EXISTING, ids=[name for name, _ in EXISTING])
def test_bodies_of_the_dialect_tests(name: str, body: Body) -> None:
    check_handled(body)


def test_existing_tables_were_found() -> None:
    assert len(EXISTING) >= 25


# --- generated bodies -----------------------------------------------------------------

WORDS = ["", "hi", "Fix the test.", "\u00e9\u2603", "\U0001f600", "\ud800", "call_1"]
texts = st.sampled_from(WORDS) | st.text(max_size=6)
ids = st.sampled_from(["call_1", "call_2", "toolu_1", ""]) | st.none()
names = st.sampled_from(["run", "read", "ls", ""])
KEYS = ["id", "type", "text", "name", "status", "cache_control", "content", "arguments"]
junk = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-2, 2)
    | st.floats(allow_nan=False)
    | texts
    | st.sampled_from([2**64, -(2**63) - 1, 10**30]),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(KEYS), c, max_size=3),
    max_leaves=8,
)
json_dicts = st.dictionaries(st.sampled_from(["path", "n", "cmd"]), junk, max_size=3)
argument_strings = (
    st.builds(json.dumps, json_dicts)
    | st.sampled_from(["not json", "{", "", "null", "[1, 2]", '{"x": NaN}', "[1e-7]", "1" * 30])
    | st.just(LONG_ARGUMENTS)
    | st.just(DEEP_ARGUMENTS)
    | st.text(max_size=5)
)


def shuffled(strategy: st.SearchStrategy[Body]) -> st.SearchStrategy[Body]:
    """The dicts of ``strategy`` with their keys in any order."""
    return strategy.flatmap(lambda d: st.permutations(list(d.items())).map(dict))


class Shapes:
    """Body strategies; ``mixed`` puts junk of any JSON type in every field."""

    def __init__(self, mixed: bool) -> None:
        def j(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
            return strategy | junk if mixed else strategy

        def obj(required: dict[str, Any], optional: dict[str, Any] | None = None) -> Any:
            return shuffled(
                st.fixed_dictionaries(
                    {k: j(v) for k, v in required.items()},
                    optional={k: j(v) for k, v in (optional or {}).items()},
                )
            )

        volatile = {"id": texts, "cache_control": st.just({"type": "ephemeral"})}
        text_part = obj(
            {"type": st.sampled_from(["text", "input_text", "output_text"]), "text": texts},
            volatile,
        )
        image = obj({"url": texts}, {"detail": st.sampled_from(["low", "high"]) | st.none()})
        part = j(
            texts
            | text_part
            | obj({"type": st.just("thinking"), "thinking": texts}, {"signature": texts})
            | obj({"type": st.sampled_from(["redacted_thinking", "reasoning"])}, {"data": texts})
            | obj({"type": st.just("image_url"), "image_url": image | texts})
            | obj(
                {"type": st.just("input_image")},
                {"image_url": texts, "file_id": texts, "detail": texts},
            )
            | obj({"type": st.just("image"), "source": json_dicts}, volatile)
        )
        content = j(texts | st.none() | st.lists(part, max_size=3))
        arguments = argument_strings | json_dicts
        tool_use = obj({"type": st.just("tool_use"), "id": ids, "name": names, "input": json_dicts})
        tool_result = obj(
            {"type": st.just("tool_result"), "tool_use_id": ids},
            {"content": content, "is_error": st.sampled_from([True, False, 1, "true"])},
        )
        function = obj({"name": names}, {"arguments": arguments, "input": texts})
        raw_call = j(
            obj({"id": ids, "type": st.just("function"), "function": function})
            | obj({"function": obj({"name": names, "arguments": json_dicts})})
            | obj({"id": ids, "type": st.just("custom"), "custom": function})
            | obj({"name": names, "arguments": arguments}, {"id": ids})
        )
        system = obj({"role": st.sampled_from(["system", "developer"])}, {"content": content})
        message = j(
            system
            | obj(
                {"role": st.just("user")},
                {
                    "content": content | st.lists(j(part | tool_result), max_size=3),
                    "images": st.lists(texts, max_size=2),
                },
            )
            | obj(
                {"role": st.just("assistant")},
                {
                    "content": content | st.lists(j(part | tool_use), max_size=3),
                    "thinking": texts,
                    "tool_calls": st.lists(raw_call, max_size=3),
                    "function_call": obj({"name": names}, {"arguments": arguments}),
                },
            )
            | obj(
                {"role": st.just("tool"), "content": content},
                {"tool_call_id": ids, "name": names, "tool_name": names},
            )
            | obj({"role": st.just("function"), "content": content}, {"name": names})
            | obj({"role": st.sampled_from(["model", "", "USER"])}, {"content": content})
        )
        declaration = obj(
            {"name": names},
            {
                "description": texts | st.none(),
                "parameters": json_dicts | st.none(),
                "parametersJsonSchema": json_dicts,
                "strict": st.booleans() | st.none(),
            },
        )
        a_tool = j(
            obj({"type": st.just("function"), "function": declaration})
            | obj({"name": names, "input_schema": json_dicts}, {"description": texts})
            | obj({"type": st.just("function"), "name": names}, {"parameters": json_dicts})
            | obj(
                {"functionDeclarations": st.lists(j(declaration), max_size=2)},
                {"id": texts, "googleSearch": json_dicts},
            )
            | obj({"type": st.sampled_from(["web_search", "code_interpreter"])}, volatile)
        )
        tools = j(st.lists(a_tool, max_size=3) | st.none())
        self.body = shuffled(
            st.fixed_dictionaries(
                {"messages": st.lists(message, max_size=6)},
                optional={
                    "model": texts,
                    "system": content,
                    "tools": tools,
                    "functions": tools,
                    "temperature": st.floats(0, 2),
                },
            )
        )


WELL_FORMED = Shapes(mixed=False).body
MIXED = Shapes(mixed=True).body
SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(WELL_FORMED)
def test_well_formed_bodies(body: Body) -> None:
    check_handled(body)


@SETTINGS
@given(MIXED)
def test_bodies_with_junk_in_every_field(body: Body) -> None:
    check_handled(body)


@SETTINGS
@given(hostile.chat_body)
def test_hostile_chat_bodies(body: Body) -> None:
    """NaN, huge integers and lone surrogates included (tests/hostile.py)."""
    if isinstance(body.get("messages"), list):
        check_handled(body)


@SETTINGS
@given(fingerprints.roots)
def test_junk_roots_of_the_fingerprint_tests(body: Body) -> None:
    if isinstance(body.get("messages"), list):
        check_handled(body)


@settings(max_examples=200, deadline=None)
@given(MIXED.map(json.dumps), st.sampled_from(hostile.BACKENDS))
def test_parsed_bodies(raw: str, backend: str) -> None:
    """Bodies as the library sees them: parsed by either backend."""
    with hostile.using(backend):
        check_handled(_json.load(raw))


# --- declining ------------------------------------------------------------------------


class Str(str):
    __slots__ = ()


class Dict(dict):  # type: ignore[type-arg]
    pass


class List(list):  # type: ignore[type-arg]
    pass


FOREIGN: list[Callable[[], object]] = [
    lambda: Str("text"),
    lambda: Dict(type="text", text="t"),
    lambda: List(["x"]),
    lambda: ("a", "tuple"),
    lambda: b"bytes",
    lambda: object(),
    lambda: OrderedDict(role="user", content="hi"),
]

DECLINED: dict[str, Callable[[], Body]] = {
    "body is a dict subclass": lambda: Dict(messages=[]),
    "messages is a list subclass": lambda: {"messages": List([])},
    "a message is a dict subclass": lambda: chat(OrderedDict(role="user", content="hi")),
    "a message is a tuple": lambda: chat(("role", "user")),
    "content is a str subclass": lambda: chat(user(Str("hi"))),
    "content is a tuple": lambda: chat(user(("hi",))),
    "a part is a str subclass": lambda: chat(user(["a", Str("b")])),
    "a part is a dict subclass": lambda: chat(user([Dict(type="text", text="t")])),
    "a part key is a tuple": lambda: chat(user([{("k",): 1, "type": "x"}])),
    "a block key is a tuple, after others": lambda: chat(
        user([{"type": "text", "text": "t", "detail": "d", ("k",): 1}])),
    "a part key is a tuple, after others": lambda: chat(
        {"role": "system", "content": [{"type": "text", "text": "t", ("k",): 1}]}),
    "an image key is a tuple, after others": lambda: chat(
        user([{"type": "image_url", "image_url": {"url": "u", ("k",): 1}}])),
    "a call key is a tuple, after others": lambda: chat(
        assistant(tool_calls=[{"id": "i", "function": {"name": "n"}, ("k",): 1}])),
    "a function key is a tuple, after others": lambda: chat(
        assistant(tool_calls=[{"id": "i", "function": {"name": "n", ("k",): 1}}])),
    "a declaration key is a tuple, after others": lambda: chat(
        tools=[{"type": "function", "function": {"name": "n", ("k",): 1}}]),
    "a message key is a tuple": lambda: chat({"role": "user", "content": "c", ("k",): 1}),
    "a tool key is a tuple": lambda: chat(tools=[{"name": "n", "input_schema": {}, ("k",): 1}]),
    "a part type is a str subclass": lambda: chat(user([{"type": Str("text"), "text": "t"}])),
    "a text is a str subclass": lambda: chat(user([{"type": "text", "text": Str("t")}])),
    "arguments are a str subclass": lambda: chat(
        assistant(None, tool_calls=[call("a", "run", Str("{}"))])
    ),
    "a call id is a tuple": lambda: chat(assistant(None, tool_calls=[call(("a",))])),
    "a call name is a str subclass": lambda: chat(assistant(tool_calls=[call("a", Str("n"))])),
    "a result id is a str subclass": lambda: chat(tool(Str("a"))),
    "a tool is a dict subclass": lambda: chat(tools=[Dict(name="x")]),
    "tools is a tuple": lambda: chat(tools=({"name": "x"},)),
    "a system is a tuple": lambda: chat(system=("s",)),
    "images is a list subclass": lambda: chat(user("x", images=List(["a"]))),
    "thinking is a str subclass": lambda: chat(assistant("x", thinking=Str("t"))),
    "a thinking text is a str subclass": lambda: chat(
        user([{"type": "thinking", "thinking": Str("t")}])),
    "an image_url is a tuple": lambda: chat(user([{"type": "image_url", "image_url": ("u",)}])),
    "a system part type is a str subclass": lambda: chat(
        {"role": "system", "content": [{"type": Str("text"), "text": "t"}]}),
    "a declaration is a dict subclass": lambda: chat(
        tools=[{"functionDeclarations": [Dict(name="x")]}]),
    "a tool function is a dict subclass": lambda: chat(tools=[{"function": Dict(name="x")}]),
    "a tool type is a str subclass": lambda: chat(tools=[{"type": Str("function"), "name": "x"}]),
    "a call is a dict subclass": lambda: chat(assistant(tool_calls=[Dict(name="x")])),
    "a call function is a dict subclass": lambda: chat(
        assistant(tool_calls=[{"function": Dict(name="x")}])),
    "tool_calls is a tuple": lambda: chat(assistant(tool_calls=("x",))),
    "function_call is a dict subclass": lambda: chat(assistant(function_call=Dict(name="x"))),
    "a block is a str subclass": lambda: chat(assistant([Str("x")])),
    "a block type is a str subclass": lambda: chat(assistant([{"type": Str("tool_use")}])),
    "a result block type is a str subclass": lambda: chat(user([{"type": Str("tool_result")}])),
    "a function name is a str subclass": lambda: chat(
        {"role": "function", "name": Str("f"), "content": "c"}),
    "a tool_name is a str subclass": lambda: chat(
        {"role": "tool", "tool_name": Str("f"), "content": "c"}),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(DECLINED))
def test_declines_on_types_it_cannot_mirror(name: str) -> None:
    body = DECLINED[name]()
    _chat.chat_intent(body, _parts.Walk())  # Python copes with them all
    assert c_intent(body) is None


def test_a_str_subclass_role_is_an_unknown_message_in_both() -> None:
    """``type(role) is not str``: no isinstance there, so nothing to decline."""
    check_handled(chat({"role": Str("user"), "content": "hi"}))


@st.composite
def sprinkled(draw: st.DrawFn) -> Body:
    """A mixed body with a few values replaced by objects of foreign types."""
    body = draw(MIXED)
    rng = draw(st.randoms(use_true_random=False))

    def walk(value: object) -> object:
        if rng.random() < 0.08:
            return rng.choice(FOREIGN)()
        if type(value) is dict:
            return {k: walk(v) for k, v in value.items()}
        if type(value) is list:
            return [walk(v) for v in value]
        return value

    return {k: walk(v) if k != "messages" else [walk(m) for m in v] for k, v in body.items()}


def test_foreign_types_decline_or_agree() -> None:
    declined: list[bool] = []

    @SETTINGS
    @given(sprinkled())
    def run(body: Body) -> None:
        declined.append(check(body))

    run()
    # Both outcomes are exercised: foreign values where Python only copies them are
    # handled, the others decline.
    assert any(declined)
    assert not all(declined)


# --- errors ---------------------------------------------------------------------------


def test_an_exception_of_parse_arguments_propagates() -> None:
    body = chat(assistant(None, tool_calls=[call("a", "run", '{"x": 1}')]))

    def boom(arguments: str) -> tuple[object, bool]:
        raise ZeroDivisionError(arguments)

    with pytest.raises(ZeroDivisionError, match="x"):
        c_intent(body, boom)


@pytest.mark.parametrize("returned", [None, (1,), (1, True, 2), [1, True], "ab"])
def test_parse_arguments_must_return_a_pair(returned: object) -> None:
    body = chat(assistant(None, tool_calls=[call("a")]))
    with pytest.raises(TypeError, match="parse_arguments"):
        c_intent(body, lambda _: returned)


def test_the_trusted_flag_is_a_truth_value() -> None:
    body = chat(assistant(None, tool_calls=[call("a")]))
    assert c_intent(body, lambda _: ({}, 0))[3] is False
    assert c_intent(body, lambda _: ({}, "yes"))[3] is True
    assert c_intent(body, lambda _: (_json.NOT_JSON, False))[3] is True  # kept as sent

    class Bad:
        def __bool__(self) -> bool:
            raise ValueError("no truth")

    with pytest.raises(ValueError, match="no truth"):
        c_intent(body, lambda _: ({}, Bad()))


def test_wrong_number_of_arguments() -> None:
    with pytest.raises(TypeError):
        speedups.chat_intent({"messages": []})
    with pytest.raises(TypeError):
        speedups.chat_intent({"messages": []}, parse_arguments, _json.NOT_JSON, None, 1, 2)
    with pytest.raises(TypeError):  # a fast parser that is not callable is called, and fails
        speedups.chat_intent(_tool_call_body(), parse_arguments, _json.NOT_JSON, 1, 99)
    with pytest.raises(TypeError):
        speedups.chat_intent({"messages": []}, parse_arguments, _json.NOT_JSON, len, "99")


def _tool_call_body() -> Body:
    call = {"id": "c", "function": {"name": "f", "arguments": "{}"}}
    return {"messages": [{"role": "assistant", "tool_calls": [call]}]}


def test_missing_or_junk_messages_decline() -> None:
    for body in ({}, {"messages": None}, {"messages": "x"}, {"messages": {"a": 1}}):
        assert c_intent(body) is None


def containers(value: object, leaves: bool = False) -> list[Any]:
    """Every dict and list inside ``value`` (every object with ``leaves``), outermost first."""
    found: list[Any] = []
    if isinstance(value, dict):
        found.append(value)
        for key, item in value.items():
            found += containers(key, leaves) + containers(item, leaves)
    elif isinstance(value, list):
        found.append(value)
        for item in value:
            found += containers(item, leaves)
    elif leaves:
        found.append(value)
    return found


def test_the_callback_may_mutate_the_body_without_crashing() -> None:
    """Breaks the contract; must still be memory-safe (the result is not checked)."""
    for at in range(1, 9):  # the body has 8 argument strings
        body = chat(
            user([{"type": "text", "text": "q"}]),
            assistant([{"type": "tool_use", "id": "a", "name": "n", "input": "{}"}],
                      thinking="t", tool_calls=[call(f"c{i}", f"n{i}", "{}") for i in range(5)],
                      function_call={"name": "f", "arguments": "{}"}),
            tool("c1", ["result"]),
            assistant(None, tool_calls=[{"custom": {"name": "p", "input": "x"}}]),
            tools=[{"name": "x", "input_schema": {}}],
        )  # fmt: skip
        everything = containers(body)
        seen: list[str] = []

        def vandal(
            arguments: str, everything: list[Any] = everything, seen: list[str] = seen, at: int = at
        ) -> tuple[object, bool]:
            seen.append(arguments)
            if len(seen) == at:
                for container in everything:
                    container.clear()
                everything.clear()
                gc.collect()
            return {"x": [arguments * 2]}, True

        c_intent(body, vandal)
        assert body == {}


# --- references and memory ------------------------------------------------------------


def benchmark_body() -> Body:
    spec = importlib.util.spec_from_file_location("bodies", ROOT / "benchmarks" / "bodies.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return json.loads(module.agent_request_bytes())  # parsed: keys shared, as in use


def test_the_benchmark_body() -> None:
    check_handled(benchmark_body())


def junk_declining_body() -> Body:
    """Most of the walk done before it declines, deep inside the last message."""
    body = benchmark_body()
    body["messages"].append(assistant(None, tool_calls=[call("z", "run", Str("{}"))]))
    return body


def small_declining_body() -> Body:
    return chat(user([{"type": "text", "text": "t"}]), assistant("x", tool_calls=[call("a")]),
                tool("a", [("tuple",)]))  # fmt: skip


def referenced(body: Body) -> list[object]:
    """A few objects inside the body, of every kind the walk holds references to."""
    messages = body["messages"]
    assistant_message = next(m for m in messages if m["role"] == "assistant")
    raw = assistant_message["tool_calls"][0]
    return [
        body,
        messages,
        messages[0],
        messages[0]["content"],
        next(iter(messages[0])),  # a key object: the walk keeps the ones it met
        assistant_message,
        assistant_message["tool_calls"],
        raw,
        raw["id"],
        raw["function"],
        raw["function"]["arguments"],
        body["tools"][0],
        body["tools"][0]["function"]["parameters"],
    ]


# Shared objects the walk puts in an intent or compares with: a reference lost or kept
# there changes no memory figure, only their counts.
KEY_NAMES = ["role", "content", "tool", "call", "name", "arguments", "type", "image", "messages"]
SHARED: list[object] = [None, True, False, 0, 1, 2, 3, "", *map(sys.intern, KEY_NAMES)]


def counts(objects: list[object]) -> str:
    """The reference counts, as text: a list of them would hold small ints itself."""
    gc.collect()
    return repr([sys.getrefcount(o) for o in objects])


def call_many(body: Body, times: int, declines: bool | None = None) -> None:
    """``times`` calls; each declines when ``declines`` says so (None: either)."""
    for _ in range(times):
        declined = c_intent(body) is None
        assert declines is None or declined == declines


@pytest.mark.parametrize(
    "make", [benchmark_body, junk_declining_body, small_declining_body], ids=lambda f: f.__name__
)
def test_reference_counts_are_unchanged(make: Callable[[], Body]) -> None:
    body = make()
    if "tools" not in body:
        body["tools"] = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    objects = referenced(body)
    expected = c_intent(body) is None
    call_many(body, 5)  # warm up: specialised bytecode, parser caches
    before, shared = counts(objects), counts(SHARED)
    call_many(body, 500, expected)
    # Measured before any assert here: a rewritten assert keeps references to None.
    after, shared_after = counts(objects), counts(SHARED)
    assert after == before
    assert shared_after == shared


def assert_counts_kept(body: Body, declines: bool) -> None:
    """50 calls leave the reference counts of the body's objects and of SHARED as they were."""
    call_many(body, 5, declines)  # warm up: specialised bytecode, parser caches
    objects = containers(body, leaves=True)
    before, shared = counts(objects), counts(SHARED)
    call_many(body, 50, declines)
    after, shared_after = counts(objects), counts(SHARED)
    assert after == before
    assert shared_after == shared


@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_counts_are_unchanged_in_every_case(name: str) -> None:
    assert_counts_kept(CASES[name], declines=False)


@pytest.mark.parametrize("name", sorted(DECLINED))
def test_reference_counts_are_unchanged_when_declining(name: str) -> None:
    assert_counts_kept(DECLINED[name](), declines=True)


def test_reference_counts_after_an_exception() -> None:
    body = benchmark_body()
    objects = referenced(body)

    def boom(arguments: str) -> tuple[object, bool]:
        raise ZeroDivisionError

    def attempts(times: int) -> None:
        for _ in range(times):
            with pytest.raises(ZeroDivisionError):
                c_intent(body, boom)

    attempts(5)
    before, shared = counts(objects), counts(SHARED)
    attempts(200)
    after, shared_after = counts(objects), counts(SHARED)
    assert after == before
    assert shared_after == shared


def traced_growth(body: Body, calls: int, parse: Callable[[str], Any] = parse_arguments) -> int:
    """Bytes still allocated after ``calls`` more calls than a warm-up of the same."""
    for _ in range(50):  # warm up free lists, the interned strings, hypothesis, ...
        c_intent(body, parse)
    gc.collect()
    tracemalloc.start()
    try:
        for _ in range(20):
            c_intent(body, parse)
        gc.collect()
        start, _ = tracemalloc.get_traced_memory()
        for _ in range(calls):
            c_intent(body, parse)
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return end - start


@pytest.mark.parametrize(
    ("make", "calls"),
    [(benchmark_body, 3_000), (junk_declining_body, 3_000), (small_declining_body, 20_000)],
    ids=["benchmark", "benchmark-declining", "small-declining"],
)
def test_no_memory_grows_over_many_calls(make: Callable[[], Body], calls: int) -> None:
    # One object of 32 bytes leaked per call would be calls * 32 bytes, far above this.
    assert traced_growth(make(), calls) < 16 * 1024


def test_no_memory_grows_when_parse_arguments_raises() -> None:
    body = benchmark_body()

    def raising(arguments: str) -> tuple[object, bool]:
        if '"start": 190' in arguments:  # the last call of the body
            raise ZeroDivisionError
        return parse_arguments(arguments)

    def attempt() -> None:
        with pytest.raises(ZeroDivisionError):
            c_intent(body, raising)

    for _ in range(20):
        attempt()
    gc.collect()
    tracemalloc.start()
    try:
        for _ in range(20):
            attempt()
        gc.collect()
        start, _ = tracemalloc.get_traced_memory()
        for _ in range(2_000):
            attempt()
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert end - start < 16 * 1024


NOMEMORY_CASES = [
    "anthropic blocks",
    "tool call shapes",
    "tools: openai, anthropic, flat, gemini, built-in",
    "ollama thinking, images and tool_name",
    "results link by id",
    "parts as tool content",
    "legacy function_call",
]
PARSED = ({"parsed": [1]}, False)


def constant_parse(arguments: str) -> tuple[object, bool]:
    """A parser that allocates nothing (orjson does not survive failed allocations)."""
    return PARSED


def sweep_failed_allocations(body: Body, expected: object, testcapi: Any) -> list[str]:
    """One call per allocation to fail (the first, the second, ...), as text outcomes:
    holding the results would hold references."""
    outcomes = []
    for start in range(1_500):
        testcapi.set_nomemory(start, start + 1)
        try:
            result = speedups.chat_intent(body, constant_parse, _json.NOT_JSON)
        except MemoryError:
            outcomes.append("MemoryError")
        else:
            outcomes.append("same" if result == expected else repr(result))
        finally:
            testcapi.remove_mem_hooks()
        result = None
    return outcomes


@pytest.mark.parametrize("name", NOMEMORY_CASES)
def test_a_failed_allocation_anywhere_raises_memory_error(name: str) -> None:
    """Every error path: each allocation of a call fails in turn, once."""
    testcapi = pytest.importorskip("_testcapi")
    body = json.loads(json.dumps(CASES[name]))
    expected = c_intent(body, constant_parse)
    objects = containers(body, leaves=True)
    # A first sweep: the interpreter keeps a few references the first time an
    # exception passes through a frame; a leak of ours repeats in every sweep.
    sweep_failed_allocations(body, expected, testcapi)
    before, shared = counts(objects), counts(SHARED)
    outcomes = sweep_failed_allocations(body, expected, testcapi)
    after, shared_after = counts(objects), counts(SHARED)
    assert after == before
    assert shared_after == shared
    assert set(outcomes) == {"MemoryError", "same"}
    assert outcomes[-1] == "same"  # the last runs allocate less than 1,500 times
