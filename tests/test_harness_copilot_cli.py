"""GitHub Copilot CLI: its tools, its shell answers' volatile number and exit line, and
its hook inputs and answers, read on the payloads recorded from the real 1.0.102
(tests/recorded/agent-clis/copilot/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness_runs import openai_first_flag
from loopfuse.harness import ToolKind, reader_for
from loopfuse.harness.copilot_cli import (
    HARNESS,
    HookInput,
    call_failed,
    exit_code,
    hook_answer,
    read_hook_input,
)

RECORDED = Path(__file__).resolve().parent / "recorded" / "agent-clis" / "copilot"


def recorded(name: str) -> dict[str, Any]:
    """The hook input of one recording (what the hook read on stdin)."""
    document: dict[str, Any] = json.loads((RECORDED / name).read_text(encoding="utf-8"))
    return document["stdin"]


def shell(output: str, number: int, code: int = 0) -> str:
    """A ``bash`` answer as Copilot CLI writes it: the output, then its exit line."""
    return f"{output}\n<shellId: {number} completed with exit code {code}>"


# --- the tools -----------------------------------------------------------------------------


def test_the_tools_are_data() -> None:
    assert HARNESS.kind("bash", {"command": "ls"}) is ToolKind.SHELL
    assert HARNESS.kind("read_bash", {"shellId": "0", "delay": 5}) is ToolKind.WAIT
    assert HARNESS.kind("view", {"path": "/w/a.py"}) is ToolKind.READ
    assert HARNESS.kind("edit", {"path": "/w/a.py", "old_str": "a", "new_str": "b"}) is (
        ToolKind.EDITOR
    )
    assert HARNESS.kind("stop_bash", {"shellId": "0"}) is ToolKind.OTHER
    assert HARNESS.kind("nobody", {}) is None
    # The model's prose about a command is not the command.
    assert HARNESS.call("bash", {"command": "ls", "description": "List"}) == {"command": "ls"}


def test_auto_judges_copilot_tools_as_copilot_does() -> None:
    """Every harness at once (the detector's default): ``read_bash`` is a wait, and a
    shell answer's non-zero exit line is a failure."""
    auto = reader_for("auto")
    assert auto is not None
    assert auto.kind("read_bash", {"shellId": "3", "delay": 10}) is ToolKind.WAIT
    assert auto.kind("bash", {"command": "ls"}) is ToolKind.SHELL
    assert auto.failed("bash", shell("", 4, 1)) is True
    assert auto.failed("bash", shell("ok", 4)) is None


def test_the_shell_number_is_volatile_and_the_exit_code_is_not() -> None:
    assert HARNESS.without_volatile(shell("hi", 0)) == HARNESS.without_volatile(shell("hi", 7))
    assert HARNESS.without_volatile(shell("hi", 0, 1)) != HARNESS.without_volatile(shell("hi", 0))
    started = "<command started in background with shellId: {}>"
    assert HARNESS.without_volatile(started.format(3)) == HARNESS.without_volatile(
        started.format(4)
    )
    running = "t\n<command with shellId: {} is still running after 30 seconds. The command is…>"
    assert HARNESS.without_volatile(running.format(1)) == HARNESS.without_volatile(
        running.format(9)
    )
    # A postToolUse hook's words, which Copilot appends to the answer the model reads
    # (and its session file keeps): not the tool's.
    noted = shell("hi", 3) + '\n\nTool "bash" succeeded. Additional guidance from '
    noted += "postToolUse hooks:\n[loopfuse] Loop detected: …"
    assert HARNESS.without_volatile(noted) == HARNESS.without_volatile(shell("hi", 0))
    # A shell the model named itself is part of its call: kept.
    assert "build" in HARNESS.without_volatile("\n<shellId: build completed with exit code 0>")
    # The same line in the command's own output, not at the end: the output, kept.
    assert exit_code("<shellId: 3 completed with exit code 2>\nmore") is None


def test_a_shell_success_is_judged_by_its_exit_line() -> None:
    assert call_failed("bash", True, shell("", 3, 127)) == (True, 127)
    assert call_failed("bash", True, shell("ok", 3)) == (None, 0)
    assert call_failed("read_bash", True, shell("done", 0, 2)) == (True, 2)
    assert call_failed("bash", None, "no exit line") == (None, None)
    assert call_failed("view", True, "1. text") == (False, None)
    assert call_failed("view", False, "Path does not exist") == (True, None)


def test_a_quiet_wait_on_a_running_command_is_never_refused() -> None:
    """``bash`` in the background, then forty ``read_bash`` polls answered "still
    running" (twenty minutes at 30 s): a wait, never a loop."""
    start = ("bash", {"command": "pytest -q", "mode": "async"}, "")
    running = "<command with shellId: 0 is still running after 30 seconds. The command is still "
    running += "running. Use read_bash to continue waiting for output, or stop_bash to stop it.>"
    steps = [start, *[("read_bash", {"shellId": "0", "delay": 30}, running)] * 40]
    assert openai_first_flag(steps) is None


def test_the_same_failing_command_is_a_loop_once_its_shell_number_is_removed() -> None:
    """The shell number makes every answer new; without it (as the hook and ``scan``
    read Copilot's answers) the same failing call is the loop it is, as early as in any
    other CLI."""
    make = [("bash", {"command": "make"}, shell("make: *** [all] Error 2", n, 2)) for n in range(8)]
    read = [(name, args, HARNESS.without_volatile(text)) for name, args, text in make]
    assert (openai_first_flag(make), openai_first_flag(read)) == (6, 3)
    missing = "cat: missing.txt: No such file or directory"
    cat = [("bash", {"command": "cat missing.txt"}, shell(missing, n, 1)) for n in range(8)]
    read = [(name, args, HARNESS.without_volatile(text)) for name, args, text in cat]
    assert (openai_first_flag(cat), openai_first_flag(read)) == (None, 4)


# --- its hook inputs -------------------------------------------------------------------------


def test_the_recorded_before_call_input_is_read() -> None:
    read = read_hook_input(recorded("camel-pre-001.json"))
    assert read == HookInput(
        "preToolUse", "2eebd779-f0e7-4fce-a8b9-8a155b64f83c", "bash", {"command": "echo hello"}
    )


def test_the_recorded_after_call_input_is_read_without_its_shell_number() -> None:
    read = read_hook_input(recorded("camel-post-001.json"))
    assert read.event == "postToolUse"
    assert (read.tool_name, read.tool_input) == ("bash", {"command": "echo hello"})
    assert read.answer == "hello\n<completed with exit code 0>"
    assert (read.error, read.exit_code) == (None, 0)
    # The same command later in the session: its next shell number, the same answer.
    later = recorded("camel-post-001.json")
    later["toolResult"]["textResultForLlm"] = shell("hello", 5)
    assert read_hook_input(later).answer == read.answer


def test_a_command_that_exits_non_zero_is_a_failure_though_copilot_says_success() -> None:
    payload = recorded("camel-post-001.json")
    payload["toolResult"]["textResultForLlm"] = shell("boom", 2, 3)
    read = read_hook_input(payload)
    assert payload["toolResult"]["resultType"] == "success"
    assert (read.error, read.exit_code) == (True, 3)


def test_the_recorded_failure_input_is_read() -> None:
    read = read_hook_input(recorded("camel-postfail-001.json"))
    assert read.event == "postToolUseFailure"
    assert (read.tool_name, read.tool_input) == ("view", {"path": "/nonexistent/file.txt"})
    assert (read.answer, read.error, read.exit_code) == ("Path does not exist", True, None)


def test_the_users_prompt_starts_a_turn() -> None:
    prompt = {"sessionId": "s", "timestamp": 1, "cwd": "/w", "prompt": "Fix the build."}
    assert read_hook_input(prompt) == HookInput("userPromptSubmitted", "s")


@pytest.mark.parametrize("name", ["pascal-pre-001.json", "pascal-post-001.json"])
def test_the_pascal_case_events_are_not_read(name: str) -> None:
    with pytest.raises(ValueError, match="PascalCase"):
        read_hook_input(recorded(name))


@pytest.mark.parametrize(
    "payload",
    [
        [],
        "x",
        {},
        {"sessionId": "", "toolName": "bash"},
        {"sessionId": "s"},
        {"sessionId": "s", "toolName": 3},
        {"sessionId": 3, "toolName": "bash"},
    ],
)
def test_an_input_of_no_known_shape_is_refused_with_a_reason(payload: object) -> None:
    with pytest.raises(ValueError, match=r"JSON object|sessionId|toolName"):
        read_hook_input(payload)


def test_other_shapes_of_an_answer_are_kept() -> None:
    """A bare string result (the SDK's other ``ToolResult`` form), a structured error."""
    bare = {"sessionId": "s", "toolName": "view", "toolArgs": {"path": "/a"}, "toolResult": "x"}
    assert read_hook_input(bare)[4:] == ("x", None, None)
    failed = {"sessionId": "s", "toolName": "view", "toolArgs": {}, "error": {"code": 1}}
    assert read_hook_input(failed)[4:] == ('{"code": 1}', True, None)


# --- its hook answers ------------------------------------------------------------------------


def test_a_refusal_is_the_top_level_permission_decision() -> None:
    said = json.loads(hook_answer("preToolUse", "deny", "[loopfuse] Loop detected"))
    assert said == {
        "permissionDecision": "deny",
        "permissionDecisionReason": "[loopfuse] Loop detected",
    }
    # No hook can end a Copilot CLI session: "end" refuses the call.
    assert hook_answer("preToolUse", "end", "r") == hook_answer("preToolUse", "deny", "r")


def test_a_note_is_top_level_additional_context_after_a_call_only() -> None:
    for event in ("postToolUse", "postToolUseFailure"):
        assert json.loads(hook_answer(event, "note", "n")) == {"additionalContext": "n"}
    assert hook_answer("preToolUse", "note", "n") == ""
    assert hook_answer("postToolUse", "deny", "r") == ""
    assert hook_answer("userPromptSubmitted", "deny", "r") == ""
    assert hook_answer("preToolUse", "allow", "") == ""
