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
"""

from __future__ import annotations

import dataclasses
from typing import Final

from loopfuse.harness import gemini_cli
from loopfuse.harness.base import Tool, ToolKind

__all__ = ["HARNESS", "exit_code"]

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
