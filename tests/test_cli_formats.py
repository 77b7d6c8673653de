"""`loopfuse scan` never says "clean" for what it did not read (#27 §4, #28, #29 §7).

A file of a format no reader knows is "not understood", with the tool calls it seems to
hold, apart from the unreadable ones, and the exit status of an input error. The formats
that were taken for something else, or skipped, are read: OpenCode's ``opencode export``,
Copilot CLI's ``events.jsonl``, Codex web and tool searches, a whole-JSON Gemini CLI
session in a ``.jsonl`` file, several records on one line. Every fixture is synthetic.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agent_transcripts import (
    claude_session,
    codex_session,
    copilot_session,
    gemini_session,
    healthy,
    looping,
    opencode_export,
    write_lines,
)
from loopfuse.cli.main import main

COPILOT_ID = "0d6a3c1e-8d52-4e55-9a7e-2f3b4c5d6e7f"
OPENCODE_ID = "ses_3fa1b2c3d4e5ZyXwVuTsRqPoNm"


def scan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    code = main(["scan", *args, "--format", "json", "--no-progress"])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    return code, json.loads(captured.out) if captured.out else {}, captured.err


def write_json(path: Path, value: object, indent: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=indent), encoding="utf-8")
    return path


# --- what is not understood is never clean ------------------------------------------------


def test_a_trajectory_of_unknown_shape_with_calls_is_not_understood(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # {"info", "messages"} is a trajectory's shape ("info" is a trajectory key); messages
    # of a shape no dialect has hold three calls no reader sees.
    messages = [
        {"who": "bot", "steps": [{"type": "tool_call", "name": "sh", "args": {"c": "ls"}}]}
        for _ in range(3)
    ]
    path = write_json(tmp_path / "run.json", {"info": {"id": "r1"}, "messages": messages})
    code, report, err = scan(capsys, str(path))
    assert code == 2
    assert report["files"] == []
    [error] = report["errors"]
    assert error["kind"] == "not understood"
    assert error["calls"] == 3
    assert "format not understood" in err
    assert "it seems to hold 3 tool calls" in err
    summary = report["summary"]
    assert (summary["clean"], summary["not_understood"], summary["unjudged_calls"]) == (0, 1, 3)


def test_json_lines_of_unknown_records_are_not_understood_with_their_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [
        {"event": "act", "item": {"type": "tool_use", "name": "Bash", "input": {"c": str(i)}}}
        for i in range(4)
    ]
    path = write_lines(tmp_path / "agent.jsonl", records)
    code, out, _ = scan(capsys, str(path))
    assert code == 2
    assert out["errors"][0]["kind"] == "not understood"
    assert out["errors"][0]["calls"] == 4
    assert main(["scan", str(path), "--no-progress", "--color", "never"]) == 2
    text = " ".join(capsys.readouterr().out.split())
    assert "0 clean, 0 flagged, 1 not understood (format unknown; 4 tool calls not judged)" in text


def test_a_cli_transcript_whose_calls_were_not_read_is_not_understood(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A Codex rollout whose calls are all of an item type this reader does not know.
    lines = [
        line
        for line in codex_session("t-1", [])
        if not (line["type"] == "response_item" and line["payload"].get("role") == "assistant")
    ]
    for k in range(5):
        payload = {"type": "image_generation_call", "status": "completed", "id": f"ig{k}"}
        lines.append({"timestamp": "2026-12-01T22:30:00.000Z", "type": "response_item",
                      "payload": payload})  # fmt: skip
    path = write_lines(tmp_path / "rollout-2026-12-01T22-23-54-t-1.jsonl", lines)
    code, report, err = scan(capsys, str(path))
    assert code == 2, report
    assert "read as a codex session with no tool calls (it seems to hold 5 tool calls)" in err


def test_a_transcript_with_no_conversation_is_a_file_scanned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Only the CLI's own notes: understood, nothing to judge, counted (not dropped).
    path = write_lines(
        tmp_path / "s.jsonl", [{"type": "summary", "summary": "x", "leafUuid": "u1"}]
    )
    code, report, _ = scan(capsys, str(path))
    assert code == 0
    assert report["summary"]["files"] == 1
    assert [run["requests"] for run in report["files"]] == [0]


# --- missing places: no all-zero report (#29 §7) -------------------------------------------


def test_a_missing_path_is_an_error_without_a_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["scan", str(tmp_path / "nowhere"), "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"loopfuse scan: error: {tmp_path / 'nowhere'}: no such file or folder"
    ]


def test_an_agent_without_transcripts_says_where_it_looked_and_scans_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    (tmp_path / ".claude" / "projects").mkdir(parents=True)
    assert main(["scan", "--agent", "claude-code", "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # not "1 scanned, 1 unreadable"
    where = tmp_path / ".claude" / "projects"
    assert captured.err.splitlines() == [
        f"loopfuse scan: error: {where}: no claude-code transcripts where it keeps them "
        f"(looked in {where})"
    ]


# --- OpenCode exports ---------------------------------------------------------------------


def test_an_opencode_export_is_read_as_a_session_with_its_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_json(tmp_path / "export.json", opencode_export(OPENCODE_ID, looping()), indent=2)
    code, report, err = scan(capsys, str(path))
    assert (code, err) == (1, "")
    [run] = report["files"]
    assert run["kind"] == "session"
    assert run["dialect"] == "anthropic"
    assert run["meta"]["agent"] == "opencode"
    assert run["meta"]["session"] == OPENCODE_ID
    assert run["meta"]["project"] == "/home/dev/projects/o5"
    assert run["meta"]["started"] == "2026-12-01T22:20:00.000Z"
    assert run["meta"]["model"] == "model-y"
    assert run["tool_calls"] == 10  # one per step, not one per message
    assert run["requests"] == 11
    assert run["tokens_estimated"] is False  # each step's tokens
    [finding] = run["findings"]
    assert finding["calls"] == ['bash {"command":"make","description":"Run it"}']
    # The same file saved as .jsonl is the same session.
    copy = write_json(tmp_path / "export.jsonl", opencode_export(OPENCODE_ID, looping()), 2)
    assert scan(capsys, str(copy))[1]["files"][0]["tool_calls"] == 10


def test_an_opencode_call_that_failed_keeps_its_flag(tmp_path: Path) -> None:
    from loopfuse.cli.agent_sessions import read_runs
    from loopfuse.cli.readers import read_path

    path = write_json(tmp_path / "e.json", opencode_export(OPENCODE_ID, looping()[:1] + healthy()))
    session = read_path(path)
    [run], problems = read_runs(session)  # type: ignore[arg-type]
    assert problems == []
    results = [
        block
        for message in run.body["messages"]
        if message["role"] == "user"
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert [block.get("is_error", False) for block in results] == [True] + [False] * 8


def test_a_healthy_opencode_export_is_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_json(tmp_path / "export.json", opencode_export(OPENCODE_ID, healthy()))
    code, report, err = scan(capsys, str(path))
    assert (code, err) == (0, "")
    assert report["files"][0]["clean"] is True
    assert report["files"][0]["tool_calls"] == 8


# --- Copilot CLI --------------------------------------------------------------------------


def copilot_file(home: Path, turns: list[Any], session: str = COPILOT_ID) -> Path:
    folder = home / ".copilot" / "session-state" / session
    return write_lines(folder / "events.jsonl", copilot_session(session, turns))


def test_a_copilot_session_is_read_with_its_calls_and_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = copilot_file(tmp_path, looping())
    code, report, err = scan(capsys, str(path))
    assert (code, err) == (1, "")
    [run] = report["files"]
    assert run["meta"]["agent"] == "copilot"
    assert run["meta"]["session"] == COPILOT_ID
    assert run["meta"]["project"] == "/home/dev/projects/p4"
    assert run["meta"]["model"] == "model-x"
    assert run["tool_calls"] == 10
    [finding] = run["findings"]
    assert finding["calls"] == ['bash {"command":"make","description":"Run it"}']
    # --agent copilot finds it where the CLI keeps it ($COPILOT_HOME moves it).
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("COPILOT_HOME", raising=False)
    code, report, _ = scan(capsys, "--agent", "copilot")
    assert code == 1
    assert [r["meta"]["session"] for r in report["files"]] == [COPILOT_ID]
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "elsewhere"))
    copilot_file(tmp_path / "elsewhere" / "..", healthy(), "other")  # ~/.copilot again
    assert main(["scan", "--agent", "copilot", "--no-progress"]) == 2  # not there


def test_a_failed_copilot_call_is_flagged_in_its_answer(tmp_path: Path) -> None:
    from loopfuse.cli.agent_sessions import read_runs
    from loopfuse.cli.readers import read_path

    path = copilot_file(tmp_path, looping()[:1] + healthy()[:2])
    [run], _ = read_runs(read_path(path))  # type: ignore[arg-type]
    results = [
        block
        for message in run.body["messages"]
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert [block.get("is_error", False) for block in results] == [True, False, False]
    assert results[0]["content"] == looping()[0].answer


# --- formats read now ---------------------------------------------------------------------


def test_codex_web_and_tool_searches_are_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = codex_session("t-2", looping())
    # Before each command, the same web search, run by the provider within the response
    # (no output item, no request of its own); once, a tool search the client answers.
    action = {"type": "search", "query": "make no rule", "queries": ["make no rule"]}
    searched: list[dict[str, Any]] = []
    for line in lines:
        if line["type"] == "response_item" and line["payload"]["type"] == "function_call":
            payload = {"type": "web_search_call", "status": "completed", "action": action}
            searched.append({**line, "payload": payload})
        searched.append(line)
    search = {"type": "tool_search_call", "call_id": "ts1", "status": "completed",
              "execution": "client", "arguments": {"query": "github", "limit": 5}}  # fmt: skip
    found = {"type": "tool_search_output", "call_id": "ts1", "status": "completed",
             "execution": "client", "tools": [{"type": "namespace", "name": "mcp__gh",
                                               "tools": [{"name": "list_prs"}]}]}  # fmt: skip
    at = next(i for i, line in enumerate(searched) if line["payload"].get("role") == "user")
    for payload in (found, search):
        searched.insert(at + 1, {**searched[at], "payload": payload})
    path = write_lines(tmp_path / "rollout-2026-12-01T22-23-54-t-2.jsonl", searched)
    code, report, err = scan(capsys, str(path))
    assert code == 1, err
    [run] = report["files"]
    assert run["tool_calls"] == 10 + 10 + 1
    assert run["requests"] == 11 + 1  # the tool search's answer makes a request; searches not
    [finding] = run["findings"]
    search = 'web_search {"queries":["make no rule"],"query":"make no rule","type":"search"}'
    assert finding["calls"] == [f'{search}; exec_command {{"cmd":"make"}}']  # one batch


def test_a_whole_json_gemini_session_is_read_whatever_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = gemini_session("g-1", looping())
    head, records = lines[0], [line for line in lines[1:] if "id" in line]
    document = {**head, "messages": records}
    for name in ("session.jsonl", "session.json", "session.txt"):
        path = write_json(tmp_path / name, document, indent=2)  # pretty: one line is not JSON
        code, report, err = scan(capsys, str(path))
        assert (code, err) == (1, ""), name
        assert report["files"][0]["meta"]["agent"] == "gemini"
        assert report["files"][0]["tool_calls"] == 10


@pytest.mark.parametrize("agent", ["claude-code", "codex", "copilot"])
def test_several_records_on_one_line_are_each_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], agent: str
) -> None:
    builders = {
        "claude-code": lambda: claude_session("c-1", looping()),
        "codex": lambda: codex_session("c-1", looping()),
        "copilot": lambda: copilot_session("c-1", looping()),
    }
    records = builders[agent]()
    apart = write_lines(tmp_path / "apart" / "s.jsonl", records)
    # Two records on each line (a writer that missed a newline), the first kept alone.
    text = json.dumps(records[0]) + "\n"
    for i in range(1, len(records), 2):
        text += " ".join(json.dumps(record) for record in records[i : i + 2]) + "\n"
    joined = tmp_path / "joined" / "s.jsonl"
    joined.parent.mkdir()
    joined.write_text(text, encoding="utf-8")
    expected = scan(capsys, str(apart))[1]["files"]
    code, report, err = scan(capsys, str(joined))
    assert (code, err) == (1, "")
    got = report["files"]
    assert [(r["requests"], r["tool_calls"]) for r in got] == [
        (r["requests"], r["tool_calls"]) for r in expected
    ]
    assert got[0]["tool_calls"] == 10


def opencode_database(path: Path, exports: list[dict[str, Any]]) -> Path:
    """OpenCode's ``opencode.db`` holding ``exports``: its session, message and part
    tables (the columns it reads; each message's and part's fields as JSON in ``data``,
    without the ids the columns hold)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(sqlite3.connect(path)) as database, database:
        database.executescript(
            "CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT, parent_id TEXT, "
            "slug TEXT, directory TEXT, title TEXT, version TEXT, time_created INTEGER, "
            "time_updated INTEGER);"
            "CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER, "
            "time_updated INTEGER, data TEXT);"
            "CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT, "
            "time_created INTEGER, time_updated INTEGER, data TEXT);"
        )
        for export in exports:
            info = export["info"]
            created = info["time"]["created"]
            database.execute(
                "INSERT INTO session VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (info["id"], "p1", info.get("parentID"), info["slug"], info["directory"],
                 info["title"], info["version"], created, created),
            )  # fmt: skip
            for message in export["messages"]:
                about = dict(message["info"])
                message_id = about.pop("id")
                about.pop("sessionID")
                database.execute(
                    "INSERT INTO message VALUES (?, ?, ?, ?, ?)",
                    (message_id, info["id"], about["time"]["created"], created, json.dumps(about)),
                )
                for part in message["parts"]:
                    fields = {k: v for k, v in part.items() if k not in ("id", "sessionID",
                                                                         "messageID")}  # fmt: skip
                    database.execute(
                        "INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
                        (part["id"], message_id, info["id"], created, created, json.dumps(fields)),
                    )
    return path


