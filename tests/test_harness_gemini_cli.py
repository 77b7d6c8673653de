"""Gemini CLI: a refused call is a failure by its structure (``{"error": ...}``), whatever
its words; its older shell banner ``Error: (none)`` / ``Exit Code: 0`` is no failure
(issue 27 §1, §3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness_runs import first_flag, gemini_run
from loopfuse.cli.main import main
from loopfuse.detector import LoopDetector, scan
from loopfuse.harness import ToolKind
from loopfuse.harness.gemini_cli import HARNESS
from loopfuse.intent import extract_intent

REFUSED = {"error": "The command was refused: it could not be read safely."}
COMMANDS = ["ls", "echo hi", "uname -a", "whoami", "pwd", "date", "id", "hostname"]


def banner(stdout: str, code: int = 0) -> str:
    """An older Gemini CLI shell answer: the command's output in the CLI's frame."""
    error = "(none)" if code == 0 else f"exit status {code}"
    return (
        f"Command: x\nDirectory: (root)\nStdout: {stdout}\nStderr: (empty)\nError: {error}\n"
        f"Exit Code: {code}\nSignal: (none)\nBackground PIDs: (none)\n"
    )


def test_the_tools_are_data() -> None:
    assert HARNESS.kind("run_shell_command", {"command": "ls"}) is ToolKind.SHELL
    assert HARNESS.kind("google_web_search", {"query": "q"}) is ToolKind.COSTLY
    assert HARNESS.kind("read_many_files", {}) is ToolKind.READ


def test_the_dialect_carries_the_error_object_as_a_flag() -> None:
    body = gemini_run([("run_shell_command", {"command": "ls"}, REFUSED)])
    [tool] = [m for m in extract_intent(body)["messages"] if m["role"] == "tool"]
    assert tool["is_error"] is True
    body = gemini_run([("run_shell_command", {"command": "ls"}, {"output": "a.py"})])
    [tool] = [m for m in extract_intent(body)["messages"] if m["role"] == "tool"]
    assert "is_error" not in tool


def test_a_streak_of_different_refused_calls_is_caught_by_the_fourth() -> None:
    steps = [("run_shell_command", {"command": c}, REFUSED) for c in COMMANDS]
    assert first_flag(gemini_run, steps, LoopDetector()) == 4
    verdict = scan(gemini_run(steps[:4]))
    assert verdict.kind == "error_streak"


def test_the_flag_can_be_switched_off() -> None:
    steps = [("run_shell_command", {"command": c}, REFUSED) for c in COMMANDS]
    # (the error object is also what Pydantic AI answers a failed call with: a framework
    # answer, read unless that is off too)
    det = LoopDetector(error_flags=False, framework_errors=False)
    assert scan(gemini_run(steps[:4]), detector=det).ok
    assert scan(gemini_run(steps[:4])).kind == "error_streak"


def test_the_success_banner_is_not_an_error() -> None:
    """A long shell-heavy stretch, every answer in the CLI's success frame (as the
    transcript reader hands it on: the output's text)."""
    steps = [
        ("run_shell_command", {"command": f"cat part{k}.txt"}, banner(f"line {k}"))
        for k in range(30)
    ]
    assert first_flag(gemini_run, steps, LoopDetector()) is None
    # ... while the same words out of their frame do read as failures:
    assert first_flag(gemini_run, steps, LoopDetector(harness="generic")) is not None


def test_a_non_zero_exit_code_is_a_failure() -> None:
    assert HARNESS.failed("run_shell_command", banner("", 2)) is True
    steps = [("run_shell_command", {"command": f"make t{k}"}, banner("", 2)) for k in range(6)]
    assert scan(gemini_run(steps)).kind == "error_streak"


def test_a_whole_json_session_of_refused_calls_is_flagged_by_scan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The transcript reader keeps the error object (its text has no error word)."""
    messages = [{"id": "u0", "type": "user", "content": "look around", "timestamp": "t"}]
    for k, command in enumerate(COMMANDS[:6]):
        call = {
            "id": f"c{k}",
            "name": "run_shell_command",
            "args": {"command": command},
            "status": "error",
            "result": [
                {
                    "functionResponse": {
                        "id": f"c{k}",
                        "name": "run_shell_command",
                        "response": REFUSED,
                    }
                }
            ],
        }
        messages.append(
            {"id": f"m{k}", "type": "gemini", "content": "", "toolCalls": [call], "timestamp": "t"}
        )
    session = {"sessionId": "s1", "projectHash": "p", "startTime": "t", "messages": messages}
    path = tmp_path / "session-1.json"
    path.write_text(json.dumps(session))
    code = main(["scan", "--format", "json", "--mode", "refuse", str(path)])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    [finding] = report["files"][0]["findings"]
    assert (finding["kind"], finding["first"]) == ("error_streak", 5)


def test_the_hook_reads_its_answers_with_this_module() -> None:
    """The shell's ``description`` is prose; the process group is new on every call."""
    call = HARNESS.call("run_shell_command", {"command": "ls", "description": "list"})
    assert call == {"command": "ls"}
    answer = "Output: a\nExit Code: 0\nProcess Group PGID: 4242\n"
    assert HARNESS.without_volatile(answer) == "Output: a\nExit Code: 0\n"
