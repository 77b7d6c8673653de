"""How a detector reads a batch with one set of settings: which of its calls count, whether
they only read or cost, which files they edit, the tool limit that applies to it, and
which evidence of an error its answers are read with.

A :class:`BatchReader` is built once per :class:`~loopfuse.detector.DetectorSettings`
(it holds the compiled tool-name and command-line classifiers of its lists) and kept on
it as ``settings.reader``; the run (:mod:`loopfuse.detector.core`), ``check`` and the
replay ask it about every batch.
"""

from __future__ import annotations

from typing import Final

from loopfuse.detector.editors import EDIT, READ, editor_call
from loopfuse.detector.errors import ErrorReading
from loopfuse.detector.shell import ShellClassifier
from loopfuse.detector.tools import ToolClassifier, own_name

__all__ = ["BatchReader"]

# Asked for on every scan: the four readings made once (a NamedTuple's __new__ is slow).
_READINGS: Final = {
    (flags, frameworks): ErrorReading(flags, frameworks)
    for flags in (False, True)
    for frameworks in (False, True)
}


class BatchReader:
    """The reading of batches that one detector's settings call for.

    >>> reader = BatchReader(
    ...     observation_tools=("read",), costly_tools=(), shell_tools=("bash",),
    ...     read_only_commands=("cat",), tool_limits=(("deploy", 1),),
    ...     ignore_tools=frozenset({"think"}), editor_aware=True, error_flags=True,
    ...     framework_errors=True,
    ... )
    >>> reader.classify(("bash",), ({"command": "cat a.py"},))
    (True, False)
    >>> reader.kept(("think", "bash")), reader.tool_limit(("mcp__ops__deploy",))
    ([1], 1)
    """

    __slots__ = ("classifier", "editor_aware", "error_reading", "ignore_tools", "limits", "shell")

    def __init__(
        self,
        *,
        observation_tools: tuple[str, ...],
        costly_tools: tuple[str, ...],
        shell_tools: tuple[str, ...],
        read_only_commands: tuple[str, ...],
        tool_limits: tuple[tuple[str, int], ...],
        ignore_tools: frozenset[str],
        editor_aware: bool,
        error_flags: bool,
        framework_errors: bool,
    ) -> None:
        self.classifier = ToolClassifier(observation_tools, costly_tools)
        self.shell = ShellClassifier(shell_tools, read_only_commands)
        self.limits = dict(tool_limits)
        self.ignore_tools = ignore_tools
        self.editor_aware = editor_aware
        self.error_reading: ErrorReading = _READINGS[error_flags, framework_errors]
        """Which evidence of an error beyond the text heuristics is read: the flags results
        carry (``error_flags``), the frameworks' answers (``framework_errors``)."""

    def tool_limit(self, names: tuple[str, ...]) -> int | None:
        """The smallest ``tool_limits`` entry that applies to every call of a batch."""
        limits = self.limits
        if not limits:
            return None
        found: list[int] = []
        for name in names:
            limit = limits.get(name)
            if limit is None:
                limit = limits.get(own_name(name))
            if limit is None:
                return None
            found.append(limit)
        return min(found) if found else None

    def classify(self, names: tuple[str, ...], args: tuple[object, ...]) -> tuple[bool, bool]:
        """``(every call only reads, some call is costly)`` for one batch.

        A shell call is read-only when its command line is (:mod:`loopfuse.detector.shell`);
        so is a call of a tool named after the program its ``command`` runs (transcripts
        that name each action after its first word: ``cat``, ``grep``, ``sed``); with
        ``editor_aware``, an editor call when it only reads (:mod:`loopfuse.detector.editors`:
        ``str_replace_editor`` ``view``, ``Read``). Any other tool is judged by its name
        (:mod:`loopfuse.detector.tools`).
        """
        observation = bool(names)
        costly = False
        for name, arguments in zip(names, args, strict=False):
            read_only = self.shell.classify_call(name, arguments)
            if read_only is None and self.editor_aware:
                editor = editor_call(name, arguments)
                if editor is not None:
                    read_only = editor.action == READ
            if read_only is None:
                read_only = self._program_call(name, arguments)
            if read_only is None:
                obs, cost = self.classifier.classify_names((name,))
                observation = observation and obs
                costly = costly or cost
            else:
                observation = observation and read_only
        return observation, costly

    def edits(self, names: tuple[str, ...], args: tuple[object, ...]) -> tuple[str, ...] | None:
        """The files a state-changing batch edits through editor tools, when that is all
        it does (``editor_aware``); ``None`` when some call changes state otherwise (a
        shell command, a tool judged by its name) or names no file."""
        if not self.editor_aware:
            return None
        paths: list[str] = []
        for name, arguments in zip(names, args, strict=False):
            editor = editor_call(name, arguments)
            if editor is None or (editor.action == EDIT and editor.path is None):
                return None
            if editor.path is not None:
                paths.append(editor.path)
        return tuple(paths) if paths else None

    def _program_call(self, name: str, arguments: object) -> bool | None:
        """For a tool named after the program its command line starts with, whether that
        command line only reads; ``None`` for any other tool."""
        if type(arguments) is not dict or "command" not in arguments:
            return None
        command = arguments["command"]
        if type(command) is not str or not command.startswith(name):
            return None
        rest = command[len(name) : len(name) + 1]
        if rest not in ("", " ", "\t", "\n"):
            return None
        return self.shell.is_read_only(command)

    def kept(self, names: tuple[str, ...]) -> list[int] | None:
        """Which calls of a batch count (``ignore_tools``): their indices, or ``None`` when
        every call does (an empty list: none does)."""
        if not self.ignore_tools:
            return None
        keep = [k for k, name in enumerate(names) if not self.ignored(name)]
        return None if len(keep) == len(names) else keep

    def ignored(self, name: str) -> bool:
        """Whether calls of tool ``name`` are never counted."""
        return bool(self.ignore_tools) and (
            name in self.ignore_tools or own_name(name) in self.ignore_tools
        )
