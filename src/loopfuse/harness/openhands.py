"""OpenHands (the open agent platform, before and after its 1.0 SDK): its tools, and how
its answers fail.

- ``execute_bash`` (``terminal`` in the SDK) runs a command line; with an empty
  ``command`` it sends nothing and reads what the running command printed since: a
  **wait**, answered ``[The command has no new output after N seconds …]`` while the
  command runs. ``is_input`` sends text to the running command (state-changing).
- ``str_replace_editor`` (``file_editor`` in the SDK) views (``command: view``) and edits
  files; ``browser`` / ``fetch`` read the web; ``think`` only thinks; ``finish`` ends.
- Every shell answer ends with ``[The command completed with exit code N.]`` (``[Command
  finished with exit code N]`` in older versions): a non-zero one is a failure whatever
  the output says; exit 0 is left to the other evidence. A refused action ends with
  ``[Error occurred in processing last action]``; a call of a tool that is not there, or
  with arguments it does not take, is answered ``Tool X is not registered. (arguments:
  …)``, ``Missing required argument "x" in tool call y``, ``Failed to parse tool call
  arguments: …``, ``Parameter 'x' is not allowed for function 'y'`` (its
  ``function_calling.py``): declared here, read by :mod:`loopfuse.detector.errors`.

>>> HARNESS.kind("execute_bash", {"command": ""}), HARNESS.kind("execute_bash", {"command": "ls"})
(<ToolKind.WAIT: 'wait'>, <ToolKind.SHELL: 'shell'>)
>>> HARNESS.failed("execute_bash", "ok\\n[The command completed with exit code 0.]") is None
True
>>> HARNESS.failed("execute_bash", "boom\\n[Command finished with exit code 2]")
True
"""

from __future__ import annotations

import re
from typing import Final

from loopfuse.harness.base import FileAccess, Harness, NotRunAnswers, Tool, ToolKind
from loopfuse.harness.generic import TOOL_NAME

__all__ = ["HARNESS"]

_READ, _WAIT, _SHELL, _EDITOR, _COSTLY, _OTHER = (
    ToolKind.READ, ToolKind.WAIT, ToolKind.SHELL, ToolKind.EDITOR, ToolKind.COSTLY,
    ToolKind.OTHER,
)  # fmt: skip

_EXIT: Final = re.compile(
    r"\[(?:The command completed with exit code|Command finished with exit code) (-?\d{1,4})\.?\]"
)
_TAIL: Final = 512  # the exit line ends the answer


def _answer_failed(text: str) -> bool | None:
    tail = text[-_TAIL:]
    if "exit code" not in tail:
        return None
    found = None
    for found in _EXIT.finditer(tail):  # noqa: B007 - the last one is the command's
        pass
    # Exit 0 is no word either way: a reproduction script that exits 0 still prints the
    # bug (on the OpenHands calibration runs, reading exit 0 as success lost 9 of the 15
    # failed runs stopped).
    return True if found is not None and int(found.group(1)) != 0 else None


HARNESS: Final = Harness(
    "openhands",
    "OpenHands",
    tools=(
        Tool("execute_bash", _SHELL, argument="command", when_empty=_WAIT),
        Tool("terminal", _SHELL, argument="command", when_empty=_WAIT),
        Tool("str_replace_editor", _EDITOR, files=FileAccess.BY_COMMAND),
        Tool("file_editor", _EDITOR, files=FileAccess.BY_COMMAND),
        Tool("browser", _COSTLY),
        Tool("fetch", _COSTLY),
        Tool("think", _READ),
        Tool("finish", _OTHER),
        Tool("task_tracker", _OTHER),
    ),
    running=("[The command has no new output after",),
    answer_failed=_answer_failed,
    not_run=NotRunAnswers(
        rf"Tool (?P<u_openhands>{TOOL_NAME}) is not registered\. \(arguments:"
        r" (?P<a_openhands>[^\n]{0,2048})\)\. Please check the tool name"
        rf"|Missing required argument \"[^\"\n]{{1,128}}\" in tool call {TOOL_NAME}$"
        r"|Failed to parse tool call arguments: (?P<a_openhands_parse>[^\n]{0,2048})$"
        r"|Parameter '[^'\n]{1,128}' is not allowed for function '",
        starts=(
            "Tool ",
            "Missing required argument",
            "Failed to parse tool call arguments",
            "Parameter '",
        ),
        ends=("[Error occurred in processing last action]",),
    ),
)
"""OpenHands' tools and conventions."""
