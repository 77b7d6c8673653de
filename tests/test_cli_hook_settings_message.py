"""A settings mistake switches the guard off, and the user is told (issue 29 §2).

``loopfuse hook`` fails open when its settings (file or flags) are refused: the call runs.
The first event of each session also shows the user why, in the CLI's channel for the
user (``systemMessage``), naming the file and the error; the model is not told, and the
later events of the session say nothing more. Payloads as the CLIs send them
(tests/hook_payloads.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hook_payloads import (
    CLAUDE_COMMON,
    CODEX_COMMON,
    GEMINI_COMMON,
    claude_failure,
    claude_pre,
    codex_post,
    codex_pre,
    gemini_after,
    gemini_before,
    prompt,
)
from loopfuse.cli.hook import handle

NOW = 1_800_000_000.0


class Hook:
    """``loopfuse hook`` in this process, on a state folder, with a settings file."""

    def __init__(self, tmp_path: Path, text: str) -> None:
        self.root = tmp_path / "state"
        self.config = tmp_path / "loopfuse.toml"
        self.config.write_text(text, encoding="utf-8")
        self.now = NOW

    def clock(self) -> float:
        self.now += 0.001
        return self.now

    def answer(
        self, payload: dict[str, Any], *flags: str, env: dict[str, str] | None = None
    ) -> dict[str, Any]:
        argv = ["--state-dir", str(self.root), "--config", str(self.config), *flags]
        output, status = handle(json.dumps(payload).encode(), argv, env or {}, self.clock)
        assert status == 0
        return json.loads(output) if output else {}

    def log(self) -> list[str]:
        path = self.root / "hook.log"
        return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def refused_or_noted(answer: dict[str, Any]) -> bool:
    """Whether the answer refuses the call, ends the session, or tells the model."""
    specific = answer.get("hookSpecificOutput", {})
    return (
        specific.get("permissionDecision") == "deny"
        or "additionalContext" in specific
        or answer.get("decision") in ("deny", "block")
        or answer.get("continue") is False
    )


BROKEN = {
    "misspelt key": ("max_strike = 9\n", "unknown key 'max_strike' (did you mean max_strikes?)"),
    "wrong value": ('max_strikes = "four"\n', "max_strikes must be an integer"),
    "unknown mode": ('[hook]\nmode = "warm"\n', "hook.mode must be one of"),
    "not TOML": ("max_strikes = = 3\n", "loopfuse.toml"),
}

# Each CLI's first events of a session, and one later event of the same session.
SESSIONS = {
    "claude-code": (claude_pre("ls", "t1"), claude_failure("ls", "t1", "boom")),
    "codex": (codex_pre("ls", "c1"), codex_post("ls", "c1", "out")),
    "gemini": (gemini_before("ls"), gemini_after("ls", "out", 0, 7)),
}


@pytest.mark.parametrize("agent", list(SESSIONS))
@pytest.mark.parametrize("case", list(BROKEN))
def test_the_user_is_told_once_per_session_naming_the_file_and_the_error(
    tmp_path: Path, agent: str, case: str
) -> None:
    text, error = BROKEN[case]
    hook = Hook(tmp_path, text)
    first, later = SESSIONS[agent]
    told = hook.answer(first, "--agent", agent)
    assert set(told) == {"systemMessage"}  # the call runs: no refusal, nothing for the model
    message = told["systemMessage"]
    assert str(hook.config) in message
    assert error in message
    assert "OFF" in message
    assert "loopfuse doctor" in message
    for payload in (later, first, later):  # the same session: said once
        assert hook.answer(payload, "--agent", agent) == {}
    assert sum("ConfigError" in line for line in hook.log()) == 4  # every call logged


@pytest.mark.parametrize(
    ("agent", "payload"),
    [
        ("claude-code", prompt(CLAUDE_COMMON, "UserPromptSubmit")),
        ("codex", prompt(CODEX_COMMON, "UserPromptSubmit")),
        ("gemini", prompt(GEMINI_COMMON, "BeforeAgent")),
    ],
)
def test_a_session_is_told_at_its_first_event_whatever_it_is(
    tmp_path: Path, agent: str, payload: dict[str, Any]
) -> None:
    """The user's prompt comes first in a session: that is where the user learns it."""
    hook = Hook(tmp_path, "max_strike = 9\n")
    assert "max_strike" in hook.answer(payload, "--agent", agent)["systemMessage"]
    assert hook.answer(SESSIONS[agent][0], "--agent", agent) == {}


