"""`loopfuse init`: the hook entries merged into each CLI's settings, idempotent,
undone exactly by --remove, and never a settings file damaged."""

from __future__ import annotations

import io
import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hook_payloads import claude_pre
from loopfuse.cli.init import main

SCRIPT = "/opt/venv/bin/loopfuse"

OTHER_HOOK = {"matcher": "Bash", "hooks": [{"type": "command", "command": "/usr/bin/audit"}]}


def run(home: Path, *args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    env = {"HOME": str(home), "CODEX_HOME": str(home / "codex-home")}
    status = main(list(args), env=env, cwd=cwd or home, stdout=out, stderr=err, executable=SCRIPT)
    return status, out.getvalue(), err.getvalue()


def read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())  # type: ignore[no-any-return]


PATHS = {
    "claude-code": Path(".claude/settings.json"),
    "codex": Path("codex-home/hooks.json"),
    "gemini": Path(".gemini/settings.json"),
    "qwen": Path(".qwen/settings.json"),
}
EVENTS = {
    "claude-code": {
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "UserPromptSubmit",
        "PostToolBatch",
    },
    "codex": {"PreToolUse", "PostToolUse", "UserPromptSubmit"},
    "gemini": {"BeforeTool", "AfterTool", "BeforeAgent"},
    "qwen": {"PreToolUse", "PostToolUse", "PostToolUseFailure", "UserPromptSubmit"},
}
PROMPT_EVENTS = {"UserPromptSubmit", "BeforeAgent", "PostToolBatch"}  # no tool to match


@pytest.mark.parametrize("agent", list(PATHS))
def test_install_writes_one_entry_per_tool_event_with_the_absolute_script(
    tmp_path: Path, agent: str
) -> None:
    status, out, err = run(tmp_path, "--agent", agent)
    assert (status, err) == (0, "")
    settings = read(tmp_path / PATHS[agent])
    assert set(settings["hooks"]) == EVENTS[agent]
    for event, groups in settings["hooks"].items():
        (group,) = groups
        assert group.get("matcher") == (None if event in PROMPT_EVENTS else "*")
        assert group["hooks"] == [{"type": "command", "command": f"{SCRIPT} hook --agent {agent}"}]
    assert ("trust" in out) == (agent == "codex")


def test_install_keeps_every_other_setting_and_hook(tmp_path: Path) -> None:
    path = tmp_path / PATHS["claude-code"]
    path.parent.mkdir()
    original = {"model": "opus", "hooks": {"PreToolUse": [OTHER_HOOK], "Stop": [OTHER_HOOK]}}
    path.write_text(json.dumps(original))
    assert run(tmp_path, "--agent", "claude-code")[0] == 0
    settings = read(path)
    assert settings["model"] == "opus"
    assert settings["hooks"]["PreToolUse"][0] == OTHER_HOOK
    assert len(settings["hooks"]["PreToolUse"]) == 2
    assert settings["hooks"]["Stop"] == [OTHER_HOOK]
    backup = path.with_name("settings.json.loopfuse-backup")
    assert json.loads(backup.read_text()) == original


def test_a_second_run_changes_nothing(tmp_path: Path) -> None:
    run(tmp_path, "--agent", "gemini")
    path = tmp_path / PATHS["gemini"]
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    status, out, _ = run(tmp_path, "--agent", "gemini")
    assert status == 0
    assert "already" in out
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_a_run_with_other_flags_replaces_loopfuse_entry_not_adds_one(tmp_path: Path) -> None:
    run(tmp_path, "--agent", "gemini")
    run(tmp_path, "--agent", "gemini", "--mode", "refuse", "--end-session")
    groups = read(tmp_path / PATHS["gemini"])["hooks"]["BeforeTool"]
    assert len(groups) == 1
    assert groups[0]["hooks"][0]["command"].endswith("--mode refuse --end-session")


@pytest.mark.parametrize("agent", list(PATHS))
def test_remove_undoes_exactly_what_install_added(tmp_path: Path, agent: str) -> None:
    path = tmp_path / PATHS[agent]
    path.parent.mkdir(parents=True)
    original = {"theme": "dark", "hooks": {"PreToolUse": [OTHER_HOOK], "Notification": []}}
    path.write_text(json.dumps(original))
    run(tmp_path, "--agent", agent)
    status, out, _ = run(tmp_path, "--agent", agent, "--remove")
    assert status == 0
    assert "removed" in out
    assert read(path) == original


