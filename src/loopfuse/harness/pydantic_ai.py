"""Pydantic AI: its built-in tools, and how its answers fail.

- Built-in tools: ``web_search`` and ``web_fetch`` (costly), ``code_execution``
  (state-changing); function tools are the user's.
- A call retried or refused is answered with a retry prompt ending ``Fix the errors and
  try again.``, or, over providers without an error flag, ``{"error": ...}``: read by
  :mod:`loopfuse.detector.errors`. Over Anthropic it sets ``is_error``.

>>> HARNESS.kind("web_fetch", {"url": "u"})
<ToolKind.COSTLY: 'costly'>
"""

from __future__ import annotations

from typing import Final

from loopfuse.harness.base import Harness, Tool, ToolKind

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
)
"""Pydantic AI's built-in tools."""
