"""Claude Code: ``BashOutput`` waits on a background shell; ``is_error`` says whether a
call failed, both ways (issue 27 §1, §2, §3)."""

from __future__ import annotations

from harness_runs import anthropic_run, first_flag
from loopfuse.detector import LoopDetector, scan
from loopfuse.harness import ToolKind
from loopfuse.harness.claude_code import HARNESS


def test_the_tools_are_data() -> None:
    assert HARNESS.kind("BashOutput", {"bash_id": "b1"}) is ToolKind.WAIT
    assert HARNESS.kind("Bash", {"command": "ls"}) is ToolKind.SHELL
    assert HARNESS.kind("WebFetch", {"url": "u"}) is ToolKind.COSTLY
    assert HARNESS.kind("Edit", {}) is ToolKind.EDITOR
    assert HARNESS.kind("mcp__fs__Read", {}) is ToolKind.READ


def test_waiting_on_a_running_background_shell_is_not_a_loop() -> None:
    start = ("Bash", {"command": "npm run build", "run_in_background": True}, "b1 started", None)
    running = "<status>running</status>\n\n<stdout>\n</stdout>"
    steps = [start, *[("BashOutput", {"bash_id": "b1"}, running, False) for _ in range(25)]]
    assert first_flag(anthropic_run, steps, LoopDetector()) is None
    done = "<status>completed</status>\n<exit_code>0</exit_code>"
    steps += [("BashOutput", {"bash_id": "b1"}, done, False) for _ in range(8)]
    assert first_flag(anthropic_run, steps, LoopDetector()) is not None


def test_a_broken_shell_is_still_caught_whatever_the_command() -> None:
    """Every Bash call answering ``Error``, flagged failed, whatever is run."""
    commands = ["ls", "git status", "pwd", "cat README.md", "echo hi", "node -v"]
    steps = [("Bash", {"command": c}, "Error", True) for c in commands]
    verdict = scan(anthropic_run(steps[:4]))
    assert verdict.kind == "error_streak"


def test_a_structured_success_is_never_read_as_a_failure() -> None:
    """Answers whose words look like failures (a log being read) but flagged succeeded."""
    steps = [
        ("Bash", {"command": f"tail -n {k} logs/app.log"}, f"ERROR: volume v{k} is full", False)
        for k in range(14)
    ]
    assert first_flag(anthropic_run, steps, LoopDetector()) is None
    # Without the flag the same words are read as failures (the generic heuristics).
    unflagged = [(n, a, t, None) for n, a, t, _ in steps]
    assert first_flag(anthropic_run, unflagged, LoopDetector()) is not None


def test_the_hook_reads_its_answers_with_this_module() -> None:
    from loopfuse.harness.claude_code import exit_code

    assert HARNESS.call("Bash", {"command": "ls", "description": "list"}) == {"command": "ls"}
    assert HARNESS.call("Read", {"file_path": "a", "description": "x"}) == {
        "file_path": "a",
        "description": "x",
    }
    assert exit_code("Exit code 127\nnode: not found") == 127