def test_agent_opencode_reads_every_session_of_its_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    other = opencode_export("ses_other", healthy())
    other["info"]["time"]["created"] -= 60_000  # older: scanned first
    data = tmp_path / "data"
    opencode_database(
        data / "opencode" / "opencode.db", [opencode_export(OPENCODE_ID, looping()), other]
    )
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    code, report, err = scan(capsys, "--agent", "opencode")
    assert (code, err) == (1, "")
    runs = report["files"]
    assert [run["meta"]["session"] for run in runs] == ["ses_other", OPENCODE_ID]
    assert [run["tool_calls"] for run in runs] == [8, 10]
    assert [bool(run["findings"]) for run in runs] == [False, True]
    assert runs[1]["meta"]["started"] == "2026-12-01T22:20:00.000Z"
    # The same sessions read from the database and from their exports: the same replay.
    export = write_json(tmp_path / "e.json", opencode_export(OPENCODE_ID, looping()))
    [exported] = scan(capsys, str(export))[1]["files"]
    keys = ("requests", "tool_calls", "tokens_in", "tokens_out", "spared_requests")
    assert [exported[k] for k in keys] == [runs[1][k] for k in keys]
    # Named on the command line, the database is read too; a folder without one is said so.
    assert scan(capsys, str(data / "opencode" / "opencode.db"))[0] == 1
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "empty"))
    (tmp_path / "empty" / "opencode").mkdir(parents=True)
    assert main(["scan", "--agent", "opencode", "--no-progress"]) == 2
    assert "no opencode transcripts where it keeps them" in capsys.readouterr().err


def test_a_sqlite_file_that_is_not_opencode_s_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(path)) as database, database:
        database.execute("CREATE TABLE t (x)")
    code, _, err = scan(capsys, str(path))
    assert code == 2
    assert err.splitlines() == [
        f"loopfuse scan: error: {path}: cannot read: not an OpenCode database it can read "
        "(no such table: session)"
    ]
