"""`loopfuse hook`: Claude Code's, Codex's, Gemini CLI's and Qwen Code's tool events, warn
then refuse (then end), state kept between processes, and never a broken agent."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hook_payloads import (
    CLAUDE_COMMON,
    CODEX_COMMON,
    GEMINI_COMMON,
    QWEN_COMMON,
    claude_batch,
    claude_failure,
    claude_post,
    claude_pre,
    codex_post,
    codex_pre,
    gemini_after,
    gemini_before,
    prompt,
    qwen_failure,
    qwen_post,
    qwen_pre,
)
from loopfuse.cli import hook_state
from loopfuse.cli.agents import HookPayloadError, parse_event
from loopfuse.cli.hook import DETECTOR_WINDOW, MAX_ANSWER_TEXT, handle, read_flags
from loopfuse.errors import ConfigError


class Hook:
    """``loopfuse hook`` run in this process on a state folder, on a fake wall clock."""

    def __init__(self, root: Path, *flags: str) -> None:
        self.root = root
        self.flags = ["--state-dir", str(root), *flags]
        self.now = 1_800_000_000.0

    def clock(self) -> float:
        """The wall clock: a millisecond passes at each reading."""
        self.now += 0.001
        return self.now

    def __call__(
        self, payload: object, *flags: str, started: float | None = None
    ) -> tuple[str, int]:
        """One hook; ``started``: when its process started (default: now), earlier for a
        hook the CLI started at the same moment as others (parallel calls)."""
        raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        argv = [*self.flags, *flags]
        if started is None:
            output, status = handle(raw, argv, {}, self.clock)
        else:
            output, status = handle(raw, argv, {}, self.clock, started=started)
        assert output == "" or isinstance(json.loads(output), dict)
        return output, status

    def answer(self, payload: object, *flags: str, started: float | None = None) -> dict[str, Any]:
        output, status = self(payload, *flags, started=started)
        assert status == 0
        return json.loads(output) if output else {}

    def log(self) -> str:
        path = self.root / "hook.log"
        return path.read_text() if path.exists() else ""


@pytest.fixture
def hook(tmp_path: Path) -> Hook:
    return Hook(tmp_path / "state")


def _deny_reason(answer: dict[str, Any]) -> str | None:
    """The refusal's reason in any CLI's format, else ``None``."""
    specific = answer.get("hookSpecificOutput", {})
    if specific.get("permissionDecision") == "deny":
        return str(specific["permissionDecisionReason"])
    if answer.get("decision") == "deny":
        return str(answer["reason"])
    return None


def _note(answer: dict[str, Any]) -> str | None:
    return answer.get("hookSpecificOutput", {}).get("additionalContext")


# --- reading the payloads ------------------------------------------------------------------


def test_each_cli_is_told_apart_by_its_payload() -> None:
    assert parse_event(claude_pre("ls", "t1")).agent == "claude-code"
    assert parse_event(codex_pre("ls", "c1")).agent == "codex"
    assert parse_event(gemini_before("ls")).agent == "gemini"
    assert parse_event(codex_pre("ls", "c1"), "claude-code").agent == "claude-code"
    # Qwen Code sends Claude Code's events (and sets CLAUDE_PROJECT_DIR): its payload differs
    assert parse_event(qwen_pre("ls", 1)).agent == "qwen"
    assert parse_event(prompt(QWEN_COMMON, "UserPromptSubmit")).agent == "qwen"
    assert parse_event(prompt(CLAUDE_COMMON, "UserPromptSubmit")).agent == "claude-code"


RECORDED_QWEN = Path(__file__).parent / "recorded" / "agent-clis" / "qwen"


@pytest.mark.parametrize("name", ["pre-001.json", "post-001.json", "postfail-001.json"])
def test_the_recorded_qwen_code_payloads_read_as_qwen_code(name: str) -> None:
    payload = json.loads((RECORDED_QWEN / name).read_text())["stdin"]
    event = parse_event(payload)
    assert (event.agent, event.tool_input) == (
        "qwen",
        {"command": payload["tool_input"]["command"]},
    )
    if event.phase == "after":
        failed = payload["hook_event_name"] == "PostToolUseFailure"
        assert (event.error, event.exit_code) == ((True, 2) if failed else (False, 0))
        assert "PGID" not in str(event.answer)


def test_a_shell_call_is_its_command_not_its_description() -> None:
    one = parse_event(claude_pre("make test", "t1", description="Run the tests"))
    two = parse_event(claude_pre("make test", "t2", description="Try the tests again"))
    assert one.tool_input == two.tool_input == {"command": "make test"}


def test_answers_of_each_cli_with_their_failure_and_exit_code() -> None:
    ok = parse_event(claude_post("echo hi", "t1", "hi"))
    assert (ok.answer, ok.error, ok.exit_code) == ("hi", False, 0)
    failed = parse_event(claude_failure("cat x", "t1", "cat: x: No such file", 1))
    assert (failed.error, failed.exit_code) == (True, 1)
    assert "No such file" in str(failed.answer)
    codex = parse_event(codex_post("cat x", "c1", "cat: x: No such file\n"))
    assert (codex.answer, codex.error) == ("cat: x: No such file\n", None)
    gemini = parse_event(gemini_after("echo hello; exit 3", "hello", 3, 9313))
    assert (gemini.error, gemini.exit_code) == (True, 3)
    assert "PGID" not in str(gemini.answer)
    assert "Exit Code: 3" in str(gemini.answer)
    assert parse_event(gemini_after("true", "", 0, 1)).error is False
    qwen = parse_event(qwen_failure("ls /nope", 2, "ls: cannot access '/nope'", 2))
    assert (qwen.agent, qwen.error, qwen.exit_code) == ("qwen", True, 2)
    assert "cannot access" in str(qwen.answer)
    assert "PGID" not in str(qwen.answer)
    fine = parse_event(qwen_post("echo hi", 3, "hi"))
    assert (fine.error, fine.exit_code) == (False, 0)


@pytest.mark.parametrize(
    "payload",
    [
        [],
        {"hook_event_name": "PreToolUse"},
        {**claude_pre("ls", "t"), "hook_event_name": "Stop"},
        {**claude_pre("ls", "t"), "hook_event_name": "PostToolBatch"},
        {**claude_pre("ls", "t"), "tool_name": 3},
        {**gemini_before("ls"), "session_id": ""},
    ],
)
def test_what_is_not_a_tool_event_is_refused_as_a_payload_error(payload: object) -> None:
    with pytest.raises(HookPayloadError):
        parse_event(payload)


# --- warn, then refuse, then end -----------------------------------------------------------


def _claude_lap(hook: Hook, i: int, *flags: str) -> tuple[dict[str, Any], dict[str, Any]]:
    before = hook.answer(claude_pre("cat missing.txt", f"toolu_{i}"), *flags)
    if _deny_reason(before):
        return before, {}
    after = hook.answer(claude_failure("cat missing.txt", f"toolu_{i}", "No such file"), *flags)
    return before, after


def _codex_lap(hook: Hook, i: int, *flags: str) -> tuple[dict[str, Any], dict[str, Any]]:
    before = hook.answer(codex_pre("cat missing.txt", f"call_{i}"), *flags)
    if _deny_reason(before):
        return before, {}
    after = hook.answer(codex_post("cat missing.txt", f"call_{i}", "No such file\n"), *flags)
    return before, after


def _gemini_lap(hook: Hook, i: int, *flags: str) -> tuple[dict[str, Any], dict[str, Any]]:
    before = hook.answer(gemini_before("cat missing.txt"), *flags)
    if _deny_reason(before):
        return before, {}
    # a new process group on every call: it must not make every answer different
    after = hook.answer(gemini_after("cat missing.txt", "No such file", 1, 9000 + i), *flags)
    return before, after


def _qwen_lap(hook: Hook, i: int, *flags: str) -> tuple[dict[str, Any], dict[str, Any]]:
    before = hook.answer(qwen_pre("cat missing.txt", i), *flags)
    if _deny_reason(before):
        return before, {}
    after = hook.answer(qwen_failure("cat missing.txt", i, "No such file"), *flags)
    return before, after


LAPS: dict[str, Callable[..., tuple[dict[str, Any], dict[str, Any]]]] = {
    "claude-code": _claude_lap,
    "codex": _codex_lap,
    "gemini": _gemini_lap,
    "qwen": _qwen_lap,
}


def _run(hook: Hook, agent: str, laps: int, *flags: str) -> list[str]:
    """What each lap got: ``ran``, ``noted``, ``refused`` or ``ended``."""
    seen = []
    for i in range(laps):
        before, after = LAPS[agent](hook, i, *flags)
        if before.get("continue") is False:
            seen.append("ended")
        elif _deny_reason(before):
            seen.append("refused")
        elif _note(after):
            seen.append("noted")
        else:
            assert before == after == {}
            seen.append("ran")
    return seen


@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini", "qwen"])
def test_warn_then_refuse_by_default(hook: Hook, agent: str) -> None:
    seen = _run(hook, agent, 8)
    first = seen.index("noted")
    assert 2 <= first <= 6, seen
    assert seen[:first] == ["ran"] * first
    assert seen[first + 1 :] == ["refused"] * (len(seen) - first - 1)
    assert "loop noted" in hook.log()
    assert "call refused" in hook.log()


@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini", "qwen"])
def test_warn_notes_one_call_before_refuse_mode_refuses_and_refuses_there(
    tmp_path: Path, agent: str
) -> None:
    """``note_early`` (default): the note comes from the detector's early twin (its
    counts one notch lower), one call before ``--mode refuse`` refuses the same calls;
    the call ``--mode refuse`` refuses is then refused, the note ignored."""
    warn = _run(Hook(tmp_path / "warn"), agent, 8)
    refuse = _run(Hook(tmp_path / "refuse", "--mode", "refuse"), agent, 8)
    refused = refuse.index("refused")
    assert warn[: refused - 1] == ["ran"] * (refused - 1)
    assert warn[refused - 1] == "noted"
    assert warn[refused:] == ["refused"] * (8 - refused)


def test_with_no_note_early_the_note_comes_where_refuse_mode_refuses(tmp_path: Path) -> None:
    """``--no-note-early`` (or ``note_early = false`` in the settings file, top level
    or ``[hook]``): the note where ``--mode refuse`` refuses, the refusal one call later,
    as before the early note."""
    refuse = _run(Hook(tmp_path / "refuse", "--mode", "refuse"), "claude-code", 8)
    refused = refuse.index("refused")
    late = ["ran"] * refused + ["noted"] + ["refused"] * (7 - refused)
    assert _run(Hook(tmp_path / "flag"), "claude-code", 8, "--no-note-early") == late
    for name, text in [
        ("top", "note_early = false\n"),
        ("table", "note_early = true\n[hook]\nnote_early = false\n"),
        ("text", 'note_early = "off"\n'),
    ]:
        config = tmp_path / f"{name}.toml"
        config.write_text(text)
        seen = _run(Hook(tmp_path / name), "claude-code", 8, "--config", str(config))
        assert seen == late, name
    # The flag wins over the file.
    flagged = _run(
        Hook(tmp_path / "wins"), "claude-code", 8, "--config", str(config), "--note-early"
    )
    assert flagged.index("noted") == refused - 1


def test_the_refusal_is_in_each_cli_own_format(tmp_path: Path) -> None:
    refusals = {}
    for agent in LAPS:
        hook = Hook(tmp_path / agent, "--mode", "refuse")
        for i in range(8):
            before, _ = LAPS[agent](hook, i)
            if _deny_reason(before):
                refusals[agent] = before
                break
    claude = refusals["claude-code"]["hookSpecificOutput"]
    assert claude["hookEventName"] == "PreToolUse"
    assert claude["permissionDecisionReason"].startswith("[loopfuse] Loop detected")
    assert refusals["codex"]["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert set(refusals["gemini"]) == {"decision", "reason"}
    qwen = refusals["qwen"]  # Claude Code's form, which Qwen Code hands the model as is
    assert set(qwen) == {"hookSpecificOutput"}
    assert qwen["hookSpecificOutput"]["permissionDecisionReason"].startswith("[loopfuse]")


def test_qwen_code_refuses_by_the_fourth_identical_failing_call(hook: Hook) -> None:
    """Qwen Code's own detector halts a session at the 5th identical call: loopfuse notes
    the 3rd failing one (a command that changes state, so no read-only allowance) and
    refuses the 4th, so the model reads why before that."""
    command = "echo attempt >> attempts.log; cat missing.txt"
    seen = []
    for i in range(6):
        before = hook.answer(qwen_pre(command, i))
        if _deny_reason(before):
            seen.append("refused")
            continue
        after = hook.answer(qwen_failure(command, i, "cat: missing.txt: No such file"))
        seen.append("noted" if _note(after) else "ran")
    assert seen == ["ran", "ran", "noted", "refused", "refused", "refused"]


def test_qwen_code_notes_after_a_successful_call_too(tmp_path: Path) -> None:
    """The note rides on PostToolUse as on PostToolUseFailure (Qwen Code appends it to the
    answer); a state-changing call with the same answer is noted at the 4th, before Qwen
    Code's own halt at the 5th (docs/agents.md: a read-only one is not, yet)."""
    hook = Hook(tmp_path / "s", "--mode", "note")
    notes = []
    for i in range(8):
        hook.answer(qwen_pre("echo run >> runs.log; echo done", i))
        notes.append(_note(hook.answer(qwen_post("echo run >> runs.log; echo done", i, "done"))))
    noted = [n for n in notes if n]
    assert noted
    assert noted[0].startswith("[loopfuse]")
    assert notes.index(noted[0]) <= 3  # by the 4th identical call


