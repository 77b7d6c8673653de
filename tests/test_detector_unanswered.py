"""``LoopDetector.check(..., answered=False)``: judging calls whose answers never come (a
hook that runs only before a call, as Crush's): no unknown answer is read as a repeated
one; only what stands whatever the answers were is refused."""

from __future__ import annotations

import pytest

from loopfuse.detector import LoopDetected, LoopDetector, ToolCall

WRITE = [ToolCall("write_file", {"path": "a.py", "text": "x"})]
READ = [ToolCall("read_file", {"path": "a.py"})]
TEST = [ToolCall("bash", {"command": "pytest -x"})]


def refused_at(detector: LoopDetector, calls: list[ToolCall], answered: bool, up_to: int) -> int:
    """The number of the first identical call refused (0: none of ``up_to``)."""
    for n in range(1, up_to + 1):
        try:
            detector.check(calls, answered=answered)
        except LoopDetected:
            return n
    return 0


def test_an_unknown_answer_is_not_read_as_a_repeated_one() -> None:
    # Told nothing, the detector reads each missing answer as a repeat: the 4th write.
    assert refused_at(LoopDetector(), WRITE, answered=True, up_to=10) == 4
    # Told the answers never come, it refuses only past the ceiling, which stands
    # whatever the answers were: the 6th identical state-changing call.
    assert refused_at(LoopDetector(), WRITE, answered=False, up_to=10) == 6


def test_a_read_repeated_without_answers_is_never_refused() -> None:
    # A poll whose output moves looks exactly like this when the answers are hidden.
    assert refused_at(LoopDetector(), READ, answered=True, up_to=30) == 6
    assert refused_at(LoopDetector(), READ, answered=False, up_to=30) == 0


def test_a_cycle_is_not_judged_without_answers() -> None:
    # edit, run the tests, edit, run the tests: progress while the output moves.
    def laps(answered: bool) -> int:
        detector = LoopDetector()
        for n in range(1, 21):
            try:
                detector.check(WRITE if n % 2 else TEST, answered=answered)
            except LoopDetected:
                return n
        return 0

    assert laps(answered=True) != 0
    assert laps(answered=False) == 0


def test_the_refusal_claims_nothing_about_the_answers() -> None:
    detector = LoopDetector()
    for _ in range(5):
        detector.check(WRITE, answered=False)
    with pytest.raises(LoopDetected) as found:
        detector.check(WRITE, answered=False)
    message = found.value.message
    assert "6 times in a row" in message
    assert "same result" not in message
    assert "kept changing" not in message


def test_a_tool_limit_still_caps_calls_without_answers() -> None:
    detector = LoopDetector(tool_limits={"read_file": 2})
    assert refused_at(detector, READ, answered=False, up_to=10) == 3


def test_answered_is_the_default_and_unchanged() -> None:
    a, b = LoopDetector(), LoopDetector()
    for _ in range(3):
        a.check(WRITE)
        b.check(WRITE, answered=True)
    with pytest.raises(LoopDetected):
        a.check(WRITE)
    with pytest.raises(LoopDetected):
        b.check(WRITE, answered=True)
