"""Tool calls written as text (smolagents, ReAct) are read as calls and answers.

Each shape is checked three ways: the canonical messages it becomes, that ``scan``
judges it as the same conversation written with native tool calls (the oracle,
``written_bodies.native_body``), and that prose which only looks a little like it is
left alone. Hostile texts cost linear time and never raise.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from loopfuse import scan
from loopfuse.intent import conversation, extract_intent, fingerprint
from written_bodies import native_body

SMOL_CALL = "Calling tools:\n[{'id': 'call_%d', 'type': 'function', 'function': {'name': 'lookup', 'arguments': {'word': 'apple'}, 'description': None}}]"  # noqa: E501
RETRY = "Now let's retry: take care not to repeat previous errors! If you have retried several times, try a completely different approach."  # noqa: E501


def chat(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "system", "content": "Be useful."}, *messages]}


def text(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": content}]}


def smol_success(laps: int, answer: str = "apple: a fruit") -> dict[str, Any]:
    messages = [text("user", "New task:\nLook apple up.")]
    for n in range(laps):
        messages.append(text("assistant", SMOL_CALL % n))
        messages.append(text("user", f"Observation:\n{answer}"))
    return chat(*messages)


def smol_failed(laps: int, error: str = "Unknown tool hex, should be one of: lookup.") -> str:
    """smolagents keeps no call for a failed step: its errors pile up in one user turn."""
    return "New task:\nConvert 255.\n" + "\n".join(
        f"Error:\n{error}\n{RETRY}\n" for _ in range(laps)
    )


def react_alternating(laps: int, answer: str = "no results") -> dict[str, Any]:
    """LlamaIndex's ReActAgent: each step an assistant turn, each answer a user turn."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Find the loop."}]
    for _ in range(laps):
        step = 'Thought: I need to search.\nAction: search\nAction Input: {"q": "loop"}'
        messages.append({"role": "assistant", "content": step})
        messages.append({"role": "user", "content": f"Observation: {answer}"})
    return chat(*messages)


def react_inline(laps: int) -> dict[str, Any]:
    """CrewAI: the observation is appended to the assistant turn that made the call."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Find the loop."}]
    for _ in range(laps):
        step = 'Thought: search\nAction: search\nAction Input: {"q": "loop"}\nObservation: none'
        messages.append({"role": "assistant", "content": step})
    return chat(*messages)


def react_scratchpad(laps: int) -> dict[str, Any]:
    """LangChain's create_react_agent: every lap inside one prompt."""
    pad = "".join(
        'Thought: search\nAction: search\nAction Input: "loop"\nObservation: none\n'
        for _ in range(laps)
    )
    prompt = f"Answer the question. Tools: search.\nQuestion: find the loop\n{pad}Thought:"
    return chat({"role": "user", "content": prompt})


def test_a_smolagents_step_becomes_a_call_and_its_answer() -> None:
    messages = extract_intent(smol_success(1))["messages"]
    assert messages == [
        {"role": "user", "content": ["New task:\nLook apple up."]},
        {
            "role": "assistant",
            "content": [],
            "tool_calls": [{"name": "lookup", "arguments": {"word": "apple"}}],
        },
        {"role": "tool", "call": 0, "content": ["apple: a fruit"]},
    ]


def test_a_failed_smolagents_step_is_an_error_answer_naming_its_tool() -> None:
    executing = (
        "Error executing tool 'lookup' with arguments {'word': 'kiwi'}: ValueError: no entry\n"
        "Please try again or use another tool"
    )
    body = chat(
        text(
            "user",
            smol_failed(1, executing) + "\n" + smol_failed(1)[len("New task:\nConvert 255.\n") :],
        )
    )
    messages = extract_intent(body)["messages"]
    assert messages[0] == {"role": "user", "content": ["New task:\nConvert 255."]}
    assert messages[1]["tool_calls"] == [{"name": "lookup", "arguments": {"word": "kiwi"}}]
    assert messages[2]["is_error"] is True
    assert messages[2]["content"] == [executing]
    assert messages[3]["tool_calls"] == [{"name": "hex", "arguments": {}}]
    assert messages[4] == {
        "role": "tool",
        "call": 0,
        "content": ["Unknown tool hex, should be one of: lookup."],
        "is_error": True,
    }
    assert len(messages) == 5


def test_a_call_id_then_an_error_answers_the_written_call() -> None:
    body = chat(
        text("user", "New task:\nGo."),
        text("assistant", SMOL_CALL % 1),
        text("user", f"Call id: call_1\nError:\nfinal_answer failed\n{RETRY}"),
    )
    answer = extract_intent(body)["messages"][-1]
    assert answer["role"] == "tool"
    assert answer["is_error"] is True
    assert answer["content"][0].startswith("final_answer failed")


@pytest.mark.parametrize(
    ("name", "body", "calls"),
    [
        ("alternating", react_alternating(1), [{"name": "search", "arguments": {"q": "loop"}}]),
        ("inline", react_inline(1), [{"name": "search", "arguments": {"q": "loop"}}]),
        ("scratchpad", react_scratchpad(1), [{"name": "search", "arguments": "loop"}]),
    ],
)
def test_react_steps_become_calls_and_answers(
    name: str, body: dict[str, Any], calls: list[Any]
) -> None:
    messages = extract_intent(body)["messages"]
    roles = [message["role"] for message in messages]
    assert roles == ["user", "assistant", "tool"], name
    assert messages[1]["tool_calls"] == calls
    assert messages[2]["call"] == 0
    assert messages[2]["content"] in (["no results"], ["none"])


