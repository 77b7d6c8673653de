"""How a detector reads a batch with one set of settings: which of its calls count, whether
they only read or cost, which files they edit, the tool limit that applies to it, and
which evidence of an error its answers are read with.

A :class:`BatchReader` is built once per :class:`~loopfuse.detector.DetectorSettings`
(it holds the compiled tool-name and command-line classifiers of its lists) and kept on
it as ``settings.reader``; the run (:mod:`loopfuse.detector.core`), ``check`` and the
replay ask it about every batch.
"""

from __future__ import annotations

from loopfuse.detector._shell_waits import bound_ran_out
from loopfuse.detector.editors import EDIT, READ, editor_call
from loopfuse.detector.errors import ErrorReading
from loopfuse.detector.shell import STATE_CHANGING, WAITS, ShellClassifier
from loopfuse.detector.tools import ToolClassifier, own_name
from loopfuse.harness import CallReader, ToolKind, reader_for
from loopfuse.harness.generic import (
    DEFAULT_COSTLY_TOOLS,
    DEFAULT_OBSERVATION_TOOLS,
    DEFAULT_SHELL_TOOLS,
)

__all__ = ["BatchReader", "Kinds"]

Kinds = tuple[bool, bool, bool]
"""``(every call only reads, some call is costly, every call waits)`` of one batch."""


