"""The agent-CLI registry and protocol (issue 27 §1): each CLI's hook protocol is its
harness module's ``CLI``, found by ``--agent`` name; the command line names none."""

from __future__ import annotations

import importlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from loopfuse.cli import agents
from loopfuse.cli import init as init_module
from loopfuse.errors import ConfigError
from loopfuse.harness.agent_cli import (
    AGENT_CLIS,
    DEFAULT_AGENT,
    PROBE_TOOL,
    TOLD_BY_PAYLOAD,
    AgentCli,
    agent_cli,
    recognised,
)
from loopfuse.harness.installers import WholeFile

ROOT = Path(__file__).resolve().parent.parent
CLI_MODULES = [ROOT / "src" / "loopfuse" / "cli" / f"{n}.py" for n in ("agents", "init", "doctor")]


def test_an_unknown_name_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown agent 'nobody'"):
        agent_cli("nobody")


@pytest.mark.parametrize("name", list(AGENT_CLIS))
def test_each_registered_cli_is_its_modules_cli(name: str) -> None:
    module = importlib.import_module(f"loopfuse.harness.{AGENT_CLIS[name]}")
    cli = agent_cli(name)
    assert cli is module.CLI
    assert isinstance(cli, AgentCli)
    assert cli.name == name
    assert cli.harness is module.HARNESS
    assert cli.title
    assert cli.before_events
    assert cli.after_events
    assert set(cli.scopes) <= {"user", "project"}
    assert "user" in cli.scopes
    assert cli.events[0] == cli.before_events[0]


@pytest.mark.parametrize("name", list(AGENT_CLIS))
def test_each_probe_event_reads_back_as_a_before_call(name: str) -> None:
    cli = agent_cli(name)
    payload = json.loads(json.dumps(cli.probe_event("s1")))  # as the hook gets it
    event = cli.parse(payload)
    assert (event.agent, event.phase, event.session, event.tool_name) == (
        name,
        "before",
        "s1",
        PROBE_TOOL,
    )
    assert agents.parse_event(payload, name) == event
    if name in (*TOLD_BY_PAYLOAD, DEFAULT_AGENT):  # read without --agent: the same CLI
        assert agents.parse_event(payload).agent == name
        assert recognised(payload) is cli


# How a CLI's answer ends its session, where it is not Claude Code's ``continue: false``:
# pi's is loopfuse's own extension's word (it calls pi's ctx.abort()); OpenCode's is
# loopfuse's plugin's (it calls client.session.abort()); Crush's is its own "halt" (the
# turn ends).
ENDS = {"pi": '"end": true', "opencode": '"action": "end"', "crush": '"halt": true'}


@pytest.mark.parametrize("name", list(AGENT_CLIS))
def test_each_cli_answers_by_the_rules_of_render(name: str) -> None:
    cli = agent_cli(name)
    before = cli.parse(cli.probe_event("s"))
    after = before._replace(phase="after", event_name=cli.after_events[0])
    assert cli.render(before, "allow", "r") == ("", 0)
    assert cli.render(after, "deny", "r") == ("", 0)  # a call that ran is not refused
    refused, status = cli.render(before, "deny", "because")
    assert status == 0
    assert "because" in refused
    assert "continue" not in refused
    assert "halt" not in refused
    if cli.answers_reach_hook:
        assert cli.render(before, "note", "r") == ("", 0)  # a note only after a call
        noted, _ = cli.render(after, "note", "look")
    else:  # no hook after a call (Crush): the note goes with the call's answer, given
        assert cli.render(after, "note", "r") == ("", 0)  # before it ran, and not again
        noted, _ = cli.render(before, "note", "look")
    assert ("look" in noted) is cli.notes_reach_model  # else nothing: it is thrown away
    ended, _ = cli.render(before, "end", "because")
    assert (ENDS.get(name, '"continue": false') in ended) is cli.can_end_session


def test_an_event_of_another_phase_is_not_a_tool_event() -> None:
    cli = agent_cli(DEFAULT_AGENT)
    with pytest.raises(agents.HookPayloadError, match="is not a tool event"):
        cli.parse({"hook_event_name": "SessionStart", "session_id": "s"})


