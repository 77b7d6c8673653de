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
"""

from __future__ import annotations

import re
from typing import Final

from loopfuse.harness.base import FileAccess, Harness, Tool, ToolKind

__all__ = ["HARNESS", "exit_code"]

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
