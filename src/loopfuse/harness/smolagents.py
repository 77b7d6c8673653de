"""smolagents (Hugging Face's agent library): its built-in tools, and how its answers fail.

- Built-in tools: ``web_search``, ``duckduckgo_search``, ``visit_webpage`` and
  ``wikipedia_search`` read the web (costly); ``python_interpreter`` runs code
  (state-changing); ``final_answer`` ends the run; every other tool is the user's and is
  judged by the generic vocabulary.
- A call it could not run is answered in its own words (``Unknown tool X, should be one
  of:``, ``Error executing tool 'x' with arguments …``); those are read, for every
  harness, by :mod:`loopfuse.detector.errors`. No structured flag reaches the model.

>>> HARNESS.kind("visit_webpage", {"url": "u"}), HARNESS.kind("my_tool", {}) is None
(<ToolKind.COSTLY: 'costly'>, True)
"""

from __future__ import annotations

from typing import Final

from loopfuse.harness.base import Harness, Tool, ToolKind

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
)
"""smolagents' built-in tools."""
