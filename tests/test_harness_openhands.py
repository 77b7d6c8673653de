"""OpenHands: an empty ``execute_bash`` command waits on the running one; a non-zero exit
line is a failure; the exit-0 line is no word either way (issue 27 §1, §2)."""

from __future__ import annotations

from harness_runs import openai_first_flag
from loopfuse.detector import LoopDetector
from loopfuse.harness import ToolKind
from loopfuse.harness.openhands import HARNESS

QUIET = (
    "[The command has no new output after 30 seconds. You may wait longer to see "
    "additional output by sending empty command '', send other commands to interact "
    "with the current process, or send keys to interrupt/kill the command.]"
)


def test_the_tools_are_data() -> None:
    assert HARNESS.kind("execute_bash", {"command": ""}) is ToolKind.WAIT
    assert HARNESS.kind("execute_bash", {"command": "pytest"}) is ToolKind.SHELL
    assert HARNESS.kind("str_replace_editor", {"command": "view"}) is ToolKind.EDITOR
    assert HARNESS.kind("think", {"thought": "x"}) is ToolKind.READ


def test_waiting_on_a_long_command_is_not_a_loop() -> None:
    start = ("execute_bash", {"command": "python train.py"}, "epoch 1\n" + QUIET)
    steps = [start, *[("execute_bash", {"command": ""}, QUIET) for _ in range(20)]]
    assert openai_first_flag(steps) is None
    assert openai_first_flag(steps, LoopDetector(max_waits=None)) is not None


def test_the_exit_line() -> None:
    assert HARNESS.failed("execute_bash", "x\n[The command completed with exit code 1.]") is True
    assert HARNESS.failed("execute_bash", "x\n[Command finished with exit code 0]") is None
    assert HARNESS.failed("execute_bash", "no exit line") is None


MULTIPLE = (
    "ERROR:\nNo replacement was performed. Multiple occurrences of old_str `x = 1` in lines "
    "[3, 9]. Please ensure it is unique."
)
SAME = "ERROR:\nInvalid `new_str` parameter: old_str `x = 1` and new_str `x = 1` are identical."
EDIT = {"command": "str_replace", "path": "/repo/a.py", "old_str": "x = 1", "new_str": "x = 2"}


def test_an_edit_the_editor_rejected_a_few_times_is_its_normal_recovery() -> None:
    """Four times the same rejected edit, then the agent views the file and moves on: no
    request of it is flagged, in either mode."""
    view = ("str_replace_editor", {"command": "view", "path": "/repo/a.py"}, "1\tx = 1\n")
    steps = [("str_replace_editor", EDIT, MULTIPLE)] * 4 + [view]
    assert openai_first_flag(steps) is None
    same = {**EDIT, "new_str": "x = 1"}
    assert openai_first_flag([("str_replace_editor", same, SAME)] * 3 + [view]) is None


def test_an_edit_rejected_again_and_again_is_still_a_loop() -> None:
    steps = [("str_replace_editor", EDIT, MULTIPLE)] * 8
    assert openai_first_flag(steps) == 5
    # a shell command failing alike is judged as before: the 3rd is refused
    fail = ("execute_bash", {"command": "make"}, "bash: make: command not found")
    assert openai_first_flag([fail] * 5) == 3
