"""End to end: GitHub Copilot CLI (``@github/copilot``, pinned in ``.ci/agent-clis``),
headless, offline, against a fake model on loopback.

Copilot CLI runs as a user runs it: ``copilot -p … --allow-all-tools`` with a model of
their own (``COPILOT_OFFLINE=true``, ``COPILOT_PROVIDER_BASE_URL``: OpenAI Chat
Completions, streamed), an isolated HOME, ``COPILOT_HOME`` and XDG folders per test; only
its unpacked program (238 MB, which its npm launcher writes under ``XDG_CACHE_HOME`` on
first use) is shared by the tests of one pytest session, in a folder of the session's
own tmp. First what the hook relies on, with a hook that only logs what it is given;
then ``loopfuse hook``, installed by ``loopfuse init --agent copilot``, on the runs issue
28 names.

Without the package these tests skip, saying how to install it; in CI
(``LOOPFUSE_REQUIRE_AGENT_CLIS=1``) they fail.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_clis import RUN_TIMEOUT, Home, Run, executable, needs
from agent_model import FakeModel, Reply, same_command, strings

pytestmark = needs("copilot")

SHELL = "bash"  # Copilot CLI's shell tool, and the argument that holds the command line
READ = "read_bash"  # its wait on a command still running


class CopilotModel(FakeModel):
    """The fake model, speaking to Copilot CLI: Chat Completions, streamed, whose turns
    are the requests offering its ``bash`` tool. A turn's commands are ``bash`` calls
    (with the reply's ``arguments``: ``mode: "async"`` starts one in the background);
    ``poll`` reads the command the last answer says still runs (``read_bash``)."""

    def chat(self, path: str, body: Any) -> tuple[int, str, bytes]:
        reply = self.play(path, body, SHELL) or Reply(text="OK")
        calls: list[tuple[str, dict[str, Any]]] = [
            (SHELL, {"command": command, "description": "Run a command", **dict(reply.arguments)})
            for command in reply.commands
        ]
        shells = re.findall(r"shellId: (\d+)", " ".join(strings(body)))
        if reply.poll and shells:
            calls.append((READ, {"shellId": shells[-1], "delay": 1}))
        message: dict[str, Any] = {"role": "assistant", "content": None if calls else reply.text}
        if calls:
            message["tool_calls"] = [
                {
                    "index": index,
                    "id": f"call_{self.next_id():020d}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
                for index, (name, arguments) in enumerate(calls)
            ]
        head = {"id": f"chatcmpl-{self.next_id()}", "object": "chat.completion.chunk"}
        head |= {"created": 0, "model": "fake-model"}
        chunks = [
            {**head, "choices": [{"index": 0, "delta": message, "finish_reason": None}]},
            {
                **head,
                "choices": [
                    {"index": 0, "delta": {}, "finish_reason": "tool_calls" if calls else "stop"}
                ],
            },
            {
                **head,
                "choices": [],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
            },
        ]
        stream = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks)
        return 200, "text/event-stream", (stream + "data: [DONE]\n\n").encode()


@pytest.fixture(scope="session")
def program_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """``XDG_CACHE_HOME`` of every Copilot run of this pytest session: its launcher
    unpacks the program there once (238 MB), not once per test; removed at the end."""
    cache = tmp_path_factory.mktemp("copilot-cache")
    yield cache
    subprocess.run(["rm", "-rf", str(cache)], check=False)


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home(tmp_path).make()


def copilot_home(home: Home) -> Path:
    """``COPILOT_HOME``: Copilot CLI's settings, logs and session files."""
    return home.home / ".copilot"


def environment(home: Home, model_url: str, cache: Path, trusted: bool = False) -> dict[str, str]:
    """The environment of a run (the shared one of tests/agent_clis.py, less other
    CLIs' keys): Copilot CLI offline with the fake model as its provider, its updates
    and telemetry off; ``trusted``: the workspace is a trusted folder
    (``COPILOT_ALLOW_ALL``), where Copilot runs the project's hooks."""
    env = {
        key: value
        for key, value in home.environment(model_url, "copilot").items()
        if not key.startswith(("GEMINI_", "GOOGLE_"))
    }
    env |= {
        "XDG_CACHE_HOME": str(cache),
        "COPILOT_HOME": str(copilot_home(home)),
        "COPILOT_OFFLINE": "true",
        "COPILOT_PROVIDER_BASE_URL": f"{model_url}/v1",
        "COPILOT_PROVIDER_TYPE": "openai",
        "COPILOT_PROVIDER_API_KEY": "dummy",
        "COPILOT_MODEL": "fake-model",
        "COPILOT_AUTO_UPDATE": "false",
    }
    if trusted:
        env["COPILOT_ALLOW_ALL"] = "true"
    return env


def run_copilot(
    home: Home, model_url: str, cache: Path, *, trusted: bool = False, prompt: str = "Fix it."
) -> Run:
    """Run Copilot CLI headless on ``prompt`` in the workspace, against the fake model."""
    cli = executable("copilot")
    assert cli is not None, "LOOPFUSE_REQUIRE_AGENT_CLIS=1 but the copilot CLI is missing"
    argv = [
        str(cli),
        "-p",
        prompt,
        "--allow-all-tools",
        "--output-format",
        "json",
        "--disable-client-telemetry",
    ]
    # Its own process group: a stuck run is ended with the program its launcher started.
    process = subprocess.Popen(
        argv,
        cwd=home.workspace,
        env=environment(home, model_url, cache, trusted),
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
        pytest.fail(f"copilot ran over {RUN_TIMEOUT} s; stderr: {stderr[-2000:]}")
    return Run(process.returncode, stdout, stderr)


# --- what the hook relies on ---------------------------------------------------------------

EVENTS = ("preToolUse", "postToolUse", "postToolUseFailure", "userPromptSubmitted")


def logging_hooks(home: Home, exit_status: int = 0) -> Path:
    """Copilot CLI's user hooks (``$COPILOT_HOME/settings.json``): each event's input
    appended to a log, one JSON line each with the event's name first; the hook exits
    ``exit_status``."""
    log = home.root / "hook.log"
    script = home.root / "log-hook.sh"
    line = f"{{ printf '%s ' \"$1\"; tr -d '\\n'; echo; }} >> '{log}'"
    script.write_text(f"#!/bin/sh\n{line}\nexit {exit_status}\n", encoding="utf-8")
    script.chmod(0o755)
    entries = {
        event: [{"type": "command", "bash": f"{script} {event}", "timeoutSec": 30}]
        for event in EVENTS
    }
    settings = copilot_home(home) / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"hooks": entries}), encoding="utf-8")
    return log


