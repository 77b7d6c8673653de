"""Tool results link to their calls in time linear in the turn, exactly as before.

Fingerprints are shared state (stores keep them across processes and versions), so the
linear :class:`~loopfuse.intent._parts.CallLinker` must give every result the very
index the old, quadratic one gave (kept in ``call_linking_reference.py`` as the oracle):
checked operation by operation on random turns (duplicate, missing, junk and unhashable
ids, names, results before any call, Responses turns that grow call by call), with the
indexed path forced on small turns too, and body by body in every dialect.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import strategies as st

from call_linking_reference import ReferenceCallLinker
from conftest import fast_and_full, run_property
from conversation_bodies import bodies
from hostile import dialect_bodies
from loopfuse import intent
from loopfuse.intent import _chat, _parts, gemini, openai_responses

CALL_IDS = st.sampled_from(["a", "b", "c", "", None, 7, ["x"], {"k": 1}])
RESULT_IDS = st.sampled_from(["a", "b", "c", "d", "", None, 7, [1]])
CALL_NAMES = st.sampled_from(["ls", "bash", ""])
RESULT_NAMES = st.sampled_from(["ls", "bash", "cat", "", None, 5])

operations = st.lists(
    st.one_of(
        st.tuples(st.just("turn"), st.lists(st.tuples(CALL_IDS, CALL_NAMES), max_size=14)),
        st.tuples(st.just("grow"), st.tuples(CALL_IDS, CALL_NAMES)),
        st.tuples(st.just("link"), st.tuples(RESULT_IDS, RESULT_NAMES)),
    ),
    max_size=40,
)


@contextmanager
def scanned_up_to(calls: int) -> Iterator[None]:
    """Link through the scan up to ``calls`` calls, through the indexes past it."""
    saved = _parts._SCANNED_UP_TO
    _parts._SCANNED_UP_TO = calls  # type: ignore[misc]
    try:
        yield
    finally:
        _parts._SCANNED_UP_TO = saved  # type: ignore[misc]


def links(linker: Any, script: list[tuple[str, Any]]) -> list[int | None]:
    """What ``linker`` answers to each ``link`` of ``script``."""
    out: list[int | None] = []
    ids: list[object] = []
    calls: list[dict[str, Any]] = []
    for op, arg in script:
        if op == "turn":
            ids = [call_id for call_id, _ in arg]
            calls = [{"name": name, "arguments": {}} for _, name in arg]
            linker.start_turn(ids, calls)
        elif op == "grow":  # a Responses turn: the same lists, one call longer
            ids.append(arg[0])
            calls.append({"name": arg[1], "arguments": {}})
            linker.start_turn(ids, calls)
        else:
            out.append(linker.link(*arg))
    return out


def links_as_before(script: list[tuple[str, Any]]) -> None:
    # Through the scan, through the indexes from the first call, and as shipped.
    for scan_up_to in (0, 3, _parts._SCANNED_UP_TO):
        with scanned_up_to(scan_up_to):
            assert links(_parts.CallLinker(), script) == links(ReferenceCallLinker(), script)


def test_a_second_turn_starts_from_its_first_call() -> None:
    # The first call still open had moved on in the first turn.
    links_as_before(
        [
            ("turn", [(None, "ls"), (None, "bash"), (None, "ls")]),
            ("link", (None, "ls")),
            ("link", (None, "ls")),
            ("link", (None, None)),
            ("turn", [(None, "ls"), (None, "bash"), (None, "ls")]),
            ("link", (None, "bash")),
            ("link", (None, None)),
        ]
    )


@pytest.mark.parametrize("examples", fast_and_full(120, 3000))
def test_links_every_result_as_the_old_linker_did(examples: int) -> None:
    run_property(examples, links_as_before, operations)


@contextmanager
def reference_linker() -> Iterator[None]:
    """Walk bodies with the old linker."""
    modules = (_chat, gemini, openai_responses)
    saved = [module.CallLinker for module in modules]
    for module in modules:
        module.CallLinker = ReferenceCallLinker  # type: ignore[attr-defined,misc]
    try:
        yield
    finally:
        for module, linker in zip(modules, saved, strict=True):
            module.CallLinker = linker  # type: ignore[misc]


def same_as_before(body: dict[str, Any]) -> None:
    raw = json.dumps(body).encode()
    now = (intent.extract_intent(body), intent.fingerprint(raw), intent.conversation(body))
    with reference_linker():
        before = (intent.extract_intent(body), intent.fingerprint(raw), intent.conversation(body))
    assert now == before


# --- wide turns of every dialect: many parallel calls, results in any order -------------


def wide_turn(dialect: str, seed: int, calls: int) -> dict[str, Any]:
    """One user message, one turn of ``calls`` parallel calls, then their results:
    shuffled, some twice, some missing, ids duplicated or left out, names that repeat."""
    rng = random.Random(seed)
    names = [rng.choice(["read", "ls", "bash", ""]) for _ in range(calls)]
    ids: list[object] = [f"c{rng.randrange(calls + 2)}" for _ in range(calls)]
    if rng.random() < 0.3:
        ids = [None] * calls
    elif rng.random() < 0.2:
        ids[rng.randrange(calls)] = None
    answered = [rng.randrange(calls + 2) for _ in range(calls + rng.randrange(-2, 3))]
    result_ids = [ids[k] if k < calls else f"x{k}" for k in answered]
    if rng.random() < 0.3:
        result_ids = [None if rng.random() < 0.5 else r for r in result_ids]
    result_names = [names[k] if k < calls and rng.random() < 0.7 else None for k in answered]
    if dialect == "openai_chat":
        turn = {
            "role": "assistant",
            "tool_calls": [
                {"id": i, "function": {"name": n, "arguments": "{}"}}
                for i, n in zip(ids, names, strict=True)
            ],
        }
        results = [{"role": "tool", "tool_call_id": i, "content": "ok"} for i in result_ids]
        return {"messages": [{"role": "user", "content": "go"}, turn, *results]}
    if dialect == "ollama":
        turn = {
            "role": "assistant",
            "tool_calls": [{"function": {"name": n, "arguments": {}}} for n in names],
        }
        results = [
            {"role": "tool", "content": "ok", **({"tool_name": n} if n is not None else {})}
            for n in result_names
        ]
        return {"model": "m", "messages": [{"role": "user", "content": "go"}, turn, *results]}
    if dialect == "anthropic":
        turn = {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": i, "name": n, "input": {}}
                for i, n in zip(ids, names, strict=True)
            ],
        }
        answers = [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in result_ids]
        return {"system": "s", "messages": [turn, {"role": "user", "content": answers}]}
    if dialect == "gemini":
        model = {
            "role": "model",
            "parts": [
                {"functionCall": {"name": n, "args": {}, **({"id": i} if i else {})}}
                for i, n in zip(ids, names, strict=True)
            ],
        }
        answers = [
            {"functionResponse": {"name": n, "response": {}, **({"id": i} if i else {})}}
            for i, n in zip(result_ids, result_names, strict=True)
        ]
        return {"contents": [model, {"role": "user", "parts": answers}]}
    items: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i, n in zip(ids, names, strict=True):
        items.append({"type": "function_call", "call_id": i, "name": n, "arguments": "{}"})
        if rng.random() < 0.05:
            items.append({"type": "reasoning", "encrypted_content": "x"})
    items += [{"type": "function_call_output", "call_id": i, "output": "ok"} for i in result_ids]
    return {"input": items}


DIALECTS = ["openai_chat", "ollama", "anthropic", "gemini", "openai_responses"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("calls", [1, 5, 9, 40])
def test_wide_turns_link_as_before(dialect: str, calls: int) -> None:
    for seed in range(25):
        same_as_before(wide_turn(dialect, seed, calls))


@pytest.mark.parametrize("examples", fast_and_full(80, 3000))
def test_random_bodies_link_as_before(examples: int) -> None:
    def check(body: dict[str, Any]) -> None:
        same_as_before(body)

    run_property(examples, check, bodies | dialect_bodies)


# --- the cost: one comparison per result, not one per call ---------------------------------


class CountedStr(str):
    """A string that counts how often it is compared for equality."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        CountedStr.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


