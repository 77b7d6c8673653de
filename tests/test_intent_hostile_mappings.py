"""Hostile mappings give the pure-Python answer on every path (issue 12, section 3).

A caller may hand loopfuse an already-parsed body holding objects that run code while
it is read: keys whose ``__hash__``/``__eq__`` change the body during a lookup, dict and
list subclasses that change it while they are walked. The C accelerator (``dumps``,
``too_deep``) runs no Python code: it declines anything but exact JSON types, and what
it does write cannot change under it. So every public function must give, with the C
accelerator on, exactly what it gives with it off -- the same value or the same
exception -- and neither may crash. Each run gets a freshly built body.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopfuse import RequestKey, intent
from loopfuse.intent import _json, _native
from test_intent_speedups import every_path, reference

Body = Any


def outcome(fn: Callable[[], object]) -> object:
    """What ``fn()`` returns, or the type of what it raises (as text)."""
    try:
        return repr(fn())
    except Exception as error:
        return f"raised {type(error).__name__}"


class Key:
    """Equal to the string ``name`` (same hash); each comparison runs ``action`` first."""

    def __init__(self, name: str, action: Callable[[], None]) -> None:
        self.name = name
        self.action = action

    def __hash__(self) -> int:
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        self.action()
        return other == self.name


class StrKey(str):
    """A str key whose comparisons run ``action`` (set after construction)."""

    action: Callable[[], None] = staticmethod(lambda: None)

    def __hash__(self) -> int:
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        self.action()
        return str.__eq__(self, other)


class MutatingDict(dict):  # type: ignore[type-arg]
    """Every read through the mapping API first runs ``action``."""

    action: Callable[[], None] = staticmethod(lambda: None)

    def get(self, key: object, default: object = None) -> object:
        self.action()
        return super().get(key, default)

    def __getitem__(self, key: object) -> object:
        self.action()
        return super().__getitem__(key)

    def items(self) -> Any:
        self.action()
        return super().items()

    def values(self) -> Any:
        self.action()
        return super().values()

    def __iter__(self) -> Iterator[object]:
        self.action()
        return super().__iter__()


class MutatingList(list):  # type: ignore[type-arg]
    action: Callable[[], None] = staticmethod(lambda: None)

    def __iter__(self) -> Iterator[object]:
        self.action()
        return super().__iter__()


def chat() -> Body:
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": '{"a": 1}'}}
    return {
        "model": "m",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "x", "v": 1.5}]},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        ],
        "tools": [{"type": "function", "function": {"name": "ls", "parameters": {}}}],
    }


def vandal(body: Body, how: str) -> Callable[[], None]:
    """An action that changes ``body`` when run: clears it, grows it, or empties lists."""

    def act() -> None:
        messages = body.get("messages") if type(body) is dict else None
        if how == "clear":
            body.clear()
        elif how == "grow" and isinstance(messages, list) and len(messages) < 50:
            messages.append({"role": "user", "content": "more"})
        elif how == "shrink" and isinstance(messages, list) and messages:
            messages.pop()
        elif how == "replace" and isinstance(messages, list) and messages:
            messages[0] = {"role": "user", "content": [1, 2, {"k": None}]}

    return act


HOW = ["clear", "grow", "shrink", "replace"]


def key_in_body(how: str, name: str) -> Body:
    """A body with a Key equal to ``name`` beside (or instead of) the real field."""
    body = chat()
    body[Key(name, vandal(body, how))] = body.pop(name, "junk")
    return body


def key_in_part(how: str) -> Body:
    body = chat()
    part = body["messages"][1]["content"][0]
    part[StrKey("type")] = part.pop("type")
    StrKey.action = staticmethod(vandal(body, how))
    return body


def subclassed(how: str, where: str) -> Body:
    body = chat()
    act = vandal(body, how)
    MutatingDict.action = MutatingList.action = staticmethod(act)
    if where == "message":
        body["messages"][1] = MutatingDict(body["messages"][1])
    elif where == "messages":
        body["messages"] = MutatingList(body["messages"])
        act = vandal(body, how)
        MutatingList.action = staticmethod(act)
    elif where == "call":
        calls = body["messages"][2]["tool_calls"]
        calls[0] = MutatingDict(calls[0])
    elif where == "tools":
        body["tools"] = MutatingList(body["tools"])
    return body


def body_subclass(how: str) -> Body:
    inner = chat()
    body = MutatingDict(inner)
    MutatingDict.action = staticmethod(vandal(body, how))
    return body


CASES: dict[str, Callable[[], Body]] = {}
for _how in HOW:
    for _name in ("messages", "system", "tools", "model", "input"):
        CASES[f"key {_name}, {_how}"] = lambda h=_how, n=_name: key_in_body(h, n)
    CASES[f"str-subclass key in a part, {_how}"] = lambda h=_how: key_in_part(h)
    for _where in ("message", "messages", "call", "tools"):
        CASES[f"subclass {_where}, {_how}"] = lambda h=_how, w=_where: subclassed(h, w)
    CASES[f"the body a dict subclass, {_how}"] = lambda h=_how: body_subclass(h)


PUBLIC: dict[str, Callable[[Body], object]] = {
    "fingerprint": lambda b: intent.fingerprint(b, "/v1/chat/completions"),
    "canonical_json": intent.canonical_json,
    "extract_intent": intent.extract_intent,
    "canonical_intent_bytes": intent.canonical_intent_bytes,
    "detect_dialect": intent.detect_dialect,
    "analyse": lambda b: intent.analyse(b)[1:],
    "from_request": lambda b: RequestKey.from_request(b).value,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_public_functions_give_the_pure_python_answer(name: str) -> None:
    make = CASES[name]
    for function, call in PUBLIC.items():
        results = every_path(lambda call=call: outcome(lambda: call(make())))
        assert len(set(results)) == 1, (function, results)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.skipif(_native._BUILT is None, reason="C extension not built")
def test_the_c_functions_decline_or_agree(name: str) -> None:
    built = _native._BUILT
    assert built is not None
    for limit in (1, 3, intent.MAX_DEPTH):
        written = built.dumps(CASES[name](), limit)
        if written is not None:
            assert written == reference(CASES[name](), limit)
        deep = built.too_deep(CASES[name](), limit)
        if deep is not None:
            with _off():
                assert deep == _json._too_deep(CASES[name](), limit)


class _off:
    def __enter__(self) -> None:
        self.previous = _native.speedups is not None
        _native.set_c_extension(False)

    def __exit__(self, *_: object) -> None:
        _native.set_c_extension(self.previous)


# --- generated: JSON values with hostile objects sprinkled in -------------------------

json_leaf = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(0, 2) | st.text(max_size=4)
json_value = st.recursive(
    json_leaf,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
    max_leaves=10,
)


@st.composite
def hostile_bodies(draw: st.DrawFn) -> Callable[[], Body]:
    """A factory of one generated chat-like body with hostile objects in it."""
    messages = draw(st.lists(json_value | st.just({"role": "user", "content": "x"}), max_size=4))
    extra = draw(st.dictionaries(st.sampled_from(["model", "system", "tools"]), json_value))
    plan = draw(st.lists(st.tuples(st.sampled_from(HOW), st.integers(0, 99)), max_size=4))
    kinds = draw(st.lists(st.sampled_from(["key", "dict", "list", "ordered"]), max_size=4))

    def make() -> Body:
        body: Body = {"messages": [_copy(m) for m in messages], **_copy(extra)}
        for (how, spot), kind in zip(plan, kinds, strict=False):
            containers = _containers(body)
            target = containers[spot % len(containers)]
            act = vandal(body, how)
            if kind == "key" and isinstance(target, dict):
                target[Key("role", act)] = "user"
            elif kind == "dict" and isinstance(target, list) and target:
                target[0] = MutatingDict(target[0]) if isinstance(target[0], dict) else target[0]
                MutatingDict.action = staticmethod(act)
            elif kind == "list" and isinstance(target, dict):
                target["content"] = MutatingList(["a", {"type": "text", "text": "b"}])
                MutatingList.action = staticmethod(act)
            elif kind == "ordered" and isinstance(target, list):
                target.append(collections.OrderedDict(role="user", content="o"))
        return body

    return make


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _containers(value: Any) -> list[Any]:
    found = [value]
    for child in value.values() if isinstance(value, dict) else value:
        if type(child) in (dict, list):
            found += _containers(child)
    return found


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_bodies())
def test_generated_hostile_bodies_give_the_pure_python_answer(make: Callable[[], Body]) -> None:
    for call in (PUBLIC["fingerprint"], PUBLIC["analyse"], PUBLIC["canonical_json"]):
        results = every_path(lambda call=call: outcome(lambda: call(make())))
        assert len(set(results)) == 1, results


def test_a_hostile_key_does_run_during_the_python_walk() -> None:
    """The cases are hostile for real: a lookup runs the key's code."""
    ran: list[int] = []
    body = chat()
    body[Key("messages", lambda: ran.append(1))] = body.pop("messages")
    intent.extract_intent(body)
    assert ran
