"""Kimi Code: its tools as data, its own words taken out of answers (the wall time, its
nudges), what its hooks send read, and its session files read as conversations, on the
payloads and sessions recorded from the real ``@moonshot-ai/kimi-code`` 2.1.0
(tests/recorded/agent-clis/kimi/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loopfuse.detector import scan
from loopfuse.harness import ToolKind, reader_for
from loopfuse.harness.kimi_code import HARNESS, answer, exit_code, wire_runs

RECORDED = Path(__file__).parent / "recorded" / "agent-clis" / "kimi"
NUDGE_3 = (
    "\n\n<system-reminder>\nThe same tool call has been repeated several times in a row. "
    "Before making your next call, write one sentence stating what new information you "
    "expect it to produce.\n</system-reminder>"
)
NUDGE_5 = (
    "\n\n<system-reminder>\nThe same tool call has now been issued 5 times in a row. Choose "
    "exactly one of the following and state your choice before acting:\n(1) Falsification "
    "check: run the cheapest test that could conclusively disprove your current approach."
    "\n</system-reminder>"
)


def payload(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RECORDED / name).read_text(encoding="utf-8"))["stdin"]
    return data


def records(name: str) -> list[tuple[int, dict[str, Any]]]:
    lines = (RECORDED / name).read_text(encoding="utf-8").splitlines()
    return [(number, json.loads(line)) for number, line in enumerate(lines, 1) if line]


def test_the_tools_are_data() -> None:
    assert HARNESS.kind("Bash", {"command": "ls"}) is ToolKind.SHELL
    assert HARNESS.kind("TaskOutput", {"task_id": "b1"}) is ToolKind.WAIT
    assert HARNESS.kind("WaitFor", {"timeout": 30}) is ToolKind.WAIT
    assert HARNESS.kind("Grep", {"pattern": "x"}) is ToolKind.READ
    assert HARNESS.kind("Write", {"path": "a", "content": "b"}) is ToolKind.EDITOR
    assert HARNESS.kind("FetchURL", {"url": "u"}) is ToolKind.COSTLY
    # the shell's description is the model's prose, not the call
    assert HARNESS.call("Bash", {"command": "ls", "description": "List"}) == {"command": "ls"}


def test_its_read_is_claude_codes_and_every_harness_agrees_on_both() -> None:
    """``Read`` is Claude Code's name: judged by every harness at once (``auto``), Kimi
    Code's Read of a file is a read, and Claude Code's Read of a background command's
    output file stays a wait (declared by both, the two would disagree on it)."""
    every = reader_for("auto")
    assert every is not None
    assert every.kind("Read", {"path": "src/app.py"}) is ToolKind.READ
    output = "/tmp/claude-0/-home-dev-p/s1/tasks/b7k2m9x.output"
    assert every.kind("Read", {"file_path": output}) is ToolKind.WAIT
    assert HARNESS.tool("Read") is None


def test_a_background_task_still_running_is_said_so_by_its_snapshot_or_wait() -> None:
    snapshot = "Wall time: 4.210 seconds\nretrieval_status: not_ready\ntask_id: b1\nstatus: running"
    assert HARNESS.still_running("TaskOutput", snapshot)
    done = "Wall time: 9.001 seconds\nretrieval_status: success\ntask_id: b1\nstatus: completed"
    assert not HARNESS.still_running("TaskOutput", done)
    assert HARNESS.still_running("WaitFor", "wait_status: timed_out\ntask_id: b1\nwaited_ms: 30000")


@pytest.mark.parametrize("nudge", ["", NUDGE_3, NUDGE_5])
def test_the_answers_of_identical_calls_compare_equal_without_kimis_own_words(nudge: str) -> None:
    """What the model reads of the same failing call, 1st, 3rd and 5th time (recorded):
    the wall time and the nudge differ, the answer does not."""
    read = (
        "Wall time: 0.013 seconds\n<system>ERROR: Tool execution failed.</system>\n"
        "cat: missing.txt: No such file or directory\nCommand failed with exit code: 1." + nudge
    )
    assert HARNESS.without_volatile(read) == (
        "<system>ERROR: Tool execution failed.</system>\n"
        "cat: missing.txt: No such file or directory\nCommand failed with exit code: 1."
    )
    assert HARNESS.failed("Bash", read) is True


def test_output_that_only_looks_like_kimis_words_is_kept() -> None:
    text = "log: Wall time: 3 seconds\n<system-reminder> no end"
    assert HARNESS.without_volatile(text) == text
    huge = "<system-reminder>" + "x" * 5000 + "</system-reminder>"  # bounded: not Kimi's
    assert HARNESS.without_volatile(huge) == huge


def test_how_an_answer_says_it_failed() -> None:
    assert exit_code("x\nCommand failed with exit code: 2.\n") == 2
    assert exit_code("Command failed with exit code: 2. and more") is None
    assert HARNESS.failed("Bash", "ok\n") is None  # a success is left to the other evidence
    failed = "Wall time: 0.0 seconds\n<system>ERROR: Tool execution failed.</system>\nboom"
    assert HARNESS.failed("Bash", failed) is True


def test_the_hooks_answers_recorded() -> None:
    ok = payload("post-001.json")
    assert answer(ok["hook_event_name"], ok) == ("hi\n", False, None)
    failed = payload("postfail-001.json")
    text, error, code = answer(failed["hook_event_name"], failed)
    assert text == failed["error"]["message"]
    assert error is True
    assert code == 2
    refused = payload("postfail-refused-001.json")  # what a refused call's hook is told
    assert answer(refused["hook_event_name"], refused) == ("REFUSED-4", True, None)


def test_a_recorded_session_is_read_as_its_calls_and_answers() -> None:
    """Eight ``echo hi`` (the last three refused by a hook, with Kimi Code's nudges from
    the 3rd on), then the model's answer."""
    problems: list[tuple[int, str]] = []
    name = "s/wd_work_d316f172dea8/session_e9/agents/main/wire.jsonl"
    [(body, meta)] = wire_runs(
        name, records("wire-sample.jsonl"), lambda n, t: problems.append((n, t))
    )
    assert problems == []
    assert meta["agent"] == "kimi"
    assert meta["session"] == "session_e9"
    assert "subagent" not in meta
    assert meta["model"] == "fake-model"
    assert meta["project"].endswith("/work")
    messages = body["messages"]
    assert messages[0] == {"role": "user", "content": [{"type": "text", "text": "Fix the build."}]}
    calls = [b for m in messages for b in m["content"] if b["type"] == "tool_use"]
    results = [b for m in messages for b in m["content"] if b["type"] == "tool_result"]
    assert [c["input"]["command"] for c in calls] == ["echo hi"] * 8
    assert [r["tool_use_id"] for r in results] == [c["id"] for c in calls]
    assert [r["content"] for r in results[:5]] == ["hi\n"] * 5  # the nudges taken out
    assert [r.get("is_error", False) for r in results] == [False] * 5 + [True] * 3
    assert messages[-1]["content"] == [{"type": "text", "text": "Done: nothing more to run."}]
    assert "system-reminder" not in json.dumps(messages)


