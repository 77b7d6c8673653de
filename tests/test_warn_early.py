"""``mode="warn"`` notes a loop one count before ``mode="refuse"`` refuses it, and refuses
it where ``refuse`` does (``note_early``, issue 27): the note is a warning, not a lap."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bash_requests import bash_request as _steps
from loopfuse import Guard, GuardEvent, LoopDetector
from loopfuse.cli.main import main
from loopfuse.detector import DetectorSettings

Steps = list[tuple[str, str]]

_MISSING = "ModuleNotFoundError: No module named 'tablib'"


def _actions(guard: Guard, steps: Steps) -> list[str]:
    """The guard's action on each request of one conversation, as it grows."""
    return [guard.check(_steps(steps[:n])).action for n in range(1, len(steps) + 1)]


LOOPS = {
    "the same call, the same answer": [("python build.py", "built 3 files")] * 7,
    "variants failing alike": [(f"python run.py --v {i}", _MISSING) for i in range(7)],
    "a cycle": [("make", "make: *** [all] Error 2"), ("vim Makefile", "edited")] * 5,
}


@pytest.mark.parametrize("steps", LOOPS.values(), ids=LOOPS.keys())
def test_warn_notes_one_request_before_refuse_refuses_and_refuses_where_it_does(
    steps: Steps,
) -> None:
    warned = _actions(Guard(mode="warn", breaker=None), steps)
    refused = _actions(Guard(mode="refuse", breaker=None), steps)
    stop = refused.index("refuse")
    assert "refuse" not in refused[:stop]
    assert warned[:stop] == ["forward"] * (stop - 1) + ["note"]
    assert warned[stop:] == refused[stop:] == ["refuse"] * (len(steps) - stop)


@pytest.mark.parametrize("steps", LOOPS.values(), ids=LOOPS.keys())
def test_without_note_early_the_note_comes_where_refuse_refuses(steps: Steps) -> None:
    """``note_early=False``: the note where ``refuse`` refuses, the refusal one later."""
    late = _actions(Guard(mode="warn", breaker=None, note_early=False), steps)
    refused = _actions(Guard(mode="refuse", breaker=None), steps)
    stop = refused.index("refuse")
    assert late[: stop + 2] == ["forward"] * stop + ["note", "refuse"]


def test_a_loop_seen_only_at_the_early_counts_is_noted_never_refused() -> None:
    """A call that repeats three times (one short of the refusal), then another that does:
    each gets a note, and nothing is refused, in the conversation noted before too."""
    first = [("python build.py", "built 3 files")] * 3
    second = [("python gen.py", "generated 2 files")] * 3
    steps = [*first, ("ls", "a b"), *second, ("ls -l", "a b c")]
    actions = _actions(Guard(mode="warn", breaker=None), steps)
    assert actions == ["forward", "forward", "note", "forward"] * 2
    assert "refuse" not in _actions(Guard(mode="refuse", breaker=None), steps)


def test_a_call_failing_again_after_an_early_note_is_refused_only_at_the_detectors_count() -> None:
    """Noted early for variants failing alike, the agent reads a file, then fails the very
    same way once more: no count reached the refusal, so it goes on (an early note's
    failure is not held against the run: that would stop runs `refuse` lets through).
    A note given at the detector's own count still is (the note ignored)."""
    noted = [(f"python run.py --v {i}", _MISSING) for i in range(3)]
    guard = Guard(mode="warn", breaker=None)
    assert _actions(guard, noted) == ["forward", "forward", "note"]
    read = ("sed -n 1,5p run.py", "import tablib")
    again = [*noted, read, ("python run.py -x", _MISSING)]
    assert guard.check(_steps(again)).action == "forward"
    assert Guard(mode="refuse", breaker=None).check(_steps(again)).action == "forward"
    # The same call failing three times is noted at the detector's own count (no count
    # comes sooner: an error is refused one repeat early already): the same read and
    # failure after it are refused.
    at_count = [("python run.py", _MISSING)] * 3
    guard = Guard(mode="warn", breaker=None)
    assert _actions(guard, at_count) == ["forward", "forward", "note"]
    assert Guard(mode="refuse", breaker=None).check(_steps(at_count)).action == "refuse"
    decision = guard.check(_steps([*at_count, read, ("python run.py -x", _MISSING)]))
    assert decision.action == "refuse"
    assert "went on after loopfuse's note" in (decision.message or "")


