"""``loopfuse hook --agent copilot`` and ``loopfuse init --agent copilot`` (#28): Copilot
CLI's inputs read by their shape, its answers at the top level, exit status 0 whatever
goes wrong (any other status refuses the call in Copilot CLI), its hooks file wholly
loopfuse's, in ``$COPILOT_HOME/hooks`` or the project's ``.github/hooks``."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hook_payloads import (
    copilot_failure,
    copilot_post,
    copilot_pre,
    copilot_prompt,
)
from loopfuse.cli.doctor import main as doctor_main
from loopfuse.cli.hook import handle
from loopfuse.cli.init import main as init_main

COPILOT = ["--agent", "copilot"]


class Session:
    """A Copilot CLI session driving the hook: each call's ``preToolUse`` then (when it
    ran) ``postToolUse``, seconds apart on a fake clock; the state in ``root``."""

    def __init__(self, root: Path, *flags: str) -> None:
        self.env = {"LOOPFUSE_STATE_DIR": str(root), "HOME": str(root)}
        self.flags = [*COPILOT, *flags]
        self.now = 1_000_000.0
        self.shell = 0

    def send(self, payload: dict[str, Any]) -> tuple[str, int]:
        self.now += 2.0
        return handle(json.dumps(payload).encode(), self.flags, self.env, lambda: self.now)

    def call(self, command: str, output: str, code: int = 0) -> tuple[str, str]:
        """One ``bash`` call: the before-hook's answer and (when it ran) the after-hook's."""
        before, status = self.send(copilot_pre(command))
        assert status == 0
        if before:
            return before, ""
        after, status = self.send(copilot_post(command, self.shell, output, code))
        self.shell += 1  # Copilot's shell number: new on every call
        assert status == 0
        return before, after


def test_a_looping_call_is_noted_then_refused_at_the_top_level(tmp_path: Path) -> None:
    """The same failing command: the 3rd is noted after it ran (``additionalContext``,
    which Copilot appends to its answer), the 4th refused (``permissionDecision``),
    though each answer had its own shell number."""
    session = Session(tmp_path)
    said = [session.call("make", "make: *** [all] Error 2", 2) for _ in range(4)]
    assert said[:2] == [("", "")] * 2
    assert said[2][0] == ""
    note = json.loads(said[2][1])
    assert list(note) == ["additionalContext"]
    assert note["additionalContext"].startswith("[loopfuse] Loop detected")
    refusal = json.loads(said[3][0])
    assert refusal["permissionDecision"] == "deny"
    assert refusal["permissionDecisionReason"].startswith("[loopfuse] Loop detected")
    assert set(refusal) == {"permissionDecision", "permissionDecisionReason"}


def test_end_session_refuses_for_copilot_never_asks_it_to_stop(tmp_path: Path) -> None:
    session = Session(tmp_path, "--mode", "refuse", "--end-session")
    said = [session.call("make", "make: *** [all] Error 2", 2)[0] for _ in range(6)]
    refusals = [json.loads(s) for s in said if s]
    assert refusals
    assert all(set(r) == {"permissionDecision", "permissionDecisionReason"} for r in refusals)


def test_a_poll_whose_output_moves_is_untouched(tmp_path: Path) -> None:
    session = Session(tmp_path)
    said = [session.call("tail -5 build.log", f"step {n}: compiled m{n}.c") for n in range(12)]
    assert said == [("", "")] * 12


def test_a_prompt_starts_a_new_run(tmp_path: Path) -> None:
    """After "try again" the same failing command is not refused for the loop before."""
    session = Session(tmp_path)
    for _ in range(4):
        session.call("make", "make: *** [all] Error 2", 2)
    assert session.send(copilot_prompt()) == ("", 0)
    assert session.call("make", "make: *** [all] Error 2", 2) == ("", "")


def test_a_failed_call_is_read_as_one(tmp_path: Path) -> None:
    """``view`` of a missing path, again and again: ``postToolUseFailure`` each time, read
    as the call's failed answer (a read: refused at the 6th, in refuse mode at the 5th)."""
    session = Session(tmp_path, "--mode", "refuse")
    view = {**copilot_failure("/w/missing.txt")}
    del view["error"]
    said = []
    for _ in range(6):
        before, _ = session.send(view)
        said.append(before)
        if not before:
            session.send(copilot_failure("/w/missing.txt"))
    assert [bool(s) for s in said] == [False] * 4 + [True] * 2
    assert "got the same result" in json.loads(said[4])["permissionDecisionReason"]
    assert (
        not (tmp_path / "hook.log").exists() or "Error" not in (tmp_path / "hook.log").read_text()
    )


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"not json",
        b"[]",
        b'{"sessionId": "s"}',
        b'{"toolName": "bash", "toolArgs": {}}',
        json.dumps(
            {"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Bash"}
        ).encode(),
        b'{"sessionId": "s", "toolName": "bash", "toolArgs": '
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}",
    ],
)
def test_an_input_it_cannot_read_is_allowed_with_exit_status_0(tmp_path: Path, raw: bytes) -> None:
    env = {"LOOPFUSE_STATE_DIR": str(tmp_path), "HOME": str(tmp_path)}
    assert handle(raw, COPILOT, env, lambda: 1.0) == ("", 0)
    assert "the call is allowed" in (tmp_path / "hook.log").read_text(encoding="utf-8")


