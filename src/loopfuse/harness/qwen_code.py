"""Qwen Code (Alibaba's terminal coding agent, a fork of Gemini CLI): its tools, and how
its answers fail.

Facts observed with Qwen Code 0.24.4 (docs/agent-clis-verified.md, "Qwen Code"):

- its tools keep Gemini CLI's ids where it kept the tool: ``run_shell_command`` runs a
  command line; ``read_file``, ``list_directory``, ``glob`` read;
  ``edit``, ``write_file`` are its editors; ``web_fetch`` reads the web. Its own:
  ``grep_search`` (reads), ``web_search`` (costly), ``todo_write``;
- a shell answer is Gemini CLI's frame (``Command:``, ``Output:``, ``Error: (none)``,
  ``Exit Code: N``, ``Signal:``, ``Process Group PGID:``), so its conventions are
  :mod:`~loopfuse.harness.gemini_cli`'s, reused, not copied; a command that exits non-zero
  comes to a hook as ``PostToolUseFailure`` with that frame as its ``error``;
- its session files keep Gemini's ``functionResponse.response`` ``{"output"|"error"}``
  and a ``toolCallResult.status``.

>>> HARNESS.kind("grep_search", {"pattern": "x"}), HARNESS.kind("run_shell_command", {})
(<ToolKind.READ: 'read'>, <ToolKind.SHELL: 'shell'>)
>>> HARNESS.failed("run_shell_command", "Command: x\\nError: (none)\\nExit Code: 2\\n")
True

Its hooks (:data:`CLI`): Claude Code's events (:mod:`~loopfuse.harness.json_hooks`), in
``~/.qwen/settings.json`` or a project's ``.qwen/settings.json`` (comments allowed).

Its transcripts (:data:`SESSIONS`, 0.24.4): ``~/.qwen/projects/<cwd>/chats/<session>.jsonl``,
replayed as Gemini ``contents``: one record a line, Claude Code's envelope (``uuid``,
``parentUuid``, ``sessionId``) around Gemini's messages: ``user``, ``assistant``
(``message.parts`` with ``functionCall``) and ``tool_result`` (``functionResponse``,
``{"output"}`` or ``{"error"}``) are the conversation, the answers of one turn's calls
one message; ``system`` records (telemetry, snapshots) are not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Final

from loopfuse.harness import gemini_cli
from loopfuse.harness.agent_cli import NotAUserPrompt, reader_names
from loopfuse.harness.base import Tool, ToolKind
from loopfuse.harness.json_hooks import JsonHooksCli

if TYPE_CHECKING:
    from pathlib import Path

    from loopfuse.harness.agent_cli import HookInstaller

__all__ = ["CLI", "HARNESS", "QwenCodeCli", "exit_code"]

exit_code = gemini_cli.exit_code

# Gemini CLI's tools Qwen Code kept under the same id (its search and todo tools it renamed).
_KEPT: Final = frozenset(
    {
        "run_shell_command",
        "read_file",
        "list_directory",
        "glob",
        "edit",
        "write_file",
        "web_fetch",
        "save_memory",
    }
)

HARNESS: Final = dataclasses.replace(
    gemini_cli.HARNESS,
    name="qwen_code",
    title="Qwen Code",
    tools=(
        *(tool for tool in gemini_cli.HARNESS.tools if tool.name in _KEPT),
        Tool("grep_search", ToolKind.READ),
        Tool("web_search", ToolKind.COSTLY),
        Tool("todo_write", ToolKind.OTHER),
    ),
)
"""Qwen Code's tools and conventions (Gemini CLI's, but for its own tool ids)."""


class QwenCodeCli(JsonHooksCli):
    """Qwen Code's hooks: Claude Code's events (``PreToolUse``, ``PostToolUse``,
    ``PostToolUseFailure``, ``UserPromptSubmit``), with Gemini CLI's answers: the
    ``tool_response.llmContent`` after a success, ``error`` after a failure (a command
    that exited non-zero included), both in Gemini CLI's shell frame. Its tool events
    carry the model's call id (``tool_call_id``) beside its own ``tool_use_id``, and its
    prompt ids end ``########N``.

    **A hook cannot end a Qwen Code session**: it ignores ``continue: false`` from
    ``PreToolUse``, and from ``PostToolUse`` puts the stop reason in place of the call's
    answer (so neither is sent); its own detector halts a session at the 5th identical
    call, so loopfuse refuses by the 4th. It fires ``UserPromptSubmit`` with an empty
    ``prompt`` each time it sends the model the answers of its calls (observed with
    0.24.4; the user's own prompt carries its text and ``submitted_prompt``): not a new
    run (:class:`~loopfuse.harness.agent_cli.NotAUserPrompt`).
    """

    name = "qwen"
    title = "Qwen Code"
    harness = HARNESS
    before_events = ("PreToolUse",)
    after_events = ("PostToolUse", "PostToolUseFailure")
    turn_events = ("UserPromptSubmit",)
    can_end_session = False

    @cached_property
    def installer(self) -> HookInstaller:  # type: ignore[override]
        """Its hooks in the settings file's ``hooks`` map, built on first use (``init`` and
        ``doctor`` need it; the hook imports no installer)."""
        from loopfuse.harness.installers import HooksMap

        return HooksMap(
            ("PreToolUse", "PostToolUse", "PostToolUseFailure", "UserPromptSubmit"),
            untargeted=frozenset({"UserPromptSubmit"}),
            comments=True,
        )

    sessions_module = "_qwen_code_sessions"

    def recognises(self, payload: dict[str, object]) -> bool:
        """Its tool events carry ``tool_call_id``; its prompt ids hold ``########``."""
        prompt = payload.get("prompt_id")
        return "tool_call_id" in payload or (isinstance(prompt, str) and "########" in prompt)

    def check_prompt(self, payload: dict[str, object]) -> None:
        """A prompt event without the user's prompt is its continuation."""
        if not (payload.get("prompt") or payload.get("submitted_prompt")):
            raise NotAUserPrompt("Qwen Code sends the model its calls' answers")

    def answer(
        self, event_name: str, payload: dict[str, object]
    ) -> tuple[object, bool | None, int | None]:
        """``tool_response.llmContent`` (or ``error``) without its volatile lines."""
        failed = event_name == "PostToolUseFailure"
        if failed:
            content = payload.get("error")
        else:
            response = payload.get("tool_response")
            content = response.get("llmContent") if isinstance(response, dict) else response
        if not isinstance(content, str):
            return content, (True if failed else None), None
        code = exit_code(content)
        text = HARNESS.without_volatile(content)
        if failed:
            return text, True, code
        return text, (code != 0) if code is not None else None, code

    def probe_ids(self, session: str) -> dict[str, object]:
        """Its own call id beside the model's."""
        return {"tool_use_id": f"{session}-own", "tool_call_id": f"{session}-call"}

    def settings_path(self, project: bool, env: Mapping[str, str], cwd: Path) -> Path:
        """``.qwen/settings.json`` in the project or the home folder."""
        from pathlib import Path  # here: the hook never asks, and imports no pathlib

        home = Path(env.get("HOME") or Path.home())
        return (cwd if project else home) / ".qwen" / "settings.json"


CLI: Final = QwenCodeCli()
"""Qwen Code's hook protocol."""


__getattr__ = reader_names("_qwen_code_sessions", ["QwenCodeSessions", "SESSIONS"], __name__)
"""Its transcript reader's names, read there on first use
(:func:`~loopfuse.harness.agent_cli.reader_names`)."""
