"""Crush's hook protocol and settings file (loopfuse.harness.crush's CLI), on payloads built
from Crush's source (tests/recorded/agent-clis/crush/README.md says from which files and
commits: Crush cannot be installed here)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import sys
import tempfile
from pathlib import Path

import pytest

from loopfuse.cli import doctor, init
from loopfuse.cli.agents import parse_event
from loopfuse.cli.hook import handle
from loopfuse.cli.init import is_our_command
from loopfuse.cli.main import main as scan_main
from loopfuse.harness import ToolKind, crush, reader_for
from loopfuse.harness.agent_cli import PROBE_TOOL, HookPayloadError
from loopfuse.harness.installers import InstallError

CLI = crush.CLI

RECORDED = Path(__file__).parent / "recorded" / "agent-clis" / "crush"
COMMAND = "/venv/bin/loopfuse hook --agent crush"


def payload(name: str) -> dict[str, object]:
    value = json.loads((RECORDED / name).read_text("utf-8"))
    assert isinstance(value, dict)
    return value


def test_a_pre_tool_use_payload_is_read_without_the_shells_prose() -> None:
    event = CLI.parse(payload("pre-bash.json"))
    assert event.phase == "before"
    assert event.event_name == "PreToolUse"
    assert event.session == "5a1e0c9f-3b7d-4e52-9d1a-2c6f8e4b7a10"
    assert event.tool_name == "bash"
    assert event.tool_input == {"command": "npm test"}  # the description is not the call
    assert event.answer is None


@pytest.mark.parametrize(
    ("name", "kind"), [("pre-view.json", ToolKind.READ), ("pre-edit.json", ToolKind.EDITOR)]
)
def test_its_tools_are_declared(name: str, kind: ToolKind) -> None:
    event = CLI.parse(payload(name))
    assert crush.HARNESS.kind(event.tool_name, event.tool_input) is kind


@pytest.mark.parametrize("spelling", ["pretooluse", "pre_tool_use", "PRE_TOOL_USE"])
def test_event_names_are_read_as_crush_normalises_them(spelling: str) -> None:
    event = CLI.parse({**payload("pre-bash.json"), "event": spelling})
    assert event.event_name == "PreToolUse"


def test_pre_compact_is_not_a_tool_event() -> None:
    with pytest.raises(HookPayloadError, match="not a tool event"):
        CLI.parse(payload("precompact.json"))


@pytest.mark.parametrize(
    "broken",
    [
        [],
        {"session_id": "s", "tool_name": "bash"},
        {"event": "PreToolUse", "tool_name": "bash"},
        {"event": "PreToolUse", "session_id": "", "tool_name": "bash"},
        {"event": "PreToolUse", "session_id": "s", "tool_name": 3},
    ],
)
def test_a_payload_that_is_not_crushs_is_refused_with_a_typed_error(broken: object) -> None:
    with pytest.raises(HookPayloadError):
        parse_event(broken, "crush")  # as the hook reads it: --agent crush


def test_the_unreleased_post_tool_use_carries_the_answer_and_its_failure_flag() -> None:
    event = CLI.parse(payload("post-bash-pr3146.json"))
    assert event.phase == "after"
    assert event.error is True
    assert isinstance(event.answer, str)
    assert "Missing script" in event.answer


def test_answers_are_json_with_exit_status_zero_in_crushs_fields() -> None:
    before = CLI.parse(payload("pre-bash.json"))
    assert CLI.render(before, "allow", "") == ("", 0)
    assert json.loads(CLI.render(before, "note", "N")[0]) == {"context": "N"}
    assert json.loads(CLI.render(before, "deny", "R")[0]) == {"decision": "deny", "reason": "R"}
    end = json.loads(CLI.render(before, "end", "R")[0])
    assert end == {"decision": "deny", "reason": "R", "halt": True}  # still a refusal
    assert {CLI.render(before, a, "x")[1] for a in ("note", "deny", "end")} == {0}


def test_after_a_call_nothing_is_refused_nor_noted_again_but_a_halt_still_goes() -> None:
    after = CLI.parse(payload("post-bash-pr3146.json"))
    assert CLI.render(after, "deny", "R") == ("", 0)
    assert CLI.render(after, "note", "N") == ("", 0)  # given with the call's before-answer
    assert json.loads(CLI.render(after, "end", "R")[0]) == {"halt": True, "reason": "R"}


def test_a_message_for_the_user_allows_the_call_without_a_decision() -> None:
    text, status = CLI.render_user_message(CLI.parse(payload("pre-bash.json")), "settings refused")
    assert status == 0
    assert json.loads(text) == {"reason": "settings refused"}  # no decision: no opinion


def test_the_doctor_probe_is_read_as_a_pre_tool_use() -> None:
    probe = CLI.probe_event("doctor-1")
    assert set(probe) == set(payload("pre-bash.json"))  # Crush's fields, no others
    event = CLI.parse(probe)
    assert (event.phase, event.session, event.tool_name) == ("before", "doctor-1", PROBE_TOOL)


def test_settings_paths(tmp_path: Path) -> None:
    home = {"HOME": "/h"}
    assert CLI.settings_path(False, home, tmp_path) == Path("/h/.config/crush/crush.json")
    xdg = {"HOME": "/h", "XDG_CONFIG_HOME": "/x"}
    assert CLI.settings_path(False, xdg, tmp_path) == Path("/x/crush/crush.json")
    own = {**xdg, "CRUSH_GLOBAL_CONFIG": "/g"}  # Crush's own variable: a folder
    assert CLI.settings_path(False, own, tmp_path) == Path("/g/crush.json")
    assert CLI.settings_path(True, home, tmp_path) == tmp_path / "crush.json"
    (tmp_path / ".crush.json").write_text("{}")
    assert CLI.settings_path(True, home, tmp_path) == tmp_path / ".crush.json"
    (tmp_path / "crush.json").write_text("{}")
    assert CLI.settings_path(True, home, tmp_path) == tmp_path / "crush.json"


def test_init_installs_for_pre_tool_use_only() -> None:
    # No released Crush fires another event; doctor asks for these.
    assert CLI.events == ("PreToolUse",)
    assert CLI.phase_of("PostToolUse") == "after"  # still read when one comes


INSTALLER = CLI.installer


def install(text: str, command: str = COMMAND) -> str:
    return INSTALLER.install(text, command, is_our_command)


def uninstall(text: str) -> str:
    return INSTALLER.uninstall(text, is_our_command)


def commands(text: str) -> list[str]:
    return INSTALLER.commands(text, is_our_command).get("PreToolUse", [])


def test_install_into_no_file_writes_one_flat_pre_tool_use_entry() -> None:
    text = install("")
    assert json.loads(text) == {
        "hooks": {
            "PreToolUse": [{"name": "loopfuse", "timeout": crush.HOOK_TIMEOUT, "command": COMMAND}]
        }
    }
    assert INSTALLER.commands(text, is_our_command) == {"PreToolUse": [COMMAND]}
    assert INSTALLER.same_but_spacing(uninstall(text), "")  # init removes the file


def test_install_keeps_the_users_hooks_and_bytes_and_is_idempotent() -> None:
    original = (RECORDED / "crush.json").read_text("utf-8")
    once = install(original)
    hooks = json.loads(once)["hooks"]["PreToolUse"]
    assert hooks[0]["name"] == "no-rm-rf"  # the user's hook runs first, as before
    assert hooks[1]["command"] == COMMAND
    assert install(once) == once
    other = install(once, COMMAND + " --mode refuse")
    assert commands(other) == [COMMAND + " --mode refuse"]  # replaced, not added
    assert uninstall(other) == original


def test_uninstall_leaves_other_settings_and_a_commented_file() -> None:
    text = '{\n  // mine\n  "options": {"debug": true}\n}\n'
    installed = install(text)
    assert "// mine" in installed
    assert uninstall(installed) == text


def test_a_command_that_only_mentions_loopfuse_is_not_ours() -> None:
    text = json.dumps({"hooks": {"PreToolUse": [{"command": "echo loopfuse hook --agent crush"}]}})
    assert commands(text) == []
    assert uninstall(text) == text


def test_hooks_of_the_wrong_shape_are_refused_not_overwritten() -> None:
    with pytest.raises(InstallError):
        install('{"hooks": []}')
    with pytest.raises(InstallError):
        install('{"hooks": {"PreToolUse": {}}}')


# -- loopfuse init --agent crush, loopfuse doctor ----------------------------------------

SCRIPT = f"{sys.executable} -m loopfuse"


def run_init(home: Path, cwd: Path, *flags: str, **env: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = init.main(
        ["--agent", "crush", *flags],
        env={"HOME": str(home), **env},
        cwd=cwd,
        stdout=out,
        stderr=err,
        executable=SCRIPT,
    )
    return status, out.getvalue(), err.getvalue()


def test_init_user_scope_idempotent_dry_run_and_remove(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir(parents=True)
    path = home / ".config" / "crush" / "crush.json"
    path.parent.mkdir(parents=True)
    original = '{\n  "$schema": "https://charm.land/crush.json",\n  "options": {"debug": true}\n}\n'
    path.write_text(original)
    status, out, _ = run_init(home, project, "--dry-run")
    assert status == 0
    assert f"{SCRIPT} hook --agent crush" in out
    assert path.read_text() == original
    assert run_init(home, project)[0] == 0
    entry = {"name": "loopfuse", "timeout": 10, "command": f"{SCRIPT} hook --agent crush"}
    assert json.loads(path.read_text())["hooks"] == {"PreToolUse": [entry]}
    text = path.read_text()
    assert "already" in run_init(home, project)[1]
    assert path.read_text() == text
    assert run_init(home, project, "--end-session")[0] == 0  # Crush can halt its turn
    assert commands(path.read_text()) == [f"{SCRIPT} hook --agent crush --end-session"]
    assert run_init(home, project, "--remove")[0] == 0
    assert path.read_text() == original
    assert not (project / "crush.json").exists()


def test_init_follows_crushs_own_folder_variables(tmp_path: Path) -> None:
    assert run_init(tmp_path, tmp_path, XDG_CONFIG_HOME=str(tmp_path / "x"))[0] == 0
    assert commands((tmp_path / "x" / "crush" / "crush.json").read_text())
    own = {"XDG_CONFIG_HOME": str(tmp_path / "x"), "CRUSH_GLOBAL_CONFIG": str(tmp_path / "g")}
    assert run_init(tmp_path, tmp_path, **own)[0] == 0
    assert commands((tmp_path / "g" / "crush.json").read_text())


def test_init_project_scope_writes_crush_json_or_the_hidden_one_there(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir(parents=True)
    assert run_init(home, project, "--project")[0] == 0
    assert commands((project / "crush.json").read_text())
    assert not home.exists()
    assert run_init(home, project, "--project", "--remove")[0] == 0
    assert not (project / "crush.json").exists()  # there was none before init
    hidden = project / ".crush.json"
    hidden.write_text('{"options": {}}\n')
    assert run_init(home, project, "--project")[0] == 0
    assert commands(hidden.read_text())
    assert not (project / "crush.json").exists()
    assert run_init(home, project, "--project", "--remove")[0] == 0
    assert hidden.read_text() == '{"options": {}}\n'


def test_doctor_finds_the_crush_hook_and_runs_it(tmp_path: Path) -> None:
    home, project, state = tmp_path / "home", tmp_path / "project", tmp_path / "state"
    project.mkdir(parents=True)
    env = {
        "HOME": str(home),
        "XDG_STATE_HOME": str(state),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    assert run_init(home, project, "--project", "--mode", "refuse")[0] == 0
    out = io.StringIO()
    status = doctor.main(["--agent", "crush"], env=env, cwd=project, stdout=out)
    text = out.getvalue()
    assert status == 0, text
    assert f"crush, user: {home}/.config/crush/crush.json: not installed" in text
    assert "ok     installed: for its 1 event" in text
    assert "mode refuse" in text
    assert "ok     runs: a test call answered in" in text
    # Settings refused: the hook allows every call and tells the user in Crush's way.
    config = tmp_path / "loopfuse.toml"
    config.write_text("max_strike = 4\n", encoding="utf-8")
    out = io.StringIO()
    status = doctor.main(
        ["--agent", "crush"], env={**env, "LOOPFUSE_CONFIG": str(config)}, cwd=project, stdout=out
    )
    assert status == 1
    assert "runs: it allows every call and says: [loopfuse] The loop guard is OFF" in out.getvalue()


# -- loopfuse scan: Crush's sessions are not read -----------------------------------------


@pytest.mark.parametrize("names", ["crush", "codex,crush"])
def test_scan_agent_crush_is_not_supported_and_says_why(
    names: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert scan_main(["scan", "--agent", names]) == 2
    err = capsys.readouterr().err
    assert err.startswith("loopfuse scan: error: --agent: scan has no reader for Crush")
    assert "(Crush keeps them in a SQLite database whose schema is not established here" in err
    assert len(err.splitlines()) == 1


def test_a_crush_database_given_to_scan_is_unreadable_not_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    database = tmp_path / "crush.db"
    with contextlib.closing(sqlite3.connect(database)) as made:
        made.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, title TEXT)")
        made.execute("CREATE TABLE messages (id TEXT, session_id TEXT, role TEXT, parts TEXT)")
        made.commit()
    assert scan_main(["scan", "--format", "json", str(database)]) == 2
    captured = capsys.readouterr()
    assert f"{database}: cannot read" in captured.err
    report = json.loads(captured.out)
    assert report["summary"]["clean"] == 0
    assert report["errors"][0]["kind"] == "unreadable"


# -- the detector reads Crush's tools as Crush means them ---------------------------------


def test_auto_judges_crushs_own_tools_as_crush_declares_them() -> None:
    auto = reader_for("auto")
    assert auto is not None
    assert auto.kind("lsp_diagnostics", {"file_path": "a.go"}) is ToolKind.READ
    assert auto.kind("job_output", {"shell_id": "001"}) is ToolKind.WAIT
    assert auto.kind("sourcegraph", {"query": "x"}) is ToolKind.COSTLY
    assert auto.kind("multiedit", {"file_path": "a.go", "edits": []}) is ToolKind.EDITOR


def test_a_diagnostics_poll_past_the_ceiling_is_never_noted() -> None:
    """Without its answers (no hook after a call), a read repeated is never judged: the
    language server's diagnostics of a file being fixed elsewhere may move."""
    clock = iter(range(1_000_000, 1_000_100))
    with tempfile.TemporaryDirectory() as state:
        for _ in range(8):
            raw = json.dumps({**payload("pre-view.json"), "tool_name": "lsp_diagnostics"})
            answer = handle(
                raw.encode(), ["--agent", "crush", "--state-dir", state], {}, lambda: next(clock)
            )
            assert answer == ("", 0)