def test_a_broken_state_folder_is_allowed_with_exit_status_0(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.write_text("not a folder", encoding="utf-8")
    env = {"LOOPFUSE_STATE_DIR": str(state), "HOME": str(tmp_path)}
    for _ in range(6):
        for payload in (copilot_pre("make"), copilot_post("make", 0, "boom", 2)):
            assert handle(json.dumps(payload).encode(), COPILOT, env, lambda: 1.0) == ("", 0)


# --- the installed command, as Copilot CLI runs it ------------------------------------------


def run_installed(
    command: str, payload: bytes, env: dict[str, str]
) -> subprocess.CompletedProcess[bytes]:
    """``command`` as Copilot CLI runs a hook's ``bash``: through bash, the input on stdin."""
    return subprocess.run(
        ["bash", "-c", command],
        input=payload,
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )


@pytest.fixture
def installed(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """``loopfuse init --agent copilot`` in an isolated home: its hooks file, the env."""
    env = {
        "HOME": str(tmp_path / "home"),
        "PATH": "/usr/bin:/bin",
        "LOOPFUSE_STATE_DIR": str(tmp_path / "state"),
    }
    assert init_main(["--agent", "copilot"], env=env, cwd=tmp_path) == 0
    return tmp_path / "home" / ".copilot" / "hooks" / "loopfuse.json", env


def installed_command(path: Path, event: str = "preToolUse") -> str:
    entries = json.loads(path.read_text(encoding="utf-8"))["hooks"][event]
    assert len(entries) == 1
    command: str = entries[0]["bash"]
    return command


def test_init_writes_a_hooks_file_of_its_own_for_every_event(
    installed: tuple[Path, dict[str, str]],
) -> None:
    path, env = installed
    hooks = json.loads(path.read_text(encoding="utf-8"))
    assert hooks["version"] == 1
    assert list(hooks["hooks"]) == [
        "preToolUse", "postToolUse", "postToolUseFailure", "userPromptSubmitted"
    ]  # fmt: skip
    commands = {entry["bash"] for entries in hooks["hooks"].values() for entry in entries}
    [command] = commands
    assert command.endswith(" hook --agent copilot || true")
    assert all(
        entry == {"type": "command", "bash": command, "timeoutSec": 30}
        for entries in hooks["hooks"].values()
        for entry in entries
    )
    before = path.read_bytes()
    assert init_main(["--agent", "copilot"], env=env, cwd=path.parent) == 0  # again: nothing
    assert path.read_bytes() == before
    assert init_main(["--agent", "copilot", "--remove"], env=env, cwd=path.parent) == 0
    assert not path.exists()


def test_init_puts_it_where_copilot_home_says(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "home"), "COPILOT_HOME": str(tmp_path / "c")}
    assert init_main(["--agent", "copilot"], env=env, cwd=tmp_path) == 0
    assert (tmp_path / "c" / "hooks" / "loopfuse.json").is_file()
    assert not (tmp_path / "home").exists()


def test_init_project_writes_github_hooks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"HOME": str(tmp_path / "home")}
    assert init_main(["--agent", "copilot", "--project"], env=env, cwd=tmp_path) == 0
    assert "only in a folder you trust" in capsys.readouterr().out
    path = tmp_path / ".github" / "hooks" / "loopfuse.json"
    assert installed_command(path).endswith(" || true")
    assert init_main(["--agent", "copilot", "--project", "--remove"], env=env, cwd=tmp_path) == 0
    assert not path.exists()


def test_init_refuses_a_hooks_file_it_did_not_write(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "home")}
    path = tmp_path / ".github" / "hooks" / "loopfuse.json"
    path.parent.mkdir(parents=True)
    theirs = '{"version": 1, "hooks": {"preToolUse": [{"type": "command", "bash": "lint"}]}}\n'
    path.write_text(theirs, encoding="utf-8")
    assert init_main(["--agent", "copilot", "--project"], env=env, cwd=tmp_path) == 2
    assert init_main(["--agent", "copilot", "--project", "--remove"], env=env, cwd=tmp_path) == 0
    assert path.read_text(encoding="utf-8") == theirs


def test_init_does_not_write_end_session_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"HOME": str(tmp_path / "home")}
    assert init_main(["--agent", "copilot", "--end-session"], env=env, cwd=tmp_path) == 0
    assert "--end-session has no effect for Copilot CLI" in capsys.readouterr().out
    path = tmp_path / "home" / ".copilot" / "hooks" / "loopfuse.json"
    assert "--end-session" not in path.read_text(encoding="utf-8")


def test_the_installed_command_answers_as_the_hook(installed: tuple[Path, dict[str, str]]) -> None:
    path, env = installed
    command = installed_command(path)
    done = run_installed(command, json.dumps(copilot_pre("ls")).encode(), env)
    assert (done.returncode, done.stdout) == (0, b"")


