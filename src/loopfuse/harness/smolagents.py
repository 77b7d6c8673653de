"""smolagents (Hugging Face's agent library): its built-in tools, and how its answers fail.

- Built-in tools: ``web_search``, ``duckduckgo_search``, ``visit_webpage`` and
  ``wikipedia_search`` read the web (costly); ``python_interpreter`` runs code
  (state-changing); ``final_answer`` ends the run; every other tool is the user's and is
  judged by the generic vocabulary.
- A call it could not run is answered in its own words (``Unknown tool X, should be one
  of:``, ``Error executing tool 'x' with arguments …``, ``Argument x is not in the tool's
  input schema``), after a ``Call id:`` line and an ``Error:`` label: declared here, read,
  for every harness, by :mod:`loopfuse.detector.errors`. No structured flag reaches the
  model.

>>> HARNESS.kind("visit_webpage", {"url": "u"}), HARNESS.kind("my_tool", {}) is None
(<ToolKind.COSTLY: 'costly'>, True)
"""

from __future__ import annotations

from typing import Final

from loopfuse.harness.base import Harness, NotRunAnswers, Tool, ToolKind
from loopfuse.harness.generic import TOOL_NAME

__all__ = ["HARNESS"]

HARNESS: Final = Harness(
    "smolagents",
    "smolagents",
    tools=(
        Tool("web_search", ToolKind.COSTLY),
        Tool("duckduckgo_search", ToolKind.COSTLY),
        Tool("visit_webpage", ToolKind.COSTLY),
        Tool("wikipedia_search", ToolKind.COSTLY),
        Tool("python_interpreter", ToolKind.OTHER),
        Tool("final_answer", ToolKind.OTHER),
    ),
    not_run=NotRunAnswers(
        rf"Unknown tool (?P<u_smolagents>{TOOL_NAME}), should be one of: "
        r"|Error executing tool '[^'\n]{1,128}' with arguments"
        r" (?P<a_smolagents>[^\n]{0,2048}?): \w+: "
        r"|Argument \S{1,128} (?:is not in the tool's input schema|is required$"
        r"|has type '[^'\n]*' but should be ')",
        starts=("Unknown tool", "Error", "Argument "),
        # blanks, its "Call id: …" line and "Error:" label alone on a line (may be none)
        label=r"[ \t\r\n]*(?:Call id: [^\n]{0,256}\n[ \t\r\n]*)?(?:Error:\s*\n)?",
    ),
)
"""smolagents' built-in tools."""
