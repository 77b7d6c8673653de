"""One home per agent harness: what each harness's tools are, and how its answers fail.

One module per harness, as :mod:`loopfuse.intent` has one per provider:
:mod:`~loopfuse.harness.claude_code`, :mod:`~loopfuse.harness.codex`,
:mod:`~loopfuse.harness.gemini_cli`, :mod:`~loopfuse.harness.qwen_code`,
:mod:`~loopfuse.harness.copilot_cli`,
:mod:`~loopfuse.harness.kimi_code`,
:mod:`~loopfuse.harness.pi`,
:mod:`~loopfuse.harness.openhands`,
:mod:`~loopfuse.harness.swe_agent` (SWE-agent and mini-swe-agent),
:mod:`~loopfuse.harness.smolagents`, :mod:`~loopfuse.harness.langchain` (LangChain and
LangGraph), :mod:`~loopfuse.harness.openai_agents`, :mod:`~loopfuse.harness.pydantic_ai`;
each holds one :class:`~loopfuse.harness.base.Harness` (``HARNESS``). The generic
vocabulary (:mod:`loopfuse.harness.generic`) judges every tool nobody declared.

The detector names no harness: its ``harness`` setting names one (or ``"auto"``: every
harness, each tool by the harness that declares it; or ``"generic"``: none), and
:func:`reader_for` hands it the :class:`~loopfuse.harness.base.CallReader` to ask. Two
readings hold for every harness, whatever the setting, as they did before harnesses had
homes: what editor and file tools do to files (:func:`file_tools`: an editor's arguments
say what it does, whoever defined it), and how the frameworks answer a call they could
not run (:func:`not_run_answers`: the tool called does not exist, so no harness setting
could name it). Adding a harness is adding one module here and its name to
:data:`~loopfuse.harness.base.HARNESSES`.

>>> reader_for("codex").kind("write_stdin", {"chars": ""})
<ToolKind.WAIT: 'wait'>
>>> reader_for("auto").kind("BashOutput", {}), reader_for("generic") is None
(<ToolKind.WAIT: 'wait'>, True)
"""

from __future__ import annotations

import importlib
from functools import cache, lru_cache
from typing import Final

from loopfuse.errors import ConfigError
from loopfuse.harness.base import (
    _NO_CONVENTION,
    HARNESSES,
    CallReader,
    FileAccess,
    Harness,
    NotRunAnswers,
    Tool,
    ToolKind,
    structured_failure,
)
from loopfuse.harness.generic import (
    DEFAULT_FILE_TOOLS,
    DEFAULT_NOT_RUN_PATTERN,
    DEFAULT_NOT_RUN_STARTS,
)

__all__ = [
    "HARNESSES",
    "HARNESS_SETTINGS",
    "NOT_RUN_ORDER",
    "CallReader",
    "FileAccess",
    "Harness",
    "NotRunAnswers",
    "Tool",
    "ToolKind",
    "file_tools",
    "harness_named",
    "not_run_answers",
    "reader_for",
    "structured_failure",
]

_CACHED_TEXT: Final = 2_048  # answers up to this long keep their reading a while (as answers.py)
_NAMES_KEPT: Final = 4096  # tool names whose declarations are remembered
# ... each at most this long: a client writes the names, and a name no harness could have
# declared (hundreds of KB) must not be kept, 4,096 times (SECURITY.md's memory bound).
_NAME_KEPT_CHARS: Final = 256
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


_BY_ARGUMENTS: Final = object()  # a tool whose kind depends on its arguments
_UNKNOWN: Final = object()


