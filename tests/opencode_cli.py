"""Run the real OpenCode (``opencode-ai``, pinned in ``.ci/agent-clis``) headless, offline,
isolated, against the fake model of :mod:`agent_model`: what tests/test_e2e_opencode.py
and benchmarks/bench_opencode.py share.

Each run gets its own HOME and XDG folders (:class:`agent_clis.Home`). As soon as a
plugin is there, OpenCode npm-installs its plugin SDK into each of its config folders at
startup, unless the folder already has it, and waits for that (over a minute when the
registry is unreachable): :func:`with_plugin_sdk` gives a folder the pinned
``@opencode-ai/plugin`` (a link) and the lock file npm would write, so nothing is
installed (and the registry is pointed at a closed port, so that nothing could be
fetched if that changed).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_clis import BIN, CLIS_DIR, INSTALL, REQUIRED, Home, run_process
from agent_model import FakeModel, Reply

OPENCODE = BIN / "opencode"
SDK = CLIS_DIR / "node_modules" / "@opencode-ai" / "plugin"
needs_opencode = pytest.mark.skipif(
    not OPENCODE.exists() and not REQUIRED,
    reason=f"the opencode CLI is not installed (run: {INSTALL})",
)

# OpenCode's switches for what it would fetch at startup, all off; and a registry that
# refuses at once, should it try to install anything.
OFFLINE = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "npm_config_registry": "http://127.0.0.1:9/",
}
READ = "read:"
"""A command of a script that starts so is a call of OpenCode's ``read`` tool (the path
after it), not of ``bash``."""


class OpenCodeModel(FakeModel):
    """The fake model, speaking OpenCode's tools: each command of a turn is a ``bash``
    call (``{"command", "description"}``), or a ``read`` call (``{"filePath"}``) for a
    command starting :data:`READ`."""

    def chat(self, path: str, body: Any) -> tuple[int, str, bytes]:
        reply = self.play(path, body, "bash") or Reply(text="OK")
        calls = []
        for index, command in enumerate(reply.commands):
            if command.startswith(READ):
                name, arguments = "read", {"filePath": command.removeprefix(READ)}
            else:
                name, arguments = "bash", {"command": command, "description": "Run a command"}
            function = {"name": name, "arguments": json.dumps(arguments)}
            calls.append(
                {
                    "index": index,
                    "id": f"call_{self.next_id():020d}",
                    "type": "function",
                    "function": function,
                }
            )
        message: dict[str, Any] = {"role": "assistant", "content": None if calls else reply.text}
        if calls:
            message["tool_calls"] = calls
        head = {"id": f"chatcmpl-{self.next_id()}", "object": "chat.completion.chunk"}
        head |= {"created": 0, "model": "fake-model"}
        usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
        finish = "tool_calls" if calls else "stop"
        chunks = [
            {**head, "choices": [{"index": 0, "delta": message, "finish_reason": None}]},
            {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
            {**head, "choices": [], "usage": usage},
        ]
        stream = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
        return 200, "text/event-stream", stream.encode()


def prepared(root: Path) -> Home:
    """An isolated home under ``root`` whose OpenCode folders (the user's, the
    workspace's ``.opencode``) have the plugin SDK, as after OpenCode's first start."""
    home = Home(root).make()
    for folder in (user_folder(home), home.workspace / ".opencode"):
        with_plugin_sdk(folder)
    return home


def user_folder(home: Home) -> Path:
    """The user's OpenCode folder ($XDG_CONFIG_HOME/opencode)."""
    return home.root / "config" / "opencode"


def with_plugin_sdk(folder: Path) -> None:
    """``folder`` with OpenCode's plugin SDK as OpenCode would install it there (the
    pinned package, linked), so that it installs nothing at startup."""
    (folder / "node_modules" / "@opencode-ai").mkdir(parents=True, exist_ok=True)
    (folder / "node_modules" / "@opencode-ai" / "plugin").symlink_to(SDK)
    version = json.loads((SDK / "package.json").read_text(encoding="utf-8"))["version"]
    dependencies = {"@opencode-ai/plugin": version}
    (folder / "package.json").write_text(json.dumps({"dependencies": dependencies}))
    lock = {
        "name": folder.name,
        "lockfileVersion": 3,
        "requires": True,
        "packages": {
            "": {"dependencies": dependencies},
            "node_modules/@opencode-ai/plugin": {"version": version, "link": True},
        },
    }
    (folder / "package-lock.json").write_text(json.dumps(lock))


def environment(home: Home, model_url: str) -> dict[str, str]:
    """The run's environment: the isolated home's, OpenCode's offline switches."""
    env = home.environment(model_url, "opencode")
    return {k: v for k, v in env.items() if not k.startswith(("GEMINI", "GOOGLE"))} | OFFLINE


def write_config(home: Home, model_url: str) -> None:
    """``opencode.json`` in the workspace: the fake model as an OpenAI-compatible
    provider, its shell and editors allowed without asking."""
    config = {
        "model": "fake/fake-model",
        "autoupdate": False,
        "share": "disabled",
        "permission": {"bash": "allow", "edit": "allow"},
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {"baseURL": f"{model_url}/v1", "apiKey": "dummy"},
                "models": {"fake-model": {"name": "Fake Model", "tool_call": True}},
            }
        },
    }
    (home.workspace / "opencode.json").write_text(json.dumps(config), encoding="utf-8")


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def run_opencode(
    home: Home,
    model: FakeModel,
    prompt: str = "Fix the build.",
    extra: Mapping[str, str] | None = None,
) -> Run:
    """``opencode run --format json PROMPT`` in the workspace, against ``model`` (with
    ``extra`` in its environment)."""
    write_config(home, model.url)
    started = time.monotonic()
    argv = [str(OPENCODE), "run", "--format", "json", prompt]
    ran = run_process(
        "opencode", argv, home.workspace, environment(home, model.url) | dict(extra or {})
    )
    return Run(ran.returncode, ran.stdout, ran.stderr, time.monotonic() - started)
