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
A framework that answers a call it could not run in words of its own (``Tool 'x' not
found.``) says how (:class:`NotRunAnswers`): those words are read, for every harness, by
:mod:`loopfuse.detector.errors`. An editor or file tool says what its calls do to files
(:class:`FileAccess`): read by :mod:`loopfuse.detector.editors`.
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
    "FileAccess",
    "Harness",
    "NotRunAnswers",
    "Tool",
    "ToolKind",
    "structured_failure",
]

HARNESSES: Final[tuple[str, ...]] = (
    "claude_code",
    "codex",
    "gemini_cli",
    "qwen_code",
    "copilot_cli",
    "kimi_code",
    "pi",
    "opencode",
    "crush",
    "openhands",
    "swe_agent",
    "smolagents",
    "langchain",
    "openai_agents",
    "pydantic_ai",
    "crewai",
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


class FileAccess(enum.StrEnum):
    """What the calls of an editor or file tool do to files (:mod:`loopfuse.detector.editors`
    reads their arguments)."""

    READS = "read"
    """Only reads files (``Read``, ``read_file``, ``glob``)."""
    EDITS = "edit"
    """Changes the file its arguments name (``Edit``, ``write_file``, ``apply_patch``)."""
    BY_COMMAND = "command"
    """Its ``command`` argument says (the text editor protocol of ``str_replace_editor``:
    :data:`~loopfuse.harness.generic.TEXT_EDITOR_READS` and ``_EDITS``)."""


@dataclass(frozen=True, slots=True)
class NotRunAnswers:
    """How a framework answers a call it could not run (a tool that does not exist,
    arguments the tool does not take, a tool that raised), in place of the tool's answer.

    ``pattern`` holds regular-expression alternatives (``|``), each starting with its own
    literal, matched at the start of an answer, a line at most ``FRAMEWORK_HEAD`` long;
    its named groups mark what changes from one such answer to the next: ``u…`` the
    invented tool's name, ``a…`` arguments echoed back, ``i…`` a call id (group names
    are unique across every harness). ``starts`` are the literals its alternatives begin
    with (a cheap filter), ``ends`` the sentences some such answers end with, and
    ``label`` a pattern of what may come before such an answer (a ``Call id:`` line)."""

    pattern: str = ""
    starts: tuple[str, ...] = ()
    ends: tuple[str, ...] = ()
    label: str = ""


@dataclass(frozen=True, slots=True)
class Tool:
    """One tool of a harness: its exact ``name`` as the harness sends it, its ``kind``,
    and, when one argument changes what a call is, that ``argument`` and the kind a call
    has when it is absent or empty (``when_empty``), or when it matches ``matching``
    (``when_matching``).

    >>> poll = Tool("write_stdin", ToolKind.OTHER, argument="chars", when_empty=ToolKind.WAIT)
    >>> poll.kind_for({"session_id": 3, "chars": ""}), poll.kind_for({"chars": "y\\n"})
    (<ToolKind.WAIT: 'wait'>, <ToolKind.OTHER: 'other'>)
    >>> read = Tool("Read", ToolKind.READ, argument="file_path",
    ...             matching=re.compile(r"[.]output\\Z"), when_matching=ToolKind.WAIT)
    >>> read.kind_for({"file_path": "/tmp/t/b1.output"}), read.kind_for({"file_path": "a.py"})
    (<ToolKind.WAIT: 'wait'>, <ToolKind.READ: 'read'>)
    """

    name: str
    kind: ToolKind
    argument: str | None = None
    when_empty: ToolKind | None = None
    prose: tuple[str, ...] = ()
    """Arguments that are the model's prose about the call, not the call (a shell's
    ``description``): the same call with other prose is the same call."""
    matching: re.Pattern[str] | None = None
    """With ``argument``: a call whose ``argument`` (a string, up to
    :data:`_ARGUMENT_READ` characters) this pattern finds is a ``when_matching`` call."""
    when_matching: ToolKind | None = None
    ended: re.Pattern[str] | None = None
    """For a wait whose answers never say the thing waited on still runs, but say when it
    ended (a last line such as ``[exited with code 0]``): that line, looked for in an
    answer's end. An answer that is the thing's output (``output``) without it says the
    thing still runs."""
    output: re.Pattern[str] | None = None
    """With ``ended``: how an answer that is the output read starts (matched at its
    start); any other answer (the tool's error: no such file) says nothing of a run."""
    files: FileAccess | None = None
    """For an editor or file tool: what its calls do to files."""

    def kind_for(self, arguments: object) -> ToolKind:
        """The kind of one call of this tool with ``arguments`` (a dict, or anything)."""
        if self.argument is None:
            return self.kind
        value = arguments.get(self.argument) if type(arguments) is dict else None
        if self.when_empty is not None and (value is None or value == ""):
            return self.when_empty
        if (
            self.matching is not None
            and self.when_matching is not None
            and type(value) is str
            and len(value) <= _ARGUMENT_READ
            and self.matching.search(value) is not None
        ):
            return self.when_matching
        return self.kind


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
    the structured fields of its results that say whether a call failed (what its
    readers carry to the detector as the tool message's ``is_error``); ``not_run`` how it
    answers a call it could not run, in words of its own (:class:`NotRunAnswers`).

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
    not_run: NotRunAnswers | None = None
    _by_name: dict[str, Tool] = field(init=False, repr=False, compare=False)
    _ends: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {tool.name: tool for tool in self.tools})
        object.__setattr__(self, "_ends", any(tool.ended is not None for tool in self.tools))

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
        """Whether ``text``, the answer to a wait, says the thing waited on still runs:
        one of :attr:`running` in its first or last lines, or, for a tool that says when
        the thing ended (:attr:`Tool.ended`), no such line at its end."""
        if type(text) is not str:
            return False
        if self._ends:
            tool = self.tool(name)
            if tool is not None and tool.ended is not None:
                if tool.output is not None and tool.output.match(text, 0, _MARKER_READ) is None:
                    return False  # not the output: an error says nothing of a run
                return tool.ended.search(text[-_MARKER_READ:]) is None
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
_ARGUMENT_READ: Final = 4096  # longest argument value a Tool's ``matching`` is tried on
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
