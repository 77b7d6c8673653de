"""Codex CLI: ``write_stdin`` with empty ``chars`` waits on a process it started; its
``Process exited with code N`` header says a command failed (issue 27 §1, §2)."""

from __future__ import annotations

from harness_runs import openai_first_flag
from loopfuse.detector import LoopDetected, LoopDetector, ToolCall, is_digest, results_digest
from loopfuse.harness import ToolKind
from loopfuse.harness.codex import HARNESS, exit_code

START = (
    "exec_command",
    {"cmd": "pytest -q tests/slow"},
    "Process running with session ID 7\nOutput:\n",
)


def poll(chars: str = "", answer: str = "Process running with session ID 7\nOutput:\n"):
    return ("write_stdin", {"session_id": 7, "chars": chars, "yield_time_ms": 30000}, answer)


def test_the_tools_are_data() -> None:
    assert HARNESS.kind("write_stdin", {"session_id": 7, "chars": ""}) is ToolKind.WAIT
    assert HARNESS.kind("write_stdin", {"session_id": 7}) is ToolKind.WAIT
    assert HARNESS.kind("write_stdin", {"session_id": 7, "chars": "y\n"}) is ToolKind.OTHER
    assert HARNESS.kind("exec_command", {"cmd": "ls"}) is ToolKind.SHELL
    assert HARNESS.kind("apply_patch", {"input": "*** Begin Patch"}) is ToolKind.EDITOR
    assert HARNESS.kind("unknown_tool", {}) is None


def test_a_quiet_poll_of_a_running_process_is_never_refused() -> None:
    """Forty quiet polls of a test run (twenty minutes at 30 s): the process still runs."""
    steps = [START, *[poll() for _ in range(40)]]
    assert openai_first_flag(steps) is None


def test_polls_printing_new_output_are_never_refused() -> None:
    answers = [f"Process running with session ID 7\nOutput:\n{k} passed\n" for k in range(30)]
    steps = [START, *[poll(answer=a) for a in answers]]
    assert openai_first_flag(steps) is None


def test_the_wait_has_a_bound() -> None:
    steps = [START, *[poll() for _ in range(12)]]
    assert openai_first_flag(steps, LoopDetector(max_waits=10)) == 12  # the 11th wait


def test_the_off_switch_judges_a_wait_as_any_call() -> None:
    steps = [START, *[poll() for _ in range(8)]]
    # Off: the poll is still a read (the read-only allowance), refused once it repeats.
    assert openai_first_flag(steps, LoopDetector(max_waits=None)) == 7


def test_a_poll_after_the_process_ended_is_judged_as_any_call() -> None:
    done = poll(answer="Process exited with code 0\nOutput:\n")
    steps = [START, poll(), *[done for _ in range(8)]]
    assert openai_first_flag(steps) is not None


def test_typing_into_the_process_again_and_again_is_a_repeat() -> None:
    steps = [START, *[poll("y\n") for _ in range(5)]]
    assert openai_first_flag(steps) == 5


def test_the_live_detector_lets_a_wait_through_with_its_answers() -> None:
    det = LoopDetector()
    calls = [ToolCall("write_stdin", {"session_id": 7, "chars": ""})]
    for _ in range(30):
        record = det.check(calls)
        det.record_results(record, answers=["Process running with session ID 7\nOutput:\n"])
    refused = 0
    for _ in range(10):  # ended: the same answer again is a repeat
        try:
            det.record_results(det.check(calls), answers=["Process exited with code 1\n"])
        except LoopDetected:
            refused += 1
    assert refused


def test_exit_code_header() -> None:
    assert (
        exit_code("Chunk ID: 1\nWall time: 0.2 seconds\nProcess exited with code 2\nOutput:\n") == 2
    )
    assert exit_code("Output:\nProcess exited with code 2\n") is None  # in the output: not ours
    assert HARNESS.failed("exec_command", "Process exited with code 127\nOutput:\nno\n") is True


def test_a_digest_made_with_the_detectors_reading_says_the_process_still_runs() -> None:
    """What ``loopfuse hook`` hands its detector: digests, not texts."""
    det = LoopDetector()
    calls = [ToolCall("write_stdin", {"session_id": 7, "chars": ""})]
    running = "Process running with session ID 7\nOutput:\n"
    for _ in range(30):
        record = det.check(calls)
        det.record_results(
            record, results_digest(calls, [running], reading=det.settings.error_reading)
        )
    assert not is_digest("0" * 32 + "/" + "0" * 32 + "/" + "0" * 16 + "/re")
    assert is_digest(results_digest(calls, [running], reading=det.settings.error_reading))
