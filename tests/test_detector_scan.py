"""scan: a whole request body, any dialect, as a proxy sees it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import fast_and_full, run_property
from loopfuse.detector import OK, LoopDetector, ToolCall, Verdict, scan, scan_intent
from loopfuse.detector.replay import replay
from loopfuse.intent import extract_intent

# A script is a list of steps:
#   ("user", text) | ("prose", text) | ("calls", [(name, arguments, answer), ...])
Step = tuple[Any, ...]


def call(name: str, args: dict[str, Any], answer: str) -> Step:
    return ("calls", [(name, args, answer)])


def openai_chat(script: list[Step]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be careful."}]
    n = 0
    for step in script:
        if step[0] == "user":
            messages.append({"role": "user", "content": step[1]})
        elif step[0] == "prose":
            messages.append({"role": "assistant", "content": step[1]})
        else:
            calls, results = [], []
            for name, args, answer in step[1]:
                n += 1
                calls.append(
                    {
                        "id": f"call_{n}",
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                )
                results.append({"role": "tool", "tool_call_id": f"call_{n}", "content": answer})
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
            messages.extend(results)
    return {"model": "gpt-4o", "messages": messages}


def openai_responses(script: list[Step]) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    n = 0
    for step in script:
        if step[0] == "user":
            items.append({"type": "message", "role": "user", "content": step[1]})
        elif step[0] == "prose":
            content = [{"type": "output_text", "text": step[1]}]
            items.append({"type": "message", "role": "assistant", "content": content})
        else:
            outputs = []
            for name, args, answer in step[1]:
                n += 1
                items.append(
                    {
                        "type": "function_call",
                        "call_id": f"fc_{n}",
                        "name": name,
                        "arguments": json.dumps(args),
                    }
                )
                outputs.append(
                    {"type": "function_call_output", "call_id": f"fc_{n}", "output": answer}
                )
            items.extend(outputs)
    return {"model": "gpt-4o", "instructions": "Be careful.", "input": items}


def anthropic(script: list[Step]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    n = 0
    for step in script:
        if step[0] == "user":
            messages.append({"role": "user", "content": step[1]})
        elif step[0] == "prose":
            messages.append({"role": "assistant", "content": [{"type": "text", "text": step[1]}]})
        else:
            uses, results = [], []
            for name, args, answer in step[1]:
                n += 1
                uses.append({"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": args})
                results.append(
                    {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": answer}
                )
            messages.append({"role": "assistant", "content": uses})
            messages.append({"role": "user", "content": results})
    return {"model": "claude", "system": "Be careful.", "max_tokens": 1024, "messages": messages}


def gemini(script: list[Step]) -> dict[str, Any]:
    contents: list[dict[str, Any]] = []
    for step in script:
        if step[0] == "user":
            contents.append({"role": "user", "parts": [{"text": step[1]}]})
        elif step[0] == "prose":
            contents.append({"role": "model", "parts": [{"text": step[1]}]})
        else:
            calls = [{"functionCall": {"name": nm, "args": a}} for nm, a, _ in step[1]]
            responses = [
                {"functionResponse": {"name": nm, "response": {"output": ans}}}
                for nm, _, ans in step[1]
            ]
            contents.append({"role": "model", "parts": calls})
            contents.append({"role": "user", "parts": responses})
    return {"contents": contents, "systemInstruction": {"parts": [{"text": "Be careful."}]}}


def ollama(script: list[Step]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for step in script:
        if step[0] == "user":
            messages.append({"role": "user", "content": step[1]})
        elif step[0] == "prose":
            messages.append({"role": "assistant", "content": step[1]})
        else:
            calls = [{"function": {"name": nm, "arguments": a}} for nm, a, _ in step[1]]
            messages.append({"role": "assistant", "content": "", "tool_calls": calls})
            for nm, _, ans in step[1]:
                messages.append({"role": "tool", "tool_name": nm, "content": ans})
    return {
        "model": "llama3.1",
        "messages": messages,
        "options": {"temperature": 0},
        "stream": False,
    }


DIALECTS = {
    "openai_chat": openai_chat,
    "openai_responses": openai_responses,
    "anthropic": anthropic,
    "gemini": gemini,
    "ollama": ollama,
}


def cd_failing(i: int) -> Step:  # the same failing command; only a shell line number drifts
    return call(
        "bash",
        {"command": "cd fastjson/ && ./gradlew test"},
        f"bash: line {1000 + 15 * i}: cd: fastjson/: No such file or directory",
    )


EDIT = call("edit", {"path": "a.py", "text": "x = 1"}, "edited")


def run_tests_result(failures: int) -> Step:
    return call("run_tests", {}, f"{failures} failed")


@pytest.fixture(params=sorted(DIALECTS))
def build(request: pytest.FixtureRequest) -> Any:
    return DIALECTS[request.param]


def test_a_repeated_failing_command_is_flagged_in_every_dialect(build: Any) -> None:
    # A failing command is refused one repeat earlier than the default 3 strikes allow.
    script: list[Step] = [("user", "fix the bug")] + [cd_failing(i) for i in range(2)]
    assert scan(build(script)) == OK
    verdict = scan(build([*script, cd_failing(2)]))
    assert not verdict.ok
    assert (verdict.kind, verdict.count, verdict.tool_names) == ("repeat", 3, ("bash",))
    assert verdict.message is not None
    assert "`bash`" in verdict.message
    assert "same result" in verdict.message
    body = json.dumps(build([*script, cd_failing(2)])).encode()
    assert scan(body) == verdict  # bytes, str and parsed bodies agree
    assert scan(body.decode()) == verdict


def test_a_cycle_is_flagged_in_every_dialect(build: Any) -> None:
    script: list[Step] = [("user", "fix the bug")] + [EDIT, run_tests_result(1)] * 2 + [EDIT]
    verdict = scan(build(script))
    assert (verdict.ok, verdict.kind, verdict.count) == (False, "cycle", 3)
    assert scan(build(script[:-1])).ok


def test_moving_answers_pass_in_every_dialect(build: Any) -> None:
    script: list[Step] = [("user", "fix the bug")]
    for failures in range(10, 0, -1):
        script += [EDIT, run_tests_result(failures)]
    assert scan(build(script)).ok


def test_a_user_turn_ends_the_run(build: Any) -> None:
    script = [cd_failing(i) for i in range(2)] + [("user", "try again")]
    script += [cd_failing(i) for i in range(2)]
    assert scan(build(script)).ok
    assert not scan(build([*script, cd_failing(9)])).ok


def test_stagnating_prose_is_flagged(build: Any) -> None:
    script: list[Step] = [("user", "go")] + [("prose", "I will fix the parser now.")] * 5
    assert scan(build(script)).ok
    verdict = scan(build([*script, ("prose", "I will fix the parser now.")]))
    assert (verdict.ok, verdict.kind, verdict.count) == (False, "stagnation", 6)


def test_the_index_points_at_the_assistant_turn_in_the_intent() -> None:
    body = openai_chat([("user", "go")] + [cd_failing(i) for i in range(4)])
    verdict = scan(body)
    intent = extract_intent(body)
    assert intent is not None
    assert verdict.index is not None
    flagged = intent["messages"][verdict.index]
    assert flagged["role"] == "assistant"
    assert verdict.index == len(intent["messages"]) - 2


def test_anthropic_tool_results_with_text_end_the_run() -> None:
    body = anthropic([("user", "go")] + [cd_failing(i) for i in range(4)])
    assert not scan(body).ok
    # A client that puts text beside the tool_result (a reminder) sends a user turn.
    for message in body["messages"]:
        if message["role"] == "user" and isinstance(message["content"], list):
            message["content"].append({"type": "text", "text": "<reminder>"})
    assert scan(body).ok


def test_missing_ids_make_answers_unknown_and_unknown_answers_never_rescue() -> None:
    moving = [call("bash", {"command": "make"}, f"built {i} targets") for i in range(4)]
    body = openai_chat([("user", "go"), *moving])
    assert scan(body).ok  # the answers move: progress (below the ceiling)
    for message in body["messages"]:
        message.pop("tool_call_id", None)
    assert not scan(body).ok


def test_duplicate_ids_in_a_batch_make_answers_unknown() -> None:
    pair = ("calls", [("ls", {"p": 1}, "a"), ("cat", {"p": 2}, "b")])
    script: list[Step] = [("user", "go")]
    for i in range(4):
        script.append(("calls", [("bash", {"p": 1}, f"v{i}"), ("bash", {"p": 2}, f"w{i}")]))
    body = openai_chat(script)
    assert scan(body).ok
    for message in body["messages"]:
        for tool_call in message.get("tool_calls") or []:
            tool_call["id"] = "same"
        if message["role"] == "tool":
            message["tool_call_id"] = "same"
    assert not scan(body).ok
    assert scan(openai_chat([pair])).ok


def test_a_refused_poll_whose_own_answer_moved_passes() -> None:
    polls = [call("job_status", {"id": 7}, "running") for _ in range(6)]
    assert not scan(openai_chat([("user", "go"), *polls])).ok
    polls[-1] = call("job_status", {"id": 7}, "done")
    assert scan(openai_chat([("user", "go"), *polls])).ok


def test_detector_settings_are_used_and_its_state_is_untouched() -> None:
    body = openai_chat([("user", "go")] + [cd_failing(i) for i in range(2)])
    det = LoopDetector(max_strikes=1)
    assert not det.scan(body).ok
    assert not scan(body, detector=det).ok
    assert scan(body).ok
    fresh = det.check([ToolCall("bash", {"command": "cd fastjson/ && ./gradlew test"})])
    assert fresh.count == 1  # still fresh


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"\xff\xfe\x00",
        b"[]",
        b"null",
        b'{"messages": "nope"}',
        b'{"messages": [1, "two", null, []]}',
        {"messages": [{"role": "assistant", "tool_calls": None}]},
        {"messages": [{"role": "assistant", "tool_calls": "ls"}]},
        {"messages": [{"role": "assistant", "tool_calls": [{"id": 7, "function": None}]}]},
        {
            "messages": [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": ["x"], "function": {"name": 3, "arguments": "{bad"}}],
                },
                {"role": "tool", "tool_call_id": {"a": 1}, "content": {"weird": True}},
            ]
        },
        {"messages": [{"role": "tool", "content": "orphan result"}]},
        {"contents": [{"role": "model", "parts": [{"functionCall": "junk"}]}]},
        {"input": [{"type": "function_call_output", "output": None}]},
        {"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}] * 50},
        "[" * 100_000,
        {"messages": [{"role": "user", "content": "x" * 1_000_000}]},
        12,
        None,
        object(),
        {"messages": [{"role": "assistant", "content": object()}]},
    ],
)
def test_junk_never_raises(body: Any) -> None:
    verdict = scan(body)
    assert isinstance(verdict, Verdict)


def test_junk_repeats_still_count() -> None:
    junk = {
        "role": "assistant",
        "tool_calls": [{"id": "x", "function": {"name": "f", "arguments": "{bad"}}],
    }
    verdict = scan({"messages": [junk] * 4})
    assert (verdict.ok, verdict.count) == (False, 4)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["role", "content", "tool_calls", "messages", "id", "call", "name"])
            | st.text(max_size=3),
            children,
            max_size=4,
        )
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_scan_never_raises_on_any_json(value: object) -> None:
    assert isinstance(scan(value), Verdict)
    assert isinstance(scan({"messages": value}), Verdict)
    assert isinstance(
        scan_intent({"messages": value if isinstance(value, list) else [value]}), Verdict
    )


# --- the tail replay gives the verdict of a full replay -----------------------------------

BATCHES = [
    [{"name": "edit", "arguments": {"p": 1}}],
    [{"name": "run_tests", "arguments": {}}],
    [{"name": "read_file", "arguments": {"path": "a"}}],
    [{"name": "bash", "arguments": {"c": "x"}}, {"name": "grep", "arguments": {"q": 1}}],
    [{"name": "grep", "arguments": {"q": 1}}, {"name": "bash", "arguments": {"c": "x"}}],
    [{"name": "web_fetch", "arguments": {"url": "u"}}],
    [{"name": "bash", "arguments": {"command": "find /usr -name x"}}],
    [{"name": "bash", "arguments": {"command": "find /opt -name x"}}],
    [{"name": "bash", "arguments": {"command": "python -m tool"}}],
    [{"name": "bash", "arguments": {"command": "tail -5 build.log"}}],
]
ANSWERS = [
    "ok",
    "ok at 10:00:01",
    "ok at 10:00:02",
    "1 failed",
    "2 failed",
    "Error: boom",
    "ModuleNotFoundError: No module named 'x'",
    "<returncode>0</returncode>\n<output>\n</output>",
]

message_step = st.one_of(
    st.tuples(
        st.just("batch"),
        st.integers(0, len(BATCHES) - 1),
        st.lists(st.sampled_from([*ANSWERS, None]), min_size=2, max_size=2),
    ),
    st.tuples(st.just("user")),
    st.tuples(st.just("prose"), st.sampled_from(["thinking...", "I will retry.", ""])),
    st.tuples(st.just("junk")),
)


def intent_of(steps: list[tuple[Any, ...]]) -> list[Any]:
    messages: list[Any] = []
    for step in steps:
        if step[0] == "batch":
            calls = BATCHES[step[1]]
            messages.append({"role": "assistant", "content": [], "tool_calls": calls})
            for index in range(len(calls)):
                answer = step[2][index]
                link = None if answer is None else index
                messages.append({"role": "tool", "call": link, "content": [answer or "?"]})
        elif step[0] == "user":
            messages.append({"role": "user", "content": ["go on"]})
        elif step[0] == "prose":
            messages.append({"role": "assistant", "content": [step[1]] if step[1] else []})
        else:
            messages.append({"role": "unknown", "value": 3})
    return messages


CONFIGS = [
    LoopDetector(),
    LoopDetector(
        max_error_streak=1, max_near_repeats=1, max_unchanged_checks=1, error_storm=(2, 3)
    ),
    LoopDetector(max_strikes=None, max_error_streak=2, max_near_repeats=2, error_storm=None),
    LoopDetector(max_strikes=1, max_observation_steps=2, max_stagnation_steps=1),
    LoopDetector(max_strikes=2, max_observation_steps=None, max_cycle_laps=1),
    LoopDetector(max_cycle_period=2, normalize_answers=False),
    LoopDetector(max_cycle_period=3, max_cycle_laps=3, max_strikes=0),
]


@settings(max_examples=400, deadline=None)
@given(st.lists(message_step, max_size=40), st.sampled_from(range(len(CONFIGS))))
def test_tail_replay_equals_full_replay(steps: list[tuple[Any, ...]], config: int) -> None:
    det = CONFIGS[config]
    messages = intent_of(steps)
    full = replay(messages, det.settings)
    assert scan_intent({"messages": messages}, det) == full


@settings(max_examples=400, deadline=None)
@given(st.lists(message_step, max_size=40), st.sampled_from(range(len(CONFIGS))))
def test_the_early_detector_finds_every_loop_the_detector_finds(
    steps: list[tuple[Any, ...]], config: int
) -> None:
    """What `mode="warn"` counts on to scan once a request: its early detector (every
    count one notch lower) finding nothing means the detector finds nothing either, so
    the detector is asked only after the early one found a loop (Guard._verdicts)."""
    det = CONFIGS[config]
    messages = intent_of(steps)
    if not scan_intent({"messages": messages}, det).ok:
        assert not scan_intent({"messages": messages}, det.earlier()).ok


@pytest.mark.parametrize("config", range(len(CONFIGS)))
def test_tail_replay_equals_full_replay_on_long_loops(config: int) -> None:
    det = CONFIGS[config]
    for pattern in ([0], [0, 1], [0, 1, 2], [2], [0, 0, 1]):
        steps: list[tuple[Any, ...]] = []
        for i in range(60):
            answer = ANSWERS[(i // 7) % len(ANSWERS)]
            steps.append(("batch", pattern[i % len(pattern)], [answer, answer]))
            messages = intent_of(steps)
            assert scan_intent({"messages": messages}, det) == replay(messages, det.settings)


cyclic_conversation = st.tuples(
    st.lists(st.integers(0, len(BATCHES) - 1), min_size=1, max_size=4),  # one lap
    st.integers(1, 12),  # laps
    st.lists(st.sampled_from(ANSWERS), min_size=1, max_size=3),  # answers cycle through
    st.lists(st.integers(0, 60), max_size=3),  # where a user turn or prose breaks in
)


@pytest.mark.parametrize("examples", fast_and_full(60, 300))
def test_tail_replay_equals_full_replay_on_cycles(examples: int) -> None:
    run_property(
        examples,
        check_tail_replay_equals_full_replay_on_cycles,
        cyclic_conversation,
        st.sampled_from(range(len(CONFIGS))),
    )


def check_tail_replay_equals_full_replay_on_cycles(
    conversation: tuple[list[int], int, list[str], list[int]], config: int
) -> None:
    lap, laps, answers, breaks = conversation
    steps: list[tuple[Any, ...]] = []
    for i, batch in enumerate(lap * laps):
        if i in breaks:
            steps.append(("user",) if i % 2 else ("prose", "I will retry."))
        answer = answers[(i // len(lap)) % len(answers)]
        steps.append(("batch", batch, [answer, answer]))
    det = CONFIGS[config]
    messages = intent_of(steps)
    for end in range(1, len(messages) + 1):
        prefix = messages[:end]
        assert scan_intent({"messages": prefix}, det) == replay(prefix, det.settings)


def test_json_results_compare_exactly() -> None:
    def poll(value: object) -> Step:
        return call("get_flag", {"name": "x"}, value)  # type: ignore[arg-type]

    same = gemini([("user", "go")] + [poll(1)] * 6)
    assert not scan(same).ok
    alternating = gemini([("user", "go")] + [poll(1), poll(True)] * 3)
    assert scan(alternating).ok  # 1 and true are different answers


def test_parallel_results_may_come_back_in_any_order() -> None:
    pair = ("calls", [("read_file", {"p": "a"}, "A"), ("edit", {"p": "b"}, "B")])
    body = openai_chat([("user", "go")] + [pair] * 4)
    messages = body["messages"]
    turns = [i for i, message in enumerate(messages) if message.get("tool_calls")]
    for i in turns[::2]:  # the results of every other batch come back swapped
        messages[i + 1], messages[i + 2] = messages[i + 2], messages[i + 1]
    assert messages[turns[0] + 1]["content"] == "B"
    verdict = scan(body)
    assert (verdict.ok, verdict.count) == (False, 4)


def test_a_system_message_mid_conversation_ends_the_run() -> None:
    body = openai_chat([("user", "go")] + [cd_failing(i) for i in range(3)])
    body["messages"].append({"role": "system", "content": "The user changed the task."})
    body["messages"] += openai_chat([cd_failing(9)])["messages"][1:]
    assert scan(body).ok
    body["messages"] += openai_chat([cd_failing(10)] * 3)["messages"][1:]
    assert not scan(body).ok


def _failure(steps: list[Step]) -> Any:
    """The failure ``scan`` names for the final batch of a conversation of ``steps``."""
    return scan(openai_chat([("user", "fix the bug"), *steps])).failure


_IMPORT_FAILS = (
    "Traceback (most recent call last):\n"
    '  File "/srv/app/check.py", line {line}, in <module>\n'
    "ModuleNotFoundError: No module named 'fastjson'\n"
    "[exit code 1]"
)


def test_the_verdict_names_the_failure_its_final_batch_got_whatever_else_it_said(
    build: Any,
) -> None:
    """Two batches fail the same way when their error lines are the same, normalised,
    whatever else the answers hold (the output before the traceback, a line number that
    drifts); in every dialect, on an ok verdict and on a loop alike."""
    first = call("bash", {"command": "python check.py"}, _IMPORT_FAILS.format(line=3))
    noisy = "check: 3 files found\n" + _IMPORT_FAILS.format(line=4)
    second = call("bash", {"command": "python check.py -v"}, noisy)
    one, other = (scan(build([("user", "fix it"), step])).failure for step in (first, second))
    assert one is not None
    assert other is not None
    assert one.name == other.name
    assert one.tools == ("bash",)
    assert one.line == "ModuleNotFoundError: No module named 'fastjson'"
    looped = scan(build([("user", "fix it"), first, first, first]))
    assert looped.kind == "repeat"
    assert looped.failure == one
    assert scan(build([("user", "fix it"), EDIT])).failure is None  # not an error
    assert scan(build([("user", "fix it"), first, ("prose", "Done.")])).failure is None


def test_an_exit_status_alone_names_no_failure() -> None:
    """Every failing command of a harness ends on its exit status: two answers that share
    only that line failed in different ways; without any other error line the whole
    normalised answer names the failure (so the same answer again is the same failure)."""
    status = [
        "[exit code 1]",
        "[Command finished with exit code 1]",
        "<returncode>1</returncode>",
        "Process exited with code 1",
    ]
    for line in status:
        first = _failure([call("bash", {"command": "make a"}, f"no rule for a\n{line}")])
        second = _failure([call("bash", {"command": "make b"}, f"no rule for b\n{line}")])
        again = _failure([call("bash", {"command": "make c"}, f"no rule for a\n{line}")])
        assert first is not None, line
        assert second is not None, line
        assert again is not None, line
        assert first.name != second.name, line
        assert first.name == again.name, line
        assert first.line is None, line


def test_the_tools_are_part_of_the_failure() -> None:
    answer = _IMPORT_FAILS.format(line=3)
    shell = _failure([call("bash", {"command": "python check.py"}, answer)])
    runner = _failure([call("run_python", {"file": "check.py"}, answer)])
    assert shell is not None
    assert runner is not None
    assert shell.name != runner.name
    assert _failure([]) is None  # no batch at all
