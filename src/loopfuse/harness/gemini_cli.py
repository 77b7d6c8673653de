"""Gemini CLI (Google's terminal coding agent): its tools, and how its answers fail.

Facts observed with Gemini CLI 0.61 (``../shared/agent-clis``) and in real sessions:

- ``run_shell_command`` runs a command line; ``read_file``, ``read_many_files``,
  ``list_directory``, ``glob``, ``search_file_content`` (``grep``) read; ``replace``,
  ``write_file`` (``edit``) are its editors; ``web_fetch`` and ``google_web_search`` read
  the web.
- A call's record carries ``status`` (``"success"``, ``"error"``, ``"cancelled"``) and its
  ``functionResponse.response`` is ``{"output": ...}`` or ``{"error": ...}`` (the Gemini
  API's own convention): a call the CLI refused (``Command rejected because it could not
  be parsed safely``) is an error by that structure alone, with no error word in it
  (:mod:`loopfuse.intent.gemini` carries it as the tool message's ``is_error``).
- Older releases end every shell answer with ``Error: (none)``, ``Exit Code: 0``,
  ``Signal: (none)`` lines: that frame is the CLI's, not the command's words, and is
  never read as an error (:attr:`~loopfuse.harness.base.Harness.frame`); a non-zero
  ``Exit Code`` is a failure. Newer ones write ``Exit Code: N`` only on failure.

>>> HARNESS.failed("run_shell_command", "Command: x\\nError: (none)\\nExit Code: 127\\n")
True
>>> HARNESS.failed("run_shell_command", "Command: ls\\nError: (none)\\nExit Code: 0\\n") is None
True
>>> HARNESS.unframed("run_shell_command", "Stdout: a\\nError: (none)\\nExit Code: 0\\n")
'Stdout: a\\n'

Its hooks (:data:`CLI`): Claude Code's protocol with its own event names and refusal
(:mod:`~loopfuse.harness.json_hooks`), in ``~/.gemini/settings.json`` or a project's
``.gemini/settings.json`` (comments allowed).

Its transcripts (:data:`SESSIONS`): ``~/.gemini/tmp/<project>/chats/session-*.jsonl``
(``$GEMINI_CLI_HOME`` moves the home folder), replayed as Gemini ``contents``. It appends
a record each time a message changes, under the same ``id`` (a model message, then the
same message with its tool calls and their results): the last version counts, at the
place of the first. ``{"$set": ...}`` lines patch the session; when they list the
messages again (the model's context rewritten: compressed, old outputs masked) only the
records not seen before count. ``{"$rewindTo": id}`` is kept out: the calls before a
rewind were made and paid for. A tool's answer is its ``llmContent`` without ``Process
Group PGID: N`` (a new number on every call). Subagents have their own files. Whole-file
JSON sessions of older versions are read too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Final

from loopfuse.harness.agent_cli import HookEvent, reader_names
from loopfuse.harness.base import FileAccess, Harness, Tool, ToolKind
from loopfuse.harness.json_hooks import JsonHooksCli

if TYPE_CHECKING:
    from pathlib import Path

    from loopfuse.harness.agent_cli import HookInstaller

__all__ = ["CLI", "HARNESS", "GeminiCliHooks", "exit_code"]

_READ, _SHELL, _EDITOR, _COSTLY, _OTHER = (
    ToolKind.READ, ToolKind.SHELL, ToolKind.EDITOR, ToolKind.COSTLY, ToolKind.OTHER,
)  # fmt: skip

_EXIT: Final = re.compile(r"^Exit Code: (-?\d{1,4}|\(none\))[ \t]*$", re.M)
_TAIL: Final = 1024  # the exit line is among the last lines of a shell answer
# The lines the CLI frames a shell answer with when they say nothing went wrong.
_FRAME: Final = re.compile(
    r"^(?:Error: \(none\)|Exit Code: 0|Signal: \(none\)|Background PIDs: [^\n]*"
    r"|Process Group PGID: [^\n]*)[ \t]*(?:\n|$)",
    re.M,
)


# Lines of a shell answer new on every call, whatever the command did.
_VOLATILE: Final = re.compile(r"^(?:Process Group PGID|Background PIDs): .*$\n?", re.M)
_ANY_EXIT: Final = re.compile(r"^Exit Code: (-?\d+)\s*$", re.M)


def exit_code(text: str) -> int | None:
    """The ``Exit Code: N`` a shell answer names, or ``None``.

    >>> exit_code("Output: x\\nExit Code: 3\\n"), exit_code("x") is None
    (3, True)
    """
    found = _ANY_EXIT.search(text)
    return int(found.group(1)) if found else None


def _answer_failed(text: str) -> bool | None:
    """A non-zero ``Exit Code:`` line of a shell answer is a failure; anything else is
    left to the other evidence (the words of a command that exited 0 may still say it
    failed: a reproduction script printing the bug)."""
    tail = text[-_TAIL:]
    if "Exit Code: " not in tail:
        return None
    found = _EXIT.search(tail)
    if found is None or found.group(1) == "(none)":
        return None
    return True if int(found.group(1)) != 0 else None


HARNESS: Final = Harness(
    "gemini_cli",
    "Gemini CLI",
    tools=(
        Tool("run_shell_command", _SHELL, prose=("description",)),
        Tool("read_file", _READ, files=FileAccess.READS),
        Tool("read_many_files", _READ, files=FileAccess.READS),
        Tool("list_directory", _READ, files=FileAccess.READS),
        Tool("glob", _READ, files=FileAccess.READS),
        Tool("search_file_content", _READ, files=FileAccess.READS),
        Tool("grep", _READ),
        Tool("replace", _EDITOR, files=FileAccess.EDITS),
        Tool("write_file", _EDITOR, files=FileAccess.EDITS),
        Tool("edit", _EDITOR, files=FileAccess.EDITS),
        Tool("web_fetch", _COSTLY),
        Tool("google_web_search", _COSTLY),
        Tool("save_memory", _OTHER),
        Tool("write_todos", _OTHER),
    ),
    answer_failed=_answer_failed,
    frame=_FRAME,
    volatile=_VOLATILE,
    # Only the "Error: (none)" line reads as a failure to the generic heuristics: without
    # it, the rest of the frame says nothing they would misread.
    frame_hints=("Error: (none)",),
    failure_fields=("status", "functionResponse.response.error"),
)
"""Gemini CLI's tools and conventions."""


