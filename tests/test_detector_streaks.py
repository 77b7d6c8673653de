"""Answer-based signals: error streaks, near repeats, unchanged checks, error storms.

Each signal is tested live (``check`` / ``record_results``: it trips on the answers and
refuses the next batch once) and through ``scan`` (the request after the answers that
complete the pattern is flagged), with its off switch.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_runs import openai_run
from loopfuse.detector import LoopDetected, LoopDetector, ToolCall, results_digest, scan
from loopfuse.errors import ConfigError, InvalidInputError

MISSING = (
    "Traceback (most recent call last):\n  File \"x\"\nModuleNotFoundError: No module named 'yaml'"
)
ONLY = {"max_strikes": None, "max_cycle_period": None, "error_aware": False}
OFF = {
    "max_error_streak": None,
    "max_near_repeats": None,
    "max_unchanged_checks": None,
    "error_storm": None,
}


def bash(command: str) -> list[ToolCall]:
    return [ToolCall("bash", {"command": command})]


def live(det: LoopDetector, steps: list[tuple[list[ToolCall], str]]) -> int | LoopDetected:
    """Run the steps; the refusal, or how many ran when none was refused."""
    for calls, answer in steps:
        try:
            record = det.check(calls)
        except LoopDetected as loop:
            return loop
        det.record_results(record, results_digest(calls, [answer]))
    return len(steps)


def conversation(steps: list[tuple[list[ToolCall], str]]) -> dict[str, Any]:
    return openai_run([(calls[0].name, calls[0].arguments, answer) for calls, answer in steps])


def first_flag(steps: list[tuple[list[ToolCall], str]], det: LoopDetector) -> int | None:
    """How many steps the first flagged request holds (``None``: never flagged)."""
    for n in range(1, len(steps) + 1):
        verdict = scan(conversation(steps[:n]), detector=det)
        if not verdict.ok:
            return n
    return None


# --- error streak ---------------------------------------------------------------------


VARIANTS = [bash(f"python -m tool.cli{i} --run") for i in range(8)]


def test_the_same_error_for_every_variant_is_an_error_streak() -> None:
    steps = [(calls, MISSING) for calls in VARIANTS]
    loop = live(LoopDetector(), steps)
    assert isinstance(loop, LoopDetected)
    assert (loop.kind, loop.count) == ("error_streak", 4)  # 3 allowed, tripped by the 4th
    assert "same error" in loop.message
    assert loop.signature.startswith("answer:")
    verdict = scan(conversation(steps[:4]))
    assert (verdict.ok, verdict.kind, verdict.count) == (False, "error_streak", 4)
    # The message quotes the line that says what failed, not the traceback's header.
    assert "`ModuleNotFoundError: No module named 'yaml'`" in (verdict.message or "")
    assert verdict.signature == loop.signature
    assert first_flag(steps, LoopDetector()) == 4


def test_the_scan_message_quotes_the_first_line_of_the_error() -> None:
    steps = [(calls, "/bin/bash: line 3: javac: command not found") for calls in VARIANTS]
    verdict = scan(conversation(steps[:4]))
    assert verdict.kind == "error_streak"
    assert "javac: command not found" in (verdict.message or "")


def test_an_error_that_changes_is_progress() -> None:
    steps = [(calls, f"ImportError: cannot import name 'x{i}'") for i, calls in enumerate(VARIANTS)]
    assert live(LoopDetector(**ONLY), steps) == len(steps)
    assert first_flag(steps, LoopDetector()) is None


def test_the_same_success_is_not_an_error_streak() -> None:
    steps = [(calls, "all 12 tests passed") for calls in VARIANTS]
    assert live(LoopDetector(**ONLY, **{**OFF, "max_error_streak": 3}), steps) == len(steps)


def test_an_empty_failure_is_not_an_error_streak() -> None:
    # grep finding nothing exits 1 with no output: it says nothing, it is not stuck.
    steps = [
        (bash(f"grep -rn name{i} src/"), "<returncode>1</returncode>\n<output>\n</output>")
        for i in range(8)
    ]
    assert live(LoopDetector(**ONLY, **{**OFF, "max_error_streak": 1}), steps) == len(steps)


def test_a_tripped_signal_refuses_the_next_batch_once() -> None:
    det = LoopDetector(**ONLY, **{**OFF, "max_error_streak": 2})
    for calls in VARIANTS[:3]:
        det.record_results(det.check(calls), results_digest(calls, [MISSING]))
    with pytest.raises(LoopDetected) as caught:
        det.check(bash("pip install pyyaml"))  # whatever the batch
    assert caught.value.kind == "error_streak"
    assert caught.value.record is not None
    # Not run: the next batch passes (one refusal per trip), and the streak goes on
    # through the refused batch: one more failure trips it again at once.
    record = det.check(VARIANTS[3])
    det.record_results(record, results_digest(VARIANTS[3], [MISSING]))
    with pytest.raises(LoopDetected) as again:
        det.check(VARIANTS[4])
    assert again.value.count == 4


def test_a_refused_batch_run_anyway_is_judged_on_its_answers() -> None:
    det = LoopDetector(**ONLY, **{**OFF, "max_error_streak": 2})
    for calls in VARIANTS[:3]:
        det.record_results(det.check(calls), results_digest(calls, [MISSING]))
    fix = bash("pip install pyyaml")
    with pytest.raises(LoopDetected) as caught:
        det.check(fix)
    assert caught.value.record is not None
    det.record_results(caught.value.record, results_digest(fix, ["Successfully installed"]))
    det.check(VARIANTS[3])  # the streak is broken: no refusal


def test_error_streak_can_be_switched_off() -> None:
    steps = [(calls, MISSING) for calls in VARIANTS]
    assert live(LoopDetector(**ONLY, **OFF), steps) == len(steps)
    assert first_flag(steps, LoopDetector(**ONLY, **OFF)) is None


# --- error-aware strikes --------------------------------------------------------------


def test_a_repeated_error_is_refused_one_repeat_earlier() -> None:
    calls = bash("cd fastjson/ && mvn compile")
    error = "bash: line {}: cd: fastjson/: No such file or directory"
    failing = [(calls, error.format(100 + i)) for i in range(6)]
    loop = live(LoopDetector(max_error_streak=None), failing)
    assert isinstance(loop, LoopDetected)
    assert (loop.kind, loop.count) == ("repeat", 3)
    quiet = [(bash("python setup.py build"), "nothing to do") for _ in range(6)]
    loop = live(LoopDetector(), quiet)
    assert isinstance(loop, LoopDetected)
    assert (loop.kind, loop.count) == ("repeat", 4)
    loop = live(LoopDetector(error_aware=False, max_error_streak=None), failing)
    assert isinstance(loop, LoopDetected)
    assert loop.count == 4
    # A read-only command gets the read-only allowance (5), one less for an error.
    looking = [(bash("cd fastjson/"), error.format(100 + i)) for i in range(8)]
    loop = live(LoopDetector(max_error_streak=None), looking)
    assert isinstance(loop, LoopDetected)
    assert (loop.kind, loop.count) == ("repeat", 5)


# --- near repeats ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "commands",
    [
        [f"find /{d} -name javac" for d in ("usr", "opt", "etc", "srv", "home")],
        [f"sed -n '{n},{n + 20}p' a.py" for n in (10, 30, 50, 70, 90)],
        [
            "grep -rn foo  src/",
            "grep -rn foo src/",
            "grep -rn  foo src/",
            "grep -rn foo src/ ",
            "grep  -rn foo src/",
        ],
    ],
)
def test_near_variants_with_the_same_answer_are_a_near_repeat(commands: list[str]) -> None:
    steps = [(bash(c), "the same listing\nof three\nlines") for c in commands]
    loop = live(LoopDetector(**ONLY, **{**OFF, "max_near_repeats": 3}), steps)
    assert isinstance(loop, LoopDetected)
    assert (loop.kind, loop.count) == ("near_repeat", 4)
    assert "differ only slightly" in loop.message
    verdict = scan(conversation(steps[:4]), detector=LoopDetector(**{**OFF, "max_near_repeats": 3}))
    assert verdict.kind == "near_repeat"


def test_different_commands_with_the_same_answer_are_not_near() -> None:
    commands = ["ls -la", "git status --short", "cat setup.cfg | head", "python -V", "pwd"]
    steps = [(bash(c), "same text") for c in commands]
    assert live(LoopDetector(**ONLY, **{**OFF, "max_near_repeats": 1}), steps) == len(steps)


def test_near_variants_whose_answers_move_are_progress() -> None:
    steps = [
        (bash(f"sed -n '{n},{n + 20}p' a.py"), f"code at line {n}") for n in range(10, 200, 20)
    ]
    assert live(LoopDetector(**ONLY, **{**OFF, "max_near_repeats": 1}), steps) == len(steps)


# --- no progress across edits -----------------------------------------------------------


def edits_and_checks(n: int, answer: str) -> list[tuple[list[ToolCall], str]]:
    steps = []
    for i in range(n):
        steps.append(
            (
                [ToolCall("str_replace", {"path": "a.py", "old": f"v{i}", "new": f"v{i + 1}"})],
                "edited",
            )
        )
        steps.append((bash("python reproduce.py"), answer))
    return steps


def test_the_same_failing_check_across_edits_is_no_progress() -> None:
    steps = edits_and_checks(8, "AssertionError: expected 3, got 2")
    loop = live(LoopDetector(**ONLY, **{**OFF, "max_unchanged_checks": 5}), steps)
    assert isinstance(loop, LoopDetected)
    assert (loop.kind, loop.count) == ("no_progress", 6)
    assert "same check" in loop.message
    verdict = scan(
        conversation(steps[:12]), detector=LoopDetector(**{**OFF, "max_unchanged_checks": 5})
    )
    assert (verdict.kind, verdict.count) == ("no_progress", 6)


def test_a_check_that_passes_or_moves_is_not_stuck() -> None:
    passing = edits_and_checks(10, "OK: all good")
    assert live(LoopDetector(**ONLY, **{**OFF, "max_unchanged_checks": 1}), passing) == len(passing)
    moving = []
    for i, step in enumerate(edits_and_checks(10, "")):
        moving.append(step if i % 2 == 0 else (step[0], f"AssertionError: {i} left"))
    assert live(LoopDetector(**ONLY, **{**OFF, "max_unchanged_checks": 1}), moving) == len(moving)


def test_a_check_run_twice_in_a_row_is_a_repeat_not_no_progress() -> None:
    steps = [(bash("python reproduce.py"), "AssertionError: x")] * 10
    det = LoopDetector(**ONLY, **{**OFF, "max_unchanged_checks": 1})
    assert live(det, steps) == len(steps)


# --- error storm ----------------------------------------------------------------------


def test_nearly_every_call_failing_is_an_error_storm() -> None:
    steps = [
        (bash(f"apt-get install pkg{i}"), f"E: Unable to locate package pkg{i}\nerror: {i}")
        for i in range(14)
    ]
    loop = live(LoopDetector(**ONLY, **{**OFF, "error_storm": (10, 12)}), steps)
    assert isinstance(loop, LoopDetected)
    assert (loop.kind, loop.count) == ("error_storm", 12)
    assert "of your last 12 tool calls failed" in loop.message


def test_failures_among_successes_are_no_storm() -> None:
    steps = []
    for i in range(30):
        ok = i % 4 == 0
        steps.append((bash(f"make t{i}"), "built" if ok else f"error: t{i} failed"))
    assert live(LoopDetector(**ONLY, **{**OFF, "error_storm": (10, 12)}), steps) == len(steps)


# --- settings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"max_error_streak": 0}, "max_error_streak"),
        ({"max_error_streak": "3"}, "max_error_streak"),
        ({"max_near_repeats": -1}, "max_near_repeats"),
        ({"max_unchanged_checks": 40}, "max_unchanged_checks"),
        ({"error_storm": (13, 12)}, "error_storm"),
        ({"error_storm": [10, 12]}, "error_storm"),
        ({"error_storm": (10, 100)}, "error_storm"),
        ({"window": 4}, "window"),
        ({"error_aware": 1}, "error_aware"),
        ({"enabled": "no"}, "enabled"),
        ({"tool_limits": {"deploy": -1}}, "tool_limits"),
        ({"tool_limits": ["deploy"]}, "tool_limits"),
        ({"tool_limits": {"": 1}}, "tool_limits"),
        ({"ignore_tools": "think"}, "ignore_tools"),
        ({"ignore_tools": [3]}, "ignore_tools"),
    ],
)
def test_every_setting_is_validated_by_name(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        LoopDetector(**kwargs)


def test_record_results_refuses_a_string_that_is_no_digest() -> None:
    det = LoopDetector()
    calls = bash("ls")
    with pytest.raises(InvalidInputError, match="answers="):
        det.record_results(det.check(calls), "error")


def test_record_results_takes_raw_answers() -> None:
    det = LoopDetector(**ONLY, **{**OFF, "max_error_streak": 2})
    for calls in VARIANTS[:3]:
        det.record_results(det.check(calls), answers=[MISSING])
    with pytest.raises(LoopDetected):
        det.check(VARIANTS[3])
    record = LoopDetector().check(VARIANTS[0])
    with pytest.raises(InvalidInputError, match="not both"):
        LoopDetector().record_results(record, results_digest(VARIANTS[0], ["x"]), answers=["x"])


# --- bounded however long the run ------------------------------------------------------


def test_a_long_run_keeps_a_bounded_window_and_bounded_memory() -> None:
    import tracemalloc

    det = LoopDetector()
    settings = det.settings

    def run(n: int, start: int) -> None:
        for i in range(start, start + n):
            calls = bash(f"python step_{i % 500}.py")  # 500 commands: the caches fill up
            record = det.check(calls)
            answer = f"ok {i}" if i % 3 else f"Error: step {i} failed"
            det.record_results(record, results_digest(calls, [answer]))

    run(1_000, 0)  # caches and the window fill up
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    run(6_000, 1_000)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert len(det._core.history) == settings.history_len
    assert grown < 500_000, grown  # bounded caches, not the run
