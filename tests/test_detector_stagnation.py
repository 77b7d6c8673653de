"""StagnationDetector: the same prose answer again and again."""

from __future__ import annotations

import pytest

from loopfuse.detector import StagnationDetected, StagnationDetector
from loopfuse.errors import ConfigError, InvalidInputError, LoopfuseError

TEXT = "I will now fix the bug in parser.py."


def test_more_than_max_steps_identical_answers_raise() -> None:
    det = StagnationDetector(max_steps=5)
    for _ in range(5):
        det.record(TEXT, made_tool_calls=False)
    with pytest.raises(StagnationDetected) as caught:
        det.record(TEXT, made_tool_calls=False)
    err = caught.value
    assert isinstance(err, LoopfuseError)
    assert (err.count, err.max_steps, err.kind) == (6, 5, "stagnation")
    assert "same answer 6 times" in err.message


def test_turns_that_called_a_tool_are_not_recorded() -> None:
    det = StagnationDetector(max_steps=1)
    det.record(TEXT, made_tool_calls=False)
    for _ in range(10):
        det.record(TEXT, made_tool_calls=True)
    with pytest.raises(StagnationDetected):
        det.record(TEXT)


def test_a_user_turn_clears_it() -> None:
    det = StagnationDetector(max_steps=2)
    det.record(TEXT)
    det.record(TEXT)
    det.clear()
    det.record(TEXT)
    det.record(TEXT)
    with pytest.raises(StagnationDetected):
        det.record(TEXT)


def test_only_the_window_of_four_times_max_steps_prose_turns_counts() -> None:
    det = StagnationDetector(max_steps=2)  # window: 8 prose turns
    det.record(TEXT)
    det.record(TEXT)
    for i in range(7):
        det.record(f"something else {i}")
    det.record(TEXT)  # the first TEXT has left the window: 2 in the window, not 3
    for i in range(5):
        det.record(f"filler {i}")
    det.record(TEXT)  # three in the last 8 prose turns
    with pytest.raises(StagnationDetected):
        det.record(TEXT)


def test_whitespace_does_not_make_a_new_answer() -> None:
    det = StagnationDetector(max_steps=1)
    det.record("Let me  check\nthe file.")
    with pytest.raises(StagnationDetected):
        det.record(" Let me check the file. ")


def test_different_answers_and_blank_text_pass() -> None:
    det = StagnationDetector(max_steps=1)
    for i in range(100):
        det.record(f"step {i}")
        det.record("   ")
        det.record("")


def test_max_steps_zero_raises_on_the_first_answer() -> None:
    with pytest.raises(StagnationDetected):
        StagnationDetector(max_steps=0).record(TEXT)


@pytest.mark.parametrize("value", [-1, 2.5, True, "5", None])
def test_bad_configuration(value: object) -> None:
    with pytest.raises(ConfigError):
        StagnationDetector(max_steps=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", [None, 3, b"bytes", ["a"]])
def test_text_must_be_a_str(text: object) -> None:
    with pytest.raises(InvalidInputError):
        StagnationDetector().record(text)  # type: ignore[arg-type]


def test_default_and_property() -> None:
    assert StagnationDetector().max_steps == 5
