"""Pydantic AI: its built-in tools, and how its answers fail.

- Built-in tools: ``web_search`` and ``web_fetch`` (costly), ``code_execution``
  (state-changing); function tools are the user's.
- A call retried or refused is answered with a retry prompt ending ``Fix the errors and
  try again.`` (``Unknown tool name: 'x'. Available tools: ...`` for a tool that does not
  exist), or, over providers without an error flag, ``{"error": ...}``: declared here,
  read by :mod:`loopfuse.detector.errors`. Over Anthropic it sets ``is_error``.

>>> HARNESS.kind("web_fetch", {"url": "u"})
<ToolKind.COSTLY: 'costly'>
"""

from __future__ import annotations

from typing import Final

from loopfuse.harness.base import Harness, NotRunAnswers, Tool, ToolKind
from loopfuse.harness.generic import QUOTED_TOOL_NAME

__all__ = ["HARNESS"]

HARNESS: Final = Harness(
    "pydantic_ai",
    "Pydantic AI",
    tools=(
        Tool("web_search", ToolKind.COSTLY),
        Tool("web_fetch", ToolKind.COSTLY),
        Tool("code_execution", ToolKind.OTHER),
    ),
    failure_fields=("is_error",),
    not_run=NotRunAnswers(
        rf"Unknown tool name: (?P<u_pydantic>{QUOTED_TOOL_NAME})\. (?:Available tools|No tools)",
        starts=("Unknown tool",),
        ends=("Fix the errors and try again.",),
        # a tool's return wrapped as {"error": "..."} over a provider without a flag
        label=r"\{\s*\"error\"\s*:\s*\"",
    ),
)
"""Pydantic AI's built-in tools."""
