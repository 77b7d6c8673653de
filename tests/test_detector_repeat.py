"""LoopDetector: run-length counting, answers, the read-only allowance and the ceiling."""

from __future__ import annotations

import threading

import pytest

from loopfuse.detector import (
    BatchRecord,
    BatchRecordError,
    LoopDetected,
    LoopDetector,
    RepeatOutcome,
    ToolCall,
    results_digest,
)
from loopfuse.errors import ConfigError, InvalidInputError, LoopfuseError

WRITE = [ToolCall("write_file", {"path": "a.py", "text": "x = 1"})]
READ = [ToolCall("read_file", {"path": "a.py"})]
FETCH = [ToolCall("web_fetch", {"url": "https://example.com"})]


def digest(calls: list[ToolCall], answer: object) -> str | None:
    return results_digest(calls, [answer])


def step(det: LoopDetector, calls: list[ToolCall], answer: object) -> RepeatOutcome:
    """Check, then record ``answer``; raises LoopDetected when refused."""
    record = det.check(calls)
    return det.record_results(record, digest(calls, answer))


def run_until_refused(det: LoopDetector, calls: list[ToolCall], answers: list[object]) -> int:
    """Number of batches that passed before one was refused (len(answers) if none)."""
    for i, answer in enumerate(answers):
        try:
            step(det, calls, answer)
        except LoopDetected:
            return i
    return len(answers)


# --- counting ---------------------------------------------------------------------------


def test_max_strikes_2_allows_two_and_raises_on_the_third() -> None:
    det = LoopDetector(max_strikes=2)
    assert step(det, WRITE, "ok") is RepeatOutcome.NOT_COMPARABLE
    assert step(det, WRITE, "ok") is RepeatOutcome.ANSWER_REPEATED
    with pytest.raises(LoopDetected) as caught:
        det.check(WRITE)
    err = caught.value
    assert isinstance(err, LoopfuseError)
    assert (err.kind, err.count) == ("repeat", 3)
    assert err.signature == det.fresh().check(WRITE).signature
    assert "`write_file`" in err.message
    assert "3 times" in err.message
    assert "same result" in err.message
    assert str(err) == err.message


def test_max_strikes_0_raises_on_the_first() -> None:
    det = LoopDetector(max_strikes=0, max_observation_steps=None)
    with pytest.raises(LoopDetected) as caught:
        det.check(WRITE)
    assert caught.value.count == 1
    assert "same result" not in caught.value.message  # no answer was ever seen


def test_default_max_strikes_is_three() -> None:
    det = LoopDetector()
    assert det.settings.max_strikes == 3
    assert run_until_refused(det, WRITE, ["ok"] * 10) == 3


def test_count_goes_up_before_the_comparison_and_refused_batches_count() -> None:
    det = LoopDetector(max_strikes=1)
    step(det, WRITE, "ok")
    for count in (2, 3, 4):  # a caller that retries a refused batch stays refused
        with pytest.raises(LoopDetected) as caught:
            det.check(WRITE)
        assert caught.value.count == count


def test_only_the_current_unbroken_run_counts() -> None:
    det = LoopDetector(max_strikes=2)
    other = [ToolCall("run_tests", {})]
    step(det, WRITE, "ok")
    step(det, WRITE, "ok")
    step(det, other, "1 failed")  # a different batch starts a new run at 1
    record = det.check(WRITE)
    assert record.count == 1
    det.record_results(record, digest(WRITE, "ok"))
    assert det.check(WRITE).count == 2


def test_signature_ignores_call_order_and_key_order() -> None:
    det = LoopDetector(max_strikes=1)
    a = [ToolCall("edit", {"p": 1, "q": [1, 2]}), ToolCall("run", {"q": "x"})]
    b = [ToolCall("run", '{"q": "x"}'), ToolCall("edit", {"q": [1, 2], "p": 1})]
    det.record_results(det.check(a), results_digest(a, ["r", "g"]))
    with pytest.raises(LoopDetected):
        det.check(b)


def test_break_run_ends_the_run() -> None:
    det = LoopDetector(max_strikes=1)
    step(det, WRITE, "ok")
    det.break_run()
    assert det.check(WRITE).count == 1


# --- answers ------------------------------------------------------------------------------


