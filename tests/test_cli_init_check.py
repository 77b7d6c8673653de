"""``loopfuse init`` checks what the hook will read before it writes (issue 29 §2).

A hook whose settings are refused fails open at every call: ``init`` refuses to install
one, with the error ``loopfuse scan --config`` gives for the same file, exit status 2,
and nothing written."""

from __future__ import annotations

import contextlib
import io
import shlex
from pathlib import Path

import pytest

from loopfuse.cli.hook import read_flags, settings_of
from loopfuse.cli.init import main as init
from loopfuse.cli.main import main as loopfuse

BROKEN = {
    "missing file": None,
    "wrong value": 'max_strikes = "four"\n',
    "unknown mode": '[hook]\nmode = "warm"\n',
    "misspelt key": "max_strike = 9\n",
    "not TOML": "max_strikes = = 3\n",
}


def run_init(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    errors = io.StringIO()
    status = init(
        list(args),
        env={"HOME": str(tmp_path / "home"), **(env or {})},
        cwd=tmp_path,
        stdout=io.StringIO(),
        stderr=errors,
        executable="/opt/venv/bin/loopfuse",
    )
    return status, errors.getvalue()


def scan_error(config: Path) -> str:
    body = config.with_name("request.json")
    body.write_text('{"model": "m", "messages": [{"role": "user", "content": "hi"}]}')
    errors = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(errors):
        assert loopfuse(["scan", str(body), "--config", str(config), "--no-progress"]) == 2
    return errors.getvalue().removeprefix("loopfuse scan: error: ")


def broken_file(tmp_path: Path, case: str) -> Path:
    path = tmp_path / "loopfuse.toml"
    text = BROKEN[case]
    if text is not None:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini"])
@pytest.mark.parametrize("case", list(BROKEN))
def test_a_refused_settings_file_is_refused_as_scan_refuses_it_and_nothing_is_written(
    tmp_path: Path, agent: str, case: str
) -> None:
    """True on main before this change too (init already read ``--config`` with
    ``load_settings``): kept as the check of the issue's wording."""
    config = broken_file(tmp_path, case)
    status, said = run_init(tmp_path, "--agent", agent, "--config", str(config))
    assert status == 2
    assert said == f"loopfuse init: error: {scan_error(config)}"
    assert not (tmp_path / "home").exists()  # no settings file, no folder, no backup


def test_a_refused_settings_file_leaves_the_cli_settings_as_they_were(tmp_path: Path) -> None:
    settings = tmp_path / "home" / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text('{"theme": "dark"}\n', encoding="utf-8")
    config = broken_file(tmp_path, "misspelt key")
    assert run_init(tmp_path, "--agent", "gemini", "--config", str(config))[0] == 2
    assert settings.read_text(encoding="utf-8") == '{"theme": "dark"}\n'
    assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json"]


@pytest.mark.parametrize("case", list(BROKEN))
def test_the_file_named_by_loopfuse_config_is_checked_too(tmp_path: Path, case: str) -> None:
    """Without ``--config`` the hook reads ``$LOOPFUSE_CONFIG``: a file it would refuse
    is refused before anything is installed, naming the variable and the file."""
    config = broken_file(tmp_path, case)
    env = {"LOOPFUSE_CONFIG": str(config)}
    status, said = run_init(tmp_path, "--agent", "claude-code", env=env)
    assert status == 2
    named = f"loopfuse init: error: $LOOPFUSE_CONFIG, which the hook reads: {config}"
    assert said.startswith(named)
    assert not (tmp_path / "home").exists()


def test_config_given_on_the_command_line_wins_over_the_environment(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text("max_strikes = 4\n", encoding="utf-8")
    env = {"LOOPFUSE_CONFIG": str(broken_file(tmp_path, "misspelt key"))}
    status, said = run_init(tmp_path, "--agent", "codex", "--config", str(good), env=env)
    assert (status, said) == (0, "")


def test_remove_does_not_check_the_settings(tmp_path: Path) -> None:
    """Taking the hook out never depends on the settings it read."""
    assert run_init(tmp_path, "--agent", "gemini")[0] == 0
    env = {"LOOPFUSE_CONFIG": str(broken_file(tmp_path, "misspelt key"))}
    assert run_init(tmp_path, "--agent", "gemini", "--remove", env=env)[0] == 0


@pytest.mark.parametrize(
    "flags",
    [
        [],
        ["--mode", "refuse"],
        ["--mode", "note", "--end-session"],
        ["--end-session", "--config", "CONFIG"],
    ],
)
def test_every_command_written_is_one_the_hook_reads(tmp_path: Path, flags: list[str]) -> None:
    config = tmp_path / "c.toml"
    config.write_text("max_strikes = 4\n[hook]\nlock_timeout = 2\n", encoding="utf-8")
    flags = [str(config) if flag == "CONFIG" else flag for flag in flags]
    out = io.StringIO()
    env = {"HOME": str(tmp_path / "home")}
    assert init(["--agent", "gemini", *flags], env=env, cwd=tmp_path, stdout=out) == 0
    command = out.getvalue().split("hook command: ", 1)[1].strip()
    words = shlex.split(command)
    settings = settings_of(read_flags(words[words.index("hook") + 1 :]), {}, None)
    assert settings.agent == "gemini"
