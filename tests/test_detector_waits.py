"""Waits written as shell command lines (issue 27 §2, "a wait is not a loop"): ``sleep 30
&& tail log``, ``kubectl wait … --timeout=60s``, ``until …; do sleep 5; done``, bounded or
not. A wait is progress while its answer says the thing waited on is not over (its bound
ran out first) or while its answers move; a wait answered the same way while nothing says
so is judged as any read-only call. The command lines and answers are written for these
tests."""

from __future__ import annotations

from typing import Any

import pytest

from harness_runs import anthropic_run, first_flag, openai_first_flag
from hook_payloads import CLAUDE_COMMON, claude_failure, claude_post, claude_pre
from loopfuse.detector import LoopDetected, LoopDetector, ToolCall, results_digest
from loopfuse.detector._shell_waits import bound_ran_out
from loopfuse.detector.shell import ShellClassifier
from loopfuse.harness import ToolKind
from loopfuse.harness.claude_code import HARNESS as CLAUDE_CODE

WAITS = [
    # for time: led by a sleep (after cd)
    "sleep 30 && tail -5 build.log",
    "sleep 60; cat out.txt",
    "sleep 45",
    "cd /repo && sleep 20 && git log -1 --oneline",
    "bash -lc 'sleep 30 && tail -n 3 train.log'",
    # for a condition, alone or bounded
    "kubectl wait --for=condition=available deploy/web --timeout=60s",
    "kubectl -n prod rollout status deploy/web --timeout=2m",
    "gh run watch 4242 --exit-status",
    "gh pr checks 17 --watch --interval 10",
    "docker wait api",
    "docker compose wait migrate",
    "until [ -f build/done ]; do sleep 5; done",
    "while ! grep -q Ready dev.log; do sleep 0.5; done; tail -3 dev.log",
    "timeout 300 bash -c 'until [ -f build/done ]; do sleep 5; done'",
    "timeout 600 gh run watch 4242",
]
NOT_WAITS = [
    "tail -5 build.log",
    "gh run view 4242",
    "gh pr checks 17",  # one look, no --watch
    "gh pr checks 17 --watch=false",
    "ls; sleep 2",  # reads, then sleeps: not led by the sleep
    "timeout 60 tail -f app.log",  # never ends by itself: the bound is its normal end
    "sleep 5 && timeout 10 tail -f app.log",
    "while true; do tail -1 log; sleep 5; done",  # no condition ends it
    "sleep 5 && rm -rf build",  # not read-only
    "until make; do sleep 5; done",
    "docker compose wait --down-project migrate",
    "sleep",
]


@pytest.mark.parametrize("command", WAITS)
def test_a_read_only_line_that_waits_is_a_wait(command: str) -> None:
    shells = ShellClassifier()
    assert shells.is_read_only(command)
    assert shells.is_wait(command)


@pytest.mark.parametrize("command", NOT_WAITS)
def test_other_lines_are_no_wait(command: str) -> None:
    assert not ShellClassifier().is_wait(command)


def test_a_wait_is_judged_as_a_wait_by_each_harness_shell() -> None:
    reader = LoopDetector().settings.reader
    line = "sleep 30 && tail -5 build.log"
    calls = [
        ("bash", {"command": line}),  # no harness: the generic shell reading
        ("Bash", {"command": line, "description": "Wait for the build"}),
        ("exec_command", {"cmd": line}),
        ("shell", {"command": ["bash", "-lc", line]}),
        ("run_shell_command", {"command": line}),
        ("execute_bash", {"command": line}),
    ]
    for name, arguments in calls:
        assert reader.kinds((name,), (arguments,)) == (True, False, True), name
    assert reader.kinds(("bash",), ({"command": "tail -5 build.log"},))[2] is False
    assert reader.kinds(("bash", "bash"), ({"command": line}, {"command": "ls"}))[2] is False


@pytest.mark.parametrize(
    "answer",
    [
        "Process exited with code 124\nOutput:\n",  # Codex
        "Exit code: 124\nWall time: 60 seconds\nOutput:\n",  # Codex, older
        "Exit code 124\n",  # Claude Code
        "...\n[The command completed with exit code 124.]",  # OpenHands
        "<returncode>124</returncode>\n<output>\n</output>",  # mini-swe-agent
        "Command: x\nOutput: (empty)\nError: (none)\nExit Code: 124\n",  # Gemini CLI
        '{"output": "", "metadata": {"exit_code": 124, "duration_seconds": 60}}',
        "error: timed out waiting for the condition on deployments/web",  # kubectl
    ],
)
def test_a_bound_that_ran_out_says_the_wait_is_not_over(answer: str) -> None:
    assert bound_ran_out(answer)


