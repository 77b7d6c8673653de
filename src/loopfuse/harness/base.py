"""What a harness is, as data: its tools and what each is, and how its answers say they
failed.

A *harness* is the program that runs an agent's tool calls (Claude Code, Codex CLI,
OpenHands, smolagents …). What a call *is* belongs to the harness that defined the tool:
Codex's ``write_stdin`` with empty ``chars`` waits on a process it started, with text it
types into it; Gemini CLI's older shell answers end with ``Error: (none)`` and ``Exit
Code: 0``, which is a success. Each harness module of this package declares that
knowledge as a :class:`Harness`; the detector reads it through the small
:class:`CallReader` protocol and names no harness itself.

How a call is judged (:class:`ToolKind`): ``read`` (only reads: the read-only allowance),
``wait`` (waits on something already running: progress while the answer says it still
runs), ``shell`` (a command line: judged by what it runs), ``editor`` (views or edits
files: judged by its arguments), ``costly`` (reads something that costs, the web),
``other`` (changes state). A tool nobody declared is judged by the generic vocabulary
(:mod:`loopfuse.harness.generic`), and a user's settings (``observation_tools`` …) still
win over any declaration for the tools they name.

How an answer says it failed, strongest evidence first: a structured field the harness
wrote (``is_error``, ``isError``, ``status: "error"``, an exit-code field:
:func:`structured_failure`); then the harness's own text conventions
(:attr:`Harness.answer_failed`); the generic text heuristics only when neither is known.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

__all__ = [
    "HARNESSES",
    "CallReader",
    "Harness",
    "Tool",
    "ToolKind",
    "structured_failure",
]

HARNESSES: Final[tuple[str, ...]] = (
    "claude_code",
    "codex",
    "gemini_cli",
    "qwen_code",
    "opencode",
    "openhands",
    "swe_agent",
    "smolagents",
    "langchain",
    "openai_agents",
    "pydantic_ai",
)
"""The harnesses with a module of their own in :mod:`loopfuse.harness`, by module name."""


class ToolKind(enum.StrEnum):
    """What one tool call is, for the detector."""

    READ = "read"
    """Only reads: gets ``max_observation_steps``."""
    WAIT = "wait"
    """Waits on something already running: progress while the answer says it still runs
    (``max_waits``)."""
    SHELL = "shell"
    """Runs a command line: read-only when the command line is (:mod:`loopfuse.detector.shell`)."""
    EDITOR = "editor"
    """Views or edits files: judged by its arguments (:mod:`loopfuse.detector.editors`)."""
    COSTLY = "costly"
    """Reads something that costs (the web, a browser): read-only, but keeps the ceiling."""
    OTHER = "other"
    """Changes state."""


@dataclass(frozen=True, slots=True)
class Tool:
    """One tool of a harness: its exact ``name`` as the harness sends it, its ``kind``,
    and, when one argument changes what a call is, that ``argument`` and the kind a call
    has when it is absent or empty (``when_empty``).

    >>> poll = Tool("write_stdin", ToolKind.OTHER, argument="chars", when_empty=ToolKind.WAIT)
    >>> poll.kind_for({"session_id": 3, "chars": ""}), poll.kind_for({"chars": "y\\n"})
    (<ToolKind.WAIT: 'wait'>, <ToolKind.OTHER: 'other'>)
    """

    name: str
    kind: ToolKind
    argument: str | None = None
    when_empty: ToolKind | None = None
    prose: tuple[str, ...] = ()
    """Arguments that are the model's prose about the call, not the call (a shell's
    ``description``): the same call with other prose is the same call."""

    def kind_for(self, arguments: object) -> ToolKind:
        """The kind of one call of this tool with ``arguments`` (a dict, or anything)."""
        if self.argument is None or self.when_empty is None:
            return self.kind
        value = arguments.get(self.argument) if type(arguments) is dict else None
        return self.when_empty if value is None or value == "" else self.kind


def _never(text: str) -> bool | None:
    return None


_NO_CONVENTION: Final = _never
"""The ``answer_failed`` of a harness that has no text convention."""


@dataclass(frozen=True, slots=True)
class Harness:
    """One harness's knowledge, as data.

    ``tools`` are the tools it defines; ``running`` the phrases (in the first or last
    lines of an answer to one of its waits) that say the thing waited on still runs;
    ``answer_failed`` reads its own text conventions for one answer (``True`` /
    ``False``: the convention says; ``None``: it does not, the other evidence decides);
    ``frame`` matches the lines it wraps every answer in (a status banner), which the
    generic heuristics must not read as the tool's words (looked for only in an answer
    holding one of ``frame_hints``); ``volatile`` matches the lines of an answer that
    change on every call whatever the tool did (a process id); ``failure_fields`` names
    the
    structured fields of its results that say whether a call failed (what its readers
    carry to the detector as the tool message's ``is_error``).

    >>> h = Harness("demo", "Demo", (Tool("poll", ToolKind.WAIT),), running=("running",))
    >>> h.kind("poll", {}), h.kind("mcp__x__poll", {}), h.kind("other", {})
    (<ToolKind.WAIT: 'wait'>, <ToolKind.WAIT: 'wait'>, None)
    >>> h.still_running("poll", "running: 3 of 9"), h.still_running("poll", "done")
    (True, False)
    """

    name: str
    title: str
    tools: tuple[Tool, ...] = ()
    running: tuple[str, ...] = ()
    answer_failed: Callable[[str], bool | None] = _never
    failure_fields: tuple[str, ...] = ()
    frame: re.Pattern[str] | None = None
    frame_hints: tuple[str, ...] = ()
    volatile: re.Pattern[str] | None = None
    _by_name: dict[str, Tool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {tool.name: tool for tool in self.tools})

    def tool(self, name: str) -> Tool | None:
        """The tool ``name`` (exact, or its own name after an ``mcp__server__`` or
        ``functions.`` namespace), or ``None`` when this harness does not define it."""
        found = self._by_name.get(name)
        if found is None and type(name) is str:
            own = _own_name(name)
            if own != name:
                found = self._by_name.get(own)
        return found

    def call(self, name: str, arguments: object) -> object:
        """``arguments`` without the prose the tool ``name`` carries beside the call.

        >>> from loopfuse.harness import harness_named
        >>> harness_named("claude_code").call("Bash", {"command": "ls", "description": "x"})
        {'command': 'ls'}
        """
        tool = self.tool(name)
        if tool is None or not tool.prose or type(arguments) is not dict:
            return arguments
        return {k: v for k, v in arguments.items() if k not in tool.prose}

    def without_volatile(self, text: str) -> str:
        """``text`` without the lines that change on every call (:attr:`volatile`)."""
        if self.volatile is None or type(text) is not str:
            return text
        return self.volatile.sub("", text)

    def kind(self, name: str, arguments: object) -> ToolKind | None:
        """What the call ``name(arguments)`` is, or ``None`` for a tool not declared here."""
        tool = self.tool(name)
        return None if tool is None else tool.kind_for(arguments)

    def still_running(self, name: str, text: str) -> bool:
        """Whether ``text``, the answer to a wait, says the thing waited on still runs."""
        if type(text) is not str:
            return False
        if not self.running:
            return False
        # The markers sit in an answer's first lines (Codex, Claude Code) or its last
        # (OpenHands): both ends are read, a bounded amount each.
        ends = text[:_MARKER_READ] + "\n" + text[-_MARKER_READ:]
        return any(marker in ends for marker in self.running)

    def failed(self, name: str, text: str) -> bool | None:
        """What this harness's own conventions say of one answer of tool ``name``."""
        if type(text) is not str or self.tool(name) is None:
            return None
        return self.answer_failed(text)

    def unframed(self, name: str, text: str) -> str:
        """``text`` without the lines this harness wraps every answer of tool ``name`` in
        (what the generic heuristics read)."""
        if self.frame is None or type(text) is not str or self.tool(name) is None:
            return text
        return self._unframed(text)

    def _unframed(self, text: str) -> str:
        frame = self.frame
        if frame is None:
            return text
        tail = text[-_FRAME_READ:]
        if not any(hint in tail for hint in self.frame_hints):
            return text  # a few substring searches in its end settle most answers
        return frame.sub("", text)

    def read(self, name: str, text: str) -> tuple[bool | None, str]:
        """:meth:`failed` and :meth:`unframed` of one answer at once: what the
        conventions say, and the text the generic heuristics read when they say
        nothing."""
        if type(text) is not str or self.tool(name) is None:
            return None, text
        return self.read_declared(text)

    def read_declared(self, text: str) -> tuple[bool | None, str]:
        """:meth:`read` of an answer of a tool this harness declares (a ``str``)."""
        said = self.answer_failed(text)
        if said is not None:
            return said, text
        if self.frame is None:
            return None, text
        return None, self._unframed(text)


class CallReader(Protocol):
    """What the detector asks of harness knowledge (a :class:`Harness`, or several
    merged: :func:`loopfuse.harness.reader_for`)."""

    def kind(self, name: str, arguments: object) -> ToolKind | None:
        """What the call is, or ``None`` for a tool not declared."""

    def still_running(self, name: str, text: str) -> bool:
        """Whether the answer to a wait says the thing waited on still runs."""

    def failed(self, name: str, text: str) -> bool | None:
        """What the harness's own conventions say of the answer (``None``: nothing)."""

    def unframed(self, name: str, text: str) -> str:
        """The answer without the harness's own frame (what the text heuristics read)."""

    def read(self, name: str, text: str) -> tuple[bool | None, str]:
        """``failed`` and ``unframed`` at once."""


_FRAME_READ: Final = 1024  # characters of an answer's end searched for its frame's lines
_MARKER_READ: Final = 512  # characters of each end of an answer searched for a marker
_NAMESPACE_SEPARATORS: Final = ("__", ".", ":", "/")


def _own_name(name: str) -> str:
    """``name`` without an ``mcp__server__`` / ``functions.`` namespace."""
    for separator in _NAMESPACE_SEPARATORS:
        if separator in name:
            name = name.rsplit(separator, 1)[-1] or name
    return name


_FAILED_STATUS: Final = frozenset({"error", "failed", "failure", "cancelled", "canceled"})
_OK_STATUS: Final = frozenset({"success", "succeeded", "ok", "completed"})
_EXIT_FIELDS: Final = ("exit_code", "exitCode", "returncode", "return_code")


def structured_failure(result: Mapping[str, object]) -> bool | None:
    """What the structured fields of one tool result say: ``True`` failed, ``False``
    succeeded, ``None`` no field says. Read in this order: ``is_error`` / ``isError``
    (a bool), ``status`` (``"error"``, ``"failed"``, ``"cancelled"`` … or
    ``"success"``), an exit-code field (an int: 0 succeeded).

    >>> structured_failure({"is_error": True}), structured_failure({"status": "success"})
    (True, False)
    >>> structured_failure({"exit_code": 2}), structured_failure({"output": "x"}) is None
    (True, True)
    """
    for key in ("is_error", "isError"):
        flag = result.get(key)
        if type(flag) is bool:
            return flag
    status = result.get("status")
    if type(status) is str:
        lowered = status.lower()
        if lowered in _FAILED_STATUS:
            return True
        if lowered in _OK_STATUS:
            return False
    for key in _EXIT_FIELDS:
        code = result.get(key)
        if type(code) is int:
            return code != 0
    return None
