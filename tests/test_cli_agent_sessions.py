"""`loopfuse scan` of Claude Code, Codex and Gemini CLI transcripts (`--agent` finds them)."""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_transcripts import (
    Turn,
    claude_extras,
    claude_session,
    codex_session,
    gemini_session,
    healthy,
    looping,
    qwen_session,
    write_lines,
)
from hook_payloads import claude_failure, claude_post, claude_pre
from hostile import json_values
from loopfuse import GuardSettings
from loopfuse.cli.agent_sessions import AGENTS, AgentSession, agent_of, read_runs, sessions_folder
from loopfuse.cli.config import Settings
from loopfuse.cli.decisions import scan_file
from loopfuse.cli.hook import handle
from loopfuse.cli.main import main
from loopfuse.cli.readers import InputError, read_bytes
from loopfuse.detector import LoopDetected, LoopDetector, ToolCall

CLAUDE_ID = "55c05628-467e-4fc2-bb1d-069f10823cee"
CODEX_ID = "01a233b5-13a8-70e1-825d-ce525db4dc71"
GEMINI_ID = "86f7cf88-6e27-45fb-863e-2273496a43b5"
QWEN_ID = "3f1c2a90-1b7e-4c55-9d2a-6a0e8c4b7f11"


def claude_file(home: Path, turns: list[Turn], session: str = CLAUDE_ID) -> Path:
    folder = home / ".claude" / "projects" / "-home-dev-projects-c3"
    return write_lines(folder / f"{session}.jsonl", claude_session(session, turns))


def codex_file(home: Path, turns: list[Turn], thread: str = CODEX_ID) -> Path:
    folder = home / ".codex" / "sessions" / "2026" / "12" / "01"
    return write_lines(
        folder / f"rollout-2026-12-01T22-23-54-{thread}.jsonl", codex_session(thread, turns)
    )


def gemini_file(home: Path, turns: list[Turn], session: str = GEMINI_ID) -> Path:
    folder = home / ".gemini" / "tmp" / "g2" / "chats"
    return write_lines(
        folder / f"session-2026-12-01T22-28-{session[:8]}.jsonl", gemini_session(session, turns)
    )


def qwen_file(home: Path, turns: list[Turn], session: str = QWEN_ID) -> Path:
    folder = home / ".qwen" / "projects" / "-home-dev-projects-q1" / "chats"
    return write_lines(folder / f"{session}.jsonl", qwen_session(session, turns))


WRITERS: dict[str, Callable[[Path, list[Turn]], Path]] = {
    "claude-code": claude_file,
    "codex": codex_file,
    "gemini": gemini_file,
    "qwen": qwen_file,
}
CALLS = {
    "claude-code": 'Bash {"command":"make","description":"Run it"}',
    "codex": 'exec_command {"cmd":"make"}',
    "gemini": 'run_shell_command {"command":"make","description":"Run it"}',
    "qwen": 'run_shell_command {"command":"make","description":"Run it"}',
}
ANSWERS = {
    "claude-code": "Exit code 1 / make: *** No rule to make target",
    "codex": "Process exited with code 1",
    "gemini": "<untrusted_context> / Output: make: *** No rule",
    "qwen": "Output: make: *** No rule",  # a failed call: {"error": ...}, as Gemini CLI's
}
SESSIONS = {"claude-code": CLAUDE_ID, "codex": CODEX_ID, "gemini": GEMINI_ID, "qwen": QWEN_ID}
DIALECTS = {
    "claude-code": "anthropic",
    "codex": "openai_responses",
    "gemini": "gemini",
    "qwen": "gemini",
}


def scan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    code = main(["scan", *args, "--format", "json", "--no-progress"])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    return code, json.loads(captured.out), captured.err