def test_each_session_is_told_and_the_agent_is_read_from_the_payload(tmp_path: Path) -> None:
    hook = Hook(tmp_path, "max_strike = 9\n")
    assert "systemMessage" in hook.answer(claude_pre("ls", "t1"))
    other = {**claude_pre("ls", "t2"), "session_id": "another-session"}
    assert "systemMessage" in hook.answer(other)
    assert hook.answer(other) == {}


def test_a_new_error_in_the_same_session_is_told_again(tmp_path: Path) -> None:
    """Told once per error: the user who fixes one mistake and makes another hears of it."""
    hook = Hook(tmp_path, "max_strike = 9\n")
    assert "max_strike" in hook.answer(claude_pre("ls", "t1"))["systemMessage"]
    hook.config.write_text('max_strikes = "four"\n', encoding="utf-8")
    assert "four" in hook.answer(claude_pre("ls", "t2"))["systemMessage"]
    assert hook.answer(claude_pre("ls", "t3")) == {}


def test_a_refused_flag_is_told_naming_the_flag(tmp_path: Path) -> None:
    hook = Hook(tmp_path, "")
    told = hook.answer(gemini_before("ls"), "--max-strikes", "-1")
    assert "--max-strikes" in told["systemMessage"]


def test_a_missing_settings_file_is_told(tmp_path: Path) -> None:
    hook = Hook(tmp_path, "")
    hook.config.unlink()
    message = hook.answer(codex_pre("ls", "c1"))["systemMessage"]
    assert f"{hook.config}: no such file" in message


def test_good_settings_say_nothing_to_the_user(tmp_path: Path) -> None:
    hook = Hook(tmp_path, "max_strikes = 4\n[hook]\nmode = 'refuse'\n")
    for payload in (claude_pre("ls", "t1"), gemini_before("ls"), codex_pre("ls", "c1")):
        assert hook.answer(payload) == {}
    assert hook.log() == []


def test_switched_off_says_nothing(tmp_path: Path) -> None:
    hook = Hook(tmp_path, "max_strike = 9\n")
    assert hook.answer(claude_pre("ls", "t1"), env={"LOOPFUSE_HOOK": "off"}) == {}


def test_the_message_is_one_bounded_line(tmp_path: Path) -> None:
    """A settings error can quote the file; what the user is shown stays short."""
    hook = Hook(tmp_path, f"{'k' * 5000} = 1\n")
    message = hook.answer(claude_pre("ls", "t1"))["systemMessage"]
    assert "\n" not in message
    assert len(message) < 1300


def test_an_unreadable_payload_is_only_logged(tmp_path: Path) -> None:
    hook = Hook(tmp_path, "max_strike = 9\n")
    argv = ["--state-dir", str(hook.root), "--config", str(hook.config)]
    assert handle(b"not json", argv, {}, hook.clock) == ("", 0)
    assert any("ConfigError" in line for line in hook.log())


def test_the_model_is_never_told(tmp_path: Path) -> None:
    """Whatever the event, a refused settings file never reaches the model's context nor
    refuses a call: the guard fails open."""
    hook = Hook(tmp_path, "max_strike = 9\n")
    for agent, (first, later) in SESSIONS.items():
        for payload in (first, later, first):
            assert not refused_or_noted(hook.answer(payload, "--agent", agent))


@pytest.mark.parametrize(
    ("flags", "named"),
    [(["--mode", "loud"], "mode must be one of"), (["--lock-timeout", "99"], "lock_timeout")],
)
def test_a_refused_flag_is_told_as_the_command_line_s(
    tmp_path: Path, flags: list[str], named: str
) -> None:
    """A value refused on the command line the CLI runs is said to be there, not in the
    file (which is fine)."""
    hook = Hook(tmp_path, "")
    message = hook.answer(claude_pre("ls", "t1"), *flags)["systemMessage"]
    assert f"the command line of `loopfuse hook`: {named}" in message
