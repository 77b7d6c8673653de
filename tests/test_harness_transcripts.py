"""The transcript registry (`loopfuse.harness.transcripts`): each CLI's `sessions`, asked by
`loopfuse scan` in a known order, and how a new CLI adds its reader."""

from __future__ import annotations

import io
import json
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from agent_transcripts import looping, write_lines
from loopfuse.cli.agent_sessions import AGENTS, AgentSession, agent_of, read_runs, sessions_folder
from loopfuse.cli.main import main
from loopfuse.harness import _copilot_sessions
from loopfuse.harness.agent_cli import AGENT_CLIS, AgentCli, agent_cli
from loopfuse.harness.claude_code import ClaudeCodeCli
from loopfuse.harness.transcripts import (
    AgentRun,
    Lines,
    SessionFolder,
    SessionFormat,
    run_meta,
    scanned_agents,
    session_format,
    session_formats,
)


def _forget() -> None:
    for cached in (
        agent_cli,
        session_format,
        scanned_agents,
        session_formats,
    ):
        cached.cache_clear()


class FakeSessions(SessionFormat):
    """A CLI that writes ``{"type": "fake.call", "tool", "args", "output", "failed"}``
    lines under ``$FAKE_HOME/runs``: the shape a new CLI helper writes. (Its records must
    not have a top-level ``messages``, ``contents``, ``input`` or ``body``: those are
    request bodies and proxy-log entries, never a transcript.)"""

    agent = "fake"
    priority = 45

    def folder(self, env: Mapping[str, str]) -> SessionFolder:
        return SessionFolder(self.agent, (Path(env["FAKE_HOME"]) / "runs",), "FAKE_HOME")

    def recognises(self, record: dict[str, Any]) -> bool:
        return record.get("type") == "fake.call"

    def read_runs(self, name: str, path: Path | None, lines: Lines) -> list[AgentRun]:
        messages: list[dict[str, Any]] = []
        for number, record in lines:
            if record.get("type") != "fake.call":
                lines.problem(number, "not a fake record")
                continue
            call = f"c{number}"
            use = {"type": "tool_use", "id": call, "name": record["tool"], "input": record["args"]}
            result = {"type": "tool_result", "tool_use_id": call, "content": record["output"]}
            result["is_error"] = record["failed"]
            messages += [
                {"role": "assistant", "content": [use]},
                {"role": "user", "content": [result]},
            ]
        meta = run_meta(agent=self.agent, session=Path(name).stem)
        return [AgentRun(name, {"model": "", "system": [], "messages": messages}, meta)]


class FakeCli(ClaudeCodeCli):
    name = "fake"
    title = "Fake CLI"
    sessions: SessionFormat | None = FakeSessions()


class FakeCliWithout(ClaudeCodeCli):
    name = "fake"
    title = "Fake CLI"
    sessions = None


@pytest.fixture
def register(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str, AgentCli], None]]:
    """Adds a CLI to the registry as its helper would: a module exporting ``CLI`` and
    one line of ``AGENT_CLIS``."""

    def add(name: str, cli: AgentCli) -> None:
        module = types.ModuleType(f"loopfuse.harness._test_{name}")
        setattr(module, "CLI", cli)  # noqa: B010 (a module made here, as agent_cli imports it)
        monkeypatch.setitem(sys.modules, module.__name__, module)
        monkeypatch.setitem(AGENT_CLIS, name, module.__name__.rpartition(".")[2])
        _forget()

    _forget()
    yield add
    _forget()


def test_every_cli_that_scan_reads_is_listed_in_its_historic_order() -> None:
    assert scanned_agents() == AGENTS
    assert AGENTS == ("claude-code", "codex", "gemini", "copilot", "opencode", "qwen", "kimi", "pi")
    for name in AGENT_CLIS:
        found = agent_cli(name).sessions
        if name not in AGENTS:  # a guarded CLI scan has no reader for (Crush): it says why
            assert found is None
            assert agent_cli(name).sessions_unread
            continue
        assert found is not None
        assert found.agent == name
        assert session_format(name) is found
    assert session_format("copilot") is _copilot_sessions.SESSIONS


