"""LangChain and LangGraph: their tools, and how their answers fail.

- Tools are the user's; the community ``ShellTool`` is ``terminal`` (a command line, in
  ``commands``) and ``requests_get`` / ``requests_post`` fetch URLs.
- A ``ToolMessage`` whose tool raised carries ``status="error"``: the structured failure,
  which :mod:`loopfuse.integrations.langchain` and the chat dialect reader carry to the
  detector as ``is_error``. ``ToolNode``'s own answers to a call it could not run (``Error:
  x is not a valid tool``) are read by :mod:`loopfuse.detector.errors`.

>>> HARNESS.kind("terminal", {"commands": ["ls"]}), HARNESS.kind("requests_get", {})
(<ToolKind.SHELL: 'shell'>, <ToolKind.COSTLY: 'costly'>)
"""

from __future__ import annotations

from typing import Final

from loopfuse.harness.base import Harness, Tool, ToolKind

__all__ = ["HARNESS"]

HARNESS: Final = Harness(
    "langchain",
    "LangChain / LangGraph",
    tools=(
        Tool("terminal", ToolKind.SHELL),
        Tool("requests_get", ToolKind.COSTLY),
        Tool("requests_post", ToolKind.OTHER),
    ),
    failure_fields=("status",),
)
"""LangChain's and LangGraph's tools and conventions."""
