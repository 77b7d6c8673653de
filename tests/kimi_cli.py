"""Run the real Kimi Code (``@moonshot-ai/kimi-code``, pinned in ``.ci/agent-clis``)
headless against :mod:`agent_model`, isolated, as :mod:`agent_clis` runs the others.

Kimi Code needs node >= 22.19 (on node 20 it dies at import): the pinned ``node``
package's ``bin`` goes first on the run's PATH, so that the machine's node is left to the
other CLIs. Its settings are ``$HOME/.kimi-code/config.toml``: a ``type = "openai"``
provider (Chat Completions) at the fake model's base URL, and the model, with its
context size (required). ``kimi -p`` runs the prompt in its "auto" permission mode (every
tool allowed) and exits when the model answers with text.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from agent_clis import BIN, CLIS_DIR, INSTALL, REQUIRED, Home, Run, run_process
from agent_model import FakeModel, Reply

NODE22 = CLIS_DIR / "node_modules" / "node" / "bin"
KIMI = BIN / "kimi"
SHELL = ("Bash", "command")  # Kimi Code's shell tool, and its command argument


def installed() -> bool:
    """Whether Kimi Code and the node it needs are installed."""
    return KIMI.exists() and (NODE22 / "node").exists()


def needs_kimi() -> pytest.MarkDecorator:
    """Skip (locally) or fail (in CI, ``LOOPFUSE_REQUIRE_AGENT_CLIS=1``) without them."""
    return pytest.mark.skipif(
        not installed() and not REQUIRED,
        reason=f"Kimi Code or the node 22 it needs is not installed (run: {INSTALL})",
    )


def kimi_home(home: Home) -> Path:
    """Where Kimi Code keeps its settings and sessions in the isolated home."""
    return home.home / ".kimi-code"


def config_file(home: Home) -> Path:
    return kimi_home(home) / "config.toml"


def write_config(home: Home, model_url: str, extra: str = "") -> None:
    """The settings of a headless offline run: the fake model as its default model
    (``extra``, TOML, appended: hooks written by hand)."""
    config = config_file(home)
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        'default_model = "fake"\n\n'
        "[providers.fake]\n"
        'type = "openai"\n'
        f'base_url = "{model_url}/v1"\n'
        'api_key = "dummy"\n\n'
        "[models.fake]\n"
        'provider = "fake"\n'
        'model = "fake-model"\n'
        "max_context_size = 128000\n" + extra,
        encoding="utf-8",
    )


def environment(home: Home) -> dict[str, str]:
    """The run's environment: node 22 first on PATH, Kimi Code's updates and telemetry
    off, the rest as :meth:`Home.environment`."""
    env = home.environment("http://127.0.0.1:9", "kimi")
    for other in ("GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GEMINI_CLI_TRUST_WORKSPACE"):
        env.pop(other, None)  # Home.environment's default, for another CLI
    env["PATH"] = f"{NODE22}{os.pathsep}{env['PATH']}"
    env |= {"KIMI_CODE_NO_AUTO_UPDATE": "1", "KIMI_DISABLE_TELEMETRY": "1"}
    return env


def run_kimi(home: Home, prompt: str = "Fix the build.") -> Run:
    """Run ``kimi -p`` on ``prompt`` in the workspace (settings already written)."""
    assert installed(), "LOOPFUSE_REQUIRE_AGENT_CLIS=1 but Kimi Code (or node 22) is missing"
    argv = [str(KIMI), "-p", prompt, "--output-format", "stream-json"]
    return run_process("kimi", argv, home.workspace, environment(home))


class KimiModel(FakeModel):
    """:class:`~agent_model.FakeModel` whose Chat Completions turns call Kimi Code's
    shell tool (``Bash {command, description}``)."""

    def chat(self, path: str, body: Any) -> tuple[int, str, bytes]:
        name, argument = SHELL
        reply = self.play(path, body, name) or Reply(text="OK")
        calls = [
            {
                "index": index,
                "id": f"call_{self.next_id():020d}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": json.dumps({argument: command, "description": "Run a command"}),
                },
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
        chunks = [
            {**head, "choices": [{"index": 0, "delta": message, "finish_reason": None}]},
            {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
            {
                **head,
                "choices": [],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
            },
        ]
        stream = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
        return 200, "text/event-stream", stream.encode()
