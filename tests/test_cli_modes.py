"""`loopfuse scan --mode refuse|warn|note`: the replay does what a deployed guard in that
mode does (a note where it would note, a stop where it would stop), and every report says
which mode it replayed and counts notes and stops apart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loopfuse.cli.main import main
from loopfuse.integrations.httpx import DEFAULT_MODE


def looping(laps: int = 8) -> dict[str, Any]:
    """The same failing command every turn: the detector's repeat, turn after turn."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "build it"}]
    for i in range(laps):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "bash"}}
        call["function"]["arguments"] = json.dumps({"command": "make"})
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "error: no rule"})
    return {"outcome": "failed", "model": "m", "messages": messages}


@pytest.fixture
def run(tmp_path: Path) -> str:
    path = tmp_path / "loop.json"
    path.write_text(json.dumps(looping()), encoding="utf-8")
    return str(path)


def report(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["scan", *args, "--format", "json", "--guards", "detector"]) == 1
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def detector_steps(document: dict[str, Any]) -> tuple[int, int]:
    summary = document["summary"]
    return summary["noted"]["detector"], summary["acted"]["detector"]


def test_the_default_mode_is_the_integrations_default(
    run: str, capsys: pytest.CaptureFixture[str]
) -> None:
    document = report(capsys, run)
    assert DEFAULT_MODE == "warn"
    assert document["settings"]["mode"] == "warn"
    assert document["summary"]["mode"] == "warn"


@pytest.mark.parametrize(
    ("mode", "noted", "refused"),
    [
        ("refuse", 0, 5),  # every looping turn from the 4th refused
        ("warn", 1, 4),  # the first noted; the loop went on: the rest refused
        ("note", 5, 0),  # every one noted, none refused
    ],
)
def test_each_mode_notes_and_stops_as_the_guard_does(
    run: str, capsys: pytest.CaptureFixture[str], mode: str, noted: int, refused: int
) -> None:
    document = report(capsys, run, "--mode", mode)
    assert detector_steps(document) == (noted, refused)
    [finding] = document["files"][0]["findings"]
    assert (finding["notes"], finding["requests"]) == (noted, refused)
    # What was not spent counts the requests stopped, never the ones sent with a note.
    assert document["summary"]["spared_requests"] == refused


def test_the_toml_key_sets_the_mode_and_a_flag_overrides_it(
    run: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "loopfuse.toml"
    config.write_text('mode = "note"\n', encoding="utf-8")
    assert detector_steps(report(capsys, run, "--config", str(config))) == (5, 0)
    flagged = report(capsys, run, "--config", str(config), "--mode", "refuse")
    assert detector_steps(flagged) == (0, 5)


def test_an_unknown_mode_is_a_usage_error(run: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", run, "--mode", "shout"]) == 2
    err = capsys.readouterr().err
    assert "--mode" in err
    assert "'refuse', 'warn', 'note'" in err


@pytest.mark.parametrize("form", ["text", "markdown", "html"])
def test_every_report_says_the_mode_and_counts_notes_apart(
    run: str, capsys: pytest.CaptureFixture[str], form: str
) -> None:
    assert main(["scan", run, "--format", form, "--mode", "warn"]) == 1
    out = capsys.readouterr().out
    assert "warn (a loop noted the first time, refused when it goes on)" in out
    assert "4 requests refused, 1 noted in 1 finding" in out


def test_a_finding_says_which_requests_were_noted_and_which_refused(
    run: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["scan", run, "--mode", "warn", "--color", "never"]) == 1
    out = capsys.readouterr().out
    assert "noted turn 4, refused turns 5-8:" in out
    document = report(capsys, run, "--mode", "warn")
    [finding] = document["files"][0]["findings"]
    assert [(span["noted"], span["first"], span["last"]) for span in finding["spans"]] == [
        (True, 4, 4),
        (False, 5, 8),
    ]