def logged(log: Path) -> list[tuple[str, dict[str, Any]]]:
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return [(line.split(" ", 1)[0], json.loads(line.split(" ", 1)[1])) for line in lines]


def tool_answers(body: Any) -> list[str]:
    """The answers of the tool calls in one request, in order."""
    messages = body.get("messages") if isinstance(body, dict) else None
    return [
        m["content"]
        for m in messages or ()
        if isinstance(m, dict) and m.get("role") == "tool" and isinstance(m.get("content"), str)
    ]


@pytest.mark.slow
def test_a_hook_sees_each_call_before_and_after_told_apart_by_its_input(
    home: Home, program_cache: Path
) -> None:
    """The contract ``loopfuse hook`` is written against, on the installed CLI: the
    user's prompt, then per call its input before and its answer after, the events told
    apart by their keys alone (no event name in the input); the answer ends with a shell
    number new on every call; a command that exits non-zero is a success."""
    log = logging_hooks(home)
    with CopilotModel(same_command("cat missing.txt", turns=2)) as model:
        run = run_copilot(home, model.url, program_cache)
    assert run.returncode == 0, run.stderr[-2000:]
    seen = logged(log)
    assert [event for event, _ in seen] == [EVENTS[3], *[EVENTS[0], EVENTS[1]] * 2]
    assert len({payload["sessionId"] for _, payload in seen}) == 1
    assert all("hook_event_name" not in payload for _, payload in seen)
    assert [sorted({"toolResult", "error", "prompt"} & set(p)) for _, p in seen] == [
        ["prompt"], [], ["toolResult"], [], ["toolResult"]
    ]  # fmt: skip
    results = [p["toolResult"] for event, p in seen if event == "postToolUse"]
    assert [r["resultType"] for r in results] == ["success", "success"]
    assert [r["textResultForLlm"].rsplit("\n", 1)[-1] for r in results] == [
        "<shellId: 0 completed with exit code 1>",
        "<shellId: 1 completed with exit code 1>",
    ]
    assert [r.turn for r in model.turns] == [0, 1, 2]  # two calls, then the answer
    assert "No such file or directory" in tool_answers(model.turns[1].body)[0]


@pytest.mark.slow
def test_a_hook_that_exits_non_zero_refuses_the_call(home: Home, program_cache: Path) -> None:
    """Why ``loopfuse hook`` must exit 0 whatever goes wrong in it, for Copilot CLI: any
    other exit status refuses the call, and the model reads only that a hook failed."""
    logging_hooks(home, exit_status=1)
    with CopilotModel(same_command("echo ran >> ran.log", turns=1)) as model:
        run = run_copilot(home, model.url, program_cache)
    assert run.returncode == 0, run.stderr[-2000:]
    assert not (home.workspace / "ran.log").exists()
    [answer] = tool_answers(model.turns[1].body)
    assert answer.startswith("Denied by preToolUse hook")