class GeminiCliHooks(JsonHooksCli):
    """Gemini CLI's hooks: ``BeforeTool``, ``AfterTool`` (``tool_response``
    ``{llmContent, returnDisplay, error?}``; a shell's ``llmContent`` names the exit code
    and a process group new on every call), ``BeforeAgent`` (the user's prompt).

    A refusal is ``{"decision": "deny", "reason": ...}``; it honours ``continue: false``
    from ``BeforeTool`` and ``AfterTool``. It reads its settings through
    ``strip-json-comments``.
    """

    name = "gemini"
    title = "Gemini CLI"
    harness = HARNESS
    before_events = ("BeforeTool",)
    after_events = ("AfterTool",)
    turn_events = ("BeforeAgent",)
    end_after_events = ("AfterTool",)

    @cached_property
    def installer(self) -> HookInstaller:  # type: ignore[override]
        """Its hooks in the settings file's ``hooks`` map, built on first use (``init`` and
        ``doctor`` need it; the hook imports no installer)."""
        from loopfuse.harness.installers import HooksMap

        return HooksMap(
            ("BeforeTool", "AfterTool", "BeforeAgent"),
            untargeted=frozenset({"BeforeAgent"}),
            comments=True,
        )

    sessions_module = "_gemini_cli_sessions"

    def recognises(self, payload: dict[str, object]) -> bool:
        """Its tool events' names are its own."""
        return payload.get("hook_event_name") in (*self.before_events, *self.after_events)

    def answer(
        self, event_name: str, payload: dict[str, object]
    ) -> tuple[object, bool | None, int | None]:
        """``llmContent`` without its volatile lines; failed when ``error`` is set or
        the exit code is not 0."""
        del event_name
        response = payload.get("tool_response")
        if not isinstance(response, dict):
            return response, None, None
        failure = response.get("error")
        content = response.get("llmContent")
        if isinstance(content, str):
            code = exit_code(content)
            text = HARNESS.without_volatile(content)
            if failure not in (None, "", {}):
                return text, True, code
            return text, (code != 0) if code is not None else None, code
        if failure not in (None, "", {}):
            return failure, True, None
        return content if content is not None else response.get("returnDisplay"), None, None

    def refusal(self, event: HookEvent, reason: str) -> dict[str, object]:
        """``{"decision": "deny", "reason": reason}``."""
        del event
        return {"decision": "deny", "reason": reason}

    def settings_path(self, project: bool, env: Mapping[str, str], cwd: Path) -> Path:
        """``.gemini/settings.json`` in the project or the home folder."""
        from pathlib import Path  # here: the hook never asks, and imports no pathlib

        home = Path(env.get("HOME") or Path.home())
        return (cwd if project else home) / ".gemini" / "settings.json"


CLI: Final = GeminiCliHooks()
"""Gemini CLI's hook protocol."""


__getattr__ = reader_names(
    "_gemini_cli_sessions",
    ["GeminiCliSessions", "SESSIONS", "gemini_parts", "gemini_result"],
    __name__,
)
"""Its transcript reader's names, read there on first use
(:func:`~loopfuse.harness.agent_cli.reader_names`)."""