@pytest.mark.parametrize(
    "breakage",
    [
        "the program is gone",  # loopfuse uninstalled, its hook left behind: status 127
        "Python cannot start",  # a broken interpreter: status 1
    ],
)
def test_the_installed_command_exits_0_when_the_hook_cannot_run(
    installed: tuple[Path, dict[str, str]], breakage: str
) -> None:
    """Copilot CLI refuses a call on any exit status but 0: the installed line allows it
    whatever became of the program it runs."""
    path, env = installed
    command = installed_command(path)
    program = command.split(" ", 1)[0]
    if breakage == "the program is gone":
        command = command.replace(program, str(path.parent / "gone" / "loopfuse"), 1)
        broken_env = env
    else:
        broken_env = {**env, "PYTHONHOME": str(path.parent / "no-python-here")}
    bare = command.removesuffix(" || true")
    assert run_installed(bare, b"{}", broken_env).returncode != 0  # what Copilot would refuse
    done = run_installed(command, json.dumps(copilot_pre("ls")).encode(), broken_env)
    assert (done.returncode, done.stdout) == (0, b"")


# --- loopfuse doctor ------------------------------------------------------------------------


def doctor_report(env: dict[str, str], cwd: Path) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    status = doctor_main(["--format", "json", "--agent", "copilot"], env=env, cwd=cwd, stdout=out)
    return status, json.loads(out.getvalue())


def test_doctor_finds_both_scopes_and_runs_the_hook_without_its_fail_open(
    tmp_path: Path,
) -> None:
    env = {
        "HOME": str(tmp_path / "home"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    hook = f"{sys.executable} -m loopfuse"
    for flags in ([], ["--project", "--mode", "refuse"]):
        assert (
            init_main(["--agent", "copilot", *flags], env=env, cwd=tmp_path, executable=hook) == 0
        )
    status, report = doctor_report(env, tmp_path)
    assert status == 0, report
    places = {place["scope"]: place for place in report["places"]}
    assert set(places) == {"user", "project"}
    for place in places.values():
        assert place["installed"], place
        assert place["ok"], place
        checks = {check["name"]: check for check in place["checks"]}
        assert list(checks) == ["installed", "settings", "state folder", "runs"]
        assert checks["installed"]["detail"] == "for its 4 events"
        [command] = place["commands"]
        assert command == f"{hook} hook --agent copilot" + (
            " --mode refuse" if place["scope"] == "project" else ""
        )
    # A program gone: Copilot would run the calls unguarded (the line ends || true);
    # doctor says so.
    path = tmp_path / ".github" / "hooks" / "loopfuse.json"
    gone = str(tmp_path / "gone" / "python")
    path.write_text(path.read_text().replace(json.dumps(sys.executable)[1:-1], gone))
    status, report = doctor_report(env, tmp_path)
    assert status == 1
    project = next(p for p in report["places"] if p["scope"] == "project")
    runs = next(c for c in project["checks"] if c["name"] == "runs")
    assert not runs["ok"]
    assert "no such program" in runs["detail"]


# --- Copilot CLI runs a project's Claude Code hooks too -------------------------------------

RECORDED = Path(__file__).resolve().parent / "recorded" / "agent-clis" / "copilot"


def copilot_pascal(name: str, **change: Any) -> dict[str, Any]:
    """A recorded PascalCase input of Copilot CLI (what it gives a ``.claude`` hook)."""
    payload: dict[str, Any] = json.loads((RECORDED / name).read_text(encoding="utf-8"))["stdin"]
    return payload | change


@pytest.mark.parametrize("agent", [["--agent", "claude-code"], []])
def test_claude_codes_hook_never_reads_copilots_inputs_as_claude_codes(
    tmp_path: Path, agent: list[str]
) -> None:
    """``loopfuse init --agent claude-code --project`` puts the hook in
    ``.claude/settings.json``, which Copilot CLI runs too. Read as Claude Code's, its
    answers (``tool_result``) were lost, and a poll whose output moves was refused at the
    7th call; now its inputs are allowed, and logged as not Claude Code's."""
    env = {"LOOPFUSE_STATE_DIR": str(tmp_path), "HOME": str(tmp_path)}
    call = {"tool_name": "Bash", "tool_input": {"command": "tail -5 build.log"}}
    said = []
    for n in range(10):
        pre = copilot_pascal("pascal-pre-001.json", **call)
        result = {"result_type": "success", "text_result_for_llm": f"step {n}\n<shellId: {n} …>"}
        post = copilot_pascal("pascal-post-001.json", **call, tool_result=result)
        for payload in (pre, post):
            now = 1.0 + 10 * n
            said.append(handle(json.dumps(payload).encode(), agent, env, lambda t=now: t))
    assert said == [("", 0)] * 20
    assert "Copilot CLI's input" in (tmp_path / "hook.log").read_text(encoding="utf-8")


def test_init_dry_run_prints_the_file_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"HOME": str(tmp_path / "home")}
    assert init_main(["--agent", "copilot", "--dry-run"], env=env, cwd=tmp_path) == 0
    shown = capsys.readouterr().out
    assert '+  "version": 1,' in shown
    assert "hook --agent copilot || true" in shown
    assert not (tmp_path / "home").exists()
