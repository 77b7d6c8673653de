"""``loopfuse scan`` of Copilot CLI sessions as 1.0.102 writes them (#28): a shell call's
answer ends ``<shellId: N completed with exit code C>`` with ``N`` new on every call,
and a command that exits non-zero is ``success: true``; a tool's ``success`` is its
word. The shape is that of tests/recorded/agent-clis/copilot/events-sample.jsonl (the
project's own recording); the sessions are synthetic."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from agent_transcripts import write_lines
from loopfuse.cli.agent_sessions import agent_of, read_runs
from loopfuse.cli.main import main
from loopfuse.cli.readers import read_path

SESSION = "6b1d8e0a-3c2f-4d5e-9a7b-1c2d3e4f5a6b"
SAMPLE = Path(__file__).resolve().parent / "recorded" / "agent-clis" / "copilot"
Step = tuple[str, dict[str, Any], str, bool]  # tool, arguments, answer, success


def bash(command: str, output: str, number: int, code: int = 0) -> Step:
    """A ``bash`` call and its answer: the output, then the exit line with the call's
    shell number."""
    answer = f"{output}\n<shellId: {number} completed with exit code {code}>"
    return ("bash", {"command": command}, answer, True)


def session(steps: list[Step]) -> list[dict[str, Any]]:
    """An ``events.jsonl`` of 1.0.102: one call per turn, its hooks, its completion."""
    lines: list[dict[str, Any]] = []

    def event(kind: str, data: dict[str, Any]) -> None:
        lines.append({"type": kind, "data": data, "id": f"e{len(lines):04d}"})

    event(
        "session.start",
        {
            "sessionId": SESSION,
            "version": 1,
            "producer": "copilot-agent",
            "copilotVersion": "1.0.102",
            "startTime": "2026-12-06T11:25:38.810Z",
            "selectedModel": "model-x",
            "context": {"cwd": "/home/dev/p", "branch": "main"},
        },
    )
    event("user.message", {"content": "Fix the build.", "turnId": "0"})
    for k, (tool, arguments, answer, success) in enumerate(steps):
        call = f"call_{k:020d}"
        event("assistant.turn_start", {"turnId": str(k)})
        request = {"toolCallId": call, "name": tool, "arguments": arguments, "type": "function"}
        event(
            "assistant.message",
            {"messageId": f"m{k}", "model": "model-x", "content": "", "toolRequests": [request]},
        )
        event(
            "tool.execution_start", {"toolCallId": call, "toolName": tool, "arguments": arguments}
        )
        event("hook.start", {"hookType": "preToolUse", "input": {"sessionId": SESSION}})
        event("hook.end", {"hookType": "preToolUse", "success": True})
        done: dict[str, Any] = {"toolCallId": call, "model": "model-x", "success": success}
        if success:
            done["result"] = {"content": answer}
        else:
            done["error"] = {"message": answer, "code": "failure"}
        if tool == "bash":
            code = re.search(r"exit code (\d+)>", answer)
            done["shellExecution"] = {"exitCode": int(code.group(1)) if code else 0}
        event("tool.execution_complete", done)
        event("assistant.turn_end", {"turnId": str(k)})
    event("assistant.message", {"messageId": "last", "content": "Done.", "toolRequests": []})
    event("session.shutdown", {})
    return lines


def write(tmp_path: Path, steps: list[Step]) -> Path:
    folder = tmp_path / ".copilot" / "session-state" / SESSION
    return write_lines(folder / "events.jsonl", session(steps))


def scan(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, dict[str, Any]]:
    code = main(["scan", str(path), "--format", "json", "--no-progress"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def answers(path: Path) -> list[dict[str, Any]]:
    [run], _ = read_runs(read_path(path))  # type: ignore[arg-type]
    return [
        block
        for message in run.body["messages"]
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def test_the_recorded_session_is_copilots_and_read_without_its_shell_numbers() -> None:
    path = SAMPLE / "events-sample.jsonl"
    assert agent_of(path.read_bytes()[:4096]) == "copilot"
    read = answers(path)
    assert [block["content"] for block in read] == ["hello\n<completed with exit code 0>"] * 2
    assert all("is_error" not in block for block in read)  # exit 0: the other evidence


def test_the_same_failing_command_is_found_at_its_third_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each answer has its own shell number: read as written, no two answers are the
    same, and the loop was found three calls late."""
    steps = [bash("make", "make: *** [all] Error 2", n, 2) for n in range(8)]
    path = write(tmp_path, steps)
    assert [b.get("is_error") for b in answers(path)] == [True] * 8  # the exit line says
    code, report = scan(capsys, path)
    assert code == 1
    [finding] = report["files"][0]["findings"]
    # noted with the request after the third call, as in any CLI (docs/detector.md)
    assert (finding["first"], finding["spans"][0]["count"]) == (4, 3)


def test_a_poll_whose_output_moves_is_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    steps = [bash("tail -5 build.log", f"step {n}: compiled m{n}.c", n) for n in range(12)]
    code, report = scan(capsys, write(tmp_path, steps))
    assert (code, report["files"][0]["clean"]) == (0, True)


def test_a_tools_own_success_is_its_word_and_a_failure_is_flagged(tmp_path: Path) -> None:
    """``view`` of files that say "Traceback": each a success (``is_error: false``, not
    read for error words); ``view`` of a missing path: a failure."""
    steps: list[Step] = [
        ("view", {"path": f"/p/log{n}.txt"}, f"1. Traceback (most recent call last):\n{n}", True)
        for n in range(3)
    ]
    steps.append(("view", {"path": "/p/missing.txt"}, "Path does not exist", False))
    read = answers(write(tmp_path, steps))
    assert [block.get("is_error") for block in read] == [False, False, False, True]


def test_a_hooks_words_appended_to_an_answer_are_not_the_answer(tmp_path: Path) -> None:
    """Copilot CLI appends a ``postToolUse`` hook's words to the answer the model reads,
    and keeps them so in its session file (loopfuse's own note, say); the hook was given
    the answer without them: the reader reads it as the hook did."""
    steps = [bash("make", "make: *** [all] Error 2", n, 2) for n in range(3)]
    tool, arguments, answer, success = steps[2]
    answer += '\n\nTool "bash" succeeded. Additional guidance from postToolUse hooks:\n'
    answer += "[loopfuse] Loop detected: you called `bash` with the same arguments 3 times"
    steps[2] = (tool, arguments, answer, success)
    read = answers(write(tmp_path, steps))
    assert len({block["content"] for block in read}) == 1
    assert [block.get("is_error") for block in read] == [True] * 3
