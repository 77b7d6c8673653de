"""End to end: a settings file broken after ``loopfuse init`` switches the guard off, and
the user of the real CLI is told, once per session (issue 29 §2).

The hook fails open (every call runs, the model is told nothing of loopfuse) and its
first event of the session answers with ``systemMessage``: Claude Code keeps it in the
session as a hook message for the user, Gemini CLI prints it in the terminal (headless:
on stderr). Codex lists it as a ``warning:`` of the hook's run in its terminal UI only;
``codex exec`` prints no hook output, so there it is checked to fail open.

The CLIs and the fake model as in tests/test_agent_clis_e2e.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_clis import Home, base_settings, needs, run_agent
from agent_model import FakeModel, same_command, strings
from test_agent_clis_e2e import FAILING, TRUST_CODEX_HOOKS, GuardedRun, loopfuse_init

TOLD = "[loopfuse] The loop guard is OFF: its settings are refused"


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home(tmp_path).make()


def broken_after_install(agent: str, home: Home, turns: int) -> tuple[GuardedRun, Path]:
    """Install with a good settings file (``init`` checks it before it writes), misspell
    a key in it, then run the CLI on a model that asks for the same failing call."""
    config = home.root / "loopfuse.toml"
    config.write_text("max_strikes = 3\n", encoding="utf-8")
    base_settings(home, agent)
    said = loopfuse_init(home, agent, "--config", str(config))
    config.write_text("max_strike = 3\n", encoding="utf-8")
    trust = (TRUST_CODEX_HOOKS,) if agent == "codex" else ()
    assert (TRUST_CODEX_HOOKS in said) == (agent == "codex")
    with FakeModel(same_command(FAILING, turns)) as model:
        run = run_agent(agent, home, model.url, "Fix the build.", *trust)
    assert run.returncode == 0, run.stderr[-3000:]
    return GuardedRun(home, run, model, agent), config


def claude_hook_messages(home: Home) -> list[str]:
    """The hook messages for the user in Claude Code's transcripts of the run."""
    messages = []
    for path in (home.home / ".claude" / "projects").glob("*/*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            entry: dict[str, Any] = json.loads(line)
            attachment = entry.get("attachment")
            if isinstance(attachment, dict) and attachment.get("type") == "hook_system_message":
                messages.append(str(attachment.get("content")))
    return messages


def assert_fails_open(done: GuardedRun, turns: int) -> None:
    """Every call ran, the agent went on to its answer, the model saw nothing of loopfuse."""
    assert done.attempts() == turns
    assert len(done.model.turns) == turns + 1
    assert not any("loopfuse" in text for r in done.model.requests for text in strings(r.body))


@needs("claude")
def test_claude_code_shows_the_user_the_refused_settings_once(home: Home) -> None:
    turns = 5
    done, config = broken_after_install("claude", home, turns)
    assert_fails_open(done, turns)
    told = [m for m in claude_hook_messages(home) if TOLD in m]
    assert len(told) == 1, told
    assert f"{config}: unknown key 'max_strike' (did you mean max_strikes?)" in told[0]


@pytest.mark.slow
@needs("gemini")
def test_gemini_cli_prints_the_refused_settings_once(home: Home) -> None:
    turns = 5
    done, config = broken_after_install("gemini", home, turns)
    assert_fails_open(done, turns)
    told = [line for line in done.run.stderr.splitlines() if TOLD in line]
    assert len(told) == 1, done.run.stderr[-2000:]
    assert f"{config}: unknown key 'max_strike'" in told[0]


@pytest.mark.slow
@needs("codex")
def test_codex_fails_open_with_refused_settings(home: Home) -> None:
    turns = 4
    done, _ = broken_after_install("codex", home, turns)
    assert_fails_open(done, turns)
    assert sum("ConfigError" in line for line in done.log_lines()) >= turns