@pytest.mark.parametrize("dialect", ["openai_chat", "ollama"])
def test_linking_compares_each_result_a_bounded_number_of_times(dialect: str) -> None:
    # 2,000 parallel calls answered in order: the old linker compared every result with
    # every call (4,000,000 comparisons); a linear one a few times per result.
    calls = 2000
    if dialect == "openai_chat":
        turn = {
            "role": "assistant",
            "tool_calls": [
                {"id": f"c{k}", "function": {"name": "read", "arguments": "{}"}}
                for k in range(calls)
            ],
        }
        results = [
            {"role": "tool", "tool_call_id": CountedStr(f"c{k}"), "content": "ok"}
            for k in range(calls)
        ]
    else:
        turn = {
            "role": "assistant",
            "tool_calls": [{"function": {"name": "read", "arguments": {}}} for _ in range(calls)],
        }
        results = [
            {"role": "tool", "tool_name": CountedStr("read"), "content": "ok"} for _ in range(calls)
        ]
    body = {"model": "m", "messages": [{"role": "user", "content": "go"}, turn, *results]}
    CountedStr.compared = 0
    found = intent.extract_intent(body)
    assert found is not None
    assert [message["call"] for message in found["messages"][2:]] == list(range(calls))
    assert CountedStr.compared <= 4 * calls