class _Every:
    """Every harness at once: each tool judged by the harnesses that declare it (when
    they disagree on a call, by none: the generic vocabulary decides). What each name
    is declared as is worked out once per name (a scan asks on every batch)."""

    __slots__ = ("_cached_read", "_conventions", "_declared", "_kinds", "harnesses")

    def __init__(self, harnesses: tuple[Harness, ...]) -> None:
        self.harnesses = harnesses
        self._cached_read = lru_cache(maxsize=512)(self._read)
        self._declared: dict[str, tuple[tuple[Harness, Tool], ...]] = {}
        self._kinds: dict[str, object] = {}
        self._conventions: dict[str, tuple[Harness, ...]] = {}

    def _declaring(self, name: str) -> tuple[tuple[Harness, Tool], ...]:
        found = self._declared.get(name)
        if found is None:
            found = tuple((h, tool) for h in self.harnesses if (tool := h.tool(name)) is not None)
            if len(self._declared) < _NAMES_KEPT and len(name) <= _NAME_KEPT_CHARS:
                self._declared[name] = found
                self._conventions[name] = tuple(
                    h for h, _ in found if h.answer_failed is not _NO_CONVENTION or h.frame
                )
        return found

    def kind(self, name: str, arguments: object) -> ToolKind | None:
        found = self._kinds.get(name, _UNKNOWN)
        if found is _UNKNOWN:
            tools = self._declaring(name)
            if any(tool.argument is not None for _, tool in tools):
                found = _BY_ARGUMENTS
            else:
                kinds = {tool.kind for _, tool in tools}
                found = kinds.pop() if len(kinds) == 1 else None
            if len(self._kinds) < _NAMES_KEPT and len(name) <= _NAME_KEPT_CHARS:
                self._kinds[name] = found
        if found is not _BY_ARGUMENTS:
            return found  # type: ignore[return-value]  # a ToolKind or None
        kinds = {tool.kind_for(arguments) for _, tool in self._declaring(name)}
        return kinds.pop() if len(kinds) == 1 else None

    def still_running(self, name: str, text: str) -> bool:
        return any(h.still_running(name, text) for h, _ in self._declaring(name))

    def _with_conventions(self, name: str) -> tuple[Harness, ...]:
        found = self._conventions.get(name)
        if found is None:
            declared = self._declaring(name)
            found = self._conventions.get(name)
            if found is None:  # a name too long to be kept: worked out each time
                found = tuple(
                    h for h, _ in declared if h.answer_failed is not _NO_CONVENTION or h.frame
                )
        return found

    def failed(self, name: str, text: str) -> bool | None:
        for harness in self._with_conventions(name):
            said = harness.failed(name, text)
            if said is not None:
                return said
        return None

    def unframed(self, name: str, text: str) -> str:
        for harness in self._with_conventions(name):
            text = harness.unframed(name, text)
        return text

    def read(self, name: str, text: str) -> tuple[bool | None, str]:
        # A proxy reads the same answers again in every request of a conversation, and a
        # scan reads the final batch's twice: a recent short answer's reading is kept.
        if type(text) is str and len(text) <= _CACHED_TEXT and len(name) <= _NAME_KEPT_CHARS:
            return self._cached_read(name, text)
        return self._read(name, text)

    def _read(self, name: str, text: str) -> tuple[bool | None, str]:
        conventions = self._conventions.get(name)
        if conventions is None:
            conventions = self._with_conventions(name)
        if not conventions:
            return None, text
        if type(text) is not str:
            return None, text
        plain = text
        for harness in conventions:
            said, plain = harness.read_declared(plain)
            if said is not None:
                return said, text
        return None, plain


@cache
def reader_for(setting: str) -> CallReader | None:
    """The harness knowledge a detector with ``harness=setting`` reads: one harness, every
    harness (``"auto"``), or none (``"generic"``: ``None``)."""
    if setting == "generic":
        return None
    if setting == "auto":
        return _Every(tuple(harness_named(name) for name in HARNESSES))
    return harness_named(setting)


@cache
def file_tools() -> dict[str, FileAccess]:
    """Every editor and file tool a harness declares, by its own name, with what its calls
    do to files (:attr:`Tool.files`), and the generic ones
    (:data:`~loopfuse.harness.generic.DEFAULT_FILE_TOOLS`): what
    :mod:`loopfuse.detector.editors` reads, whatever the ``harness`` setting.

    >>> tools = file_tools()
    >>> tools["str_replace_editor"], tools["apply_patch"], tools["Read"]
    (<FileAccess.BY_COMMAND: 'command'>, <FileAccess.EDITS: 'edit'>, <FileAccess.READS: 'read'>)
    """
    found = {name: FileAccess(access) for name, access in DEFAULT_FILE_TOOLS}
    for harness in (harness_named(name) for name in HARNESSES):
        for tool in harness.tools:
            if tool.files is None:
                continue
            known = found.setdefault(tool.name, tool.files)
            if known is not tool.files:  # two harnesses disagree: a table to fix, not a guess
                raise ValueError(f"{tool.name}: {known} or {tool.files}? ({harness.name})")
    return found


NOT_RUN_ORDER: Final[tuple[str, ...]] = (
    "langchain",
    "generic",
    "openai_agents",
    "pydantic_ai",
    "smolagents",
    "crewai",
    "openhands",
)
"""The order the frameworks' :class:`NotRunAnswers` are tried in (``generic``: the plain
forms of :mod:`loopfuse.harness.generic`): each alternative starts with its own literal,
so the order only settles an answer two of them would both read."""


@cache
def not_run_answers() -> NotRunAnswers:
    """Every framework's answers to a call it could not run, as one
    :class:`NotRunAnswers` (the harnesses in :data:`NOT_RUN_ORDER`, then any other that
    declares some): what :mod:`loopfuse.detector.errors` reads, for every harness.

    >>> "is not a valid tool" in not_run_answers().pattern
    True
    """
    order = [*NOT_RUN_ORDER, *(name for name in HARNESSES if name not in NOT_RUN_ORDER)]
    parts: list[NotRunAnswers] = []
    for name in order:
        if name == "generic":
            parts.append(NotRunAnswers(DEFAULT_NOT_RUN_PATTERN, DEFAULT_NOT_RUN_STARTS))
        elif (answers := harness_named(name).not_run) is not None:
            parts.append(answers)
    return NotRunAnswers(
        "|".join(part.pattern for part in parts if part.pattern),
        tuple(dict.fromkeys(start for part in parts for start in part.starts)),
        tuple(dict.fromkeys(end for part in parts for end in part.ends)),
        "|".join(part.label for part in parts if part.label),
    )
