"""CrewAI (the multi-agent framework): its tools, and how its answers fail.

- Its own tools are the agents' delegation tools, ``Delegate work to coworker`` and
  ``Ask question to coworker`` (each hands a task or a question to another agent:
  a change of state); every other tool is the user's and is judged by the generic
  vocabulary.
- A call it could not run is answered in its own words, from its
  ``translations/en.json`` (read in its repository, not installed here): ``You tried to
  use the tool X, but it doesn't exist.``, ``Action 'X' don't exist, these are the only
  available Actions``, ``Error: the Action Input is not a valid key, value dictionary.``,
  ``I encountered an error while trying to use the tool.``, ``Error executing tool.
  coworker mentioned not found``, ``I tried reusing the same input, I must stop using
  this action input.``: declared here, read, for every harness, by
  :mod:`loopfuse.detector.errors`. No structured flag reaches the model.

>>> HARNESS.kind("Delegate work to coworker", {"task": "t"})
<ToolKind.OTHER: 'other'>
"""

from __future__ import annotations

from typing import Final

from loopfuse.harness.base import Harness, NotRunAnswers, Tool, ToolKind

__all__ = ["HARNESS"]

HARNESS: Final = Harness(
    "crewai",
    "CrewAI",
    tools=(
        Tool("Delegate work to coworker", ToolKind.OTHER),
        Tool("Ask question to coworker", ToolKind.OTHER),
    ),
    not_run=NotRunAnswers(
        r"You tried to use the tool (?P<u_crewai>[^\n]{1,128}?), but it doesn't exist\."
        r"|Action (?P<u_crewai_action>'[^'\n]{1,128}') don't exist, these are the only"
        r" available Actions"
        r"|Error executing tool\. coworker mentioned not found"
        r"|Error: the Action Input is not a valid key, value dictionary\."
        r"|I encountered an error while trying to use the tool\."
        r"|I tried reusing the same input, I must stop using this action input\.",
        starts=(
            "You tried to use the tool",
            "Action '",
            "Error",
            "I encountered an error",
            "I tried reusing the same input",
        ),
    ),
)
"""CrewAI's tools and conventions."""
