"""One home per agent harness: what each harness's tools are, and how its answers fail.

One module per harness, as :mod:`loopfuse.intent` has one per provider:
:mod:`~loopfuse.harness.claude_code`, :mod:`~loopfuse.harness.codex`,
:mod:`~loopfuse.harness.gemini_cli`, :mod:`~loopfuse.harness.openhands`,
:mod:`~loopfuse.harness.swe_agent` (SWE-agent and mini-swe-agent),
:mod:`~loopfuse.harness.smolagents`, :mod:`~loopfuse.harness.langchain` (LangChain and
LangGraph), :mod:`~loopfuse.harness.openai_agents`, :mod:`~loopfuse.harness.pydantic_ai`;
each holds one :class:`~loopfuse.harness.base.Harness` (``HARNESS``). The generic
vocabulary (:mod:`loopfuse.harness.generic`) judges every tool nobody declared.

The detector names no harness: its ``harness`` setting names one (or ``"auto"``: every
harness, each tool by the harness that declares it; or ``"generic"``: none), and
:func:`reader_for` hands it the :class:`~loopfuse.harness.base.CallReader` to ask. Adding a
harness is adding one module here and its name to
:data:`~loopfuse.harness.base.HARNESSES`.

>>> reader_for("codex").kind("write_stdin", {"chars": ""})
<ToolKind.WAIT: 'wait'>
>>> reader_for("auto").kind("BashOutput", {}), reader_for("generic") is None
(<ToolKind.WAIT: 'wait'>, True)
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Final

from loopfuse.errors import ConfigError
from loopfuse.harness.base import (
    HARNESSES,
    CallReader,
    Harness,
    Tool,
    ToolKind,
    structured_failure,
)

__all__ = [
    "HARNESSES",
    "HARNESS_SETTINGS",
    "CallReader",
    "Harness",
    "Tool",
    "ToolKind",
    "harness_named",
    "reader_for",
    "structured_failure",
]

HARNESS_SETTINGS: Final[tuple[str, ...]] = ("auto", "generic", *HARNESSES)
"""The values of the detector's ``harness`` setting."""


@cache
def harness_named(name: str) -> Harness:
    """The :class:`Harness` of module ``name`` (one of :data:`HARNESSES`).

    >>> harness_named("gemini_cli").title
    'Gemini CLI'
    """
    if name not in HARNESSES:
        raise ConfigError(f"unknown harness {name!r}; one of {', '.join(HARNESSES)}")
    found: Harness = importlib.import_module(f"loopfuse.harness.{name}").HARNESS
    return found


class _Every:
    """Every harness at once: each tool judged by the harnesses that declare it (when
    they disagree on a call, by none: the generic vocabulary decides)."""

    __slots__ = ("_by_name", "harnesses")

    def __init__(self, harnesses: tuple[Harness, ...]) -> None:
        self.harnesses = harnesses
        self._by_name: dict[str, tuple[Harness, ...]] = {}

    def _declaring(self, name: str) -> tuple[Harness, ...]:
        found = self._by_name.get(name)
        if found is None:
            found = tuple(h for h in self.harnesses if h.tool(name) is not None)
            if len(self._by_name) < 4096:
                self._by_name[name] = found
        return found

    def kind(self, name: str, arguments: object) -> ToolKind | None:
        kinds = {h.kind(name, arguments) for h in self._declaring(name)}
        return kinds.pop() if len(kinds) == 1 else None

    def still_running(self, name: str, text: str) -> bool:
        return any(h.still_running(name, text) for h in self._declaring(name))

    def failed(self, name: str, text: str) -> bool | None:
        for harness in self._declaring(name):
            said = harness.failed(name, text)
            if said is not None:
                return said
        return None

    def unframed(self, name: str, text: str) -> str:
        for harness in self._declaring(name):
            text = harness.unframed(name, text)
        return text


@cache
def reader_for(setting: str) -> CallReader | None:
    """The harness knowledge a detector with ``harness=setting`` reads: one harness, every
    harness (``"auto"``), or none (``"generic"``: ``None``)."""
    if setting == "generic":
        return None
    if setting == "auto":
        return _Every(tuple(harness_named(name) for name in HARNESSES))
    return harness_named(setting)