def test_the_note_comes_after_the_call_as_additional_context(hook: Hook) -> None:
    for i in range(8):
        _, after = _claude_lap(hook, i)
        if _note(after):
            assert after["hookSpecificOutput"]["hookEventName"] == "PostToolUseFailure"
            assert after["hookSpecificOutput"]["additionalContext"].startswith("[loopfuse]")
            return
    raise AssertionError("never noted")


def test_refuse_mode_refuses_at_once_and_note_mode_never(tmp_path: Path) -> None:
    refused = _run(Hook(tmp_path / "r", "--mode", "refuse"), "claude-code", 6)
    assert "noted" not in refused
    assert refused[refused.index("refused") :] == ["refused"] * (6 - refused.index("refused"))
    noted = _run(Hook(tmp_path / "n", "--mode", "note"), "claude-code", 8)
    assert "refused" not in noted
    assert noted.count("noted") >= 3


@pytest.mark.parametrize("agent", ["claude-code", "gemini"])
def test_end_session_ends_a_loop_that_goes_on_after_its_refusal(hook: Hook, agent: str) -> None:
    seen = _run(hook, agent, 9, "--end-session")
    refused = seen.index("refused")
    assert seen[refused + 1] == "ended", seen
    before, _ = LAPS[agent](hook, 20, "--end-session")
    assert before["continue"] is False
    assert _deny_reason(before) is not None  # Claude Code runs the call once more without it
    assert "ended the session" in before["stopReason"]


