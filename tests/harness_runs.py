"""Synthetic agent runs for the harness tests: one tool call per turn, in the dialect the
harness speaks, and the first request of a growing conversation that ``scan`` flags."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agent_runs import openai_run
from loopfuse.detector import LoopDetector, scan

Step = tuple[str, Any, str]  # (tool name, arguments, answer)
FlaggedStep = tuple[str, Any, str, bool | None]  # ... and its is_error flag


def anthropic_run(steps: list[FlaggedStep]) -> dict[str, Any]:
    """A Messages API request after ``steps``; each answer's ``is_error`` as given
    (``None``: left out)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Get the build green."}]
    for i, (name, arguments, answer, flag) in enumerate(steps):
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{i}", "name": name, "input": arguments}],
            }
        )
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": f"t{i}", "content": answer}
        if flag is not None:
            result["is_error"] = flag
        messages.append({"role": "user", "content": [result]})
    return {"model": "claude", "max_tokens": 1000, "messages": messages}


def gemini_run(steps: list[tuple[str, Any, Any]]) -> dict[str, Any]:
    """A Gemini request after ``steps``; each answer a ``functionResponse.response`` (an
    object, or the text ``loopfuse scan``'s Gemini CLI reader puts there)."""
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "Look around."}]}]
    for name, arguments, response in steps:
        contents.append(
            {"role": "model", "parts": [{"functionCall": {"name": name, "args": arguments}}]}
        )
        contents.append(
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": name, "response": response}}],
            }
        )
    return {"contents": contents}


def first_flag(
    build: Callable[[list[Any]], dict[str, Any]], steps: list[Any], det: LoopDetector
) -> int | None:
    """How many steps the first request ``scan`` flags holds (``None``: none is)."""
    for n in range(1, len(steps) + 1):
        if not scan(build(steps[:n]), detector=det).ok:
            return n
    return None


def openai_first_flag(steps: list[Step], det: LoopDetector | None = None) -> int | None:
    """:func:`first_flag` of an OpenAI Chat run."""
    return first_flag(openai_run, steps, det or LoopDetector())


def args(value: dict[str, Any]) -> str:
    """Arguments as a model writes them."""
    return json.dumps(value)
