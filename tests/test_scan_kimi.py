"""``loopfuse scan`` of Kimi Code's sessions: ``--agent kimi`` finds its ``wire.jsonl``
files, each read as the conversation it holds (the recorded sessions of real runs:
tests/recorded/agent-clis/kimi/), and a file it cannot read is said so, never clean."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from loopfuse.cli.agent_sessions import agent_of, sessions_folder
from loopfuse.cli.main import main

RECORDED = Path(__file__).parent / "recorded" / "agent-clis" / "kimi"
SESSION = "session_7b5e8509-6e63-4337-8a64-fca0ff11e07d"


def scan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    code = main(["scan", *args, "--format", "json", "--no-progress"])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    return code, json.loads(captured.out), captured.err


def session_file(kimi_home: Path, recorded: str, agent: str = "main") -> Path:
    """A recorded session where Kimi Code keeps it."""
    folder = kimi_home / "sessions" / "wd_work_9f3e7582ceca" / SESSION / "agents" / agent
    folder.mkdir(parents=True, exist_ok=True)
    (folder.parent.parent / "state.json").write_text("{}", encoding="utf-8")  # not a session
    shutil.copy(RECORDED / recorded, folder / "wire.jsonl")
    return folder / "wire.jsonl"


def lines(recorded: str) -> list[dict[str, Any]]:
    text = (RECORDED / recorded).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line]


def test_agent_kimi_finds_its_sessions_and_the_loop_in_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KIMI_CODE_HOME", raising=False)
    session_file(tmp_path / ".kimi-code", "wire-failing-refused.jsonl")
    code, report, err = scan(capsys, "--agent", "kimi")
    assert code == 1, err
    [run] = report["files"]
    assert run["meta"]["agent"] == "kimi"
    assert run["meta"]["session"] == SESSION
    assert run["meta"]["project"] == "/tmp/kimi-probe/r1/work"
    assert run["tool_calls"] == 6
    first = run["findings"][0]  # then refused as it went on (warn mode)
    assert (first["guard"], first["kind"], first["count"]) == ("detector", "repeat", 3)
    assert first["calls"][0].startswith('Bash {"command":"echo attempt >> attempts.log;')
    assert first["answer"] == "cat: missing.txt: No such file or directory"


def test_kimi_code_home_moves_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KIMI_CODE_HOME", str(tmp_path / "kimi"))
    path = session_file(tmp_path / "kimi", "wire-sample.jsonl")
    folder = sessions_folder("kimi")
    assert folder.roots == (tmp_path / "kimi" / "sessions",)
    assert list(folder.files()) == [path]  # its state.json beside it is not a session


def test_a_session_is_recognised_by_its_content(tmp_path: Path) -> None:
    assert agent_of((RECORDED / "wire-sample.jsonl").read_bytes()[:4096]) == "kimi"
    renamed = tmp_path / "anything.jsonl"
    shutil.copy(RECORDED / "wire-sample.jsonl", renamed)
    assert main(["scan", str(renamed), "--no-progress", "--format", "json"]) == 0  # clean


def test_a_healthy_session_and_a_subagent_are_clean_runs_of_their_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KIMI_CODE_HOME", raising=False)
    healthy = [
        record
        for record in lines("wire-sample.jsonl")
        if record.get("type") != "context.append_loop_event"
        or record["event"]["type"] not in ("tool.call", "tool.result")
        or record["event"]["toolCallId"] in ("call_00000000000000000002",)
    ]
    main_file = session_file(tmp_path / ".kimi-code", "wire-sample.jsonl")
    main_file.write_text("\n".join(json.dumps(r) for r in healthy) + "\n", encoding="utf-8")
    session_file(tmp_path / ".kimi-code", "wire-sample.jsonl", agent="explore-1")
    code, report, err = scan(capsys, "--agent", "kimi")
    assert code == 0, err
    runs = {run["meta"].get("subagent", "main"): run for run in report["files"]}
    assert set(runs) == {"main", "explore-1"}
    assert runs["main"]["tool_calls"] == 1
    assert runs["explore-1"]["tool_calls"] == 8
    assert all(run["clean"] for run in runs.values())  # 5 reads: within the allowance


def test_a_session_of_another_protocol_is_an_error_not_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = lines("wire-sample.jsonl")
    records[0]["protocol_version"] = "2.0"
    path = tmp_path / "wire.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    code, report, err = scan(capsys, str(path))
    assert code == 2
    assert "'2.0'" in err
    assert report["files"] == []


def test_a_session_whose_calls_it_cannot_read_is_not_understood(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A later protocol 1.x that renamed its loop events: the calls are there (the
    messages Kimi Code appends list them) but none is read: never reported clean."""
    records = lines("wire-failing-refused.jsonl")
    for record in records:
        if record.get("type") == "context.append_loop_event":
            record["event"]["type"] = "tool.invoked"
    path = tmp_path / "wire.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    code, _, err = scan(capsys, str(path))
    assert code == 2
    assert "format not understood" in err
    assert "tool call" in err