@pytest.mark.parametrize(
    ("recorded", "calls", "kind"),
    [("wire-failing-refused.jsonl", 3, "repeat"), ("wire-sample.jsonl", 6, "repeat")],
)
def test_the_recorded_loops_are_found_where_the_hook_finds_them(
    recorded: str, calls: int, kind: str
) -> None:
    """The same failing command: refused at its 3rd call (an error repeated); the same
    ``echo hi`` (read-only), whose answers differ only by Kimi Code's nudges: at its 6th."""
    [(body, _)] = wire_runs("wire.jsonl", records(recorded), print)
    messages = body["messages"]
    asked = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    before = {**body, "messages": messages[: asked[calls - 2] + 1]}
    assert scan(before).ok
    verdict = scan({**body, "messages": messages[: asked[calls - 1] + 1]})
    assert (verdict.ok, verdict.kind) == (False, kind)


def test_the_failures_are_flagged() -> None:
    [(body, _)] = wire_runs("wire.jsonl", records("wire-failing-refused.jsonl"), print)
    results = [b for m in body["messages"] for b in m["content"] if b["type"] == "tool_result"]
    assert [r["is_error"] for r in results] == [True] * 6
    assert results[0]["content"].endswith("Command failed with exit code: 1.")
    assert [r["content"] for r in results[3:]] == ["REFUSED-4", "REFUSED-5", "REFUSED-6"]


def test_a_session_of_another_protocol_is_a_problem_not_a_clean_session() -> None:
    problems: list[tuple[int, str]] = []
    lines = [
        (1, {"type": "metadata", "protocol_version": "2.0"}),
        *records("wire-sample.jsonl")[1:],
    ]
    assert wire_runs("wire.jsonl", lines, lambda n, t: problems.append((n, t))) == []
    assert problems
    assert problems[0][0] == 1
    assert "'2.0'" in problems[0][1]


def test_a_subagent_is_its_own_run_and_damaged_records_are_problems() -> None:
    problems: list[tuple[int, str]] = []
    lines = [*records("wire-sample.jsonl"), (99, {"type": "context.append_loop_event"})]
    [(_, meta)] = wire_runs(
        "x/session_1/agents/explore-1/wire.jsonl", lines, lambda n, t: problems.append((n, t))
    )
    assert meta["subagent"] == "explore-1"
    assert meta["session"] == "session_1"
    assert [n for n, _ in problems] == [99]
