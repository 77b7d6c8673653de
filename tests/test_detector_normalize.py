"""Answer normalisation: drifting noise is the same answer; real progress is not."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopfuse.detector import LoopDetected, LoopDetector, ToolCall, normalize_answer, results_digest

DRIFT = [
    (
        "/bin/bash: line 13068: cd: fastjson/: No such file or directory",
        "/bin/bash: line 13083: cd: fastjson/: No such file or directory",
    ),
    (
        "ERROR 2024-05-01T10:00:03Z connection refused",
        "ERROR 2024-05-01T10:00:09.125Z connection refused",
    ),
    ("[10:00:03] build failed", "[10:02:41] build failed"),
    ("Ran 12 tests in 0.031s\nFAILED (failures=2)", "Ran 12 tests in 0.029s\nFAILED (failures=2)"),
    ("wrote /tmp/tmpa8x2k1qz/out.json", "wrote /tmp/tmpq01mm3zz/out.json"),
    ("<Foo object at 0x7f3a2c1d9e80>", "<Foo object at 0x7f3a2c1e01f0>"),
    (
        "request 3f2a9c1e-0b7d-4e55-9a1c-2b3c4d5e6f70 failed",
        "request 8d1e2f3a-4b5c-4d6e-8f70-1a2b3c4d5e6f failed",
    ),
    ("HEAD is now at 4e8c2a1f fix", "HEAD is now at 9b7d3c02 fix"),
    ("server (pid 4121) exited", "server (pid 4133) exited"),
    ("done  \n", "done\n"),
    ("took 120 ms", "took 95 ms"),
]

PROGRESS = [
    ("Compiling 34/120", "Compiling 56/120"),
    ("Downloading... 45%", "Downloading... 60%"),
    ("3 passed, 2 failed", "4 passed, 1 failed"),
    ("[File: a.java (267 lines total)]", "[File: a.java (278 lines total)]"),
    ("queue length: 12", "queue length: 9"),
    ("line 12: x = 1", "line 13: x = 1"),  # a file listing, not a shell error prefix
    ("Compiling 34/120 (elapsed 00:01:02)", "Compiling 56/120 (elapsed 00:01:40)"),
    ("balance: 1203", "balance: 833"),
    ("ok in 0.5s", "failed in 0.5s"),
]


@pytest.mark.parametrize(("a", "b"), DRIFT)
def test_incidental_drift_normalises_away(a: str, b: str) -> None:
    assert a != b
    assert normalize_answer(a) == normalize_answer(b)


@pytest.mark.parametrize(("a", "b"), PROGRESS)
def test_real_progress_survives_normalisation(a: str, b: str) -> None:
    assert normalize_answer(a) != normalize_answer(b)


@given(st.text())
def test_normalisation_is_idempotent_and_never_raises(text: str) -> None:
    once = normalize_answer(text)
    assert normalize_answer(once) == once


BASH = [ToolCall("bash", {"command": "cd fastjson/ && mvn -q compile"})]
POLL = [ToolCall("bash", {"command": "make -j8 2>&1 | tail -1"})]


def passes(det: LoopDetector, calls: list[ToolCall], answers: list[str]) -> int:
    for i, answer in enumerate(answers):
        try:
            record = det.check(calls)
        except LoopDetected:
            return i
        det.record_results(record, results_digest(calls, [answer]))
    return len(answers)


def test_a_failing_command_whose_error_drifts_is_a_loop() -> None:
    answers = [f"/bin/bash: line {13000 + 15 * i}: cd: fastjson/: No such file" for i in range(9)]
    assert passes(LoopDetector(max_strikes=2, max_observation_steps=None), BASH, answers) == 2
    # Without normalisation every answer "moves", and only the ceiling would stop it.
    det = LoopDetector(
        max_strikes=2, max_observation_steps=None, normalize_answers=False, max_error_streak=None
    )
    assert passes(det, BASH, answers) == 9


def test_a_poll_whose_output_really_moves_passes() -> None:
    answers = [f"[{10 + i}:00:00] Compiling {10 * i}/120 (took {i}.2s)" for i in range(12)]
    assert passes(LoopDetector(max_strikes=2, max_observation_steps=None), POLL, answers) == 12


def test_a_poll_stuck_on_the_same_progress_with_new_timestamps_is_a_loop() -> None:
    answers = [f"[{10 + i}:00:00] Compiling 34/120 (took {i}.2s)" for i in range(12)]
    assert passes(LoopDetector(max_strikes=2, max_observation_steps=None), POLL, answers) == 2