def test_qwen_code_is_never_sent_continue_false(hook: Hook) -> None:
    """Qwen Code ignores ``continue: false`` from PreToolUse and puts its stop reason in
    place of the answer from PostToolUse: the loop is refused, never "ended"."""
    seen = _run(hook, "qwen", 10, "--end-session")
    assert "ended" not in seen
    assert seen[-1] == "refused"
    assert "Qwen Code cannot be ended" in hook.log()
    answer = hook.answer(qwen_post("cat missing.txt", 30, "x"), "--end-session")
    assert "continue" not in answer


def test_qwen_code_prompt_event_without_a_prompt_is_not_a_new_run(hook: Hook) -> None:
    """Qwen Code fires UserPromptSubmit, with an empty prompt, each time it sends the model
    its calls' answers: the loop goes on being counted, and nothing is logged."""
    command = "echo attempt >> attempts.log; cat missing.txt"
    seen = []
    for i in range(5):
        before = hook.answer(qwen_pre(command, i))
        if _deny_reason(before):
            seen.append("refused")
            continue
        after = hook.answer(qwen_failure(command, i, "cat: missing.txt: No such file"))
        seen.append("noted" if _note(after) else "ran")
        assert (
            hook.answer({**QWEN_COMMON, "hook_event_name": "UserPromptSubmit", "prompt": ""}) == {}
        )
    assert seen == ["ran", "ran", "noted", "refused", "refused"]
    assert "Payload" not in hook.log()


def test_codex_is_never_sent_continue_false(hook: Hook) -> None:
    """Codex runs the command when a deny comes with ``continue: false``."""
    seen = _run(hook, "codex", 10, "--end-session")
    assert "ended" not in seen
    assert seen[-1] == "refused"
    assert "Codex cannot be ended" in hook.log()


@pytest.mark.parametrize(
    ("agent", "payload"),
    [
        ("claude-code", prompt(CLAUDE_COMMON, "UserPromptSubmit")),
        ("codex", prompt(CODEX_COMMON, "UserPromptSubmit")),
        ("gemini", prompt(GEMINI_COMMON, "BeforeAgent")),
        ("qwen", prompt(QWEN_COMMON, "UserPromptSubmit")),
    ],
)
def test_a_user_prompt_starts_a_new_run(hook: Hook, agent: str, payload: dict[str, Any]) -> None:
    """ "Try again" from the user is not refused for the loop before it."""
    seen = _run(hook, agent, 8)
    assert seen[-1] == "refused"
    assert hook.answer(payload, "--agent", agent) == {}
    assert _run(hook, agent, 2) == ["ran", "ran"]


def test_an_answer_that_moves_is_not_a_loop(hook: Hook) -> None:
    """A poll whose output changes (``tail -5 build.log``) is never refused."""
    for i in range(12):
        before = hook.answer(claude_pre("tail -5 build.log", f"t{i}"))
        assert before == {}
        after = hook.answer(claude_post("tail -5 build.log", f"t{i}", f"step {i} of 40"))
        assert after == {}


def test_gemini_answers_pair_with_their_calls_in_order(hook: Hook) -> None:
    """No call id: the oldest call of the same tool and arguments without an answer."""
    hook.answer(gemini_before("ls a"))
    hook.answer(gemini_before("ls a"))
    hook.answer(gemini_after("ls a", "x", 0, 1))
    state = hook_state.load(_only_session(hook.root))
    calls = [e for e in state.events if e[0] == "call"]
    answers = [e for e in state.events if e[0] == "answer"]
    assert [a[1] for a in answers] == [calls[0][1]]


def test_the_answer_of_a_refused_call_is_not_counted_as_a_call(hook: Hook) -> None:
    for i in range(8):
        before, _ = _claude_lap(hook, i, "--mode", "refuse")
        if _deny_reason(before):
            break
    path = _only_session(hook.root)
    calls = len([e for e in hook_state.load(path).events if e[0] == "call"])
    hook.answer(claude_failure("cat missing.txt", f"toolu_{i}", "No such file"))
    assert len([e for e in hook_state.load(path).events if e[0] == "call"]) == calls


def test_a_user_setting_from_the_command_line_and_the_settings_file(
    hook: Hook, tmp_path: Path
) -> None:
    config = tmp_path / "loopfuse.toml"
    config.write_text('max_observation_steps = 2\nmax_strikes = 1\n[hook]\nmode = "refuse"\n')
    seen = _run(hook, "claude-code", 4, "--config", str(config))
    assert seen == ["ran", "ran", "refused", "refused"]
    ignored = _run(Hook(tmp_path / "i"), "claude-code", 6, "--ignore-tools", "Bash")
    assert ignored == ["ran"] * 6