def test_recognition_asks_the_stricter_formats_first() -> None:
    order = [found.agent for found in session_formats()]
    assert order == ["codex", "gemini", "qwen", "claude-code", "copilot", "opencode", "kimi", "pi"]
    priorities = [found.priority for found in session_formats()]
    assert priorities == sorted(set(priorities))  # no tie left to chance
    envelope = {"sessionId": "s", "type": "user", "uuid": "u", "parentUuid": None}
    qwen = {**envelope, "message": {"role": "user", "parts": [{"text": "hi"}]}}
    claude = {**envelope, "message": {"role": "user", "content": "hi"}}
    assert agent_of(json.dumps(qwen).encode() + b"\n") == "qwen"
    assert agent_of(json.dumps(claude).encode() + b"\n") == "claude-code"


def test_a_new_cli_adds_its_reader_with_its_registry_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    register: Callable[[str, AgentCli], None],
) -> None:
    register("fake", FakeCli())
    monkeypatch.setenv("FAKE_HOME", str(tmp_path))
    records = [
        {"type": "fake.call", "tool": "Bash", "args": {"command": turn.command}}
        | {"output": turn.answer, "failed": turn.failed}
        for turn in looping()
    ]
    path = write_lines(tmp_path / "runs" / "day1" / "s1.jsonl", records)
    write_lines(tmp_path / "runs" / "notes.txt", records)  # not a transcript: skipped
    assert scanned_agents()[-1] == "fake"
    assert agent_of(path.read_bytes()[:200]) == "fake"
    assert list(sessions_folder("fake").files()) == [path]
    code = main(["scan", "--agent", "fake", "--format", "json", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 1
    (run,) = json.loads(out)["files"]
    assert run["meta"] == {"agent": "fake", "session": "s1"}
    assert run["clean"] is False
    assert main(["scan", str(path), "--no-progress"]) == 1  # a path, recognised: the same
    capsys.readouterr()


def test_scan_agent_names_a_cli_without_a_reader_clearly(
    capsys: pytest.CaptureFixture[str], register: Callable[[str, AgentCli], None]
) -> None:
    register("fake", FakeCliWithout())
    assert "fake" not in scanned_agents()
    assert main(["scan", "--agent", "codex,fake", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "loopfuse scan: error: --agent: scan has no reader for Fake CLI transcripts; it reads "
        "claude-code, codex, gemini, copilot, opencode, qwen, kimi, pi (see loopfuse scan --help)"
    ]
    with pytest.raises(ValueError, match="cannot read Fake CLI's transcripts"):
        sessions_folder("fake")


def test_the_line_reader_reports_bad_lines_and_counts_them_on_the_first_run() -> None:
    data = b'{"type": "fake.call", "tool": "Bash", "args": {}, "output": "", "failed": false}\n'
    data += b"not json\n" + b'{"type": "other"}\n'
    session = AgentSession("s.jsonl", "fake", len(data), lambda: io.BytesIO(data))
    runs, problems = FakeSessions().read_session(session)
    assert problems == ["line 2: not valid JSON: Expecting value", "line 3: not a fake record"]
    assert runs[0].bad_lines == 2


def test_read_runs_asks_the_sessions_own_format(
    register: Callable[[str, AgentCli], None],
) -> None:
    register("fake", FakeCli())
    data = b'{"type": "fake.call", "tool": "Read", "args": {}, "output": "x", "failed": false}\n'
    runs, problems = read_runs(AgentSession("s.jsonl", "fake", len(data), lambda: io.BytesIO(data)))
    assert (len(runs), problems) == (1, [])
    assert runs[0].body["messages"][0]["content"][0]["name"] == "Read"