@pytest.mark.parametrize("agent", sorted(WRITERS))
def test_a_looping_session_is_found_with_its_session_command_and_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], agent: str
) -> None:
    path = WRITERS[agent](tmp_path, looping())
    code, report, err = scan(capsys, str(path))
    assert code == 1, err
    assert err == ""
    [run] = report["files"]
    assert run["kind"] == "session"
    assert run["dialect"] == DIALECTS[agent]
    assert run["meta"]["agent"] == agent
    assert run["meta"]["session"] == SESSIONS[agent]
    assert run["meta"]["started"].startswith("2026-12-01T22:")
    projects = ("/home/dev/projects/c3", "/home/dev/projects/x3", "g2", "/home/dev/projects/q1")
    assert run["meta"]["project"] in projects
    assert run["requests"] == 11  # ten calls and the final answer
    assert run["tool_calls"] == 10
    assert run["tokens_estimated"] is False  # every answer's usage was recorded
    [finding] = run["findings"]
    assert finding["guard"] == "detector"
    assert finding["calls"] == [CALLS[agent]]
    assert ANSWERS[agent] in finding["answer"]  # the first line of what the model saw
    assert finding["requests"] >= 5


def test_a_qwen_code_session_is_found_where_it_keeps_them_and_read_as_qwen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--agent qwen`` finds ``~/.qwen/projects/<cwd>/chats/*.jsonl``; the recorded
    session of a real run (its envelope is Claude Code's) is read as Qwen Code's."""
    monkeypatch.setenv("HOME", str(tmp_path))
    qwen_file(tmp_path, looping())
    code, report, err = scan(capsys, "--agent", "qwen")
    assert code == 1, err
    assert [run["meta"]["agent"] for run in report["files"]] == ["qwen"]
    recorded = Path(__file__).parent / "recorded" / "agent-clis" / "qwen"
    head = (recorded / "transcript-sample.jsonl").read_bytes()[:4096]
    assert agent_of(head) == "qwen"


@pytest.mark.parametrize("agent", sorted(WRITERS))
def test_a_healthy_session_is_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], agent: str
) -> None:
    path = WRITERS[agent](tmp_path, healthy())
    code, report, err = scan(capsys, str(path))
    assert (code, err) == (0, "")
    [run] = report["files"]
    assert run["clean"] is True
    assert run["requests"] == 9


def test_the_text_report_names_the_session_its_project_and_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = codex_file(tmp_path, looping())
    assert main(["scan", str(path), "--no-progress", "--color", "never"]) == 1
    out = capsys.readouterr().out
    assert f"codex session {CODEX_ID}" in out
    assert "/home/dev/projects/x3" in out
    assert "started 2026-12-01T22:23:54.802Z" in out
    assert 'exec_command {"cmd":"make"}' in out


@pytest.mark.parametrize("agent", ["codex", "gemini"])
def test_what_changes_on_every_call_does_not_hide_a_repeat(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], agent: str
) -> None:
    # Codex's Chunk ID and Wall time, Gemini's process group id: a new value on every
    # call. Were they part of the answer, every answer would differ, and the repeat
    # would only be refused late, at the ceiling for moving answers (turn 7). Warn mode
    # notes it one count before the refusal (note_early).
    turns = [Turn("npm install", "up to date, audited 1 package", failed=False)] * 10
    code, report, _ = scan(capsys, str(WRITERS[agent](tmp_path, turns)))
    assert code == 1
    [finding] = report["files"][0]["findings"]
    assert (finding["kind"], finding["first"], finding["count"]) == ("repeat", 4, 3)
    noted, refused = finding["spans"]
    assert (noted["noted"], noted["first"], noted["last"]) == (True, 4, 4)
    assert (refused["noted"], refused["first"], refused["count"]) == (False, 5, 4)


def test_tokens_are_the_recorded_usage_counted_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Codex records each response's usage twice (token_usage_record, token_count).
    turns = healthy()
    _, report, _ = scan(capsys, str(codex_file(tmp_path, turns)))
    [run] = report["files"]
    assert run["tokens_in"] == sum(50 + k for k in range(len(turns))) + 1
    assert run["tokens_out"] == 20 * (len(turns) + 1)
    # Gemini: input, output plus thoughts, of each model message (re-emitted: once).
    _, report, _ = scan(capsys, str(gemini_file(tmp_path, turns)))
    [run] = report["files"]
    assert (run["tokens_in"], run["tokens_out"]) == (50 * 9, 25 * 9)
    # Claude Code: input with the cache reads.
    _, report, _ = scan(capsys, str(claude_file(tmp_path, turns)))
    [run] = report["files"]
    assert (run["tokens_in"], run["tokens_out"]) == (150 * 9, 20 * 9)


def test_claude_answer_split_over_lines_is_one_turn_and_duplicates_are_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = claude_session(CLAUDE_ID, [Turn("make", "boom")] * 2)
    # Claude Code writes each content block of an answer as its own line (same
    # message.id, same usage): a thinking block before the first tool call.
    thinking = json.loads(json.dumps(lines[1]))
    thinking["message"]["content"] = [{"type": "thinking", "thinking": "hm", "signature": "s"}]
    thinking["uuid"] = "thinking-1"
    lines.insert(1, thinking)
    lines.insert(3, lines[2])  # the same record written twice (same uuid)
    path = write_lines(tmp_path / f"{CLAUDE_ID}.jsonl", [*claude_extras(CLAUDE_ID), *lines])
    code, report, err = scan(capsys, str(path))
    assert (code, err) == (0, "")
    [run] = report["files"]
    assert run["requests"] == 3
    assert run["tool_calls"] == 2
    assert run["tokens_in"] == 150 * 3


def test_claude_parallel_calls_of_one_answer_are_one_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = claude_session(CLAUDE_ID, [Turn("make", "boom")])
    second = json.loads(json.dumps(lines[1]))
    second["uuid"] = "second-call"
    block = second["message"]["content"][0]
    block["id"], block["input"]["command"] = "toolu_second", "make test"
    result = json.loads(json.dumps(lines[2]))
    result["uuid"] = "second-result"
    result["message"]["content"][0]["tool_use_id"] = "toolu_second"
    lines[2:2] = [second]
    lines[4:4] = [result]
    path = write_lines(tmp_path / f"{CLAUDE_ID}.jsonl", lines)
    _, report, _ = scan(capsys, str(path))
    [run] = report["files"]
    assert (run["requests"], run["tool_calls"]) == (2, 2)


def test_claude_sidechain_is_its_own_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Older Claude Code versions keep a subagent's lines in the session's file.
    main_run = claude_session(CLAUDE_ID, healthy())
    subagent = claude_session(CLAUDE_ID, looping(), sidechain="a1b2c3", parent="x")
    path = write_lines(tmp_path / f"{CLAUDE_ID}.jsonl", [*main_run[:5], *subagent, *main_run[5:]])
    code, report, _ = scan(capsys, str(path))
    assert code == 1
    runs = {run["name"]: run for run in report["files"]}
    assert set(runs) == {str(path), f"{path} (subagent a1b2c3)"}
    assert runs[str(path)]["clean"] is True
    assert runs[str(path)]["requests"] == 9
    assert runs[f"{path} (subagent a1b2c3)"]["meta"]["subagent"] == "a1b2c3"
    assert runs[f"{path} (subagent a1b2c3)"]["findings"]


def test_claude_subagent_file_is_found_and_scanned_as_its_own_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    main_file = claude_file(tmp_path, healthy())
    subagents = main_file.parent / CLAUDE_ID / "subagents"
    write_lines(
        subagents / "agent-a1b2c3.jsonl", claude_session(CLAUDE_ID, looping(), sidechain="a1b2c3")
    )
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    code, report, _ = scan(capsys, "--agent", "claude-code")
    assert code == 1
    [healthy_run, subagent_run] = report["files"]
    assert healthy_run["clean"] is True
    assert subagent_run["name"].endswith("agent-a1b2c3.jsonl")
    assert subagent_run["meta"]["subagent"] == "a1b2c3"
    assert subagent_run["findings"]


def test_a_resumed_claude_session_does_not_count_the_history_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `claude --resume A` writes a new file B: a copy of A (its lines keep A's
    # sessionId), then the new turns. A is reported by its own file.
    first = "aaaaaaaa-0000-4000-8000-000000000001"
    resumed = "bbbbbbbb-0000-4000-8000-000000000002"
    old = claude_session(first, looping())
    new = claude_session(resumed, healthy(), start=20, prompt="Go on")
    write_lines(tmp_path / f"{first}.jsonl", old)
    path_b = write_lines(tmp_path / f"{resumed}.jsonl", [*old, *new])
    code, report, _ = scan(capsys, str(tmp_path))
    assert code == 1
    runs = {Path(run["name"]).stem: run for run in report["files"]}
    assert runs[first]["findings"]
    assert runs[first]["requests"] == 11
    assert runs[resumed]["meta"]["continues"] == first
    assert runs[resumed]["meta"]["session"] == resumed
    assert runs[resumed]["requests"] == 9  # its own turns only
    assert runs[resumed]["clean"] is True
    assert report["summary"]["requests"] == 20
    # B resumed again: C copies A and B. Each part is counted by its own file.
    third = "cccccccc-0000-4000-8000-000000000003"
    newest = claude_session(third, looping(), start=40, prompt="Again")
    write_lines(tmp_path / f"{third}.jsonl", [*old, *new, *newest])
    _, report, _ = scan(capsys, str(tmp_path))
    runs = {Path(run["name"]).stem: run for run in report["files"]}
    assert [runs[key]["requests"] for key in (first, resumed, third)] == [11, 9, 11]
    assert runs[third]["meta"]["continues"] == resumed
    (tmp_path / f"{first}.jsonl").unlink()  # A's part is now counted in B, once
    _, report, _ = scan(capsys, str(tmp_path))
    runs = {Path(run["name"]).stem: run for run in report["files"]}
    assert [runs[key]["requests"] for key in (resumed, third)] == [20, 11]
    write_lines(tmp_path / f"{first}.jsonl", old)
    (tmp_path / f"{third}.jsonl").unlink()
    # Without A's file, B is all that is left of A: counted there.
    (tmp_path / f"{first}.jsonl").unlink()
    code, report, _ = scan(capsys, str(path_b))
    assert code == 1
    [run] = report["files"]
    assert run["requests"] == 20
    assert "continues" not in run["meta"]


def test_gemini_records_written_again_are_one_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Commands that succeed (exit 0): a failing one repeated four times is a loop.
    lines = gemini_session(GEMINI_ID, [Turn("make", "boom", failed=False)] * 3)
    # The context set again (same ids, old outputs masked: not what the model saw
    # then), a rewind, then a new turn.
    again = [line for line in lines if "id" in line and line.get("type") != "info"]
    masked = json.loads(json.dumps(again).replace("boom", "[masked]"))
    extra = gemini_session(GEMINI_ID, [Turn("make", "boom", failed=False)])[4:7]
    extra = json.loads(json.dumps(extra).replace("model-0", "model-9"))
    lines += [{"$set": {"messages": masked}}, {"$rewindTo": "done"}, *extra]
    path = write_lines(tmp_path / "session-x.jsonl", lines)
    # Four successful identical calls: refuse mode refuses the fifth, so none of these.
    code, report, err = scan(capsys, str(path), "--mode", "refuse")
    assert (code, err) == (0, "")
    [run] = report["files"]
    assert (run["requests"], run["tool_calls"]) == (5, 4)
    assert run["findings"] == []
    # Warn mode notes the request after the third (note_early: one count before the
    # refusal), and refuses nothing.
    code, report, err = scan(capsys, str(path))
    assert (code, err) == (1, "")
    [run] = report["files"]
    assert (run["requests"], run["tool_calls"]) == (5, 4)
    [finding] = run["findings"]
    assert [(s["noted"], s["first"], s["count"]) for s in finding["spans"]] == [(True, 4, 3)]
    [replayed], _ = read_runs(AgentSession(str(path), "gemini", 0, lambda: path.open("rb")))
    assert "[masked]" not in json.dumps(replayed.body)


def test_gemini_answers_are_in_the_conversation_once_as_the_text_the_model_saw() -> None:
    lines = gemini_session(GEMINI_ID, [Turn("make", "boom")] * 2)
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    session = AgentSession("s.jsonl", "gemini", len(data), lambda: io.BytesIO(data))
    [run], problems = read_runs(session)
    assert problems == []
    roles = [content["role"] for content in run.body["contents"]]
    assert roles == ["user", "user", "model", "user", "model", "user", "model"]
    answers = [
        part["functionResponse"]["response"]
        for content in run.body["contents"]
        for part in content["parts"]
        if "functionResponse" in part
    ]
    expected = "<untrusted_context>\nOutput: boom\nExit Code: 1\n</untrusted_context>"
    assert answers == [expected, expected]


def test_an_older_gemini_whole_file_session_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [line for line in gemini_session(GEMINI_ID, looping()) if "id" in line]
    latest = {record["id"]: record for record in records}
    document = {
        "sessionId": GEMINI_ID,
        "projectHash": "74ac",
        "startTime": "2026-12-01T22:28:45.170Z",
        "lastUpdated": "2026-12-01T22:29:45.170Z",
        "messages": list(latest.values()),
    }
    path = tmp_path / "chats" / "session-2026-12-01T22-28-86f7cf88.json"
    path.parent.mkdir()
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    code, report, _ = scan(capsys, str(path))
    assert code == 1
    assert report["files"][0]["meta"]["session"] == GEMINI_ID


def test_agent_finds_every_cli_s_sessions_where_it_keeps_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    claude_file(home, looping())
    codex_file(home, healthy())
    gemini_file(home, looping())
    # What else the CLIs keep there is not a transcript.
    write_lines(home / ".codex" / "sessions" / "history.jsonl", [{"session_id": "x", "text": "hi"}])
    write_lines(home / ".gemini" / "tmp" / "g2" / "logs.json", [[{"sessionId": "x"}]])
    monkeypatch.setenv("HOME", str(home))
    for name in (
        "CLAUDE_CONFIG_DIR",
        "CODEX_HOME",
        "GEMINI_CLI_HOME",
        "COPILOT_HOME",
        "XDG_DATA_HOME",
    ):
        monkeypatch.delenv(name, raising=False)
    code, report, err = scan(capsys, "--agent", "claude-code,codex,gemini")
    assert (code, err) == (1, "")
    agents = [run["meta"]["agent"] for run in report["files"]]
    assert agents == ["claude-code", "codex", "gemini"]
    assert [run["clean"] for run in report["files"]] == [False, True, False]
    code, report, _ = scan(capsys, "--agent", "codex")
    assert code == 0
    assert [run["meta"]["session"] for run in report["files"]] == [CODEX_ID]
    # "all": the CLIs that kept any session; one that was never run is not an error.
    for folder in (home / ".codex", home / ".gemini"):
        shutil.rmtree(folder)
    code, report, err = scan(capsys, "--agent", "all")
    assert (code, err) == (1, "")
    assert [run["meta"]["agent"] for run in report["files"]] == ["claude-code"]
    shutil.rmtree(home / ".claude")
    assert main(["scan", "--agent", "all"]) == 2
    assert len(capsys.readouterr().err.splitlines()) == len(AGENTS)  # where each looked


def test_agent_folders_follow_the_variables_that_move_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "nobody"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    monkeypatch.setenv("GEMINI_CLI_HOME", str(tmp_path / "gemini-home"))
    thread = "01a233b5-0000-7000-8000-00000000c0de"
    write_lines(
        tmp_path
        / "codex-home"
        / "archived_sessions"
        / f"rollout-2026-11-30T10-00-00-{thread}.jsonl",
        codex_session(thread, looping()),
    )
    write_lines(
        tmp_path / "claude-config" / "projects" / "-srv-app" / f"{CLAUDE_ID}.jsonl",
        claude_session(CLAUDE_ID, looping()),
    )
    gemini_file(tmp_path / "gemini-home", looping())
    for agent, session in (("codex", thread), ("claude-code", CLAUDE_ID), ("gemini", GEMINI_ID)):
        code, report, _ = scan(capsys, "--agent", agent)
        assert code == 1
        assert [run["meta"]["session"] for run in report["files"]] == [session]
    assert sessions_folder("codex", {"HOME": "/h"}).roots[0] == Path("/h/.codex/sessions")
    assert sessions_folder("gemini", {"HOME": "/h"}).roots[0] == Path("/h/.gemini/tmp")


def test_a_missing_folder_is_a_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "nowhere"))
    code = main(["scan", "--agent", "codex", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.splitlines() == [
        f"loopfuse scan: error: {tmp_path / 'nowhere' / 'sessions'}: no codex transcripts: "
        "no such folder (set CODEX_HOME if the CLI keeps them elsewhere)"
    ]
    (tmp_path / "nowhere" / "sessions").mkdir(parents=True)
    assert main(["scan", "--agent", "codex", "--no-progress"]) == 2
    assert "no codex transcripts where it keeps them" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ([], "the following arguments are required: PATH (or --agent NAME)"),
        (["--agent", "cursor"], "unknown CLI cursor; one of claude-code, codex, gemini, copilot"),
        (["--agent", "codex", "runs/"], "--agent finds the CLI's transcripts itself"),
    ],
)
def test_agent_usage_errors(
    capsys: pytest.CaptureFixture[str], args: list[str], problem: str
) -> None:
    assert main(["scan", *args]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert problem in err


def test_malformed_lines_are_reported_and_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines: list[Any] = claude_session(CLAUDE_ID, looping())
    text = "".join(json.dumps(line) + "\n" for line in lines)
    parts = text.splitlines(keepends=True)
    parts.insert(3, '{"type": "user", "uuid": "x", "sessionId": "s"}\n')  # no message
    parts.insert(5, "{not json\n")
    parts.insert(7, "[1, 2]\n")
    path = tmp_path / f"{CLAUDE_ID}.jsonl"
    path.write_text("".join(parts), encoding="utf-8")
    code, report, err = scan(capsys, str(path))
    assert code == 1  # the loop is still found
    assert err.splitlines() == [
        f"loopfuse scan: error: {path}: line 4: a user line without a message object",
        f"loopfuse scan: error: {path}: line 6: not valid JSON: Expecting property name "
        "enclosed in double quotes",
        f"loopfuse scan: error: {path}: line 8: expected a JSON object, got an array",
    ]
    assert report["files"][0]["bad_lines"] == 3
    # A damaged first line does not hide what the file is.
    path.write_text("{cut short\n" + text, encoding="utf-8")
    code, report, err = scan(capsys, str(path))
    assert code == 1
    assert report["files"][0]["kind"] == "session"
    assert err.splitlines() == [
        f"loopfuse scan: error: {path}: line 1: not valid JSON: Expecting property name "
        "enclosed in double quotes"
    ]
    # A file of nothing but bad lines is an unreadable file.
    path.write_text(json.dumps(lines[0])[:-1] + "\n" + "[]\n", encoding="utf-8")
    assert main(["scan", str(path)]) == 2


def test_the_three_formats_and_a_proxy_log_are_told_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def head(lines: list[dict[str, Any]]) -> bytes:
        return "".join(json.dumps(line) + "\n" for line in lines).encode()[:65536]

    assert agent_of(head(claude_session(CLAUDE_ID, healthy()))) == "claude-code"
    assert agent_of(head(claude_extras(CLAUDE_ID))) == "claude-code"
    assert agent_of(head(codex_session(CODEX_ID, healthy()))) == "codex"
    assert agent_of(head(codex_session(CODEX_ID, healthy()))[:4096]) == "codex"  # first line cut
    assert agent_of(head(gemini_session(GEMINI_ID, healthy()))) == "gemini"
    assert agent_of(head(gemini_session(GEMINI_ID, healthy())[2:])) == "gemini"
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert agent_of(head([body])) is None
    assert agent_of(head([{"session": "s", "body": body}])) is None
    assert agent_of(b"not json\n") is None
    assert agent_of(b"not json\n" + head(claude_session(CLAUDE_ID, healthy()))) == "claude-code"
    assert agent_of(b'{"sessionId": "s", "type": "user"}', whole=True) == "claude-code"
    assert agent_of(b'{"sessionId": "s", "type": "user"}') is None  # a line cut short
    log = write_lines(tmp_path / "proxy.jsonl", [{"session": "s", "body": body}] * 3)
    _, report, _ = scan(capsys, str(log))
    assert report["files"][0]["kind"] == "log"


def test_a_transcript_on_standard_input(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = "".join(json.dumps(line) + "\n" for line in codex_session(CODEX_ID, looping()))
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data.encode())))
    code, report, _ = scan(capsys, "-")
    assert code == 1
    assert report["files"][0]["meta"]["session"] == CODEX_ID


def _paths(value: object, prefix: tuple[Any, ...] = (), depth: int = 4) -> list[tuple[Any, ...]]:
    """Where a value sits in a record: every key and index, a few levels deep."""
    found = [prefix]
    if depth and isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key), depth - 1)
    elif depth and isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index), depth - 1)
    return found


def _replaced(record: Any, path: tuple[Any, ...], value: object) -> Any:
    if not path:
        return value
    copy = json.loads(json.dumps(record))
    inner = copy
    for step in path[:-1]:
        inner = inner[step]
    inner[path[-1]] = value
    return copy


FIXTURES = {
    "claude-code": [*claude_extras(CLAUDE_ID), *claude_session(CLAUDE_ID, looping()[:3])],
    "codex": codex_session(CODEX_ID, looping()[:3]),
    "gemini": gemini_session(GEMINI_ID, looping()[:3]),
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), agent=st.sampled_from(sorted(FIXTURES)))
def test_any_value_anywhere_in_a_transcript_is_read_or_refused_never_a_crash(
    data: st.DataObject, agent: str
) -> None:
    lines: list[Any] = list(FIXTURES[agent])
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(0, len(lines) - 1))
        path = data.draw(st.sampled_from(_paths(lines[index])))
        lines[index] = _replaced(lines[index], path, data.draw(json_values))
    raw = "".join(json.dumps(line) + "\n" for line in lines).encode()
    error: InputError | None = None
    try:
        scan_file(read_bytes(f"{agent}.jsonl", raw, log=True), Settings())
    except InputError as exc:
        error = exc
    assert error is None or str(error).startswith(f"{agent}.jsonl: ")


def hook_acts_at(agent: str, turns: list[Turn]) -> tuple[int | None, int | None]:
    """The turns whose calls the hook (warn mode, its default) first notes and first
    refuses, told each call as the hook is (``ToolCall(tool_name, json of tool_input)``)
    and each answer as the text the model saw (less what changes on every call): the
    note where the detector's early twin (``LoopDetector().earlier()``, its counts one
    notch lower) first finds a loop, the refusal at the first call after it where the
    ``LoopDetector`` itself finds one (the note ignored)."""
    detectors = (LoopDetector().earlier(), LoopDetector())
    noted: int | None = None
    for number, turn in enumerate(turns, start=1):
        if agent == "claude-code":
            call = ToolCall("Bash", json.dumps({"command": turn.command, "description": "Run it"}))
            answer = f"Exit code 1\n{turn.answer}" if turn.failed else turn.answer
        elif agent == "codex":
            call = ToolCall("exec_command", json.dumps({"cmd": turn.command}))
            code = 1 if turn.failed else 0
            answer = (
                f"Process exited with code {code}\nOriginal token count: 11\nOutput:\n"
                f"{turn.answer}\n"
            )
        else:
            args = {"command": turn.command, "description": "Run it"}
            call = ToolCall("run_shell_command", json.dumps(args))
            answer = (
                f"<untrusted_context>\nOutput: {turn.answer}\nExit Code: "
                f"{1 if turn.failed else 0}\n</untrusted_context>"
            )
        found = []
        for detector in detectors:
            try:
                record = detector.check([call])
                found.append(False)
            except LoopDetected as loop:
                record = loop.record
                found.append(True)
            error = turn.failed if agent == "claude-code" else None
            detector.record_results(record, answers=[answer], error=error)
        if noted is None and any(found):
            noted = number
        elif noted is not None and found[1]:
            return noted, number
    return noted, None


@pytest.mark.parametrize("agent", sorted(WRITERS))
@pytest.mark.parametrize(
    "turns",
    [
        looping(),
        [Turn("npm install", "up to date, audited 1 package", failed=False)] * 10,
        [Turn(f"make target{i % 2}", "make: *** No rule to make target") for i in range(10)],
    ],
    ids=["same-error", "same-success", "cycle"],
)
def test_calls_are_judged_as_the_hook_judges_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], agent: str, turns: list[Turn]
) -> None:
    # The scan decides on requests (a proxy's view: the request after the last call it
    # saw); the hook decides on a call once the model asked for it. So the hook notes
    # the call of the turn the scan notes, or of the turn before it, never later; and
    # refuses the call of the turn the scan refuses, or of the turn before it.
    _, report, _ = scan(capsys, str(WRITERS[agent](tmp_path, turns)))
    findings = report["files"][0]["findings"]
    noted, refused = hook_acts_at(agent, turns)
    assert findings
    assert noted is not None
    assert refused is not None
    spans = [span for finding in findings for span in finding["spans"]]
    assert spans[0]["noted"]
    assert noted <= findings[0]["first"] == spans[0]["first"] <= noted + 1
    first_refused = next(span["first"] for span in spans if not span["noted"])
    assert refused <= first_refused <= refused + 1
    if agent == "claude-code":  # the model above is the real hook's decisions
        decided = hook_decides(tmp_path / "state", turns, "warn")
        assert decided.index("note") + 1 == noted
        assert decided.index("refuse") + 1 == refused


_MISSING = (
    "Traceback (most recent call last):\n"
    '  File "/srv/report/run.py", line 3, in <module>\n'
    "    import tablib\n"
    "ModuleNotFoundError: No module named 'tablib'"
)
_NOTED = [Turn("python run.py", _MISSING)] * 3
_READ = Turn("sed -n 1,5p run.py", "import csv\nimport tablib\n", failed=False)
_NEXT = Turn("pip install tablib", "Successfully installed tablib-3.5.0", failed=False)
# The same call, the same success: warn notes it one call before refuse mode refuses it.
_INSTALLS = [Turn("npm install", "up to date, audited 1 package", failed=False)] * 5


def hook_decides(root: Path, turns: list[Turn], mode: str) -> list[str]:
    """What the real ``loopfuse hook`` (Claude Code's payloads, ``--mode mode``) does with
    each turn's call: ``note`` (it ran, and the note came with its answer), ``refuse``
    (it did not run) or ``forward``."""
    now = [1_800_000_000.0]

    def clock() -> float:
        now[0] += 0.001
        return now[0]

    def hook(payload: dict[str, Any]) -> dict[str, Any]:
        output, _ = handle(
            json.dumps(payload).encode(), ["--state-dir", str(root), "--mode", mode], {}, clock
        )
        return json.loads(output) if output else {}

    decided = []
    for k, turn in enumerate(turns):
        before = hook(claude_pre(turn.command, f"toolu_{k}"))
        if before.get("hookSpecificOutput", {}).get("permissionDecision") == "deny":
            decided.append("refuse")
            continue
        post = claude_failure if turn.failed else claude_post
        after = hook(post(turn.command, f"toolu_{k}", turn.answer))
        decided.append(
            "note" if after.get("hookSpecificOutput", {}).get("additionalContext") else "forward"
        )
    return decided


@pytest.mark.parametrize(
    "turns",
    [
        [*_NOTED, _READ, Turn("python run.py -v", "report: 12 rows\n" + _MISSING), _NEXT],
        [*_NOTED, _READ, Turn("python run.py -v", "AssertionError: 12 != 11"), _NEXT],
        [*_NOTED, Turn("python run.py --retry", "starting\n" + _MISSING), _NEXT, _NEXT],
        [*_INSTALLS[:3], _READ, _NEXT],
    ],
    ids=["failed-again", "failed-otherwise", "failed-again-at-once", "noted-early"],
)
def test_warn_decides_as_the_hook_decides_after_a_note(tmp_path: Path, turns: list[Turn]) -> None:
    """``scan --mode warn`` and the live hook on one Claude Code session: the same note
    and the same refusal of the note ignored, the noted failure again (issue 27) too.
    The scan decides on the request *after* a turn's answer (its position: the turn
    that request produced); the hook notes with the turn's answer, and refuses the next
    turn's call before it runs, which is that same request's."""
    path = claude_file(tmp_path, turns)
    settings = Settings(guard=GuardSettings(mode="warn"))
    ((result,), _) = scan_file(read_bytes(str(path), path.read_bytes(), log=True), settings)
    scanned = {step.position: step.action for step in result.steps}
    hook = hook_decides(tmp_path / "state", turns, "warn")
    if turns[0] is _INSTALLS[0]:  # noted one call before refuse mode refuses the same
        refusing = hook_decides(tmp_path / "refuse", _INSTALLS, "refuse")
        assert hook == ["forward", "forward", "note", "forward", "forward"]
        assert refusing.index("refuse") == 3
    # A note given with turn k's answer is the scan's at k + 1; a refused call is the
    # scan's refusal at its own turn.
    noted = [k + 2 for k, action in enumerate(hook) if action == "note"]
    refused = [k + 1 for k, action in enumerate(hook) if action == "refuse"]
    assert noted == [p for p, action in scanned.items() if action == "note"]
    assert refused == [p for p, action in scanned.items() if action == "refuse" and p <= len(turns)]


def test_a_fifo_named_like_a_transcript_is_not_opened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    claude_file(tmp_path, looping())
    os.mkfifo(tmp_path / ".claude" / "projects" / "-home-dev-projects-c3" / "zz.jsonl")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    code, report, err = scan(capsys, "--agent", "claude-code")  # would block on the FIFO
    assert (code, err) == (1, "")
    assert [Path(run["name"]).stem for run in report["files"]] == [CLAUDE_ID]
