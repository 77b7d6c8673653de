"""``loopfuse doctor``: for each CLI loopfuse can guard, is the hook installed, does it read
its settings, can it write its state folder, does it run (issue 29 §2).

Each test installs the hook with ``loopfuse init`` in an isolated home, as a user does,
running this Python's loopfuse (``python -m loopfuse``), then breaks one thing."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loopfuse.cli import doctor, init
from loopfuse.cli.entry import main as entry
from loopfuse.harness.agent_cli import AGENT_CLIS, agent_cli

HOOK = f"{sys.executable} -m loopfuse"


class Machine:
    """An isolated home, a project folder and a state folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.project = root / "project"
        self.state = root / "state"
        for folder in (self.home, self.project):
            folder.mkdir()
        self.env = {
            "HOME": str(self.home),
            "CODEX_HOME": str(self.home / ".codex"),
            "XDG_STATE_HOME": str(self.state),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        }

    def init(self, agent: str, *flags: str) -> None:
        out, err = io.StringIO(), io.StringIO()
        status = init.main(
            ["--agent", agent, *flags],
            env=self.env,
            cwd=self.project,
            stdout=out,
            stderr=err,
            executable=HOOK,
        )
        assert status == 0, err.getvalue()

    def doctor(self, *args: str, **env: str) -> tuple[int, str]:
        out = io.StringIO()
        status = doctor.main(list(args), env=self.env | env, cwd=self.project, stdout=out)
        return status, out.getvalue()

    def report(self, **env: str) -> tuple[int, dict[str, Any]]:
        status, text = self.doctor("--format", "json", **env)
        return status, json.loads(text)

    def checks(self, report: dict[str, Any], agent: str, scope: str = "user") -> dict[str, Any]:
        place = next(p for p in report["places"] if (p["agent"], p["scope"]) == (agent, scope))
        return {check["name"]: check for check in place["checks"]}


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    return Machine(tmp_path)