def test_an_early_note_is_an_event_of_its_own_loop() -> None:
    events: list[GuardEvent] = []
    guard = Guard(mode="warn", breaker=None, on_event=events.append)
    steps = LOOPS["the same call, the same answer"][:3]
    decision = guard.check(_steps(steps))
    assert (decision.action, decision.kind, decision.count) == ("note", "repeat", 3)
    assert [event.action for event in events] == ["loop_noted"]
    noted = events[0].loop
    assert noted is not None
    assert noted.count == 3


def test_the_early_detector_is_the_guards_own_one_notch_lower() -> None:
    detector = LoopDetector(max_strikes=5, error_storm=(6, 10))
    early = Guard(detector=detector).early_detector
    assert isinstance(early, LoopDetector)
    assert early.settings == detector.settings.earlier()
    assert (early.settings.max_strikes, early.settings.error_storm) == (4, (5, 9))
    assert detector.settings.max_strikes == 5  # the guard's own detector is unchanged
    # Only warn notes early; a detector of the caller's own kind scans its own way.
    assert Guard(mode="refuse").early_detector is None
    assert Guard(mode="note").early_detector is None
    assert Guard(note_early=False).early_detector is None
    assert Guard(detector=None).early_detector is None

    class OwnDetector(LoopDetector):
        pass

    assert Guard(detector=OwnDetector()).early_detector is None


def test_counts_at_their_lowest_stay_and_bounds_the_user_gave_are_kept() -> None:
    lowest = DetectorSettings(
        max_strikes=0,
        max_observation_steps=0,
        max_cycle_laps=1,
        max_error_streak=1,
        max_near_repeats=1,
        max_unchanged_checks=1,
        max_unread_edit_checks=1,
        error_storm=(1, 4),
        max_stagnation_steps=0,
    )
    assert lowest.earlier() is lowest
    assert Guard(detector=LoopDetector(lowest)).early_detector is None  # nothing lower
    capped = DetectorSettings(tool_limits={"deploy": 2}, max_waits=7, max_near_repeats=None)
    early = capped.earlier()
    assert (early.tool_limits, early.max_waits, early.max_near_repeats) == (
        (("deploy", 2),),
        7,
        None,
    )
    assert capped.earlier() is early  # built once per settings


def test_a_proxy_logs_early_note_names_the_looping_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`loopfuse scan` of a proxy log: the early note's finding names the calls that loop,
    as `refuse`'s finding does (not the request's last words)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Build it."}]
    entries = []
    for i in range(6):
        body = {"model": "m", "messages": list(messages)}
        entries.append({"session": "s1", "path": "/v1/chat/completions", "body": body})
        call = {"name": "bash", "arguments": '{"command": "python build.py"}'}
        tool_call = {"id": f"c{i}", "type": "function", "function": call}
        messages.append({"role": "assistant", "content": "Building.", "tool_calls": [tool_call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "built 3 files"})
    log = tmp_path / "proxy.jsonl"
    log.write_text("".join(json.dumps(entry) + "\n" for entry in entries), encoding="utf-8")
    found = {}
    for mode in ("warn", "refuse"):
        main(["scan", str(log), "--mode", mode, "--format", "json", "--no-progress"])
        [result] = json.loads(capsys.readouterr().out)["files"]
        [finding] = [f for f in result["findings"] if f["guard"] == "detector"]
        found[mode] = finding
    assert found["warn"]["spans"][0]["noted"] is True
    assert found["warn"]["first"] == found["refuse"]["first"] - 1
    assert found["warn"]["calls"] == found["refuse"]["calls"]
    assert found["warn"]["calls"][0].startswith("bash ")