@pytest.mark.parametrize(
    "answer",
    [
        "cat: missing.txt: No such file or directory",
        "Process exited with code 1\nOutput:\n124 passed\n",
        "Exit code 1240\n",
        "deployment.apps/web condition met",
        "",
    ],
)
def test_other_answers_say_nothing_of_a_bound(answer: str) -> None:
    assert not bound_ran_out(answer)


def test_a_long_answer_is_read_at_its_ends_only() -> None:
    middle = "Process exited with code 124\n"
    assert not bound_ran_out("x" * 5000 + middle + "y" * 5000)
    assert bound_ran_out("x" * 5000 + middle)


KUBECTL = ("bash", {"command": "kubectl wait --for=condition=available deploy/web --timeout=60s"})
TIMED_OUT = "error: timed out waiting for the condition on deployments/web"


def steps_of(call: tuple[str, Any], answers: list[str]) -> list[tuple[str, Any, str]]:
    return [(call[0], call[1], answer) for answer in answers]


def test_a_wait_whose_bound_runs_out_again_and_again_is_never_refused() -> None:
    """A deployment that takes twenty minutes: twenty ``kubectl wait --timeout=60s`` that
    each time out (an error's words, the same every time)."""
    assert openai_first_flag(steps_of(KUBECTL, [TIMED_OUT] * 20)) is None
    det = LoopDetector()
    calls = [ToolCall(*KUBECTL)]
    for _ in range(20):
        det.record_results(det.check(calls), answers=[TIMED_OUT])


def test_timeout_around_a_watch_is_a_wait_while_it_runs_out() -> None:
    """``timeout 300 gh run watch`` cut at its bound (exit 124) while the run goes on, in
    Claude Code's words: each answer flagged failed, ``Exit code 124``."""
    line = "timeout 300 gh run watch 4242 --exit-status"
    quiet = "Exit code 124\nRefreshing run status every 3 seconds. Press Ctrl+C to quit.\n"
    steps = [("Bash", {"command": line}, quiet, True) for _ in range(15)]
    assert first_flag(anthropic_run, steps, LoopDetector()) is None


def test_a_loop_waiting_in_codex_is_a_wait_while_codex_says_it_runs() -> None:
    line = "until [ -f build/done ]; do sleep 5; done"
    running = "Process running with session ID 41\nOutput:\n"
    steps = [("exec_command", {"cmd": line}, running) for _ in range(15)]
    assert openai_first_flag(steps) is None


def test_the_same_failing_wait_is_still_a_loop() -> None:
    """``sleep 5 && cat missing.txt`` answering "No such file" every time: nothing runs,
    nothing moves. It is caught where ``cat missing.txt`` alone is, live and in a scan."""
    missing = "cat: missing.txt: No such file or directory"
    for line in ("sleep 5 && cat missing.txt", "cat missing.txt"):
        steps = [("bash", {"command": line}, missing) for _ in range(10)]
        assert openai_first_flag(steps) == openai_first_flag(
            [("bash", {"command": "cat missing.txt"}, missing) for _ in range(10)]
        )
        assert openai_first_flag(steps) is not None
    det = LoopDetector()
    calls = [ToolCall("bash", {"command": "sleep 5 && cat missing.txt"})]
    kinds = []
    for _ in range(10):
        try:
            det.record_results(det.check(calls), answers=[missing])
        except LoopDetected as refused:
            kinds.append(refused.kind)
    assert kinds[:1] == ["repeat"]


def test_a_quiet_wait_for_time_is_judged_as_a_read() -> None:
    """Nothing in ``sleep 60 && tail log``'s answer says the job still runs: the same
    answer again is counted as a read-only poll's (its allowance, then a stop)."""
    line = ("bash", {"command": "sleep 60 && tail -n 3 train.log"})
    quiet = steps_of(line, ["epoch 3 loss 0.41"] * 10)
    read = steps_of(("bash", {"command": "tail -n 3 train.log"}), ["epoch 3 loss 0.41"] * 10)
    assert openai_first_flag(quiet) == openai_first_flag(read) is not None
    moving = steps_of(line, [f"epoch {k} loss 0.{90 - k}" for k in range(30)])
    assert openai_first_flag(moving) is None


def test_the_waits_have_a_bound_and_an_off_switch() -> None:
    steps = steps_of(KUBECTL, [TIMED_OUT] * 14)
    assert openai_first_flag(steps, LoopDetector(max_waits=10)) == 11  # the 11th wait
    # Off: a read-only call whose error repeats, judged as it was before waits were read.
    off = openai_first_flag(steps, LoopDetector(max_waits=None))
    assert off is not None
    assert off <= 5


def test_the_live_detector_reads_a_wait_from_a_digest_made_with_its_reading() -> None:
    """What ``loopfuse hook`` hands its detector: a digest, not the text."""
    det = LoopDetector()
    calls = [ToolCall(*KUBECTL)]
    reading = det.settings.error_reading
    for _ in range(20):
        det.record_results(det.check(calls), results_digest(calls, [TIMED_OUT], reading=reading))


