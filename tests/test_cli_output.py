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
    assert "detector  repeat, count" in out
    assert "model told: Loop detected" in out
    assert out.count(": clean") == 2
    assert "4 scanned: 2 clean, 2 with interventions" in out
    assert "flagged 2 of 2 failed" in out


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


def test_json_report(files: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["scan", *files, str(Path(files[0]).parent / "missing.json"), "--format", "json"]) == 2
    )
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert [f["name"] for f in report["files"]] == files
    assert report["errors"] == [
        {"file": str(Path(files[0]).parent / "missing.json"), "problem": "no such file or folder"}
    ]
    assert report["settings"]["max_strikes"] == 3
    first = report["files"][0]
    assert first["kind"] == "trajectory"
    assert first["meta"] == {"outcome": "failed", "exit_reason": "max_steps", "model": "m"}
    assert first["requests"] == 8
    assert first["interventions"][0]["guard"] == "detector"
    summary = report["summary"]
    assert summary["files"] == 5
    assert summary["errors"] == 1
    assert summary["found"] is True
    assert summary["outcomes"] == {"failed": [2, 2]}
    assert summary["spared_requests"] == sum(f["spared_requests"] for f in report["files"])


def test_markdown_report(files: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", *files, "--format", "markdown"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("# loopfuse scan\n")
    assert "| file | kind | requests | result |" in out
    assert "| turns | guard | kind | count | what | model told |" in out
    assert "## Summary" in out
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    assert all(line.count(" | ") >= 3 for line in rows)


def test_toml_config_uses_the_flag_names(
    tmp_path: Path, files: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    strict = tmp_path / "strict.toml"
    strict.write_text("max_strikes = 0\nmax-observation-steps = 0\nformat = 'json'\n")
    assert main(["scan", files[2], "--config", str(strict)]) == 1
    early = json.loads(capsys.readouterr().out)["files"][0]["interventions"][0]["first"]
    lax = tmp_path / "pyproject.toml"
    lax.write_text("[project]\nname = 'x'\n[tool.loopfuse]\nguards = ['breaker', 'dedup']\n")
    assert main(["scan", files[2], "--config", str(lax)]) == 0
    capsys.readouterr()
    # Flags override the file.
    args = ["scan", files[2], "--config", str(strict), "--max-observation-steps", "none"]
    assert main([*args, "--max-strikes", "3"]) == 1
    later = json.loads(capsys.readouterr().out)["files"][0]["interventions"][0]["first"]
    assert later > early


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("max_strike = 2\n", "unknown key 'max_strike'"),
        ("max_strikes = 'many'\n", "max_strikes must be an integer >= 0, got 'many'"),
        ("window = -1\n", "window must be a positive number of seconds"),
        ("guards = 3\n", "guards must be a list of names"),
        ("format = 'yaml'\n", "format must be one of text, json, markdown"),
        ("normalize_answers = 'maybe'\n", "normalize_answers must be true or false"),
        ("max_strikes = \n", "not valid TOML"),
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
    [cycle] = by_name["ab_cycle.json"]["interventions"]  # every step of the cycle: one
    assert (cycle["kind"], cycle["requests"]) == ("cycle", cycle["last"] - cycle["first"] + 1)
    assert [subject.split()[0] for subject in cycle["subjects"]] == ["edit_file", "run_tests"]
    guards = {i["guard"] for i in by_name["retry_storm.jsonl"]["interventions"]}
    assert guards == {"breaker", "dedup"}


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