def test_scan_reads_a_settings_file_with_a_hook_table(tmp_path: Path) -> None:
    """One file for both: ``loopfuse scan --config`` skips the ``[hook]`` table."""
    from loopfuse.cli.config import Settings

    config = tmp_path / "loopfuse.toml"
    config.write_text('max_strikes = 2\n[hook]\nmode = "refuse"\n')
    assert Settings.from_toml(config).detector.max_strikes == 2


@pytest.mark.parametrize(
    ("argv", "wanted"),
    [
        (["--end-session", "--no-normalize-answers"], {"end_session": True}),
        (["--tool-limits=deploy=1"], {"tool_limits": "deploy=1"}),
        (["--no-note-early"], {"note_early": False}),
    ],
)
def test_flags(argv: list[str], wanted: dict[str, object]) -> None:
    assert wanted.items() <= read_flags(argv).items()


@pytest.mark.parametrize("argv", [["--nope"], ["--mode"], ["scan"], ["--end-session=yes"]])
def test_a_bad_flag_is_a_config_error(argv: list[str]) -> None:
    with pytest.raises(ConfigError):
        read_flags(argv)


# --- never break the agent ----------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"not json",
        b"[1, 2]",
        json.dumps({**claude_pre("ls", "t"), "hook_event_name": "SessionStart"}).encode(),
        json.dumps({"hook_event_name": "BeforeTool", "tool_name": "x"}).encode(),
        b"\xff\xfe",
        b"[" * 100_000,
    ],
)
def test_bad_input_allows_the_call_and_logs_one_line(hook: Hook, raw: bytes) -> None:
    assert hook(raw) == ("", 0)
    assert len(hook.log().splitlines()) == 1
    assert "the call is allowed" in hook.log()


@pytest.mark.parametrize(
    "flags",
    [["--mode", "loud"], ["--max-strikes", "-1"], ["--config", "/no/such/file.toml"]],
)
def test_bad_settings_allow_the_call_and_say_why_in_the_log(hook: Hook, flags: list[str]) -> None:
    # The call is allowed; the user is shown why (issue 29 §2: the answer now carries a
    # systemMessage, tests/test_cli_hook_settings_message.py), the model nothing.
    assert set(hook.answer(claude_pre("ls", "t1"), *flags)) == {"systemMessage"}
    assert "ConfigError" in hook.log()


def test_loopfuse_hook_off_in_the_environment_lets_everything_through(tmp_path: Path) -> None:
    raw = json.dumps(claude_pre("ls", "t")).encode()
    env = {"LOOPFUSE_HOOK": "off"}
    assert handle(raw, ["--state-dir", str(tmp_path)], env, lambda: 0.0) == ("", 0)
    assert not (tmp_path / "sessions").exists()


def _only_session(root: Path) -> str:
    (path,) = (root / "sessions").glob("*.json")
    return str(path)


@pytest.mark.parametrize(
    "content",
    [
        b"\x00garbage{",
        b'{"format": "someone-else", "version": 1}',
        b'{"format": "loopfuse-hook-state", "version": 99, "events": []}',
        b'{"format": "loopfuse-hook-state", "version": 1, "events": {}, "noted": {}}',
        b'{"format": "loopfuse-hook-state", "version": 1, "events": [["call", 1]],'
        b' "noted": {}, "refused": {}, "next_id": 1}',
        b"[" * 100_000,
    ],
)
def test_a_corrupt_foreign_or_future_state_file_is_a_fresh_start(
    hook: Hook, content: bytes
) -> None:
    hook.answer(claude_pre("cat missing.txt", "t0"))
    path = Path(_only_session(hook.root))
    path.write_bytes(content)
    assert _run(hook, "claude-code", 3) == ["ran", "ran", "ran"]
    assert "Error" not in hook.log()