def files(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def test_installed_nowhere_is_a_problem(machine: Machine) -> None:
    status, text = machine.doctor()
    assert status == 1
    # each CLI's every scope (user, project; Codex: user only)
    places = sum(len(agent_cli(name).scopes) for name in AGENT_CLIS)
    # claude-code, gemini, qwen, copilot, pi, opencode, crush twice; codex, kimi once
    assert places >= 16
    assert text.count("not installed") == places
    assert "installed nowhere: loopfuse init --agent" in text


def test_a_qwen_code_hook_is_found_in_either_scope_and_passes_every_check(
    machine: Machine,
) -> None:
    machine.init("qwen")
    machine.init("qwen", "--project", "--mode", "refuse")
    status, report = machine.report()
    assert status == 0
    for scope in ("user", "project"):
        checks = machine.checks(report, "qwen", scope)
        assert all(check["ok"] for check in checks.values()), checks
    assert "mode refuse" in machine.checks(report, "qwen", "project")["settings"]["detail"]


def test_an_installed_hook_that_works_passes_every_check(machine: Machine) -> None:
    machine.init("claude-code")
    machine.init("gemini", "--project", "--mode", "refuse")
    before = files(machine.home) | files(machine.project)
    status, report = machine.report()
    assert status == 0
    assert report["ok"] is True
    for agent, scope in (("claude-code", "user"), ("gemini", "project")):
        checks = machine.checks(report, agent, scope)
        assert list(checks) == ["installed", "settings", "state folder", "runs"]
        assert all(check["ok"] for check in checks.values()), checks
    assert "mode refuse" in machine.checks(report, "gemini", "project")["settings"]["detail"]
    installed = {(p["agent"], p["scope"]) for p in report["places"] if p["installed"]}
    assert installed == {("claude-code", "user"), ("gemini", "project")}
    # Nothing written outside the state folder; the test sessions are gone from it.
    assert files(machine.home) | files(machine.project) == before
    sessions = machine.state / "loopfuse" / "sessions"
    assert not [p for p in sessions.iterdir() if "loopfuse-doctor" in p.name]


def test_the_human_report_says_each_check(machine: Machine) -> None:
    machine.init("codex")
    status, text = machine.doctor()
    assert status == 0
    assert "codex, user:" in text
    assert "ok     runs: a test call answered in" in text
    assert "1 guarded, 0 problems: all good" in text


def test_a_settings_file_broken_after_install_is_found(machine: Machine) -> None:
    config = machine.root / "loopfuse.toml"
    config.write_text("max_strikes = 4\n", encoding="utf-8")
    machine.init("gemini", "--config", str(config))
    config.write_text("max_strike = 4\n", encoding="utf-8")
    status, report = machine.report()
    assert status == 1
    checks = machine.checks(report, "gemini")
    assert not checks["settings"]["ok"]
    assert (
        f"{config}: unknown key 'max_strike' (did you mean max_strikes?)"
        in (checks["settings"]["detail"])
    )
    assert not checks["runs"]["ok"]  # it fails open, and says so to the user
    assert "allows every call" in checks["runs"]["detail"]


def test_a_file_named_by_loopfuse_config_is_read_as_the_hook_reads_it(machine: Machine) -> None:
    machine.init("claude-code")
    config = machine.root / "bad.toml"
    config.write_text('[hook]\nmode = "warm"\n', encoding="utf-8")
    status, report = machine.report(LOOPFUSE_CONFIG=str(config))
    assert status == 1
    detail = machine.checks(report, "claude-code")["settings"]["detail"]
    assert f"$LOOPFUSE_CONFIG, which the hook reads: {config}: hook.mode" in detail


def test_a_state_folder_that_is_a_file_is_found(machine: Machine) -> None:
    machine.init("claude-code")
    machine.state.mkdir()
    (machine.state / "loopfuse").write_text("not a folder", encoding="utf-8")
    status, report = machine.report()
    assert status == 1
    checks = machine.checks(report, "claude-code")
    assert "not a folder" in checks["state folder"]["detail"]
    assert not checks["runs"]["ok"]
    assert (machine.state / "loopfuse").read_text() == "not a folder"


def test_a_sessions_folder_that_is_a_link_is_not_followed(machine: Machine) -> None:
    machine.init("claude-code")
    elsewhere = machine.root / "elsewhere"
    elsewhere.mkdir()
    (machine.state / "loopfuse").mkdir(parents=True, mode=0o700)
    (machine.state / "loopfuse" / "sessions").symlink_to(elsewhere)
    status, report = machine.report()
    assert status == 1
    state = machine.checks(report, "claude-code")["state folder"]
    assert "a symbolic link, not followed" in state["detail"]


def test_a_state_folder_others_may_write_to_is_found(machine: Machine) -> None:
    machine.init("codex")
    (machine.state / "loopfuse").mkdir(parents=True)
    (machine.state / "loopfuse").chmod(0o777)
    status, report = machine.report()
    assert status == 1
    assert "others may write to" in machine.checks(report, "codex")["state folder"]["detail"]


def test_a_state_folder_not_made_yet_is_fine(machine: Machine) -> None:
    machine.init("gemini")
    status, report = machine.report()
    assert status == 0
    assert machine.checks(report, "gemini")["state folder"]["ok"]


def test_a_hook_whose_program_is_gone_is_found(machine: Machine) -> None:
    settings = machine.home / ".claude" / "settings.json"
    machine.init("claude-code")
    text = settings.read_text(encoding="utf-8").replace(HOOK, "/no/such/venv/bin/loopfuse")
    settings.write_text(text, encoding="utf-8")
    status, report = machine.report()
    assert status == 1
    runs = machine.checks(report, "claude-code")["runs"]
    assert runs == {
        "name": "runs",
        "ok": False,
        "detail": "/no/such/venv/bin/loopfuse: no such program (reinstall loopfuse?)",
    }


def test_an_install_missing_an_event_says_to_run_init_again(machine: Machine) -> None:
    settings = machine.home / ".claude" / "settings.json"
    machine.init("claude-code")
    data = json.loads(settings.read_text(encoding="utf-8"))
    del data["hooks"]["PostToolBatch"]
    settings.write_text(json.dumps(data), encoding="utf-8")
    status, report = machine.report()
    assert status == 1
    installed = machine.checks(report, "claude-code")["installed"]
    assert installed["detail"] == (
        "not for PostToolBatch (an older install?): run loopfuse init --agent claude-code"
    )


def test_a_gemini_settings_file_with_comments_is_read(machine: Machine) -> None:
    machine.init("gemini")
    settings = machine.home / ".gemini" / "settings.json"
    text = settings.read_text(encoding="utf-8")
    settings.write_text("// mine\n" + text.replace("{", "{ /* a note */", 1), encoding="utf-8")
    status, report = machine.report()
    assert status == 0, report


def test_a_settings_file_that_is_not_json_is_a_problem(machine: Machine) -> None:
    settings = machine.home / ".codex" / "hooks.json"
    settings.parent.mkdir()
    settings.write_text("{not json", encoding="utf-8")
    status, report = machine.report()
    assert status == 1
    assert "not valid JSON" in machine.checks(report, "codex")["installed"]["detail"]


def test_switched_off_in_the_environment_is_said(machine: Machine) -> None:
    machine.init("codex")
    status, report = machine.report(LOOPFUSE_HOOK="off")
    assert status == 1
    assert "LOOPFUSE_HOOK" in machine.checks(report, "codex")["runs"]["detail"]


def test_one_cli_only(machine: Machine) -> None:
    machine.init("codex")
    status, text = machine.doctor("--agent", "gemini")
    assert status == 1
    assert "codex, user" not in text


def test_the_project_that_is_the_home_folder_is_checked_once(machine: Machine) -> None:
    machine.init("claude-code")
    out = io.StringIO()
    status = doctor.main([], env=machine.env, cwd=machine.home, stdout=out)
    assert status == 0
    assert out.getvalue().count(".claude/settings.json") == 1


def test_it_is_a_command_of_the_console_script(capsys: pytest.CaptureFixture[str]) -> None:
    assert entry(["doctor", "--help"]) == 0
    assert "installed" in capsys.readouterr().out
    assert entry(["doctor", "--format", "yaml"]) == 2


def test_the_hook_never_imports_the_doctor(tmp_path: Path) -> None:
    """The hook runs at every tool call: what it imports is its cost."""
    event = json.dumps({"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "x"})
    argv = ["-X", "importtime", "-m", "loopfuse", "hook", "--state-dir", str(tmp_path)]
    done = subprocess.run(
        [sys.executable, *argv],
        input=event,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "loopfuse.cli.hook" in done.stderr
    assert "loopfuse.cli.doctor" not in done.stderr
    assert "loopfuse.cli.hook_check" not in done.stderr
