"""LangChain and LangGraph: their tools, and how their answers fail.

- Tools are the user's; the community ``ShellTool`` is ``terminal`` (a command line, in
  ``commands``) and ``requests_get`` / ``requests_post`` fetch URLs.
- A ``ToolMessage`` whose tool raised carries ``status="error"``: the structured failure,
  which :mod:`loopfuse.integrations.langchain` and the chat dialect reader carry to the
  detector as ``is_error``. ``ToolNode``'s own answers to a call it could not run (``Error:
  x is not a valid tool, try one of [...]``, ``Error invoking tool 'x' with kwargs {...}
  with error:``, ``Tool call x with id … could not be executed - arguments were malformed
  or truncated.``) are declared here (:attr:`~loopfuse.harness.base.Harness.not_run`)
  and read, for every harness, by :mod:`loopfuse.detector.errors`.

>>> HARNESS.kind("terminal", {"commands": ["ls"]}), HARNESS.kind("requests_get", {})
(<ToolKind.SHELL: 'shell'>, <ToolKind.COSTLY: 'costly'>)
"""

from __future__ import annotations

from typing import Final

from loopfuse.harness.base import Harness, NotRunAnswers, Tool, ToolKind
from loopfuse.harness.generic import TOOL_NAME

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
    not_run=NotRunAnswers(
        # ToolNode (langgraph.prebuilt.tool_node), its templates as installed
        r"Error: (?P<u_langchain>[^\n]{1,128}?) is not a valid tool, try one of \["
        r"|Error (?:invoking|executing) tool '[^'\n]{1,128}' with kwargs"
        r" (?P<a_langchain>[^\n]{0,2048}) with error:$"
        rf"|Tool call {TOOL_NAME} with id (?P<i_langchain>[^\s]{{1,256}}) could not be"
        r" executed - arguments were malformed or truncated\.",
        starts=("Error", "Tool "),
    ),
)
"""LangChain's and LangGraph's tools and conventions."""