def test_changed_answer_restarts_the_strikes_at_one() -> None:
    same = LoopDetector(max_strikes=2, max_observation_steps=None)
    step(same, WRITE, "v1")
    step(same, WRITE, "v1")
    with pytest.raises(LoopDetected):  # the control: same answers, refused at the third
        same.check(WRITE)
    det = LoopDetector(max_strikes=2, max_observation_steps=None)
    step(det, WRITE, "v1")
    assert step(det, WRITE, "v2") is RepeatOutcome.ANSWER_CHANGED
    record = det.check(WRITE)  # 3 in a row, but only 2 strikes since the change
    assert (record.count, record.strikes, record.rescued) == (3, 2, True)
    assert det.record_results(record, digest(WRITE, "v2")) is RepeatOutcome.ANSWER_REPEATED
    with pytest.raises(LoopDetected) as caught:
        det.check(WRITE)
    assert caught.value.count == 3  # strikes, not the run's total


def test_rescued_is_true_exactly_when_past_the_threshold_thanks_to_a_moving_answer() -> None:
    det = LoopDetector(max_strikes=2, max_observation_steps=None)
    flags = []
    for answer in ["a", "b", "c", "d"]:
        record = det.check(WRITE)
        flags.append(record.rescued)
        det.record_results(record, digest(WRITE, answer))
    assert flags == [False, False, True, True]
    fresh = LoopDetector(max_strikes=2).check(WRITE)
    assert fresh.rescued is False


def test_first_occurrence_and_unknown_digests_are_not_comparable() -> None:
    det = LoopDetector(max_strikes=5)
    assert step(det, WRITE, "ok") is RepeatOutcome.NOT_COMPARABLE
    record = det.check(WRITE)
    assert det.record_results(record, None) is RepeatOutcome.NOT_COMPARABLE
    record = det.check(WRITE)  # the previous digest is unknown: still not comparable
    assert det.record_results(record, digest(WRITE, "other")) is RepeatOutcome.NOT_COMPARABLE


def test_unknown_answers_never_rescue() -> None:
    det = LoopDetector(max_strikes=2, max_observation_steps=None)
    for _ in range(2):
        det.record_results(det.check(WRITE), None)
    with pytest.raises(LoopDetected) as caught:
        det.check(WRITE)
    assert "same result" not in caught.value.message  # the answers were never seen


def test_answers_never_recorded_do_not_rescue_either() -> None:
    det = LoopDetector(max_strikes=2, max_observation_steps=None)
    det.check(WRITE)
    det.check(WRITE)
    with pytest.raises(LoopDetected):
        det.check(WRITE)


def test_a_record_from_an_ended_run_is_not_the_current_run() -> None:
    det = LoopDetector()
    old = det.check(WRITE)
    det.check(READ)
    assert det.record_results(old, digest(WRITE, "ok")) is RepeatOutcome.NOT_THE_CURRENT_RUN
    old = det.check(READ)
    det.break_run()
    assert det.record_results(old, digest(READ, "x")) is RepeatOutcome.NOT_THE_CURRENT_RUN


def test_a_record_can_be_used_once() -> None:
    det = LoopDetector()
    record = det.check(WRITE)
    det.record_results(record, digest(WRITE, "ok"))
    with pytest.raises(BatchRecordError):
        det.record_results(record, digest(WRITE, "ok"))
    with pytest.raises(BatchRecordError):
        LoopDetector().record_results(det.check(WRITE), None)
    with pytest.raises(BatchRecordError):
        det.record_results("not a record", None)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        det.record_results(det.check(WRITE), 42)  # type: ignore[arg-type]


def test_batch_record_describes_the_batch() -> None:
    record = LoopDetector().check(READ + WRITE)
    assert isinstance(record, BatchRecord)
    assert record.tool_names == ("read_file", "write_file")
    assert record.signature.count("|") == 1
    assert (record.observation, record.costly) == (False, False)
    assert "count=1" in repr(record)


# --- observation allowance and ceiling ----------------------------------------------------


def test_read_only_batches_use_the_observation_allowance() -> None:
    det = LoopDetector(max_strikes=2, max_observation_steps=5)
    assert run_until_refused(det, READ, ["same"] * 10) == 5
    assert run_until_refused(LoopDetector(max_strikes=2), WRITE, ["same"] * 10) == 2


def test_quiet_status_polls_get_the_allowance() -> None:
    poll = [ToolCall("job_status", {"id": 7})]
    assert run_until_refused(LoopDetector(max_strikes=2), poll, ["running"] * 10) == 5
    poll = [ToolCall("get_terminal_output", {"terminal": 1})]
    assert run_until_refused(LoopDetector(max_strikes=2), poll, ["..."] * 10) == 5


