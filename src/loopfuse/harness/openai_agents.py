"""The OpenAI Agents SDK: its hosted and local tools, and how its answers fail.

- Hosted tools: ``web_search`` (costly), ``file_search`` (read), ``code_interpreter``
  and ``computer`` (state-changing); local ones: ``shell`` / ``local_shell`` (a command
  line), ``apply_patch`` (an editor). Function tools are the user's.
- A function tool that raised is answered ``An error occurred while running the tool.``,
  arguments that are not JSON ``Invalid JSON input for tool x`` (declared here), and a
  call of a tool that does not exist ``Tool 'x' not found`` (the plain form, in
  :mod:`loopfuse.harness.generic`): text, read by :mod:`loopfuse.detector.errors`; no
  structured flag reaches the model.

>>> HARNESS.kind("file_search", {}), HARNESS.kind("shell", {"commands": ["ls"]})
(<ToolKind.READ: 'read'>, <ToolKind.SHELL: 'shell'>)
"""

from __future__ import annotations

from typing import Final

from loopfuse.harness.base import Harness, NotRunAnswers, Tool, ToolKind

__all__ = ["HARNESS"]

HARNESS: Final = Harness(
    "openai_agents",
    "OpenAI Agents SDK",
    tools=(
        Tool("web_search", ToolKind.COSTLY),
        Tool("file_search", ToolKind.READ),
        Tool("code_interpreter", ToolKind.OTHER),
        Tool("computer", ToolKind.OTHER),
        Tool("shell", ToolKind.SHELL),
        Tool("local_shell", ToolKind.SHELL),
        Tool("apply_patch", ToolKind.EDITOR),
    ),
    not_run=NotRunAnswers(
        r"An error occurred while running the tool\.|Invalid JSON input for tool ",
        starts=("An error occurred while running the tool", "Invalid JSON input for tool"),
    ),
)
"""The OpenAI Agents SDK's tools."""
