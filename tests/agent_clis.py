"""Run the real coding-agent CLIs headless against :mod:`agent_model`, isolated.

The CLIs are the npm packages pinned in ``.ci/agent-clis/package.json``, installed by
``npm ci --prefix .ci/agent-clis`` (``.ci/run`` does it). Each run gets its own HOME,
CODEX_HOME and XDG directories under the test's tmp_path, an environment that holds no
key or proxy of the machine's, the CLIs' switches for telemetry and updates off, and a
model on loopback: nothing leaves the machine.

A missing CLI skips its tests, saying how to install it; in CI
(``LOOPFUSE_REQUIRE_AGENT_CLIS=1``) it is a failure.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agent_model import FakeModel, strings
from loopfuse.cli.hook_state import SessionState, load

ROOT = Path(__file__).resolve().parent.parent
CLIS_DIR = ROOT / ".ci" / "agent-clis"
BIN = CLIS_DIR / "node_modules" / ".bin"
INSTALL = "npm ci --prefix .ci/agent-clis"
# CI sets LOOPFUSE_REQUIRE_AGENT_CLIS=1: there a missing CLI is a failure, not a skip.
REQUIRED = os.environ.get("LOOPFUSE_REQUIRE_AGENT_CLIS") == "1"
AGENTS = ("claude", "codex", "gemini", "qwen")
# The CLI's executable under node_modules/.bin.
EXECUTABLES = {"claude": "claude", "codex": "codex", "gemini": "gemini", "qwen": "qwen"}
EXECUTABLES["pi"] = "pi"  # tests/pi_e2e.py
RUN_TIMEOUT = 150.0  # seconds; a run that takes this long is stuck (the model is bounded)


def executable(agent: str) -> Path | None:
    """The installed CLI, or None."""
    path = BIN / EXECUTABLES[agent]
    return path if path.exists() else None


def needs(agent: str) -> pytest.MarkDecorator:
    """Skip (locally) or fail (in CI) when ``agent``'s CLI is not installed."""
    return pytest.mark.skipif(
        executable(agent) is None and not REQUIRED,
        reason=f"the {agent} CLI is not installed (run: {INSTALL})",
    )


@dataclass
class Home:
    """The isolated places of one run: HOME, the CLIs' homes, XDG dirs, the workspace."""

    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def codex_home(self) -> Path:
        return self.home / ".codex"

    @property
    def workspace(self) -> Path:
        return self.root / "work"

    @property
    def state(self) -> Path:
        """XDG_STATE_HOME."""
        return self.root / "state"

    def make(self) -> Home:
        for path in (self.home, self.codex_home, self.workspace, self.state):
            path.mkdir(parents=True, exist_ok=True)
        for name in ("config", "cache", "data"):
            (self.root / name).mkdir(exist_ok=True)
        return self

    def environment(self, model_url: str, agent: str) -> dict[str, str]:
        """The environment of a run: the machine's PATH and locale, nothing else of it."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": str(self.home),
            "CODEX_HOME": str(self.codex_home),
            "XDG_CONFIG_HOME": str(self.root / "config"),
            "XDG_CACHE_HOME": str(self.root / "cache"),
            "XDG_DATA_HOME": str(self.root / "data"),
            "XDG_STATE_HOME": str(self.state),
            "TMPDIR": str(self.root),
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
            "NO_COLOR": "1",
            "CI": "1",
        }
        if "PYTHONPATH" in os.environ:  # the source tree under test, for loopfuse's hook
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        if agent == "claude":
            env |= {
                "ANTHROPIC_BASE_URL": model_url,
                "ANTHROPIC_API_KEY": "dummy",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_AUTOUPDATER": "1",
                "DISABLE_TELEMETRY": "1",
                "DISABLE_ERROR_REPORTING": "1",
            }
        elif agent == "codex":
            env |= {"FAKE_API_KEY": "dummy"}
        elif agent == "qwen":
            env |= {
                "OPENAI_API_KEY": "dummy",
                "OPENAI_BASE_URL": f"{model_url}/v1",
                "OPENAI_MODEL": "fake-model",
            }
        else:
            env |= {
                "GEMINI_API_KEY": "dummy",
                "GOOGLE_GEMINI_BASE_URL": model_url,
                "GEMINI_CLI_TRUST_WORKSPACE": "true",
            }
        return env


def settings_file(home: Home, agent: str) -> Path:
    """Where the user's hook settings of ``agent`` live (what ``loopfuse init`` edits)."""
    return {
        "claude": home.home / ".claude" / "settings.json",
        "codex": home.codex_home / "hooks.json",
        "gemini": home.home / ".gemini" / "settings.json",
        "qwen": home.home / ".qwen" / "settings.json",
    }[agent]


