"""End to end: the real coding-agent CLIs, headless, against a fake model on loopback.

First what the hook relies on, with a hook that only logs what it is given: each CLI
calls it before and after every shell call with the documented payload, and the model's
next request carries the call's result. Then ``loopfuse hook``, installed as users
install it, on the runs the issue names.

The CLIs are the pinned npm packages of ``.ci/agent-clis`` (see tests/agent_clis.py);
without them these tests skip, saying how to install them (in CI they fail).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_clis import AGENTS, HOOK_EVENTS, Home, base_settings, needs, run_agent, write_hooks
from agent_model import FakeModel, same_command, strings

# Codex runs a hook only once the user trusted it (`loopfuse init` does that in its config);
# a hook written by hand is trusted for one run with this flag.
TRUST_CODEX_HOOKS = "--dangerously-bypass-hook-trust"


def each_agent() -> list[Any]:
    """The three CLIs as parameters, each skipped (or failed in CI) when not installed."""
    return [pytest.param(agent, marks=needs(agent), id=agent) for agent in AGENTS]


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home(tmp_path).make()


def logging_hook(home: Home) -> Path:
    """A hook that appends each payload it reads to a log, one JSON line each, and allows."""
    log = home.root / "hook.log"
    script = home.root / "log-hook.sh"
    script.write_text(f"#!/bin/sh\n{{ tr -d '\\n'; echo; }} >> '{log}'\n", encoding="utf-8")
    script.chmod(0o755)
    return script


def payloads(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line]


@pytest.mark.parametrize("agent", each_agent())
def test_a_hook_sees_each_shell_call_before_and_after_and_the_model_its_result(
    agent: str, home: Home
) -> None:
    """The contract ``loopfuse hook`` is written against, checked on the installed CLI:
    the before-call event with the command line, then the after-call event (Claude's
    failure event for a failing command), for each call; the model reads the result."""
    hook = logging_hook(home)
    base_settings(home, agent)
    write_hooks(home, agent, str(hook))
    trust = (TRUST_CODEX_HOOKS,) if agent == "codex" else ()
    with FakeModel(same_command("cat missing.txt", turns=2)) as model:
        run = run_agent(agent, home, model.url, "Fix the build.", *trust)
    assert run.returncode == 0, run.stderr
    seen = payloads(home.root / "hook.log")
    before, after = HOOK_EVENTS[agent][0], HOOK_EVENTS[agent][-1]
    assert [p["hook_event_name"] for p in seen] == [before, after] * 2
    assert all(p["tool_input"]["command"] == "cat missing.txt" for p in seen)
    assert len({p["session_id"] for p in seen}) == 1
    assert [r.turn for r in model.turns] == [0, 1, 2]  # two calls, then the answer
    assert any("No such file or directory" in text for text in strings(model.turns[1].body))


@needs("codex")
def test_codex_skips_a_hook_the_user_has_not_trusted(home: Home) -> None:
    """Why ``loopfuse init`` must make Codex trust the hook: an untrusted one never runs,
    and nothing says so."""
    write_hooks(home, "codex", str(logging_hook(home)))
    with FakeModel(same_command("cat missing.txt", turns=1)) as model:
        run = run_agent("codex", home, model.url)
    assert run.returncode == 0, run.stderr
    assert len(model.turns) == 2  # the call ran
    assert not (home.root / "hook.log").exists()
