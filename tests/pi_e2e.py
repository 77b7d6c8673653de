"""Run the real pi (``@mariozechner/pi-coding-agent``) headless against the fake model.

pi speaks OpenAI Chat Completions to a provider of ``~/.pi/agent/models.json`` (docs/
agent-clis-verified.md, "pi"): the fake model of :mod:`agent_model` answers it, with pi's
own shell tool, ``bash {"command"}`` (:class:`PiModel`). Each run has its own HOME (pi's
``~/.pi/agent``: models, extensions, sessions), XDG folders and TMPDIR under the test's
tmp_path, ``PI_OFFLINE=1`` and ``PI_SKIP_VERSION_CHECK=1``: nothing leaves the machine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_clis import Home, Run, executable, run_process
from agent_model import FakeModel, Reply

PI_SHELL = ("bash", "command")
"""pi's shell tool, and the argument that holds the command line."""
PI_OFFLINE = {"PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1"}


class PiModel(FakeModel):
    """:class:`FakeModel` whose Chat Completions turns are pi's: a request offering pi's
    ``bash`` tool is the agent's turn, answered with ``bash`` calls (the other routes are
    the base class's)."""

    def chat(self, path: str, body: Any) -> tuple[int, str, bytes]:
        name, argument = PI_SHELL
        reply = self.play(path, body, name) or Reply(text="OK")
        calls = [
            {
                "index": index,
                "id": f"call_{self.next_id():020d}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps({argument: command})},
            }
            for index, command in enumerate(reply.commands)
        ]
        message: dict[str, Any] = {"role": "assistant", "content": None if calls else reply.text}
        if calls:
            message["tool_calls"] = calls
        finish = "tool_calls" if calls else "stop"
        head = {
            "id": f"chatcmpl-{self.next_id()}",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "fake-model",
        }
        usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
        chunks = [
            {**head, "choices": [{"index": 0, "delta": message, "finish_reason": None}]},
            {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
            {**head, "choices": [], "usage": usage},
        ]
        stream = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
        return 200, "text/event-stream", stream.encode()


def agent_dir(home: Home) -> Path:
    """pi's ``~/.pi/agent`` in the isolated home."""
    return home.home / ".pi" / "agent"


def pi_settings(home: Home, model_url: str) -> None:
    """pi's provider of the fake model (``models.json``), as a user points pi at a local
    OpenAI-compatible server."""
    provider = {
        "baseUrl": f"{model_url}/v1",
        "api": "openai-completions",
        "apiKey": "dummy",
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [{"id": "fake-model", "name": "Fake", "reasoning": False}],
    }
    folder = agent_dir(home)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "models.json").write_text(json.dumps({"providers": {"fake": provider}}))


def pi_environment(home: Home) -> dict[str, str]:
    """The environment of a pi run (the model is named in ``models.json``)."""
    env = home.environment("http://127.0.0.1:9", "pi")
    for other in ("GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GEMINI_CLI_TRUST_WORKSPACE"):
        env.pop(other, None)  # Home.environment's defaults are Gemini CLI's
    return env | PI_OFFLINE


def run_pi(home: Home, model: FakeModel, prompt: str = "Fix the build.", *extra: str) -> Run:
    """Run pi headless (``pi -p``) on ``prompt`` in the workspace, against ``model``."""
    cli = executable("pi")
    assert cli is not None, "LOOPFUSE_REQUIRE_AGENT_CLIS=1 but pi is missing"
    pi_settings(home, model.url)
    argv = [str(cli), "-p", "--provider", "fake", "--model", "fake-model", *extra, prompt]
    return run_process("pi", argv, home.workspace, pi_environment(home))
