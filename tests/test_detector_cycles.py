"""Cycles: A -> B -> A -> B ..., refused only when every lap got the same answers."""

from __future__ import annotations

import pytest

from loopfuse.detector import LoopDetected, LoopDetector, ToolCall, results_digest
from loopfuse.detector.records import HistoryEntry
from loopfuse.detector.signals.cycle import find_cycle
from loopfuse.errors import ConfigError

EDIT = [ToolCall("edit", {"path": "a.py", "line": 3, "text": "x = 1"})]
TEST = [ToolCall("run_tests", {"path": "tests/"})]
OPEN = [ToolCall("open_file", {"path": "a.py"})]
SCROLL = [ToolCall("scroll_down", {})]
THIRD = [ToolCall("bash", {"command": "git diff"})]


def play(det: LoopDetector, laps: list[tuple[list[ToolCall], str]]) -> int:
    """Run the batches in order; the number that passed before one was refused."""
    for i, (calls, answer) in enumerate(laps):
        try:
            record = det.check(calls)
        except LoopDetected:
            return i
        det.record_results(record, results_digest(calls, [answer]))
    return len(laps)


def test_abab_with_the_same_answers_is_refused_on_the_third_lap() -> None:
    det = LoopDetector(max_cycle_laps=2)
    laps = [(EDIT, "edited"), (TEST, "1 failed")] * 5
    assert play(det, laps) == 4  # A B A B pass; the third A is refused
    with pytest.raises(LoopDetected) as caught:
        det.check(EDIT)
    err = caught.value
    assert (err.kind, err.period) == ("cycle", 2)
    assert err.count == 4  # the refused lap is counted, like a refused repeat
    assert err.tool_names == ("run_tests", "edit")
    assert "cycle of 2 steps" in err.message
    assert "`edit`" in err.message


def test_period_three_cycle() -> None:
    laps = [(EDIT, "edited"), (TEST, "1 failed"), (THIRD, "diff")] * 4
    assert play(LoopDetector(max_cycle_laps=2), laps) == 6


def test_moving_answers_in_a_cycle_are_progress() -> None:
    laps = []
    for i in range(20):
        laps += [(EDIT, "edited"), (TEST, f"{20 - i} failed")]
    assert play(LoopDetector(max_cycle_laps=2), laps) == 40


def test_one_moving_lap_restarts_the_count() -> None:
    laps = [(EDIT, "e"), (TEST, "2 failed"), (EDIT, "e"), (TEST, "1 failed")]
    laps += [(EDIT, "e"), (TEST, "1 failed"), (EDIT, "e"), (TEST, "1 failed")]
    # Laps 2, 3 and 4 repeat; the answers moved between laps 1 and 2.
    assert play(LoopDetector(max_cycle_laps=2), laps) == 6


def test_a_x_a_is_not_a_cycle() -> None:
    laps = [(OPEN, "code"), (EDIT, "e1"), (OPEN, "code"), (THIRD, "diff"), (OPEN, "code")]
    assert play(LoopDetector(max_cycle_laps=1), laps) == 5


def test_max_cycle_laps_one_refuses_the_second_lap() -> None:
    laps = [(EDIT, "e"), (TEST, "t")] * 3
    assert play(LoopDetector(max_cycle_laps=1), laps) == 3


def test_cycles_longer_than_max_cycle_period_are_not_looked_for() -> None:
    batches = [[ToolCall("step", {"n": n})] for n in range(5)]
    laps = [(calls, "same") for calls in batches] * 4
    # (Each step is a near variant of the one before with the same answer: that is its
    # own signal, switched off here.)
    assert play(LoopDetector(max_cycle_period=4, max_near_repeats=None), laps) == 20
    assert play(LoopDetector(max_cycle_period=5, max_near_repeats=None), laps) == 10
    assert play(LoopDetector(max_cycle_period=4), laps) == 4


def test_cycle_detection_can_be_switched_off() -> None:
    laps = [(EDIT, "e"), (TEST, "t")] * 10
    assert play(LoopDetector(max_cycle_period=None), laps) == 20
    for short in (0, 1):
        with pytest.raises(ConfigError, match="use None to turn cycles off"):
            LoopDetector(max_cycle_period=short)


def test_read_only_cycles_get_the_observation_allowance() -> None:
    laps = [(OPEN, "code"), (SCROLL, "more code")] * 10
    assert play(LoopDetector(max_cycle_laps=2, max_observation_steps=5), laps) == 10


def test_unknown_answers_do_not_rescue_a_cycle() -> None:
    det = LoopDetector(max_cycle_laps=2)
    for calls in [EDIT, TEST, EDIT, TEST]:
        det.record_results(det.check(calls), None)
    with pytest.raises(LoopDetected):
        det.check(EDIT)


def test_a_user_turn_clears_the_cycle_history() -> None:
    det = LoopDetector(max_cycle_laps=2)
    play(det, [(EDIT, "e"), (TEST, "t")] * 2)
    det.break_run()
    assert play(det, [(EDIT, "e"), (TEST, "t")] * 2) == 4


def test_repeats_inside_a_lap_are_fine() -> None:
    laps = [(EDIT, "e"), (EDIT, "e2"), (TEST, "t")] * 4  # lap A A' B, period 3
    assert play(LoopDetector(max_cycle_laps=2, max_strikes=5), laps) == 6


def entry(key: str, answers: str | None) -> HistoryEntry:
    e = HistoryEntry(key, (key,), False)
    e.answers = answers
    return e


def test_find_cycle_reports_the_shortest_period() -> None:
    history = [entry(k, k.lower()) for k in "ABABABA"]
    hit = find_cycle(history, 6, 2, 5, True)
    assert hit is not None
    assert (hit.period, hit.laps) == (2, 4)
    assert hit.previous is history[-3]


def test_find_cycle_needs_history() -> None:
    assert find_cycle([], 4, 2, 5, True) is None
    assert find_cycle([entry("A", "a")], 4, 2, 5, True) is None
    assert find_cycle([entry("A", "a")] * 6, 4, 1, 5, True) is None  # a repeat, not a cycle
