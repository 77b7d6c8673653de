"""`loopfuse scan` output: text in 80 columns, colour only on a TTY, JSON, Markdown, progress,
TOML configuration, and `loopfuse demo`."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from loopfuse.cli.main import main
from loopfuse.cli.results import FileResult, Finding, Span
from loopfuse.cli.summary import Summary

ANSI = re.compile(r"\033\[[0-9;]*m")


class TTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def looping(laps: int = 8, name: str = "bash", command: str = "make") -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "build it"}]
    for i in range(laps):
        args = json.dumps({"command": command + " --verbose" * 30})  # a long call
        call = {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": args}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "error: " + "x" * 300})
    return {"outcome": "failed", "exit_reason": "max_steps", "model": "m", "messages": messages}


def clean() -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "hello"}]}


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    paths = []
    long_dir = tmp_path / ("a-rather-long-folder-name-" * 3)
    long_dir.mkdir()
    for i, data in enumerate([looping(), clean(), looping(9, "read_file"), clean()]):
        path = long_dir / f"run-{i}-with-a-long-name-to-test-clipping.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        paths.append(str(path))
    return paths


def test_text_fits_80_columns_and_has_no_colour_off_a_tty(
    files: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["scan", *files]) == 1
    out = capsys.readouterr().out
    assert not ANSI.search(out)
    too_wide = [line for line in out.splitlines() if len(line) > 80]
    assert not too_wide, too_wide
    assert "repeat: 3 in a row, up to 7" in out
    assert out.count(": clean") == 0  # clean runs are counted, not listed
    assert "4 scanned: 2 clean, 2 flagged" in out
    assert "flagged 2 of 2 failed" in out
    # Flagged runs first, then the summary, then the flagged files.
    flagged = [files[0], files[2]]
    summary = out.index("\nSummary\n")
    assert all(out.index(name[-40:]) < summary for name in flagged)
    listed = out[out.index("Flagged files (2)") :].splitlines()[1:]
    assert [line.strip()[-40:] for line in listed] == [name[-40:] for name in flagged]
    assert main(["scan", *files, "--verbose"]) == 1
    out = capsys.readouterr().out
    assert out.count(": clean") == 2
    assert "model told: Loop detected" in out
    assert not [line for line in out.splitlines() if len(line) > 80]


def test_each_finding_says_where_what_and_what_was_not_spent(
    files: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["scan", files[2], "--mode", "refuse"]) == 1
    lines = capsys.readouterr().out.splitlines()
    [head] = [i for i, line in enumerate(lines) if line.startswith("  turn ")]
    assert lines[head] == "  turn 5 (message 9)  error_streak then repeat: 4 in a row, up to 8"
    assert lines[head + 1].startswith('      read_file {"command":"make --verbose --verbose')
    assert lines[head + 2] == "      answer: error: " + "x" * 56 + "..."
    assert lines[head + 3].startswith("      refused turn 5 (error_streak), turns 6-9 (repeat):")
    assert "5 tool calls, ~" in lines[head + 3] + lines[head + 4]


def test_colour_when_asked_or_on_a_tty(
    files: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["scan", files[0], "--color", "always"]) == 1
    assert ANSI.search(capsys.readouterr().out)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    tty = TTY()
    monkeypatch.setattr("sys.stdout", tty)
    assert main(["scan", files[0]]) == 1
    assert ANSI.search(tty.getvalue())
    monkeypatch.setenv("NO_COLOR", "1")
    tty = TTY()
    monkeypatch.setattr("sys.stdout", tty)
    assert main(["scan", files[0]]) == 1
    assert not ANSI.search(tty.getvalue())


def test_progress_bar_only_on_a_tty_and_for_many_files(
    files: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("loopfuse.cli.progress.PATIENCE", 1e9)  # few files: never
    tty = TTY()
    monkeypatch.setattr("sys.stderr", tty)
    assert main(["scan", *files]) == 1
    drawn = tty.getvalue()
    assert "[" in drawn
    assert "/4 " in drawn
    assert drawn.endswith("\r")  # erased at the end
    assert all(len(line) <= 80 for line in drawn.split("\r"))
    tty = TTY()
    monkeypatch.setattr("sys.stderr", tty)
    assert main(["scan", *files[:3]]) == 1  # few files: no bar
    assert tty.getvalue() == ""
    tty = TTY()
    monkeypatch.setattr("sys.stderr", tty)
    assert main(["scan", *files, "--no-progress"]) == 1
    assert tty.getvalue() == ""
    capsys.readouterr()
    assert main(["scan", *files]) == 1  # stderr not a TTY: no bar
    assert capsys.readouterr().err == ""


def test_progress_for_one_long_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("loopfuse.cli.progress.PATIENCE", 0.0)  # "long" from the start
    monkeypatch.setattr("loopfuse.cli.progress._REDRAW", 0.0)
    path = tmp_path / "proxy.jsonl"
    path.write_text("".join(json.dumps(clean()) + "\n" for _ in range(50)), encoding="utf-8")
    tty = TTY()
    monkeypatch.setattr("sys.stderr", tty)
    assert main(["scan", str(path)]) == 1
    drawn = tty.getvalue().split("\r")
    # Files and bytes, each a figure that says what it counts (#29 §7: "1/1 50%" was the
    # share of the current file, read as the scan's).
    size = path.stat().st_size
    halfway = f"1/1 files, {size // 2 / 1000:.1f}/{size / 1000:.1f} kB"
    assert any(halfway in frame for frame in drawn), drawn
    assert all(len(frame) <= 80 for frame in drawn)
    assert tty.getvalue().endswith("\r")  # erased at the end
    tty = TTY()
    monkeypatch.setattr("sys.stderr", tty)
    assert main(["scan", str(path), "--no-progress"]) == 1
    assert tty.getvalue() == ""


def test_json_report(files: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(Path(files[0]).parent / "missing.json")
    assert main(["scan", *files, missing, "--format", "json"]) == 1  # a loop: 1, whatever else
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert [f["name"] for f in report["files"]] == files
    assert report["errors"] == [
        {
            "file": str(Path(files[0]).parent / "missing.json"),
            "problem": "no such file or folder",
            "kind": "unreadable",
        }
    ]
    assert report["settings"]["max_strikes"] == 3
    first = report["files"][0]
    assert first["kind"] == "trajectory"
    assert first["meta"] == {"outcome": "failed", "exit_reason": "max_steps", "model": "m"}
    assert first["requests"] == 8
    assert first["findings"][0]["guard"] == "detector"
    assert first["findings"][0]["spans"][-1]["kind"] == "repeat"
    summary = report["summary"]
    # A missing path is listed in "errors" but is not a file scanned (#29 §7).
    assert (summary["files"], summary["errors"], len(report["errors"])) == (4, 0, 1)
    assert summary["found"] is True
    assert summary["outcomes"] == {"failed": [2, 2]}
    assert summary["spared_requests"] == sum(f["spared_requests"] for f in report["files"])
    assert summary["spared_tokens_in"] == sum(f["spared_tokens_in"] for f in report["files"])
    assert summary["cost"] is None


def test_markdown_report(files: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", *files, "--format", "markdown"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("# loopfuse scan\n")
    assert out.index("| files | 4 scanned: 2 clean, 2 flagged |") < out.index("## Flagged runs (2)")
    assert "| where | what | repeated | not spent |" in out
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    assert all(line.count(" | ") >= 1 for line in rows)
    assert "clean" not in out.split("## Flagged runs")[1]  # clean runs are only counted


def test_markdown_stays_under_60000_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    for i in range(400):
        (folder / f"run-{i:03}.json").write_text(json.dumps(looping(9)), encoding="utf-8")
    assert main(["scan", str(folder), "--format", "markdown"]) == 1
    out = capsys.readouterr().out
    assert len(out) <= 60_000
    assert out.index("| files | 400 scanned: 0 clean, 400 flagged |") < out.index("## Flagged")
    shown = out.count("\n### ")
    assert 10 < shown < 400
    assert f"_{400 - shown} flagged runs left out to keep this report under 60,000" in out


def test_markdown_cannot_be_broken_out_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = looping(8, name="x`|<img src=x onerror=alert(1)>\n# heading", command="`rm` | *b*")
    path = tmp_path / "`evil`|<b>.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert main(["scan", str(path), "--format", "markdown"]) == 1
    out = capsys.readouterr().out
    spans = re.findall(r"`[^`]*`", out)
    outside = re.sub(r"`[^`]*`", "", out)
    assert "<img" not in outside
    assert "<b>" not in outside  # run text only inside code spans
    assert any("<img src=x onerror=alert(1)>" in span for span in spans)
    assert "\n# heading" not in out
    rows = [line for line in out.splitlines() if line.startswith("| turn")]
    assert rows
    for line in rows:
        assert len(re.split(r"(?<!\\)\|", line)) == 6  # four cells: every other pipe escaped


def test_toml_config_uses_the_flag_names(
    tmp_path: Path, files: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    strict = tmp_path / "strict.toml"
    strict.write_text("max_strikes = 0\nmax-observation-steps = 0\nformat = 'json'\n")
    assert main(["scan", files[2], "--config", str(strict)]) == 1
    early = json.loads(capsys.readouterr().out)["files"][0]["findings"][0]["first"]
    lax = tmp_path / "pyproject.toml"
    lax.write_text("[project]\nname = 'x'\n[tool.loopfuse]\nguards = ['breaker', 'dedup']\n")
    assert main(["scan", files[2], "--config", str(lax)]) == 0
    capsys.readouterr()
    # Flags override the file.
    args = ["scan", files[2], "--config", str(strict), "--max-observation-steps", "none"]
    assert main([*args, "--max-strikes", "3"]) == 1
    later = json.loads(capsys.readouterr().out)["files"][0]["findings"][0]["first"]
    assert later > early


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("max_strike = 2\n", "unknown key 'max_strike'"),
        ("max_strikes = 'many'\n", "max_strikes must be an integer >= 0 or none, got 'many'"),
        ("window = -1\n", "window must be a positive number of seconds"),
        ("guards = 3\n", "guards must be a list of names"),
        ("format = 'yaml'\n", "format must be one of text, json, markdown"),
        ("normalize_answers = 'maybe'\n", "normalize_answers must be true or false"),
        ("max_strikes = \n", "not valid TOML"),
        ("read_only_commands = ['  ']\n", "read_only_commands entry '  ' names no program"),
        ("error_storm = 'often'\n", "error_storm must be two integers >= 1"),
    ],
)
def test_bad_config_is_one_line_exit_2(
    tmp_path: Path, files: list[str], capsys: pytest.CaptureFixture[str], text: str, problem: str
) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(text)
    assert main(["scan", files[0], "--config", str(config)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.strip().splitlines()
    assert str(config) in line
    assert problem in line


def test_missing_config(
    tmp_path: Path, files: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["scan", files[0], "--config", str(tmp_path / "none.toml")]) == 2
    assert "none.toml: no such file" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--max-error-streak", "0"], "--max-error-streak must be an integer >= 1 or none"),
        (["--error-storm", "10"], "--error-storm must be two integers >= 1"),
        (["--error-storm", "20,12"], "detector settings: error_storm must be None or (errors,"),
        (["--max-error-streak", "60"], "max_error_streak must be < detector_window (48)"),
        (["--detector-window", "4"], "detector settings: detector_window must be an int >= 8"),
        (["--tool-limits", "deploy"], "--tool-limits must be NAME=N pairs"),
        (["--price-per-mtok", "cheap"], "--price-per-mtok must be dollars per million tokens"),
    ],
)
def test_new_detector_settings_are_checked_and_named(
    files: list[str], capsys: pytest.CaptureFixture[str], args: list[str], problem: str
) -> None:
    assert main(["scan", files[0], *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.strip().splitlines()
    assert problem in line


def test_new_detector_settings_change_the_result(
    tmp_path: Path, files: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # The error streak trips first with the defaults; switched off, the repeat does.
    assert main(["scan", files[2], "--format", "json"]) == 1
    first = json.loads(capsys.readouterr().out)["files"][0]["findings"][0]
    assert first["kind"] == "error_streak"
    config = tmp_path / "loopfuse.toml"
    config.write_text("max_error_streak = 'none'\nerror_storm = false\nformat = 'json'\n")
    assert main(["scan", files[2], "--config", str(config)]) == 1
    later = json.loads(capsys.readouterr().out)["files"][0]["findings"][0]
    assert later["kind"] == "repeat"
    assert later["first"] > first["first"]
    # A tool the detector never counts: nothing left to flag.
    assert main(["scan", files[2], "--ignore-tools", "read_file"]) == 0
    capsys.readouterr()
    config.write_text("[tool.loopfuse]\ntool_limits = {read_file = 1}\nerror_storm = [3, 4]\n")
    assert main(["scan", files[2], "--config", str(config), "--format", "json"]) == 1
    limited = json.loads(capsys.readouterr().out)
    assert limited["settings"]["tool_limits"] == [["read_file", 1]]
    assert limited["settings"]["error_storm"] == [3, 4]
    assert limited["files"][0]["findings"][0]["first"] < first["first"]


def test_a_price_gives_the_cost(files: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", files[0], "--price-per-mtok", "3", "--format", "json"]) == 1
    summary = json.loads(capsys.readouterr().out)["summary"]
    tokens = summary["spared_tokens_in"] + summary["spared_tokens_out"]
    assert summary["cost"] == pytest.approx(tokens * 3 / 1e6)
    assert main(["scan", files[0], "--price-per-mtok", "3"]) == 1
    out = capsys.readouterr().out
    assert f"${tokens * 3 / 1e6:,.2f} at $3/Mtok" in out


def test_demo_explains_and_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    for name in ("looping_agent.json", "ab_cycle.json", "retry_storm.jsonl", "healthy_run.json"):
        assert f"[ok] {name}" in out
    assert "UNEXPECTED" not in out
    assert "healthy_run.json\n  trajectory, openai_chat, resolved (submitted)" in out
    assert "no guard acted, as it should" in out
    assert all(len(line) <= 80 for line in out.splitlines())


def test_demo_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    by_name = {f["name"]: f for f in report["files"]}
    assert by_name["healthy_run.json"]["clean"] is True
    assert report["summary"]["mode"] == "warn"  # the one default, as loopfuse scan's
    [cycle] = by_name["ab_cycle.json"]["findings"]  # every step of the cycle: one
    assert cycle["kind"] == "cycle"
    # warn: noted first, refused when it goes on, every request from the first note on
    assert [(span["noted"], span["first"]) for span in cycle["spans"]] == [
        (True, cycle["first"]),
        (False, cycle["spans"][0]["last"] + 1),
    ]
    assert cycle["spans"][-1]["last"] == cycle["last"]
    # The lap the early note saw (note_early: one lap sooner, so it ends on the edit).
    assert [call.split()[0] for call in cycle["calls"]] == ["run_tests", "edit_file"]
    [storm] = by_name["retry_storm.jsonl"]["findings"]  # a retry storm: one finding
    assert [(span["guard"], span["noted"]) for span in storm["spans"]] == [
        ("dedup", False),
        ("breaker", True),
        ("breaker", False),
    ]


def test_python_dash_m(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "loop.json"
    path.write_text(json.dumps(looping()), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "loopfuse", "scan", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert "detector" in done.stdout
    assert done.stderr == ""


def test_a_reader_that_goes_away_is_not_an_error() -> None:
    from loopfuse.cli.main import _emit

    class Gone(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError

    _emit(Gone(), "report\n")  # no exception: the exit status still tells the result


def test_text_from_a_run_cannot_drive_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = looping(8, name="ls\x1b[2J\x1b]0;pwned\x07", command="\x1b[31mred")
    data["exit_reason"] = "max\x1b[H"
    path = tmp_path / "run\x1b[1m.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert main(["scan", str(path), "--verbose"]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out  # colour is off here: any escape would be the run's
    assert "ls\ufffd[2J" in out


def test_the_summary_lists_kinds_that_tie_as_first_met() -> None:
    # The order of a report must not move from one run to the next (with the hash seed).
    kinds = [f"kind{i}" for i in range(12)]
    spans = [Span("detector", kind, n, n) for n, kind in enumerate(kinds, start=1)]
    finding = Finding("s", "turn", 1, 12, "detector", kinds[0], 3, 3, ["x"], None, None)
    finding.spans = spans
    result = FileResult("run.json", "request", "openai_chat", {}, findings=[finding])
    summary = Summary.of([result], [], ("breaker", "detector", "dedup"))
    assert list(summary.kinds["detector"]) == kinds


@pytest.mark.parametrize("form", ["text", "markdown", "html"])
def test_one_request_is_one_request_in_every_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], form: str
) -> None:
    body = json.dumps(clean())
    path = tmp_path / "twice.jsonl"
    path.write_text(f"{body}\n{body}\n", encoding="utf-8")
    assert main(["scan", str(path), "--format", form]) == 1
    out = capsys.readouterr().out
    assert "1 request answered from the cache" in out
    assert "1 requests" not in out