def test_the_tables_of_cli_agents_are_the_registrys() -> None:
    assert tuple(AGENT_CLIS) == agents.AGENTS
    assert set(TOLD_BY_PAYLOAD) <= set(AGENT_CLIS)
    assert DEFAULT_AGENT in AGENT_CLIS
    for name in AGENT_CLIS:
        cli = agent_cli(name)
        assert agents.BEFORE_EVENTS[name] == cli.before_events
        assert agents.AFTER_EVENTS[name] == cli.after_events
        assert agents.TURN_EVENTS[name] == cli.turn_events
        assert agents.BATCH_EVENTS[name] == cli.batch_events
        assert agents.can_end_session(name) is cli.can_end_session
    assert dict(agents.BEFORE_EVENTS).keys() == set(AGENT_CLIS)
    with pytest.raises(KeyError):
        agents.BEFORE_EVENTS["nobody"]


@pytest.mark.parametrize("path", CLI_MODULES, ids=lambda p: p.name)
def test_the_command_line_names_no_cli_outside_its_docstrings(path: Path) -> None:
    """``init``, ``doctor`` and ``agents`` ask the registry (their docstrings may name
    CLIs as examples)."""
    import ast

    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    named = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and any(word in node.value.lower() for word in ("claude", "codex", "gemini", "qwen"))
    ]
    assert named == []


# -- loopfuse init with a CLI of a file wholly loopfuse's ------------------------------


class _PluginCli(AgentCli):
    """A synthetic CLI whose hook is a plugin file of loopfuse's own."""

    name = DEFAULT_AGENT  # a registered name, so that the command is loopfuse's
    title = "Plugin CLI"
    before_events = ("before",)
    after_events = ("after",)
    installer = WholeFile("// loopfuse\nrun(@LOOPFUSE_ARGV@);\n", ("before", "after"))

    def parse(self, payload: dict[str, object]) -> Any:
        raise NotImplementedError

    def render(self, event: Any, action: Any, reason: str) -> tuple[str, int]:
        raise NotImplementedError

    def probe_event(self, session: str) -> dict[str, object]:
        raise NotImplementedError

    def settings_path(self, project: bool, env: Any, cwd: Path) -> Path:
        return cwd / "plugins" / "loopfuse.js"


def _init(tmp_path: Path, *flags: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = init_module.main(
        ["--agent", DEFAULT_AGENT, *flags],
        env={"HOME": str(tmp_path / "home")},
        cwd=tmp_path,
        stdout=out,
        stderr=err,
        executable="/v/bin/loopfuse",
    )
    return status, out.getvalue(), err.getvalue()


def test_init_writes_and_removes_a_file_wholly_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(init_module, "agent_cli", lambda name: _PluginCli())
    plugin = tmp_path / "plugins" / "loopfuse.js"
    assert _init(tmp_path, "--project")[0] == 0
    command = ["/v/bin/loopfuse", "hook", "--agent", DEFAULT_AGENT]
    assert plugin.read_text() == f"// loopfuse\nrun({json.dumps(command)});\n"
    assert "already with loopfuse hook" in _init(tmp_path, "--project")[1]
    assert _init(tmp_path, "--project", "--mode", "refuse")[0] == 0  # replaced
    assert '"--mode", "refuse"' in plugin.read_text()
    assert not plugin.with_name("loopfuse.js.loopfuse-backup").exists()  # nothing to keep
    status, out, _ = _init(tmp_path, "--project", "--remove")
    assert status == 0
    assert "removed from" in out
    assert not plugin.exists()
    assert "no loopfuse hook to remove" in _init(tmp_path, "--project", "--remove")[1]


def test_init_refuses_a_file_at_its_place_it_did_not_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(init_module, "agent_cli", lambda name: _PluginCli())
    plugin = tmp_path / "plugins" / "loopfuse.js"
    plugin.parent.mkdir()
    plugin.write_text("// the user's own plugin\n")
    status, _, err = _init(tmp_path, "--project")
    assert status == 2
    assert "loopfuse init did not write" in err
    assert str(plugin) in err
    assert _init(tmp_path, "--project", "--remove")[1].endswith("already without loopfuse hook\n")
    assert plugin.read_text() == "// the user's own plugin\n"
