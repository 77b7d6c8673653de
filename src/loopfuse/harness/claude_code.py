"""Claude Code (Anthropic's terminal coding agent): its tools, and how its answers fail.

Facts observed with Claude Code 2.1 (``../shared/agent-clis``) and in real transcripts:

- ``Bash`` runs a command line; ``BashOutput`` (``TaskOutput`` in later versions) reads
  the output of a shell started with ``run_in_background``: a **wait**, whose answer says
  ``<status>running</status>`` while the shell runs; ``KillShell`` / ``KillBash`` stop it.
- ``Read``, ``Grep``, ``Glob``, ``LS``, ``NotebookRead`` only read; ``Edit``,
  ``MultiEdit``, ``Write``, ``NotebookEdit`` are its editors; ``WebFetch`` and
  ``WebSearch`` read the web (costly).
- A failed call's ``tool_result`` carries ``is_error: true`` (a non-zero exit of ``Bash``
  too: its text then starts ``Exit code N``); many versions write ``is_error: false`` on
  success, older ones leave it out. Its hooks: ``PostToolUseFailure`` is the failure.
  The flag decides when present; the text heuristics only when it is absent.

>>> HARNESS.kind("BashOutput", {"bash_id": "b1"}), HARNESS.kind("Bash", {"command": "ls"})
(<ToolKind.WAIT: 'wait'>, <ToolKind.SHELL: 'shell'>)
>>> HARNESS.still_running("BashOutput", "<status>running</status>\\n<stdout>..")
True

Its hooks (:data:`CLI`): the protocol it set (:mod:`~loopfuse.harness.json_hooks`), in
``~/.claude/settings.json`` (``$CLAUDE_CONFIG_DIR``) or a project's
``.claude/settings.json``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from loopfuse.harness.base import Harness, Tool, ToolKind
from loopfuse.harness.installers import HooksMap
from loopfuse.harness.json_hooks import JsonHooksCli

__all__ = ["CLI", "HARNESS", "ClaudeCodeCli", "exit_code"]

_EXIT: Final = re.compile(r"\AExit code (\d+)\b")


def exit_code(text: str) -> int | None:
    """The exit status a failed ``Bash`` call's hook answer starts with
    (``PostToolUseFailure``: ``Exit code 1``), or ``None``.

    >>> exit_code("Exit code 2\\nmake: *** [all] Error 2"), exit_code("boom") is None
    (2, True)
    """
    found = _EXIT.match(text)
    return int(found.group(1)) if found else None


_READ, _WAIT, _SHELL, _EDITOR, _COSTLY, _OTHER = (
    ToolKind.READ, ToolKind.WAIT, ToolKind.SHELL, ToolKind.EDITOR, ToolKind.COSTLY,
    ToolKind.OTHER,
)  # fmt: skip

HARNESS: Final = Harness(
    "claude_code",
    "Claude Code",
    tools=(
        Tool("Bash", _SHELL, prose=("description",)),
        Tool("BashOutput", _WAIT),
        Tool("TaskOutput", _WAIT),
        Tool("KillShell", _OTHER),
        Tool("KillBash", _OTHER),
        Tool("Read", _READ),
        Tool("Grep", _READ),
        Tool("Glob", _READ),
        Tool("LS", _READ),
        Tool("NotebookRead", _READ),
        Tool("Edit", _EDITOR),
        Tool("MultiEdit", _EDITOR),
        Tool("Write", _EDITOR),
        Tool("NotebookEdit", _EDITOR),
        Tool("WebFetch", _COSTLY),
        Tool("WebSearch", _COSTLY),
        Tool("TodoWrite", _OTHER),
        Tool("Task", _OTHER),
        Tool("ExitPlanMode", _OTHER),
    ),
    running=("<status>running</status>",),
    failure_fields=("is_error",),
)
"""Claude Code's tools and conventions."""


class ClaudeCodeCli(JsonHooksCli):
    """Claude Code's hooks: ``PreToolUse``, ``PostToolUse`` / ``PostToolUseFailure``
    (the failure, its text starting ``Exit code N`` for a shell), ``UserPromptSubmit``
    and ``PostToolBatch``, the end of a batch of parallel calls listing them: it runs a
    turn's state-changing shell calls one after the other, hooks and all, so only this
    event tells them from the calls of separate turns.

    It ends a session on ``continue: false`` from ``PreToolUse`` (with the deny, or the
    call runs once more) and from ``PostToolUse``, but ignores it in
    ``PostToolUseFailure``.
    """

    name = "claude-code"
    title = "Claude Code"
    harness = HARNESS
    before_events = ("PreToolUse",)
    after_events = ("PostToolUse", "PostToolUseFailure")
    turn_events = ("UserPromptSubmit",)
    batch_events = ("PostToolBatch",)
    end_after_events = ("PostToolUse",)
    installer = HooksMap(
        ("PreToolUse", "PostToolUse", "PostToolUseFailure", "UserPromptSubmit", "PostToolBatch"),
        untargeted=frozenset({"UserPromptSubmit", "PostToolBatch"}),
    )

    def answer(
        self, event_name: str, payload: dict[str, object]
    ) -> tuple[object, bool | None, int | None]:
        """``error`` after a failure; a shell's ``stdout`` and ``stderr`` after a success."""
        if event_name == "PostToolUseFailure":
            text = payload.get("error")
            text = text if isinstance(text, str) else json.dumps(text)
            return text, True, exit_code(text)
        response = payload.get("tool_response")
        if isinstance(response, dict) and isinstance(response.get("stdout"), str):
            parts = [response["stdout"], response.get("stderr")]
            return "\n".join(p for p in parts if isinstance(p, str) and p), False, 0
        return response, False, None

    def probe_ids(self, session: str) -> dict[str, object]:
        """Its call id."""
        return {"tool_use_id": f"{session}-call"}

    def settings_path(self, project: bool, env: Mapping[str, str], cwd: Path) -> Path:
        """``.claude/settings.json`` in the project, else in ``$CLAUDE_CONFIG_DIR``
        (default ``~/.claude``)."""
        if project:
            return cwd / ".claude" / "settings.json"
        base = env.get("CLAUDE_CONFIG_DIR")
        home = Path(env.get("HOME") or Path.home())
        return (Path(base) if base else home / ".claude") / "settings.json"


CLI: Final = ClaudeCodeCli()
"""Claude Code's hook protocol."""