def test_a_state_folder_that_cannot_be_written_allows_the_call(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    hook = Hook(blocked / "state")
    assert hook(claude_pre("ls", "t1")) == ("", 0)


def test_a_session_locked_too_long_allows_the_call(hook: Hook) -> None:
    hook.answer(claude_pre("ls", "t0"))
    lock = _only_session(hook.root).removesuffix(".json") + ".lock"
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert hook(claude_pre("ls", "t1"), "--lock-timeout", "0.01") == ("", 0)
    finally:
        os.close(fd)
    assert "LockTimeout" in hook.log()


def test_the_lock_wait_is_bounded_on_its_clock(tmp_path: Path) -> None:
    path = str(tmp_path / "sessions" / "s.json")
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    with hook_state.locked(path, 1.0), pytest.raises(hook_state.LockTimeout):  # noqa: SIM117
        with hook_state.locked(path, 0.5, clock=lambda: now[0], sleep=sleep):
            pass
    assert 0.5 <= sum(slept) < 0.51


# --- bounded, cleaned up --------------------------------------------------------------------


def test_state_stays_bounded(hook: Hook) -> None:
    """The detector's window of calls and answers; long arguments as their hash, an
    answer as its digest once the next call is checked (until then, head and tail)."""
    big = "x" * 100_000
    for i in range(40):
        hook.answer(claude_pre(f"echo {i} {big}", f"t{i}"), "--detector-window", "12")
        answer = claude_post(f"echo {i} {big}", f"t{i}", f"{i} {big}")
        hook.answer(answer, "--detector-window", "12")
    path = _only_session(hook.root)
    assert os.path.getsize(path) < MAX_ANSWER_TEXT + 10_000
    events = hook_state.load(path).events
    assert len(events) == 24
    assert events[-1][0] == "answer"
    assert len(events[-1][2]["answer"]) < MAX_ANSWER_TEXT + 100
    hook.answer(claude_pre("ls", "t-last"), "--detector-window", "12")
    assert os.path.getsize(path) < 10_000


def test_an_after_hook_does_not_import_the_detector(tmp_path: Path) -> None:
    """Half the hooks are after a call: they keep the answer and pay for nothing else."""
    payload = json.dumps(claude_post("ls", "t1", "a.py"))
    code = (
        "import sys; from loopfuse.cli.hook import handle;"
        f"print(handle({payload!r}.encode(), ['--state-dir', {str(tmp_path)!r}], {{}}, "
        "lambda: 0.0), 'loopfuse.detector' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    assert done.stdout.decode().strip() == "('', 0) False"


def test_an_after_hook_given_detector_settings_reads_only_their_declaration(
    tmp_path: Path,
) -> None:
    """Its detector flags and keys are read by DetectorSettings' fields, which cost no
    classifier, no intent parser, no run. The first hook of a version of the settings
    file checks all of it as load_settings does (the guards' import, once: issue 29 §3);
    the next ones read what it checked."""
    config = tmp_path / "loopfuse.toml"
    config.write_text("max_strikes = 4\ndetector_window = 40\n")
    payload = json.dumps(claude_post("ls", "t1", "a.py"))
    argv = ["--state-dir", str(tmp_path), "--config", str(config), "--no-error-aware"]
    code = (
        "import sys; from loopfuse.cli.hook import handle;"
        f"print(handle({payload!r}.encode(), {argv!r}, {{}}, lambda: 0.0));"
        "print(sorted(m for m in sys.modules if m.startswith('loopfuse.')))"
    )
    for _ in range(2):  # the first checks the file, the second reads its check
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    answer, loaded = done.stdout.decode().strip().splitlines()
    assert answer == "('', 0)"
    assert "loopfuse.detector.settings" in loaded
    for heavy in ("shell", "reader", "core", "signals", "tools", "loopfuse.intent"):
        assert heavy not in loaded, heavy


def test_the_hook_bounds_the_state_with_the_detector_default_window() -> None:
    from loopfuse.detector import DEFAULT_WINDOW

    assert DETECTOR_WINDOW == DEFAULT_WINDOW


def test_idle_sessions_are_removed_on_an_injected_clock(tmp_path: Path) -> None:
    root = str(tmp_path)
    old = hook_state.session_path(root, "codex", "old")
    new = hook_state.session_path(root, "codex", "new")
    for path in (old, new):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        hook_state.save(path, hook_state.SessionState())
    now = 1_900_000_000.0
    os.utime(old, (now - hook_state.MAX_IDLE - 1,) * 2)
    os.utime(new, (now - 60,) * 2)
    assert hook_state.cleanup(root, now) == 1
    assert not os.path.exists(old)
    assert os.path.exists(new)
    os.utime(new, (now - hook_state.MAX_IDLE - 1,) * 2)
    assert hook_state.cleanup(root, now + 60) == 0  # looked an hour ago at most once
    assert hook_state.cleanup(root, now + hook_state.CLEANUP_EVERY) == 1


def test_a_session_whose_hook_runs_is_not_removed(tmp_path: Path) -> None:
    root = str(tmp_path)
    path = hook_state.session_path(root, "gemini", "busy")
    os.makedirs(os.path.dirname(path))
    hook_state.save(path, hook_state.SessionState())
    os.utime(path, (0, 0))
    with hook_state.locked(path, 1.0):
        assert hook_state.cleanup(root, 1_900_000_000.0) == 0
    assert os.path.exists(path)


def test_state_is_private_to_the_user(hook: Hook) -> None:
    """It holds command lines and their output."""
    hook.answer(claude_pre("cat .env", "t1"))
    path = Path(_only_session(hook.root))
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    assert hook.root.stat().st_mode & 0o777 == 0o700


def test_odd_session_ids_make_safe_file_names(tmp_path: Path) -> None:
    for session in ("../../etc/passwd", ".hidden", "a" * 500, "é/ü"):
        path = hook_state.session_path(str(tmp_path), "codex", session)
        assert os.path.dirname(path) == str(tmp_path / "sessions")


# --- the console script -------------------------------------------------------------------


def _script() -> list[str]:
    installed = Path(sys.executable).parent / "loopfuse"
    return [str(installed)] if installed.exists() else [sys.executable, "-m", "loopfuse"]


def _run_script(
    payload: object, root: Path, *flags: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return subprocess.run(
        [*_script(), "hook", "--state-dir", str(root), *flags],
        input=raw,
        capture_output=True,
        timeout=60,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_the_console_script_keeps_the_stdin_stdout_exit_contract(tmp_path: Path) -> None:
    root = tmp_path / "state"
    outputs = []
    for i in range(8):
        done = _run_script(claude_pre("cat missing.txt", f"t{i}"), root, "--mode", "refuse")
        assert done.returncode == 0
        assert done.stderr == b""
        outputs.append(done.stdout)
        if done.stdout:
            break
        after = claude_failure("cat missing.txt", f"t{i}", "No such file")
        assert _run_script(after, root).stdout == b""
    answer = json.loads(outputs[-1])
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    broken = _run_script(b"{not json", root)
    assert (broken.returncode, broken.stdout, broken.stderr) == (0, b"", b"")


def test_the_hook_imports_the_detector_and_not_the_rest() -> None:
    code = (
        "import sys, loopfuse.cli.entry, loopfuse.cli.hook;"
        "print(sorted(m for m in sys.modules if m.startswith('loopfuse.')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    loaded = done.stdout.decode()
    for heavy in ("loopfuse.integrations", "loopfuse.dedup", "loopfuse.cli.main", "breaker"):
        assert heavy not in loaded
    code = "import sys, loopfuse; print(sorted(m for m in sys.modules if 'loopfuse' in m))"
    bare = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    assert bare.stdout.decode().strip() == "['loopfuse', 'loopfuse._api']"  # lazy


@pytest.fixture
def eight_parallel_hooks(tmp_path: Path) -> Iterator[tuple[Path, list[subprocess.Popen[bytes]]]]:
    root = tmp_path / "state"
    processes = []
    for _ in range(8):
        process = subprocess.Popen(  # a loaded machine must not time the lock out
            [*_script(), "hook", "--state-dir", str(root), "--lock-timeout", "60"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        processes.append(process)
    yield root, processes
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_parallel_hooks_of_one_session_keep_one_consistent_state(
    eight_parallel_hooks: tuple[Path, list[subprocess.Popen[bytes]]],
) -> None:
    root, processes = eight_parallel_hooks
    # every process has started and waits for its stdin: close them all at once
    payloads = [json.dumps(claude_pre(f"echo {i}", f"t{i}")).encode() for i in range(8)]
    for process, payload in zip(processes, payloads, strict=True):
        assert process.stdin is not None
        process.stdin.write(payload)
    for process in processes:
        assert process.stdin is not None
        process.stdin.close()
    for process in processes:
        assert process.wait(timeout=60) == 0
    (path,) = (root / "sessions").glob("*.json")
    state = hook_state.load(str(path))
    ids = sorted(str(e[5]) for e in state.events if e[0] == "call")
    assert ids == sorted(f"t{i}" for i in range(8))
    assert not (root / "hook.log").exists()


# --- the parallel calls of one turn are one batch -------------------------------------------

# Two failing calls the model asks for together, every turn (state-changing: each leaves a
# trace), as in the end-to-end test.
PAIR = ("echo a >> attempts.log; cat missing-a.txt", "echo b >> attempts.log; cat b.txt")


def _pair_turn(
    hook: Hook, turn: int, order: tuple[int, int], interleaved: bool = False
) -> list[str]:
    """One turn of the pair, its hooks started at the same moment (as the CLIs run them),
    taking the lock in ``order``: both before-hooks then both after-hooks, or (with
    ``interleaved``) each call's after-hook right after its before-hook. What each call
    of the pair got, in the pair's order: ``ran``, ``noted`` or ``refused``."""
    ids = [f"toolu_{turn}_{i}" for i in range(2)]
    started = hook.clock()  # every hook of the turn was started before any decided
    got = ["", ""]
    for phase in ("before", "after") if not interleaved else ("both",):
        for i in order:
            if phase in ("before", "both"):
                before = hook.answer(claude_pre(PAIR[i], ids[i]), started=started)
                if _deny_reason(before):
                    got[i] = "refused"
                    continue
            if phase in ("after", "both") and got[i] != "refused":
                failure = claude_failure(PAIR[i], ids[i], f"cat: {i}: No such file", 1)
                after = hook.answer(failure, started=started)
                got[i] = "noted" if _note(after) else "ran"
    return got


@pytest.mark.parametrize("interleaved", [False, True], ids=["pre-pre-post-post", "pre-post"])
def test_the_parallel_calls_of_a_turn_are_told_and_refused_together(
    hook: Hook, interleaved: bool
) -> None:
    """A loop of two calls per turn is one batch repeated: noted at the 3rd turn and
    refused at the 4th, as one failing call is, both calls alike, whichever hook takes
    the lock first (and whether a call's after-hook comes before its sibling's
    before-hook)."""
    seen = [
        _pair_turn(hook, turn, (0, 1) if turn % 2 else (1, 0), interleaved) for turn in range(6)
    ]
    one_failing_call = ["ran", "ran", "noted", "refused", "refused", "refused"]
    assert [s[0] for s in seen] == [s[1] for s in seen] == one_failing_call, seen


def test_a_parallel_turn_is_one_batch_in_the_state(hook: Hook) -> None:
    _pair_turn(hook, 0, (0, 1))
    _pair_turn(hook, 1, (1, 0))
    calls = [e for e in hook_state.load(_only_session(hook.root)).events if e[0] == "call"]
    batches = [call[6] for call in calls]
    assert batches[0] == batches[1] != batches[2] == batches[3]


def test_sequential_calls_stay_separate_batches(hook: Hook) -> None:
    """pre(A), post(A), pre(B), post(B), each hook started after the one before it
    answered: the model asked for B after it read A's answer."""
    for i, command in enumerate(("ls", "cat notes.txt", "ls", "cat notes.txt")):
        assert hook.answer(claude_pre(command, f"t{i}")) == {}
        assert hook.answer(claude_post(command, f"t{i}", f"answer {i}")) == {}
    calls = [e for e in hook_state.load(_only_session(hook.root)).events if e[0] == "call"]
    assert len({call[6] for call in calls}) == 4


def test_a_refused_batch_is_refused_again_then_ended_as_one(hook: Hook) -> None:
    """With --end-session, every call of the batch after the refused one ends the
    session, not only the first whose hook got the lock (and not the second of the
    refused batch, which the first's refusal must not turn into an end)."""
    ends = []
    for turn in range(6):
        started = hook.clock()
        got: list[str | bool] = []
        for i in (turn % 2, 1 - turn % 2):
            answer = hook.answer(
                claude_pre(PAIR[i], f"t{turn}{i}"), "--end-session", started=started
            )
            got.append("ended" if answer.get("continue") is False else bool(_deny_reason(answer)))
        for i in range(2):
            if got[0] is False:
                failure = claude_failure(PAIR[i], f"t{turn}{i}", "No such file", 1)
                hook.answer(failure, "--end-session", started=started)
        ends.append(got)
    assert ends[:2] == [[False, False]] * 2
    assert ends[3] == [True, True], ends
    assert ends[4] == ["ended", "ended"], ends


def _concurrently(root: Path, payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run one hook process per payload, all started before any reads its input."""
    processes = [
        subprocess.Popen(  # a loaded machine must not time the lock out
            [*_script(), "hook", "--state-dir", str(root), "--lock-timeout", "60"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in payloads
    ]
    try:
        for process, payload in zip(processes, payloads, strict=True):
            assert process.stdin is not None
            process.stdin.write(json.dumps(payload).encode())
        for process in processes:
            assert process.stdin is not None
            process.stdin.close()
        answers = []
        for process in processes:
            assert process.stdout is not None
            assert process.stderr is not None
            out, err = process.stdout.read(), process.stderr.read()
            assert (process.wait(timeout=60), err) == (0, b"")
            answers.append(json.loads(out) if out else {})
        return answers
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def test_concurrent_hook_processes_of_a_looping_pair_decide_alike(tmp_path: Path) -> None:
    """The real thing: each turn's two before-hooks, then its two after-hooks, as
    concurrent processes, in whatever order they get the lock."""
    root = tmp_path / "state"
    seen = []
    for turn in range(4):
        ids = [f"toolu_{turn}_{i}" for i in range(2)]
        before = _concurrently(root, [claude_pre(PAIR[i], ids[i]) for i in range(2)])
        if any(_deny_reason(b) for b in before):
            seen.append(["refused" if _deny_reason(b) else "ran" for b in before])
            continue
        failures = [claude_failure(PAIR[i], ids[i], "No such file", 1) for i in range(2)]
        after = _concurrently(root, failures)
        seen.append(["noted" if _note(a) else "ran" for a in after])
    assert seen == [["ran"] * 2] * 2 + [["noted"] * 2, ["refused"] * 2], seen


# --- the refusal says what ran -----------------------------------------------------------------


def test_a_refusal_counts_the_calls_that_ran(hook: Hook) -> None:
    """A refused call never ran, nor did the refused ones before it: the reason says how
    many identical calls ran and got the same answer."""
    reasons = []
    command = "echo attempt >> attempts.log; cat missing.txt"
    for i in range(5):
        before = hook.answer(claude_pre(command, f"t{i}"), "--mode", "refuse")
        reason = _deny_reason(before)
        if reason:
            reasons.append(reason)
            continue
        hook.answer(claude_failure(command, f"t{i}", "cat: missing.txt: No such file", 1))
    assert len(reasons) == 3
    assert "with the same arguments 2 times in a row and got the same result" in reasons[0]
    for reason in reasons:  # two ran (the same error), then each call was refused
        assert "with the same arguments 2 times in a row" in reason
        assert "This call was refused: it did not run." in reason


def test_a_hook_whose_clock_read_before_the_note_does_not_forget_it(hook: Hook) -> None:
    """A parallel call's hook reads the clock, then waits for the lock while its sibling
    notes the loop: its earlier time must not make the note look expired, or the loop is
    noted again instead of refused."""
    assert _run(hook, "claude-code", 3) == ["ran"] * 3
    assert hook.answer(claude_pre("cat missing.txt", "t3")) == {}  # the loop is noted
    hook.now -= 0.5  # the after-hook read its clock before that
    assert _note(hook.answer(claude_failure("cat missing.txt", "t3", "No such file")))
    hook.now += 1.0
    assert _deny_reason(hook.answer(claude_pre("cat missing.txt", "t4")))


def test_claude_code_serial_calls_of_a_turn_are_one_batch_by_its_end_of_batch(
    hook: Hook,
) -> None:
    """Claude Code runs a turn's state-changing shell calls one after the other, each
    hook started after the one before answered, as separate turns would be; its
    PostToolBatch says which calls were one batch: the first turn's are merged, and
    later turns stay open until it comes. So the pair loop is told and refused as one
    batch, at the turns one failing call would be."""
    seen = []
    for turn in range(6):
        got = []
        ids = [f"toolu_{turn}_{i}" for i in range(2)]
        for i in (turn % 2, 1 - turn % 2):
            before = hook.answer(claude_pre(PAIR[i], ids[i]))
            if _deny_reason(before):
                got.append("refused")
                continue
            after = hook.answer(claude_failure(PAIR[i], ids[i], "No such file", 1))
            got.append("noted" if _note(after) else "ran")
        assert hook.answer(claude_batch([(PAIR[i], ids[i], "Exit code 1") for i in range(2)])) == {}
        seen.append(got)
    assert seen == [["ran"] * 2] * 2 + [["noted"] * 2] + [["refused"] * 2] * 3, seen
    calls = [e for e in hook_state.load(_only_session(hook.root)).events if e[0] == "call"]
    assert calls[0][6] == calls[1][6] != calls[2][6] == calls[3][6]


def test_a_missing_end_of_batch_does_not_hold_the_next_turn_in_the_batch(hook: Hook) -> None:
    """Once the session has said where its batches end, a batch stays open for the next
    call; but the same call again is the next turn (its end of batch went missing)."""
    hook.answer(claude_pre("ls", "t0"))
    hook.answer(claude_post("ls", "t0", "a.py"))
    hook.answer(claude_batch([("ls", "t0", "a.py")]))
    for i in (1, 2):
        hook.answer(claude_pre("ls", f"t{i}"))
        hook.answer(claude_post("ls", f"t{i}", "a.py"))
    calls = [e for e in hook_state.load(_only_session(hook.root)).events if e[0] == "call"]
    assert len({call[6] for call in calls}) == 3


def test_a_before_hook_does_not_import_orjson(tmp_path: Path) -> None:
    """orjson (with uuid and platform) is about a tenth of a hook's cost, and a hook's few
    kilobytes of JSON gain nothing from it: the entry point keeps it out, and the
    decision is the one the library gives with orjson."""
    payload = json.dumps(claude_pre("cat missing.txt", "t1")).encode()
    code = (
        "import sys; from loopfuse.cli.entry import main;"
        f"sys.stdin = __import__('io').TextIOWrapper(__import__('io').BytesIO({payload!r}));"
        f"main(['hook', '--state-dir', {str(tmp_path)!r}]);"
        "print('orjson' in sys.modules and sys.modules['orjson'] is not None,"
        " 'loopfuse.detector' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    assert done.stdout.decode().strip().splitlines()[-1] == "False True"


def test_warn_refuses_a_session_that_goes_on_looping_in_another_shape(hook: Hook) -> None:
    """Noted for one loop (the same failing command), the agent goes on looping in another
    shape (variants of it, failing alike: a new signature): the note was ignored, so the
    next loop is refused, not noted again (issue 27)."""
    error = "ModuleNotFoundError: No module named 'yaml'"
    seen = []
    commands = ["python build.py"] * 3 + [f"python build.py --step {k}" for k in range(5)]
    for i, command in enumerate(commands):
        before = hook.answer(claude_pre(command, f"toolu_{i}"))
        if _deny_reason(before):
            seen.append("refused")
            continue
        after = hook.answer(claude_failure(command, f"toolu_{i}", error))
        seen.append("noted" if _note(after) else "ran")
    assert seen.count("noted") == 1, seen
    assert "refused" in seen[seen.index("noted") + 1 :], seen


# --- warn: the noted failure again (issue 27) --------------------------------------------

_MISSING = (
    "Traceback (most recent call last):\n"
    '  File "/srv/report/run.py", line 3, in <module>\n'
    "    import tablib\n"
    "ModuleNotFoundError: No module named 'tablib'"
)
_NOTED = [("python run.py", _MISSING, True)] * 3  # the same failing call: noted at the third
_READ = ("sed -n 1,5p run.py", "import csv\nimport tablib\n", False)
_NEXT = ("pip install tablib", "Successfully installed tablib-3.5.0", False)


def _steps(hook: Hook, steps: list[tuple[str, str, bool]], *flags: str) -> list[str]:
    """Each Claude Code Bash call of ``steps`` (command, answer, failed) through the
    hook: ``ran``, ``noted``, or the reason it was refused."""
    seen = []
    for i, (command, answer, failed) in enumerate(steps):
        before = hook.answer(claude_pre(command, f"toolu_{i}"), *flags)
        reason = _deny_reason(before)
        if reason is not None:
            seen.append(reason)
            continue
        post = claude_failure if failed else claude_post
        after = hook.answer(post(command, f"toolu_{i}", answer), *flags)
        seen.append("noted" if _note(after) else "ran")
    return seen


def test_warn_refuses_the_call_after_a_call_that_failed_again_the_way_its_note_said(
    hook: Hook,
) -> None:
    """Noted for a call failing again and again, the agent reads a file, then runs a
    variant of the call, which fails the very same way (the same error line, other
    output before it). No signal counts to its threshold again, but the failure the
    note came with is back: the note was ignored, so the next call is refused, as the
    integrations' Guard refuses the request that call would have come from."""
    varied = ("python run.py -v", "report: verbose on, 12 rows\n" + _MISSING, True)
    *ran, reason = _steps(hook, [*_NOTED, _READ, varied, _NEXT])
    assert ran == ["ran", "ran", "noted", "ran", "ran"]
    assert reason.startswith("[loopfuse] Loop detected: your call to `Bash` failed again")
    assert "(`ModuleNotFoundError: No module named 'tablib'`)" in reason
    assert "This call was refused: it did not run." in reason
    assert "went on after loopfuse's note" in reason
    assert "call refused (repeat, 4x): Bash" in hook.log()  # the noted loop, one more
    # In note mode it is never refused; in refuse mode the loop was refused at once.
    noting = Hook(hook.root.parent / "note", "--mode", "note")
    assert _steps(noting, [*_NOTED, _READ, varied, _NEXT])[-1] == "ran"
    refusing = Hook(hook.root.parent / "refuse", "--mode", "refuse")
    *ran, refused = _steps(refusing, _NOTED)
    assert (ran, refused[:10]) == (["ran", "ran"], "[loopfuse]")


def test_warn_refuses_a_failure_again_only_once_the_noted_one_is_known(hook: Hook) -> None:
    """The noted batch's own answers name the failure; the call right after the note is
    the agent's answer to it, not a failure again (its answers are read next)."""
    again = ("python run.py --retry", "starting\n" + _MISSING, True)
    seen = _steps(hook, [*_NOTED, again, _NEXT, _NEXT])
    assert seen[:4] == ["ran", "ran", "noted", "ran"]
    assert "failed again the same way" in seen[4]
    assert seen[5] == "ran"  # the refused call has no answer: nothing failed again since


def test_warn_lets_a_session_on_when_its_calls_fail_another_way_after_the_note(
    tmp_path: Path,
) -> None:
    """What a heeded note looks like: the next failure is another one (a test that now
    runs and fails on an assertion), or shares with the noted one only the exit status.
    A new prompt from the user, or the note's window passing, forgets the noted failure."""
    assertion = ("python run.py", "AssertionError: expected 12 rows, got 11", True)
    status = ("python run.py --out x", "wrote 0 rows to out.csv", True)
    for other in (assertion, status):
        hook = Hook(tmp_path / str(len(other[0])))
        assert _steps(hook, [*_NOTED, _READ, other, _NEXT])[-1] == "ran"
    varied = ("python run.py -v", "report: verbose on\n" + _MISSING, True)
    hook = Hook(tmp_path / "prompt")
    _steps(hook, _NOTED)
    hook.answer(prompt(CLAUDE_COMMON, "UserPromptSubmit"))
    assert _steps(hook, [_READ, varied, _NEXT])[-1] == "ran"
    hook = Hook(tmp_path / "window")
    _steps(hook, [*_NOTED, _READ, varied])
    hook.now += 601.0  # the note is forgotten, and its failure with it
    assert _steps(hook, [_NEXT])[-1] == "ran"


def test_the_noted_failure_kept_is_small_and_a_damaged_one_is_a_fresh_start(
    hook: Hook,
) -> None:
    """One noted failure per session: the loop, its count, when, and a 32-digit name."""
    _steps(hook, [*_NOTED, _READ])
    path = _only_session(hook.root)
    kept = hook_state.load(path).failure
    assert kept is not None
    assert set(kept) == {"batch", "loop", "count", "at", "name"}
    assert str(kept["loop"]).startswith("repeat:")
    assert len(str(kept["name"])) == 32
    assert len(json.dumps(kept)) < 200
    data = json.loads(Path(path).read_text())
    for damaged in ({**kept, "name": "not a name"}, {**kept, "at": "x"}, [1], {"batch": 1}):
        Path(path).write_text(json.dumps({**data, "failure": damaged}))
        assert hook_state.load(path).events == []  # a fresh start
    del data["failure"]  # a state file of the release before: read as it is
    Path(path).write_text(json.dumps(data))
    assert hook_state.load(path).events == data["events"]


def test_a_loop_only_the_early_twin_finds_is_noted_never_refused(hook: Hook) -> None:
    """Three different calls failing with the same error: the early twin's error streak
    (two allowed), not the detector's (three allowed). The call after them is noted, and
    so is the call after the next three, in a session noted already (a note again, not
    a refusal: ``refuse`` mode refuses none of these calls)."""
    failing = [("python run.py", _MISSING, True), ("pytest -x tests", _MISSING, True)]
    failing.append(("make report", _MISSING, True))
    again = [("python -m report", _MISSING, True), ("tox -e py311", _MISSING, True)]
    again.append(("./build.sh", _MISSING, True))
    steps = [*failing, _NEXT, *again, ("ls", "run.py\n", False), ("git status", "clean", False)]
    seen = _steps(hook, steps)
    assert seen == ["ran", "ran", "ran", "noted", "ran", "ran", "ran", "noted", "ran"]
    assert hook.log().count("loop noted (error_streak, 3x): Bash") == 2
    assert "refused" not in hook.log()
    for flags in (("--mode", "refuse"), ("--no-note-early",)):
        other = Hook(hook.root.parent / flags[-1])
        assert _steps(other, steps, *flags) == ["ran"] * len(steps)


def test_failing_again_after_an_early_note_is_not_refused(hook: Hook) -> None:
    """Noted early (three different calls failing alike: the early twin's error streak),
    the noted call fails another way; the agent reads a file, then fails that way once
    more: no count reached the refusal, and an early note's failure is not held against
    the session (as the integrations' ``Guard`` does not hold it). After a note at the
    detector's own count, it is: the test above."""
    failing = [
        ("python run.py", _MISSING, True),
        ("pytest -x tests", _MISSING, True),
        ("make report", _MISSING, True),
    ]
    other = "FileNotFoundError: [Errno 2] No such file or directory: 'rows.csv'\n"
    again = [("python report.py", other, True), _READ, ("python report.py -v", other, True)]
    steps = [*failing, *again, ("ls", "run.py\n", False)]
    assert _steps(hook, steps) == ["ran", "ran", "ran", "noted", "ran", "ran", "ran"]
    assert "refused" not in hook.log()


def test_the_answers_a_note_came_with_are_not_noted_again(hook: Hook) -> None:
    """Noted at the third identical failing call (the detector's own count), the agent
    reads a file: the early twin's error streak (three errors, the answers the note came
    with) is not noted again on that call, as ``loopfuse scan`` notes that request once."""
    seen = _steps(hook, [*_NOTED, _READ, _NEXT])
    assert seen == ["ran", "ran", "noted", "ran", "ran"]
    assert hook.log().count("loop noted") == 1