class BatchReader:
    """The reading of batches that one detector's settings call for.

    >>> reader = BatchReader(
    ...     observation_tools=("read",), costly_tools=(), shell_tools=("bash",),
    ...     read_only_commands=("cat", "sleep", "tail"), tool_limits=(("deploy", 1),),
    ...     ignore_tools=frozenset({"think"}), editor_aware=True, error_flags=True,
    ...     framework_errors=True,
    ... )
    >>> reader.classify(("bash",), ({"command": "cat a.py"},))
    (True, False)
    >>> reader.kinds(("write_stdin",), ({"session_id": 3, "chars": ""},))
    (True, False, True)
    >>> reader.kinds(("bash",), ({"command": "sleep 30 && tail -5 build.log"},))
    (True, False, True)
    >>> reader.kept(("think", "bash")), reader.tool_limit(("mcp__ops__deploy",))
    ([1], 1)
    """

    __slots__ = (
        "_declared_kind",
        "_user_names",
        "classifier",
        "editor_aware",
        "error_reading",
        "harness",
        "ignore_tools",
        "limits",
        "shell",
        "user",
        "user_shell",
    )

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
        harness: str = "auto",
    ) -> None:
        self.classifier = ToolClassifier(observation_tools, costly_tools)
        self.shell = ShellClassifier(shell_tools, read_only_commands)
        self.limits = dict(tool_limits)
        self.ignore_tools = ignore_tools
        self.editor_aware = editor_aware
        self.harness: CallReader | None = reader_for(harness)
        """What the harnesses declare about their tools (``None``: the generic vocabulary
        only)."""
        # A user's own names win over any harness's declaration for the tools they name.
        extra_observation = _extra(observation_tools, DEFAULT_OBSERVATION_TOOLS)
        extra_costly = _extra(costly_tools, DEFAULT_COSTLY_TOOLS)
        self.user = (
            ToolClassifier(extra_observation, extra_costly)
            if extra_observation or extra_costly
            else None
        )
        extra_shells = _extra(shell_tools, DEFAULT_SHELL_TOOLS)
        self.user_shell = ShellClassifier(extra_shells, ()) if extra_shells else None
        self._user_names = self.user is not None or self.user_shell is not None
        self._declared_kind = None if self.harness is None else self.harness.kind
        self.error_reading: ErrorReading = ErrorReading(error_flags, framework_errors, self.harness)
        """Which evidence of an error beyond the text heuristics is read: the flags results
        carry (``error_flags``), the frameworks' answers (``framework_errors``), the
        harnesses' own conventions."""

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
        """``(every call only reads, some call is costly)`` for one batch (see :meth:`kinds`)."""
        observation, costly, _ = self.kinds(names, args)
        return observation, costly

    def kinds(self, names: tuple[str, ...], args: tuple[object, ...]) -> Kinds:
        """``(every call only reads, some call is costly, every call waits)`` for one batch.

        A call of a tool a harness declared is what the harness says it is
        (:mod:`loopfuse.harness`): a read, a wait on something running (also a read), a
        shell (judged by its command line), an editor (by its arguments), costly, or a
        change of state — unless the user's own settings name the tool. Any other call:
        a shell call is read-only when its command line is (:mod:`loopfuse.detector.shell`);
        so is a call of a tool named after the program its ``command`` runs (transcripts
        that name each action after its first word: ``cat``, ``grep``, ``sed``); with
        ``editor_aware``, an editor call when it only reads (:mod:`loopfuse.detector.editors`:
        ``str_replace_editor`` ``view``, ``Read``). Any other tool is judged by its name
        (:mod:`loopfuse.detector.tools`).

        A shell call, declared or not, whose command line only reads and waits (``sleep
        30 && tail log``, ``kubectl wait …``, ``until …; do sleep 5; done``:
        :mod:`loopfuse.detector._shell_waits`) is a wait, as a harness's own wait tool is.
        """
        observation = bool(names)
        costly = False
        wait = bool(names)
        declared = self._declared_kind
        for name, arguments in zip(names, args, strict=False):
            kind = None if declared is None else declared(name, arguments)
            if kind is not None and self._user_names and self._user_named(name):
                kind = None  # the user's own names decide for this tool
            if kind is not None:
                if kind is ToolKind.READ or kind is ToolKind.COSTLY:
                    wait = False
                    costly = costly or kind is ToolKind.COSTLY
                elif kind is ToolKind.SHELL:
                    reading = self._command_reading(arguments)
                    wait = wait and reading == WAITS
                    observation = observation and reading != STATE_CHANGING
                elif kind is not ToolKind.WAIT:
                    wait = False
                    declared_read, cost = self._declared(kind, name, arguments)
                    observation = observation and declared_read
                    costly = costly or cost
                continue
            shell = self.shell.call_reading(name, arguments)
            read_only = None if shell is None else shell != STATE_CHANGING
            if read_only is None and self.editor_aware:
                editor = editor_call(name, arguments)
                if editor is not None:
                    read_only = editor.action == READ
            if read_only is None:
                shell = self._program_call(name, arguments)
                read_only = None if shell is None else shell != STATE_CHANGING
            wait = wait and shell == WAITS
            if read_only is None:
                obs, cost = self.classifier.classify_names((name,))
                observation = observation and obs
                costly = costly or cost
            else:
                observation = observation and read_only
        return observation, costly, wait

    def _user_named(self, name: str) -> bool:
        """Whether the user's own ``observation_tools``, ``costly_tools`` or ``shell_tools``
        (beyond the defaults) name this tool: then they decide, not a harness."""
        if self.user is not None and any(self.user.classify_names((name,))):
            return True
        return self.user_shell is not None and self.user_shell.is_shell_tool(name)

    def _declared(self, kind: ToolKind, name: str, arguments: object) -> tuple[bool, bool]:
        """``(only reads, costly)`` of a call a harness declared of ``kind``."""
        if kind is ToolKind.READ or kind is ToolKind.WAIT:
            return True, False
        if kind is ToolKind.COSTLY:
            return True, True
        if kind is ToolKind.SHELL:
            return self._command_reading(arguments) != STATE_CHANGING, False
        if kind is ToolKind.EDITOR:
            if not self.editor_aware:
                return self.classifier.classify_names((name,))
            editor = editor_call(name, arguments)
            return editor is not None and editor.action == READ, False
        return False, False

    def _command_reading(self, arguments: object) -> int:
        """:meth:`~loopfuse.detector.shell.ShellClassifier.reading` of a shell call's
        command line (state-changing when it has none)."""
        command = self.shell.command_of(arguments)
        return STATE_CHANGING if command is None else self.shell.reading(command)

    def still_running(self, names: tuple[str, ...], text: str | None) -> bool:
        """Whether the answers of a wait batch say the thing waited on still runs: the
        harness's own words (``Process running with session ID``), or a shell wait's
        bound that ran out before what it waited for happened (:func:`~loopfuse.detector.
        _shell_waits.bound_ran_out`: ``timeout``'s 124, ``timed out waiting for the
        condition``)."""
        if text is None:
            return False
        harness = self.harness
        if harness is not None and any(harness.still_running(name, text) for name in names):
            return True
        return bound_ran_out(text)

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

    def _program_call(self, name: str, arguments: object) -> int | None:
        """For a tool named after the program its command line starts with, the
        :meth:`~loopfuse.detector.shell.ShellClassifier.reading` of that command line;
        ``None`` for any other tool."""
        if type(arguments) is not dict or "command" not in arguments:
            return None
        command = arguments["command"]
        if type(command) is not str or not command.startswith(name):
            return None
        rest = command[len(name) : len(name) + 1]
        if rest not in ("", " ", "\t", "\n"):
            return None
        return self.shell.reading(command)

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


def _extra(patterns: tuple[str, ...], defaults: tuple[str, ...]) -> tuple[str, ...]:
    """The patterns a user added to (or put in place of) the defaults."""
    known = set(defaults)
    return tuple(pattern for pattern in patterns if pattern not in known)
