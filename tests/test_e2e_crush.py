"""``loopfuse hook --agent crush`` run as Crush runs a hook, through a loop.

There is no run of the real Crush here: its npm package downloads its binary from
github.com at install, which this project's machines cannot reach (docs/agents.md,
"Crush"). So :class:`CrushRunner` does what Crush's source does around a hook
(``internal/hooks/runner.go``, ``input.go``, ``internal/agent/hooked_tool.go``, commits in
tests/recorded/agent-clis/crush/README.md): the hook's command line through a POSIX shell,
the payload as compact JSON on stdin, Crush's environment variables, a timeout; then its
reading of the exit status and stdout (2: refused with stderr; 49: halted; other non-zero,
a timeout or stdout that is not JSON: no opinion; 0: ``decision`` / ``halt`` / ``reason``
/ ``context`` or ``hookSpecificOutput``), and what the model then reads: a refusal as the
call's failed answer ``Tool call blocked by hook. Reason: R``, a halt as ``Turn halted by
hook. Reason: R`` and the end of the turn, a ``context`` appended to the answer of the call
that ran.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from loopfuse.cli.hook_state import load, session_path

SESSION = "5a1e0c9f-3b7d-4e52-9d1a-2c6f8e4b7a10"
TIMEOUT = 10.0  # the timeout loopfuse init writes (Crush's default is 30 s)


@dataclass
class Outcome:
    """What one call came to, as the model sees it."""

    ran: bool
    answer: str
    is_error: bool = False
    halted: bool = False


class CrushRunner:
    """One Crush session whose every tool call goes through ``loopfuse hook``."""

    def __init__(self, tmp: Path, *flags: str, env: dict[str, str] | None = None) -> None:
        self.project = tmp / "project"
        self.project.mkdir(parents=True, exist_ok=True)
        self.command = shlex.join(
            [sys.executable, "-m", "loopfuse", "hook", "--agent", "crush", *flags]
        )
        self.env = {
            **os.environ,
            "LOOPFUSE_STATE_DIR": str(tmp / "state"),
            "PYTHONPATH": os.pathsep.join(sys.path),
            **(env or {}),
        }

    def hook(self, tool: str, arguments: dict[str, object]) -> tuple[int, str, str]:
        """Run the hook as Crush's ``Runner.Run`` does: exit status, stdout, stderr."""
        payload = {
            "event": "PreToolUse",
            "session_id": SESSION,
            "cwd": str(self.project),
            "tool_name": tool,
            "tool_input": arguments,
        }
        env = {
            **self.env,
            "CRUSH": "1",
            "AGENT": "crush",
            "AI_AGENT": "crush",
            "CRUSH_EVENT": "PreToolUse",
            "CRUSH_TOOL_NAME": tool,
            "CRUSH_SESSION_ID": SESSION,
            "CRUSH_CWD": str(self.project),
            "CRUSH_PROJECT_DIR": str(self.project),
        }
        if "command" in arguments:
            env["CRUSH_TOOL_INPUT_COMMAND"] = str(arguments["command"])
        try:
            done = subprocess.run(
                ["/bin/sh", "-c", self.command],
                input=json.dumps(payload, separators=(",", ":")).encode(),
                capture_output=True,
                cwd=self.project,
                env=env,
                timeout=TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return -1, "", ""  # Crush: a timed-out hook is no opinion
        return done.returncode, done.stdout.decode(), done.stderr.decode()

    def call(self, tool: str, arguments: dict[str, object], output: str = "ok") -> Outcome:
        """One tool call: the hook, then what Crush makes of its answer."""
        status, stdout, stderr = self.hook(tool, arguments)
        decision, halt, reason, context = read_answer(status, stdout, stderr)
        if halt:
            return Outcome(False, f"Turn halted by hook. Reason: {reason}", True, True)
        if decision == "deny":
            return Outcome(False, f"Tool call blocked by hook. Reason: {reason}", True)
        answer = output if not context else f"{output}\n{context}"
        return Outcome(True, answer)


def read_answer(status: int, stdout: str, stderr: str) -> tuple[str, bool, str, str]:
    """Crush's ``runOne`` and ``parseStdout``: (decision, halt, reason, context)."""
    if status == 2:
        return "deny", False, stderr.strip() or "blocked by hook", ""
    if status == 49:
        return "deny", True, stderr.strip() or "turn halted by hook", ""
    if status != 0 or not stdout.strip():
        return "none", False, "", ""
    try:
        raw = json.loads(stdout)
    except ValueError:
        return "none", False, "", ""
    if not isinstance(raw, dict):
        return "none", False, "", ""
    claude = raw.get("hookSpecificOutput")
    if isinstance(claude, dict):
        decision = str(claude.get("permissionDecision", "")).lower()
        reason = str(claude.get("permissionDecisionReason", ""))
        context = str(claude.get("additionalContext", ""))
        return (decision if decision in ("allow", "deny") else "none"), False, reason, context
    decision = str(raw.get("decision") or "").lower()
    context = raw.get("context") or ""
    if isinstance(context, list):
        context = "\n".join(str(c) for c in context if c)
    return (
        decision if decision in ("allow", "deny") else "none",
        raw.get("halt") is True,
        str(raw.get("reason") or ""),
        str(context),
    )


TESTS = {"command": "npm test", "description": "Run the tests"}


def test_a_looping_model_is_noted_then_refused(tmp_path: Path) -> None:
    crush = CrushRunner(tmp_path)
    outcomes = [crush.call("bash", TESTS, "1 failing") for _ in range(7)]
    assert all(o.ran and "[loopfuse]" not in o.answer for o in outcomes[:4])
    # The 6th identical state-changing call is past the ceiling (refuse mode refuses it):
    # warn notes the 5th, one count early, and refuses the 6th.
    noted = outcomes[4]
    assert noted.ran
    assert "[loopfuse] Loop detected" in noted.answer  # after its own answer
    refused = outcomes[5]
    assert not refused.ran
    assert refused.is_error
    assert refused.answer.startswith("Tool call blocked by hook. Reason: [loopfuse]")
    assert "same result" not in refused.answer  # the guard never saw one
    assert not outcomes[6].ran  # and so is every one after it


def test_refuse_mode_refuses_the_sixth_call_and_end_session_halts(tmp_path: Path) -> None:
    crush = CrushRunner(tmp_path, "--mode", "refuse", "--end-session")
    outcomes = [crush.call("bash", TESTS) for _ in range(7)]
    assert all(o.ran for o in outcomes[:5])
    assert not outcomes[5].ran
    assert not outcomes[5].halted
    assert outcomes[6].halted  # it went on after its refusal: the turn ends


def test_a_poll_repeated_past_the_ceiling_is_untouched(tmp_path: Path) -> None:
    """The default run's twin of the healthy run below: a read-only command asked for
    7 times (a state-changing one is noted at the 5th) runs every time, no note."""
    crush = CrushRunner(tmp_path)
    for _ in range(7):
        outcome = crush.call("bash", {"command": "git status --short"})
        assert (outcome.ran, outcome.answer) == (True, "ok")
    state = load(session_path(str(tmp_path / "state"), "crush", SESSION))
    assert len([e for e in state.events if e[0] == "call"]) == 7  # each one judged


@pytest.mark.slow
def test_a_healthy_run_and_a_repeated_read_are_untouched(tmp_path: Path) -> None:
    crush = CrushRunner(tmp_path)
    calls: list[tuple[str, dict[str, object]]] = [
        ("view", {"file_path": "main.go"}),
        ("edit", {"file_path": "main.go", "old_string": "a", "new_string": "b"}),
        ("bash", TESTS),
        ("edit", {"file_path": "main.go", "old_string": "b", "new_string": "c"}),
        ("bash", TESTS),
        # a poll whose output may move: without its answers, never judged a loop
        *[("bash", {"command": "git status --short"})] * 12,
        *[("view", {"file_path": "build.log"})] * 12,
    ]
    for tool, arguments in calls:
        outcome = crush.call(tool, arguments)
        assert outcome.ran
        assert outcome.answer == "ok"  # no note either
    # Each call was judged (not let through unread): the session holds every one of them.
    state = load(session_path(str(tmp_path / "state"), "crush", SESSION))
    judged = [(e[2], e[3]) for e in state.events if e[0] == "call"]
    assert judged == [
        (tool, {"command": a["command"]} if tool == "bash" else a) for tool, a in calls
    ]
    assert not (tmp_path / "state" / "hook.log").exists()  # nothing failed


@pytest.mark.slow
def test_a_broken_state_folder_fails_open(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    crush = CrushRunner(tmp_path, env={"LOOPFUSE_STATE_DIR": str(blocker / "state")})
    for _ in range(8):
        status, stdout, _ = crush.hook("bash", TESTS)
        assert status == 0  # Crush: no opinion, the call runs
        assert stdout == ""
    # The same calls with a state folder that works: the guard answers from the 5th.
    working = CrushRunner(tmp_path / "working")
    answers = [working.hook("bash", TESTS)[1] for _ in range(8)]
    assert answers[:4] == [""] * 4
    assert all(answers[4:])


def test_the_runner_reads_answers_as_crush_does() -> None:
    assert read_answer(2, "", "no\n") == ("deny", False, "no", "")
    assert read_answer(49, "", "") == ("deny", True, "turn halted by hook", "")
    assert read_answer(1, '{"decision": "deny"}', "") == ("none", False, "", "")
    assert read_answer(0, "not json", "") == ("none", False, "", "")
    assert read_answer(0, '{"decision":"deny","reason":"R","halt":true}', "")[:3] == (
        "deny",
        True,
        "R",
    )
    assert read_answer(0, '{"context":["a","","b"]}', "") == ("none", False, "", "a\nb")
    claude = '{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"R"}}'
    assert read_answer(0, claude, "") == ("deny", False, "R", "")