@pytest.mark.parametrize(
    "build",
    [smol_success, react_alternating, react_inline, react_scratchpad],
    ids=["smolagents", "alternating", "inline", "scratchpad"],
)
def test_a_written_loop_is_flagged_at_the_lap_its_native_twin_is(build: Any) -> None:
    flagged = None
    for laps in range(1, 9):
        body = build(laps)
        verdict = scan(body)
        assert verdict.ok == scan(native_body(body)).ok, laps
        if not verdict.ok and flagged is None:
            flagged = laps
            assert verdict.kind == "repeat"
            assert verdict.tool_names == (("lookup",) if build is smol_success else ("search",))
    assert flagged is not None, "the written loop was never flagged"


def test_failed_smolagents_steps_are_flagged_at_the_third() -> None:
    flagged = [laps for laps in range(1, 7) if not scan(chat(text("user", smol_failed(laps)))).ok]
    assert flagged[0] == 3  # an error gets one strike less than a healthy answer
    verdict = scan(chat(text("user", smol_failed(3))))
    assert verdict.tool_names == ("hex",)


def test_a_written_poll_whose_answer_moves_is_progress() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Wait for the build."}]
    for n in range(8):
        step = "Thought: check\nAction: tail\nAction Input: build.log"
        messages.append({"role": "assistant", "content": step})
        messages.append({"role": "user", "content": f"Observation: step {n} of 9 done"})
    assert scan(chat(*messages)).ok


@pytest.mark.parametrize(
    "messages",
    [
        # "Action:" in prose, with no "Action Input:" line after it
        [{"role": "assistant", "content": "Action: we should refactor.\nThen test."}],
        # a user turn reading "Observation:" after a turn that wrote no call
        [
            {"role": "assistant", "content": "I looked."},
            {"role": "user", "content": "Observation: the sky is blue"},
        ],
        # "Error:" without smolagents' retry line
        [{"role": "user", "content": "Error:\nsomething broke\nplease help"}],
        # a "Calling tools:" that is not a list of calls
        [{"role": "assistant", "content": "Calling tools:\n[1, 2, 3]"}],
        [{"role": "assistant", "content": "Calling tools: several, in turn."}],
        # an action whose name is a sentence
        [{"role": "assistant", "content": "Action: look it up\nAction Input: x"}],
    ],
)
def test_prose_that_only_looks_like_a_written_call_is_left_alone(
    messages: list[dict[str, Any]],
) -> None:
    body = chat({"role": "user", "content": "Hi."}, *messages)
    intent = extract_intent(body)
    assert not any("tool_calls" in m or m["role"] == "tool" for m in intent["messages"])


def test_native_tool_calls_are_never_read_as_text() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    body = chat(
        {"role": "user", "content": "List."},
        {"role": "assistant", "content": "Action: rm\nAction Input: -rf /", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
    )
    messages = extract_intent(body)["messages"]
    assert messages[1]["tool_calls"] == [{"name": "ls", "arguments": {}}]
    assert messages[1]["content"] == ["Action: rm\nAction Input: -rf /"]


@pytest.mark.parametrize("build", [smol_success, react_alternating, react_inline])
def test_each_request_of_a_written_conversation_holds_a_prefix_of_its_intent(
    build: Any,
) -> None:
    body = build(4)
    found = conversation(body)
    assert found is not None
    for turn in found.turns:
        cut = {**body, "messages": body["messages"][: turn.start]}
        intent = extract_intent(cut)
        assert intent["messages"] == found.intent["messages"][: turn.messages]


def test_two_sends_of_a_written_conversation_fingerprint_the_same() -> None:
    body = smol_success(3)
    renumbered = json.loads(json.dumps(body).replace("call_1", "call_99"))
    assert fingerprint(body) == fingerprint(renumbered)  # ids are volatile, as natively
    assert fingerprint(body) != fingerprint(smol_success(3, "apple: a company"))


@pytest.mark.parametrize(
    "hostile",
    [
        "Calling tools:\n" + "[" * 100_000,
        "Calling tools:\n[" + "{'a': " * 5_000 + "1" + "}" * 5_000 + "]",
        "Calling tools:\n" * 50_000,
        "Action: a\nAction Input: b\n" * 50_000,
        "Action: a\n" + "\n" * 100_000 + "Action Input: b",
        ("Error:\n" + "x\n" * 10) * 10_000,
        "Observation: \ud83d" + "Action Input: " * 10_000,
    ],
    ids=["deep", "deep-dicts", "labels", "many-actions", "blank-run", "errors", "surrogate"],
)
def test_hostile_written_texts_never_raise(hostile: str) -> None:
    for role in ("assistant", "user"):
        body = chat({"role": "user", "content": "Go."}, {"role": role, "content": hostile})
        extract_intent(body)
        scan(body)
        fingerprint(json.dumps(body).encode())


def test_reading_written_calls_is_linear_in_the_text() -> None:
    def cost(laps: int) -> float:
        body = react_scratchpad(laps)
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            extract_intent(body)
            best = min(best, time.perf_counter() - started)
        return best

    small, large = cost(2_000), cost(8_000)
    # Four times the text: about four times the cost (a quadratic reader gives ~16x).
    assert large < 8 * small + 0.05


@pytest.mark.parametrize("kind", [[], {}, ["text"], None, 3])
def test_a_block_whose_type_is_junk_is_read_as_before(kind: object) -> None:
    """Found by the transcript fuzz: a user block whose ``type`` is a list (unhashable)."""
    body = chat({"role": "user", "content": [{"type": kind, "text": "Observation: x"}]})
    intent = extract_intent(body)
    assert intent is not None
    assert not any(m["role"] == "tool" for m in intent["messages"])
    scan(body)
    fingerprint(json.dumps(body).encode())