def test_remove_takes_a_hooks_table_it_emptied(tmp_path: Path) -> None:
    path = tmp_path / PATHS["codex"]
    path.parent.mkdir()
    path.write_text('{"version": 1}')
    run(tmp_path, "--agent", "codex")
    run(tmp_path, "--agent", "codex", "--remove")
    assert read(path) == {"version": 1}
    assert run(tmp_path, "--agent", "codex", "--remove")[1].endswith(
        "already without loopfuse hook\n"
    )


def test_remove_with_no_file_writes_nothing(tmp_path: Path) -> None:
    status, out, _ = run(tmp_path, "--agent", "claude-code", "--remove")
    assert status == 0
    assert "no loopfuse hook" in out
    assert not (tmp_path / ".claude").exists()


@pytest.mark.parametrize(
    "content", ["{not json", "[1, 2]", '{"hooks": []}', '{"hooks": {"PreToolUse": {}}}', "\xff"]
)
def test_a_settings_file_it_cannot_read_is_refused_and_left_alone(
    tmp_path: Path, content: str
) -> None:
    path = tmp_path / PATHS["claude-code"]
    path.parent.mkdir()
    path.write_text(content, encoding="latin-1")
    before = path.read_bytes()
    status, _, err = run(tmp_path, "--agent", "claude-code")
    assert status == 2
    assert err.startswith("loopfuse init: error: ")
    assert str(path) in err
    assert path.read_bytes() == before
    assert not path.with_name("settings.json.loopfuse-backup").exists()


def test_dry_run_prints_the_change_and_writes_nothing(tmp_path: Path) -> None:
    status, out, _ = run(tmp_path, "--agent", "claude-code", "--dry-run")
    assert status == 0
    assert f'+            "command": "{SCRIPT} hook --agent claude-code"' in out
    assert not (tmp_path / ".claude").exists()


def test_project_settings_are_in_the_current_folder(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    assert run(tmp_path, "--agent", "gemini", "--project", cwd=project)[0] == 0
    assert (project / ".gemini" / "settings.json").exists()
    assert not (tmp_path / ".gemini").exists()
    status, _, err = run(tmp_path, "--agent", "codex", "--project", cwd=project)
    assert status == 2
    assert "CODEX_HOME" in err


def test_qwen_code_user_and_project_settings_idempotent_dry_run_and_remove(
    tmp_path: Path,
) -> None:
    """Qwen Code: ``~/.qwen/settings.json``, or ``.qwen/settings.json`` in the current
    folder; a second run writes nothing, ``--dry-run`` writes nothing, ``--remove`` puts
    the original back byte for byte, comments (which Qwen Code strips) kept."""
    project = tmp_path / "project"
    project.mkdir()
    assert run(tmp_path, "--agent", "qwen", "--project", cwd=project)[0] == 0
    assert (project / ".qwen" / "settings.json").exists()
    assert not (tmp_path / ".qwen").exists()
    path = tmp_path / PATHS["qwen"]
    path.parent.mkdir()
    original = '{\n  // the model\n  "model": {"name": "qwen3-coder"}\n}\n'
    path.write_text(original)
    status, out, _ = run(tmp_path, "--agent", "qwen", "--dry-run")
    assert status == 0
    assert f"{SCRIPT} hook --agent qwen" in out
    assert path.read_text() == original
    assert run(tmp_path, "--agent", "qwen")[0] == 0
    text = path.read_text()
    assert "// the model" in text
    assert "already" in run(tmp_path, "--agent", "qwen")[1]
    assert path.read_text() == text
    assert run(tmp_path, "--agent", "qwen", "--remove")[0] == 0
    assert path.read_text() == original


def test_end_session_is_not_written_for_qwen_code_which_cannot_be_ended(tmp_path: Path) -> None:
    status, out, _ = run(tmp_path, "--agent", "qwen", "--end-session")
    assert status == 0
    assert "no effect for Qwen Code" in out
    command = read(tmp_path / PATHS["qwen"])["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert command == f"{SCRIPT} hook --agent qwen"


def test_the_command_written_runs_the_hook(tmp_path: Path) -> None:
    """Without ``executable=``: the real console script, by its absolute path."""
    out = io.StringIO()
    env = {"HOME": str(tmp_path)}
    assert main(["--agent", "claude-code"], env=env, stdout=out, stderr=io.StringIO()) == 0
    settings = read(tmp_path / PATHS["claude-code"])
    command = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    argv = shlex.split(command)
    assert Path(argv[0]).is_absolute()
    done = subprocess.run(
        [*argv, "--state-dir", str(tmp_path / "state")],
        input=json.dumps(claude_pre("ls", "t1")).encode(),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert (tmp_path / "state" / "sessions").is_dir()


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(tmp_path)[0] == 2
    assert run(tmp_path, "--agent", "nobody")[0] == 2
