"""SWE-agent and mini-swe-agent (Princeton's agents for software issues): their tools, and
how their answers fail.

- SWE-agent 1.x: ``bash`` runs a command line; ``str_replace_editor`` views and edits;
  ``edit`` and ``create`` edit; ``submit`` ends. Its window commands (``open``,
  ``goto``, ``scroll_up`` / ``scroll_down``, ``search_file``, ``search_dir``,
  ``find_file``) are deliberately *not* declared: ``open``, ``goto`` and ``scroll_*``
  move the window its next ``edit`` acts on, and reading its searches as reads made a
  lap of a failing and a working search five laps instead of two on the calibration
  runs (docs/detector.md); the generic vocabulary judges them, as before.
- mini-swe-agent: one ``bash`` tool (or actions written in the text), whose answer wraps
  the exit status in ``<returncode>N</returncode>``: a non-zero one is a failure;
  exit 0 is left to the other evidence.

>>> HARNESS.failed("bash", "<returncode>0</returncode>\\n<output>\\nok\\n</output>") is None
True
>>> HARNESS.failed("bash", "<returncode>1</returncode>\\n<output>\\n</output>")
True
"""

from __future__ import annotations

import re
from typing import Final

from loopfuse.harness.base import FileAccess, Harness, Tool, ToolKind

__all__ = ["HARNESS"]

_RETURNCODE: Final = re.compile(r"<returncode>\s*(-?\d{1,4})\s*</returncode>")
_HEAD: Final = 256  # mini-swe-agent writes the return code first


def _answer_failed(text: str) -> bool | None:
    head = text[:_HEAD]
    if "<returncode>" not in head:
        return None
    found = _RETURNCODE.search(head)
    return True if found is not None and int(found.group(1)) != 0 else None


HARNESS: Final = Harness(
    "swe_agent",
    "SWE-agent / mini-swe-agent",
    tools=(
        Tool("bash", ToolKind.SHELL),
        Tool("str_replace_editor", ToolKind.EDITOR, files=FileAccess.BY_COMMAND),
        Tool("edit", ToolKind.EDITOR, files=FileAccess.EDITS),
        Tool("create", ToolKind.EDITOR, files=FileAccess.EDITS),
        Tool("submit", ToolKind.OTHER),
    ),
    answer_failed=_answer_failed,
)
"""SWE-agent's and mini-swe-agent's tools and conventions."""