def test_read_only_batch_with_moving_answers_passes_forever() -> None:
    det = LoopDetector(max_strikes=2, max_observation_steps=5)
    answers = [f"Compiling {i}/120" for i in range(100)]
    assert run_until_refused(det, READ, answers) == 100


def test_state_changing_batch_carried_by_moving_answers_is_refused_past_the_allowance() -> None:
    det = LoopDetector(max_strikes=2, max_observation_steps=5)
    answers = [f"file now has {100 + i} lines" for i in range(20)]
    assert run_until_refused(det, WRITE, answers) == 5
    with pytest.raises(LoopDetected) as caught:
        det.check(WRITE)
    assert caught.value.count == 7  # the total never resets within the run
    assert "kept changing" not in caught.value.message  # the 6th answer was never given
    det = LoopDetector(max_strikes=2, max_observation_steps=5)
    for answer in answers[:5]:
        step(det, WRITE, answer)
    with pytest.raises(LoopDetected) as caught:
        det.check(WRITE)
    assert caught.value.count == 6
    assert "kept changing" in caught.value.message


def test_no_ceiling_without_an_observation_allowance() -> None:
    det = LoopDetector(max_strikes=2, max_observation_steps=None)
    assert run_until_refused(det, WRITE, [f"v{i}" for i in range(30)]) == 30
    assert (
        run_until_refused(LoopDetector(max_strikes=2, max_observation_steps=None), READ, ["x"] * 5)
        == 2
    )


def test_the_allowance_never_makes_the_guard_stricter_than_max_strikes() -> None:
    det = LoopDetector(max_strikes=4, max_observation_steps=1)
    assert run_until_refused(det, READ, ["same"] * 10) == 4
    det = LoopDetector(max_strikes=4, max_observation_steps=1)
    assert run_until_refused(det, WRITE, [f"v{i}" for i in range(10)]) == 4  # ceiling 4, not 1


def test_costly_read_only_tools_keep_max_strikes_and_the_ceiling() -> None:
    det = LoopDetector(max_strikes=2, max_observation_steps=5)
    assert run_until_refused(det, FETCH, ["same page"] * 10) == 2
    det = LoopDetector(max_strikes=2, max_observation_steps=5)
    assert run_until_refused(det, FETCH, [f"page v{i}" for i in range(10)]) == 5
    record = LoopDetector().check(FETCH)
    assert (record.observation, record.costly) == (True, True)


def test_a_mixed_batch_is_not_read_only() -> None:
    det = LoopDetector(max_strikes=2, max_observation_steps=5)
    assert run_until_refused(det, READ + WRITE, [["a", "b"]] * 10) == 2


# --- configuration and input ------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_strikes": -1},
        {"max_strikes": 2.0},
        {"max_strikes": True},
        {"max_strikes": "3"},
        {"max_observation_steps": -2},
        {"max_cycle_period": -1},
        {"max_cycle_laps": None},
        {"max_stagnation_steps": 1.5},
        {"normalize_answers": "yes"},
        {"observation_tools": "read_file"},
        {"costly_tools": [3]},
        {"observation_tools": ["__"]},
    ],
)
def test_bad_configuration_raises_config_error(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as caught:
        LoopDetector(**kwargs)  # type: ignore[arg-type]
    assert isinstance(caught.value, ValueError)  # ConfigError is also a ValueError


@pytest.mark.parametrize("calls", [[], ToolCall("ls", {}), "ls", [("ls", {})], [None], 7])
def test_check_refuses_what_is_not_a_batch(calls: object) -> None:
    with pytest.raises(InvalidInputError):
        LoopDetector().check(calls)  # type: ignore[arg-type]


def test_fresh_has_the_settings_and_none_of_the_state() -> None:
    det = LoopDetector(max_strikes=1, max_observation_steps=7, max_cycle_laps=4)
    step(det, WRITE, "ok")
    clone = det.fresh()
    kept = clone.settings
    assert (kept.max_strikes, kept.max_observation_steps, kept.max_cycle_laps) == (1, 7, 4)
    assert clone.check(WRITE).count == 1
    with pytest.raises(LoopDetected):
        det.check(WRITE)


def test_shared_between_threads_every_check_is_counted() -> None:
    det = LoopDetector(max_strikes=10_000, max_observation_steps=None)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(500):
                record = det.check(WRITE)
                det.record_results(record, None)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert det.check(WRITE).count == 8 * 500 + 1
