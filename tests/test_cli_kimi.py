"""``loopfuse hook``, ``init`` and ``doctor`` for Kimi Code (``--agent kimi``), on the
payloads recorded from the real Kimi Code 2.1.0 (tests/recorded/agent-clis/kimi/) and
payloads of their shape (tests/hook_payloads.py).

What Kimi Code lets a hook do decides what loopfuse answers there: a refusal before a call
(its reason is the call's answer to the model), nothing after it (Kimi Code runs its
after-call hooks in the background and throws away what they print), no end of a
session; and only from the user's own settings."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from hook_payloads import kimi_failure, kimi_post, kimi_pre, kimi_prompt
from loopfuse.cli import doctor, init
from loopfuse.cli.agents import parse_event
from loopfuse.cli.hook import handle
from loopfuse.cli.hook_state import load
from loopfuse.harness.installers import BEGIN, END
from test_cli_hook import Hook as ClaudeHook
from test_cli_hook import _run

RECORDED = Path(__file__).parent / "recorded" / "agent-clis" / "kimi"
FAILING = "echo attempt >> attempts.log; cat missing.txt"
ERROR = "cat: missing.txt: No such file or directory"
SCRIPT = "/opt/venv/bin/loopfuse"


class Hook:
    """``loopfuse hook --agent kimi`` run in this process, on a fake wall clock."""

    def __init__(self, root: Path, *flags: str) -> None:
        self.root = root
        self.flags = ["--state-dir", str(root), "--agent", "kimi", *flags]
        self.now = 1_800_000_000.0

    def clock(self) -> float:
        self.now += 0.001
        return self.now

    def __call__(self, payload: dict[str, Any], started: float | None = None) -> str:
        raw = json.dumps(payload).encode()
        output, status = handle(raw, self.flags, {}, self.clock, started=started)
        assert status == 0
        return output

    def refusal(self, payload: dict[str, Any]) -> str | None:
        """The reason a before-call answer refuses the call with, else ``None``."""
        output = self(payload)
        if not output:
            return None
        specific = json.loads(output)["hookSpecificOutput"]
        assert specific["permissionDecision"] == "deny"
        assert "continue" not in json.loads(output)  # Kimi Code's answers have no such field
        return str(specific["permissionDecisionReason"])

    def log(self) -> str:
        path = self.root / "hook.log"
        return path.read_text() if path.exists() else ""

    def events(self) -> list[list[Any]]:
        [path] = (self.root / "sessions").glob("kimi-*.json")
        return load(str(path)).events


@pytest.fixture
def hook(tmp_path: Path) -> Hook:
    return Hook(tmp_path / "state")


def recorded(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RECORDED / name).read_text(encoding="utf-8"))["stdin"]
    return data


# --- reading its payloads ------------------------------------------------------------------


def test_the_recorded_payloads_read_as_kimi_codes_events() -> None:
    pre = parse_event(recorded("pre-001.json"), "kimi")
    assert (pre.agent, pre.phase, pre.tool_name) == ("kimi", "before", "Bash")
    assert pre.tool_input == {"command": "echo hi"}  # its description is prose
    assert pre.call_id == "call_00000000000000000002"  # the model's call id
    post = parse_event(recorded("post-001.json"), "kimi")
    assert (post.phase, post.answer, post.error, post.call_id) == (
        "after",
        "hi\n",
        False,
        pre.call_id,
    )
    failed = parse_event(recorded("postfail-001.json"), "kimi")
    assert (failed.phase, failed.error, failed.exit_code) == ("after", True, 2)
    prompt = parse_event(recorded("userprompt-001.json"), "kimi")
    assert prompt.phase == "turn"


# --- the hook --------------------------------------------------------------------------------


def run_loop(hook: Hook, calls: int, answers_late: bool = False) -> list[str]:
    """The same failing call ``calls`` times, as Kimi Code runs it: the before-hook, then
    (unless refused) the after-hook, or, ``answers_late``, the after-hook of each call
    only after the next call's before-hook (it runs in the background); a refused call
    fires ``PostToolUseFailure`` too, with the reason. What each call got."""
    seen: list[str] = []
    late: dict[str, Any] | None = None
    for i in range(calls):
        reason = hook.refusal(kimi_pre(FAILING, i))
        if late is not None:
            assert hook(late) == ""
            late = None
        after = (
            kimi_failure(FAILING, i, reason, None) if reason else kimi_failure(FAILING, i, ERROR)
        )
        if answers_late:
            late = after
        else:
            assert hook(after) == ""  # nothing after a call: Kimi Code throws it away
        seen.append(reason or "ran")
    return seen


def test_a_failing_loop_is_refused_at_once_the_refusal_being_the_note(hook: Hook) -> None:
    """warn mode: Kimi Code throws notes away, so the loop found at the 3rd failing call
    is refused then; the reason says what the note says, and the next refusal that the
    loop went on after it."""
    seen = run_loop(hook, 6)
    assert seen[:2] == ["ran", "ran"]
    first, second = seen[2], seen[3]
    assert first.startswith("[loopfuse] Loop detected: you called `Bash`")
    assert first.endswith("This call was refused: it did not run.")
    assert "went on after loopfuse's note" in second
    assert all(reason.startswith("[loopfuse]") for reason in seen[2:])
    log = hook.log()
    assert "loop noted" not in log
    assert log.count("call refused") == 4


def test_a_refused_calls_failure_event_is_not_another_failed_call(hook: Hook) -> None:
    """Each refused call's PostToolUseFailure (its error: the refusal's reason) is paired
    with the refused call by its call id: no answer is kept for it, no call added, and
    the count the model is told is of the calls that ran."""
    seen = run_loop(hook, 6)
    calls = [e for e in hook.events() if e[0] == "call"]
    answers = [e for e in hook.events() if e[0] == "answer"]
    assert len(calls) == 6
    assert len(answers) == 2  # the two calls that ran
    assert "the same arguments 2 times in a row" in seen[-1]


def test_answers_kept_late_still_pair_and_the_loop_is_refused_by_the_4th_call(
    hook: Hook,
) -> None:
    """Kimi Code's after-hook of a call may run after the next call's before-hook: the
    answer still goes to its own call (by its id), the next call is not taken for a
    parallel call of the last one, and the loop is refused one call later at most."""
    seen = run_loop(hook, 6, answers_late=True)
    assert seen[:2] == ["ran", "ran"]
    assert seen.index(next(s for s in seen if s != "ran")) in (2, 3)
    batches = {json.dumps(e[6]) for e in hook.events() if e[0] == "call"}
    assert len(batches) == 6  # one batch each


def test_an_after_hook_that_ends_after_the_next_call_started_does_not_join_them(
    hook: Hook,
) -> None:
    """The CLIs that wait for their after-hooks start the next call's before-hook only
    once they answered, so one started before that is a parallel call. Kimi Code does
    not wait: a before-hook started while the last call's after-hook ran opens a new
    batch (else a loop of one call every turn reads as ever-growing batches)."""
    hook(kimi_pre("ls", 1))
    started = hook.now + 0.0005  # the next call's hook starts during the after-hook
    hook(kimi_post("ls", 1, "a.py\n"))
    hook(kimi_pre("cat a.py", 2), started=started)
    batches = [e[6] for e in hook.events() if e[0] == "call"]
    assert batches[0] != batches[1]


def test_end_session_is_a_refusal_and_note_mode_says_nothing(tmp_path: Path) -> None:
    ended = Hook(tmp_path / "e", "--end-session")
    seen = run_loop(ended, 8)
    assert sum(s != "ran" for s in seen) == 6  # every call after the loop: refused
    assert "Kimi Code cannot be ended" in ended.log()
    noted = Hook(tmp_path / "n", "--mode", "note")
    assert run_loop(noted, 8) == ["ran"] * 8  # noted in the log: Kimi Code has no place
    assert "loop noted" in noted.log()


def test_a_prompt_starts_a_new_run(hook: Hook) -> None:
    run_loop(hook, 4)
    hook(kimi_prompt())
    assert hook.refusal(kimi_pre(FAILING, 10)) is None


def test_a_settings_error_is_shown_as_kimi_codes_hook_message(tmp_path: Path) -> None:
    hook = Hook(tmp_path / "s", "--max-strikes", "zero")
    output = hook(kimi_prompt("fix it"))
    assert json.loads(output)["message"].startswith("[loopfuse] The loop guard is OFF")
    assert hook(kimi_pre("ls", 1)) == ""  # once per session


# --- init and doctor ----------------------------------------------------------------------


def run_init(home: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = init.main(
        ["--agent", "kimi", *args],
        env=env or {"HOME": str(home)},
        cwd=home,
        stdout=out,
        stderr=err,
        executable=SCRIPT,
    )
    return status, out.getvalue(), err.getvalue()


def test_init_adds_its_tables_to_the_users_config_and_remove_restores_it(tmp_path: Path) -> None:
    config = tmp_path / ".kimi-code" / "config.toml"
    config.parent.mkdir()
    original = (RECORDED / "config.toml").read_text(encoding="utf-8")
    config.write_text(original, encoding="utf-8")
    status, out, _ = run_init(tmp_path, "--dry-run")
    assert status == 0
    assert f'+command = "{SCRIPT} hook --agent kimi"' in out
    assert config.read_text() == original
    assert run_init(tmp_path)[0] == 0
    text = config.read_text()
    assert text.startswith(original)
    assert BEGIN in text
    assert END in text
    hooks = tomllib.loads(text)["hooks"]
    ours = [h for h in hooks if h["command"] == f"{SCRIPT} hook --agent kimi"]
    assert [h["event"] for h in ours] == [
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "UserPromptSubmit",
    ]
    assert len(hooks) == 3 + 4  # the user's three kept
    assert "already" in run_init(tmp_path)[1]
    assert config.read_text() == text
    assert run_init(tmp_path, "--remove")[0] == 0
    assert config.read_text() == original
    assert not config.with_name("config.toml.loopfuse-backup").exists()


def test_init_makes_the_file_in_kimi_code_home_and_remove_takes_it_away(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "KIMI_CODE_HOME": str(tmp_path / "kimi")}
    assert run_init(tmp_path, env=env)[0] == 0
    config = tmp_path / "kimi" / "config.toml"
    assert config.read_text().startswith(BEGIN)
    assert run_init(tmp_path, "--remove", env=env)[0] == 0
    assert not config.exists()


def test_init_refuses_a_project_scope_and_says_why(tmp_path: Path) -> None:
    status, _, err = run_init(tmp_path, "--project")
    assert status == 2
    assert "never a project's" in err
    assert not (tmp_path / ".kimi-code").exists()


def test_init_does_not_write_end_session_and_says_so(tmp_path: Path) -> None:
    status, out, _ = run_init(tmp_path, "--end-session")
    assert status == 0
    assert "--end-session has no effect for Kimi Code" in out
    assert "--end-session" not in (tmp_path / ".kimi-code" / "config.toml").read_text()


def test_init_refuses_a_config_it_cannot_edit_safely(tmp_path: Path) -> None:
    config = tmp_path / ".kimi-code" / "config.toml"
    config.parent.mkdir()
    config.write_text('hooks = [{event = "Stop", command = "x"}]\n', encoding="utf-8")
    status, _, err = run_init(tmp_path)
    assert status == 2
    assert str(config) in err
    assert config.read_text() == 'hooks = [{event = "Stop", command = "x"}]\n'


def test_doctor_finds_the_hook_in_the_users_config_and_it_works(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "HOME": str(home),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    loopfuse = Path(sys.executable).with_name("loopfuse")
    out, err = io.StringIO(), io.StringIO()
    assert init.main(["--agent", "kimi"], env=env, cwd=home, stdout=out, stderr=err,
                     executable=str(loopfuse)) == 0  # fmt: skip
    out = io.StringIO()
    status = doctor.main(["--format", "json"], env=env, cwd=home, stdout=out)
    report = json.loads(out.getvalue())
    [place] = [p for p in report["places"] if p["agent"] == "kimi"]
    assert place["scope"] == "user"
    assert all(check["ok"] for check in place["checks"]), place["checks"]
    assert status == 0


@pytest.mark.parametrize("payload", [kimi_pre("ls", 1), kimi_post("ls", 1, "a.py\n")])
def test_a_kimi_hook_reads_no_toml(tmp_path: Path, payload: dict[str, Any]) -> None:
    """Its installer reads TOML (``init``); a hook imports the installer with the CLI's
    module, and pays for no TOML reader."""
    code = (
        "import sys; from loopfuse.cli.hook import handle;"
        f"handle({json.dumps(payload)!r}.encode(), ['--state-dir', {str(tmp_path)!r}, "
        "'--agent', 'kimi'], {}, lambda: 0.0);"
        "print('tomllib' in sys.modules, 'loopfuse.harness.kimi_code' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    assert done.stdout.decode().split() == ["False", "True"]


def test_a_call_failing_again_the_way_the_refused_loop_did_is_refused(hook: Hook) -> None:
    """warn mode's "a note ignored", where the note is the first refusal: after it, the
    agent reads a file, then runs a variant of the call, which fails the very same way;
    the call after it is refused, as after a note elsewhere. A failure of another kind
    after the refusal lets the session go on."""
    missing = "ModuleNotFoundError: No module named 'tablib'"
    steps = [
        ("python run.py", missing, True),
        ("python run.py", missing, True),
        ("python run.py", missing, True),  # refused: the note
        ("sed -n 1,5p run.py", "import tablib\n", False),
        ("python run.py -v", "verbose\n" + missing, True),
        ("pip install tablib", "Successfully installed tablib", False),
    ]
    seen = []
    for i, (command, output, failed) in enumerate(steps):
        reason = hook.refusal(kimi_pre(command, i))
        if reason is None:
            after = kimi_failure(command, i, output) if failed else kimi_post(command, i, output)
        else:
            after = kimi_failure(command, i, reason, None)
        hook(after)
        seen.append(reason or "ran")
    assert seen[:2] == ["ran", "ran"]
    assert seen[2].startswith("[loopfuse] Loop detected")
    assert seen[3:5] == ["ran", "ran"]
    assert "failed again the same way" in seen[5]
    assert "went on after loopfuse's note" in seen[5]


def test_kimi_code_refuses_where_refuse_mode_refuses_with_no_early_note(tmp_path: Path) -> None:
    """warn mode notes a loop one call early (the detector's early twin) where the note
    reaches the model; Kimi Code throws notes away and refuses its first loop, so there
    the early twin is not used: an early refusal would be stricter than refuse mode. A
    read-only call failing again and again (its allowance): Claude Code notes it one
    call before refuse mode refuses it; Kimi Code refuses it where refuse mode does."""

    def kimi_run(hook: Hook) -> list[str]:
        seen = []
        for i in range(8):
            reason = hook.refusal(kimi_pre("cat missing.txt", i))
            after = kimi_failure("cat missing.txt", i, reason or ERROR, None if reason else 1)
            assert hook(after) == ""
            seen.append("ran" if reason is None else "refused")
        return seen

    refuse = kimi_run(Hook(tmp_path / "refuse", "--mode", "refuse"))
    refused = refuse.index("refused")
    assert refuse == ["ran"] * refused + ["refused"] * (8 - refused)
    assert kimi_run(Hook(tmp_path / "warn")) == refuse
    claude = _run(ClaudeHook(tmp_path / "claude"), "claude-code", 8)
    assert claude == ["ran"] * (refused - 1) + ["noted"] + ["refused"] * (8 - refused)
