"""The reports name each file relative to the scanned folder, whole, and say the folder
once; the JSON report keeps the paths (programs open them) and says the folder too."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from agent_transcripts import claude_session, looping, write_lines
from loopfuse.cli.main import main
from loopfuse.cli.names import scanned_folder, shown_name


def _looping_run(laps: int = 9) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix it"}]
    for i in range(laps):
        call = {"name": "bash", "arguments": json.dumps({"command": "cat missing.txt"})}
        messages.append({"role": "assistant", "tool_calls": [{"id": f"c{i}", "function": call}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "no such file"})
    return {"outcome": "failed", "model": "m", "messages": messages}


def _healthy_run() -> dict[str, Any]:
    return {"outcome": "resolved", "model": "m", "messages": [{"role": "user", "content": "hi"}]}


LONG = "a-run-whose-name-alone-is-longer-than-an-eighty-column-terminal-can-show-on-one-line"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A scanned folder deep enough that its whole path fills a line."""
    root = tmp_path / ("a-deep-folder-of-agent-runs-" * 3) / "runs"
    (root / "nightly").mkdir(parents=True)
    (root / "a-loop.json").write_text(json.dumps(_looping_run()), encoding="utf-8")
    (root / "b-fine.json").write_text(json.dumps(_healthy_run()), encoding="utf-8")
    (root / "nightly" / f"{LONG}.json").write_text(json.dumps(_looping_run()), "utf-8")
    return root


def _scan(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["scan", *args, "--no-progress"]) == 1
    return capsys.readouterr().out


def test_text_names_files_in_the_folder_whole_and_says_the_folder(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _scan(capsys, str(folder))
    lines = out.splitlines()
    assert lines[0] == "a-loop.json"  # not the folder's whole path, cut from the left
    assert "..." not in out
    assert out.count(str(folder)[:40]) == 1  # the folder, said once (the summary, below)
    assert all(len(line) <= 80 for line in lines)
    # The long name goes on over the next line, whole: joined, it is the name.
    name = f"nightly/{LONG}.json"
    start = lines.index(name[:80])
    assert lines[start] + lines[start + 1] == name
    # The folder, once, in the summary (wrapped there, whole).
    summary = out[out.index("\nSummary\n") :]
    assert summary.splitlines()[2].startswith("  folder     /")
    rows = summary.splitlines()[2:]
    said = rows[: next(i for i, row in enumerate(rows) if row.startswith("  files"))]
    assert "".join(row.strip() for row in said) == f"folder     {folder}"
    flagged = out[out.index("Flagged files (2)") :].splitlines()[1:]
    assert [line.strip() for line in flagged] == ["a-loop.json", name[:78], name[78:]]


def test_names_are_relative_to_the_folder_given_as_typed(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(folder.parent)
    out = _scan(capsys, "runs", "--format", "markdown")
    assert "### `a-loop.json`" in out
    assert f"### `nightly/{LONG}.json`" in out
    assert f"| folder | `{folder}` |" in out
    # Several paths: the folder that holds them all.
    out = _scan(capsys, "runs/a-loop.json", f"runs/nightly/{LONG}.json", "--format", "markdown")
    assert f"| folder | `{folder}` |" in out
    assert "### `a-loop.json`" in out


def test_a_file_named_alone_is_named_in_its_folder(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _scan(capsys, str(folder / "a-loop.json"))
    assert out.startswith("a-loop.json\n")


def test_json_keeps_the_paths_and_says_the_folder(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = json.loads(_scan(capsys, str(folder), "--format", "json"))
    assert report["folder"] == str(folder)
    assert {run["name"] for run in report["files"]} == {
        str(folder / "a-loop.json"),
        str(folder / "b-fine.json"),
        str(folder / "nightly" / f"{LONG}.json"),
    }


def test_stdin_has_no_folder(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    body = json.dumps({"model": "m", "messages": _looping_run()["messages"]}).encode()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(body)))
    out = _scan(capsys, "-")
    assert out.startswith("<stdin>\n")
    assert "folder" not in out


def test_a_cli_sessions_are_named_in_the_cli_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    session = "9d2c3a8e-4f1b-4c2d-8e9f-0a1b2c3d4e5f"
    projects = tmp_path / "claude" / "projects"
    write_lines(projects / "-home-dev-app" / f"{session}.jsonl", claude_session(session, looping()))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    out = _scan(capsys, "--agent", "claude-code", "--format", "markdown")
    assert f"### `-home-dev-app/{session}.jsonl`" in out
    assert f"| folder | `{projects}` |" in out


def test_names_outside_the_folder_stay_as_they_are() -> None:
    root = os.path.abspath("runs")
    assert shown_name(os.path.join(root, "x", "a.json"), root) == os.path.join("x", "a.json")
    assert shown_name("/elsewhere/a.json", root) == "/elsewhere/a.json"
    assert shown_name(root, root) == root  # the folder itself: an error about it
    assert shown_name("<stdin>", root) == "<stdin>"
    assert shown_name("runs/a.json", None) == "runs/a.json"
    assert scanned_folder(["-"]) is None
    assert scanned_folder([]) is None


def test_the_folder_is_of_paths_that_exist_and_not_the_root(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "a.json").write_text("{}", encoding="utf-8")
    runs = str(tmp_path / "runs")
    assert scanned_folder([runs]) == runs
    assert scanned_folder([f"{runs}/a.json"]) == runs  # a file: its folder
    assert scanned_folder([runs, str(tmp_path / "missing.json")]) == runs
    assert scanned_folder([str(tmp_path / "missing.json")]) is None
    assert scanned_folder([runs, "/"]) is None  # only the root in common
    assert scanned_folder(["/x/sessions", "/y/sessions"], folders=True) is None
