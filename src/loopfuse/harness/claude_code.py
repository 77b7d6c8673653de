"""Claude Code (Anthropic's terminal coding agent): its tools, and how its answers fail.

Facts observed with Claude Code 2.1 (``../shared/agent-clis``) and in real transcripts:

- ``Bash`` runs a command line; ``BashOutput`` (``TaskOutput`` in later versions) reads
  the output of a shell started with ``run_in_background``: a **wait**, whose answer says
  ``<status>running</status>`` while the shell runs; ``KillShell`` / ``KillBash`` stop it.
  2.1.328 removed ``TaskOutput``: the model reads (``Read``) the background command's output
  file (``…/tasks/<id>.output``, the path its start answer names), which ends with
  ``[exited with code N]`` (``[killed]``) once the command ended: such a ``Read`` is a
  wait, on something still running until that line comes. Its ``Monitor`` (a deferred
  tool) runs a command line in the background (judged by what it runs).
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
>>> HARNESS.kind("Read", {"file_path": "/tmp/claude-0/p/s/tasks/b1x2.output"})
<ToolKind.WAIT: 'wait'>
>>> HARNESS.still_running("Read", "1\\tstarted\\n"), HARNESS.still_running("Read", "1\\t[killed]")
(True, False)
>>> HARNESS.still_running("Read", "File does not exist.")  # an error says nothing of a run
False

Its hooks (:data:`CLI`): the protocol it set (:mod:`~loopfuse.harness.json_hooks`), in
``~/.claude/settings.json`` (``$CLAUDE_CONFIG_DIR``) or a project's
``.claude/settings.json``.

Its transcripts (:data:`SESSIONS`): ``~/.claude/projects/<cwd>/<session>.jsonl``
(``$CLAUDE_CONFIG_DIR`` moves ``~/.claude``), subagents in
``<session>/subagents/*.jsonl``, replayed as Anthropic ``messages``. One line per
content block: the blocks of one answer share its ``message.id`` and are joined back
into one assistant message (its ``usage`` counted once); a line whose ``uuid`` was
already read is a duplicate and skipped. Subagents are their own runs: their own file
(``subagents/agent-*.jsonl``) or, in older versions, ``isSidechain`` lines of the
session's file (one run per ``agentId``, or per chain). A resumed session (``--resume``,
``--continue``) is written to a new file that starts with a copy of the session it
continues (lines keeping the earlier ``sessionId``): when that earlier session's file
is beside it, the copy is replayed as context only (the earlier file reports it), so
nothing is counted twice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Final

from loopfuse.harness.agent_cli import HookEvent, HookPayloadError, reader_names
from loopfuse.harness.base import FileAccess, Harness, Tool, ToolKind
from loopfuse.harness.json_hooks import JsonHooksCli

if TYPE_CHECKING:
    from pathlib import Path

    from loopfuse.harness.agent_cli import HookInstaller

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
        Tool(
            "Read",
            _READ,
            argument="file_path",
            matching=re.compile(r"/tasks/[A-Za-z0-9_-]{1,64}\.output\Z"),
            when_matching=_WAIT,
            files=FileAccess.READS,
            ended=re.compile(
                r"\[(?:exited with code -?\d{1,4}|killed|stopped|timed out)[^\]\n]{0,64}\]"
            ),
            # numbered lines (a transcript), or the file object a hook is given
            output=re.compile(r'[ \t]{0,16}\d{1,9}(?:\t|\u2192)|\{"file":\{'),
        ),
        Tool("Monitor", _SHELL, prose=("description",)),
        Tool("Grep", _READ, files=FileAccess.READS),
        Tool("Glob", _READ, files=FileAccess.READS),
        Tool("LS", _READ, files=FileAccess.READS),
        Tool("NotebookRead", _READ, files=FileAccess.READS),
        Tool("Edit", _EDITOR, files=FileAccess.EDITS),
        Tool("MultiEdit", _EDITOR, files=FileAccess.EDITS),
        Tool("Write", _EDITOR, files=FileAccess.EDITS),
        Tool("NotebookEdit", _EDITOR, files=FileAccess.EDITS),
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

    @cached_property
    def installer(self) -> HookInstaller:  # type: ignore[override]
        """Its hooks in the settings file's ``hooks`` map, built on first use (``init`` and
        ``doctor`` need it; the hook imports no installer)."""
        from loopfuse.harness.installers import HooksMap

        return HooksMap(
            (
                "PreToolUse",
                "PostToolUse",
                "PostToolUseFailure",
                "UserPromptSubmit",
                "PostToolBatch",
            ),
            untargeted=frozenset({"UserPromptSubmit", "PostToolBatch"}),
        )

    sessions_module = "_claude_code_sessions"

    def parse(self, payload: dict[str, object]) -> HookEvent:
        """As every Claude Code-style CLI's, but never Copilot CLI's input: it runs a
        project's ``.claude/settings.json`` hooks too, and its inputs read as Claude
        Code's lose every answer (:func:`~loopfuse.harness.copilot_cli.sent_by_copilot`);
        they are allowed and logged, for ``loopfuse hook --agent copilot`` to guard."""
        if "transcript_path" not in payload:  # never so from Claude Code: look closer
            from loopfuse.harness.copilot_cli import sent_by_copilot

            if sent_by_copilot(payload):
                raise HookPayloadError(
                    "Copilot CLI's input (it runs this project's .claude hooks too): not "
                    "read as Claude Code's; `loopfuse init --agent copilot` guards Copilot CLI"
                )
        return super().parse(payload)

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
        from pathlib import Path  # here: the hook never asks, and imports no pathlib

        if project:
            return cwd / ".claude" / "settings.json"
        base = env.get("CLAUDE_CONFIG_DIR")
        home = Path(env.get("HOME") or Path.home())
        return (Path(base) if base else home / ".claude") / "settings.json"


CLI: Final = ClaudeCodeCli()
"""Claude Code's hook protocol."""


__getattr__ = reader_names("_claude_code_sessions", ["ClaudeCodeSessions", "SESSIONS"], __name__)
"""Its transcript reader's names, read there on first use
(:func:`~loopfuse.harness.agent_cli.reader_names`)."""