# --- Claude Code 2.1.328: Read of a background command's output file -------------------

OUTPUT = "/tmp/claude-1000/-home-dev-p/55c05628/tasks/b7k2m9x.output"


def test_reading_a_background_commands_output_is_a_wait() -> None:
    assert CLAUDE_CODE.kind("Read", {"file_path": OUTPUT}) is ToolKind.WAIT
    assert CLAUDE_CODE.kind("Read", {"file_path": "/home/dev/p/tasks/a.py"}) is ToolKind.READ
    assert CLAUDE_CODE.kind("Read", {"file_path": OUTPUT + ".bak"}) is ToolKind.READ
    assert CLAUDE_CODE.still_running("Read", "1\tbuilding 3/40\n2\t")
    assert not CLAUDE_CODE.still_running("Read", "1\tbuilt\n2\t\n3\t[exited with code 0]\n4\t")
    assert not CLAUDE_CODE.still_running("Read", "1\tbuilding\n2\t[killed]\n")
    assert not CLAUDE_CODE.still_running("Read", "File does not exist.")


def test_polling_a_background_command_quietly_is_never_refused_until_it_ended() -> None:
    start = (
        "Bash",
        {"command": "npm run build", "run_in_background": True},
        f"Command running in background with ID: b7k2m9x. Output is being written to: {OUTPUT}",
        False,
    )
    poll = ("Read", {"file_path": OUTPUT}, "1\t> build\n2\t", None)
    steps = [start, *[poll for _ in range(25)]]
    assert first_flag(anthropic_run, steps, LoopDetector()) is None
    done = ("Read", {"file_path": OUTPUT}, "1\t> build\n2\t\n3\t[exited with code 1]\n4\t", None)
    assert first_flag(anthropic_run, [*steps, *[done] * 8], LoopDetector()) is not None
    missing = ("Read", {"file_path": OUTPUT}, "File does not exist.", True)
    assert first_flag(anthropic_run, [start, *[missing] * 8], LoopDetector()) is not None


def claude_read(call_id: str, content: str | None) -> list[dict[str, Any]]:
    """The hook inputs of one ``Read`` of the output file (2.1.328's shape, as recorded):
    before, then after (``content``) or its failure (``None``)."""
    common = {**CLAUDE_COMMON, "tool_name": "Read", "tool_input": {"file_path": OUTPUT}}
    before = {**common, "hook_event_name": "PreToolUse", "tool_use_id": call_id}
    if content is None:
        after = {
            **common,
            "hook_event_name": "PostToolUseFailure",
            "tool_use_id": call_id,
            "error": "File does not exist.",
            "is_interrupt": False,
        }
    else:
        lines = content.count("\n") + 1
        response = {
            "type": "text",
            "file": {
                "filePath": OUTPUT,
                "content": content,
                "numLines": lines,
                "startLine": 1,
                "totalLines": lines,
            },
        }
        after = {
            **common,
            "hook_event_name": "PostToolUse",
            "tool_use_id": call_id,
            "tool_response": response,
        }
    return [before, after]


def hook_run(tmp_path: Any, payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from test_cli_hook import Hook

    hook = Hook(tmp_path / "state")
    return [hook.answer(payload) for payload in payloads]


def test_the_hook_lets_quiet_polls_of_a_running_command_through(tmp_path: Any) -> None:
    payloads = [
        claude_pre("npm run build", "toolu_0"),
        claude_post("npm run build", "toolu_0", ""),
    ]
    for i in range(1, 16):
        payloads += claude_read(f"toolu_{i}", "> build\n")
    assert all(answer == {} for answer in hook_run(tmp_path, payloads))


def test_the_hook_still_stops_polls_of_a_command_that_ended(tmp_path: Any) -> None:
    payloads = []
    for i in range(12):
        payloads += claude_read(f"toolu_{i}", "> build\n\n[exited with code 1]\n")
    assert any(answer != {} for answer in hook_run(tmp_path, payloads))


def test_the_hook_lets_a_bounded_wait_that_runs_out_through(tmp_path: Any) -> None:
    """``kubectl wait`` in Claude Code: each time out is a failure (``Exit code 1``)."""
    line = KUBECTL[1]["command"]
    payloads = []
    for i in range(15):
        payloads += [claude_pre(line, f"toolu_{i}"), claude_failure(line, f"toolu_{i}", TIMED_OUT)]
    assert all(answer == {} for answer in hook_run(tmp_path, payloads))
    missing = "cat: missing.txt: No such file or directory"
    failing = []
    for i in range(10):
        failing += [
            claude_pre("sleep 5 && cat missing.txt", f"toolu_f{i}"),
            claude_failure("sleep 5 && cat missing.txt", f"toolu_f{i}", missing),
        ]
    assert any(answer != {} for answer in hook_run(tmp_path / "other", failing))