def update_json(path: Path, change: dict[str, Any]) -> None:
    """Merge ``change`` into the JSON object in ``path`` (top-level keys; created if absent)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    current = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    path.write_text(json.dumps(current | change, indent=2), encoding="utf-8")


def base_settings(home: Home, agent: str, own_loop_detection: bool = False) -> None:
    """What each CLI needs to run headless offline, besides hooks: Gemini's auth type
    (else it exits 41), its telemetry and updates off, and its own loop detector off
    unless ``own_loop_detection`` (so that what stops a loop is the hook); Qwen Code's
    OpenAI-compatible auth, model, telemetry and updates off (its own loop detector cannot
    be turned off: it halts a run at the 5th identical call)."""
    if agent == "gemini":
        update_json(
            settings_file(home, agent),
            {
                "security": {"auth": {"selectedType": "gemini-api-key"}},
                "privacy": {"usageStatisticsEnabled": False},
                "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
                "model": {"disableLoopDetection": not own_loop_detection},
            },
        )
    elif agent == "qwen":
        update_json(
            settings_file(home, agent),
            {
                "security": {"auth": {"selectedType": "openai"}},
                "model": {"name": "fake-model"},
                "privacy": {"usageStatisticsEnabled": False},
                "general": {"enableAutoUpdate": False},
            },
        )


# The hook events each CLI fires before and after a tool call.
HOOK_EVENTS = {
    "claude": ("PreToolUse", "PostToolUse", "PostToolUseFailure"),
    "codex": ("PreToolUse", "PostToolUse"),
    "gemini": ("BeforeTool", "AfterTool"),
    "qwen": ("PreToolUse", "PostToolUse", "PostToolUseFailure"),
}


def write_hooks(home: Home, agent: str, command: str) -> None:
    """Register ``command`` for every tool event of ``agent``, in the user's settings."""
    hooks = {
        event: [{"matcher": "*", "hooks": [{"type": "command", "command": command}]}]
        for event in HOOK_EVENTS[agent]
    }
    update_json(settings_file(home, agent), {"hooks": hooks})


@dataclass
class Run:
    """A finished CLI run."""

    returncode: int
    stdout: str
    stderr: str


@dataclass
class HookedRun:
    """A CLI run with loopfuse's hook (or plugin) installed, and what the hook left: its
    state folder, its log, the one session it kept; the commands that really ran."""

    home: Home
    run: Run
    model: FakeModel

    hook_agent: ClassVar[str]
    """The hook's name for the CLI: its sessions are ``sessions/<hook_agent>-*.json``."""

    @property
    def state_dir(self) -> Path:
        return self.home.state / "loopfuse"

    def texts(self, turn: int) -> list[str]:
        """What the model read in the request of ``turn``."""
        return list(strings(self.model.turns[turn].body))

    def attempts(self) -> int:
        """How many times the failing command really ran."""
        log = self.home.workspace / "attempts.log"
        return len(log.read_text(encoding="utf-8").splitlines()) if log.exists() else 0

    def log_lines(self) -> list[str]:
        log = self.state_dir / "hook.log"
        return log.read_text(encoding="utf-8").splitlines() if log.exists() else []

    def session(self) -> SessionState:
        """The one session's state the hook kept."""
        files = sorted((self.state_dir / "sessions").glob(f"{self.hook_agent}-*.json"))
        assert len(files) == 1, files
        return load(str(files[0]))


def run_agent(
    agent: str, home: Home, model_url: str, prompt: str = "Fix the build.", *extra: str
) -> Run:
    """Run ``agent`` headless on ``prompt`` in the workspace, against the fake model."""
    cli = executable(agent)
    assert cli is not None, f"LOOPFUSE_REQUIRE_AGENT_CLIS=1 but the {agent} CLI is missing"
    if agent == "claude":
        argv = [str(cli), "-p", prompt, "--output-format", "json", "--allowedTools", "Bash"]
    elif agent == "codex":
        provider = (
            '{name="fake",base_url="' + model_url + '/v1",wire_api="responses",'
            'env_key="FAKE_API_KEY"}'
        )
        argv = [
            str(cli),
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "-c",
            "model_provider=fake",
            "-c",
            "model=fake-model",
            "-c",
            f"model_providers.fake={provider}",
            prompt,
        ]
    else:
        argv = [str(cli), "-p", prompt, "--output-format", "json", "--yolo"]
    return run_process(agent, [*argv, *extra], home.workspace, home.environment(model_url, agent))


def run_process(name: str, argv: list[str], cwd: Path, env: Mapping[str, str]) -> Run:
    """Run one CLI's ``argv`` headless (no stdin) in ``cwd`` with ``env``, to its end; a
    run over :data:`RUN_TIMEOUT` fails the test. Its own process group, so a stuck run is
    ended with every process it started (the npm launchers start the native binaries as
    children)."""
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"{name} ran over {RUN_TIMEOUT} s; stderr: {stderr[-2000:]}")
    return Run(process.returncode, stdout, stderr)


# --- GitHub Copilot CLI (its runs: tests/test_e2e_copilot.py) --------------------------------
EXECUTABLES["copilot"] = "copilot"
