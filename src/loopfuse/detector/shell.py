"""Shell-aware classification: which tools are shells, and which command lines only read.

Most coding agents act through one shell tool (``bash``, ``shell``, ``exec_command``,
``run_shell_command``, …), so a tool's *name* says nothing about whether a call changes
anything; its command line does. :class:`ShellClassifier` answers, for one tool call:

- ``None``: the tool is not a shell (its name decides, as before);
- ``True``: a shell command line made only of read-only programs (``tail -5 build.log``,
  ``gh run view 4242``, ``sleep 60 && tail -n 3 train.log``) — an observation;
- ``False``: a shell command that changes state, or that could not be read.

Of a read-only line it also tells whether it *waits* (:meth:`ShellClassifier.is_wait`):
``sleep 30 && tail log``, ``kubectl wait … --timeout=60s``, ``until [ -f done ]; do sleep
5; done`` (:mod:`._shell_waits`); the detector judges such a call as a wait.

The command line is attacker-controlled text. Reading it never raises on a ``str``, costs
time linear in its length (a line longer than ``max_command_length`` is not read at all),
and whenever the reader is unsure the answer is ``False``: calling a poll state-changing
only costs it the larger read-only allowance, while calling a write read-only would let a
loop that changes things run longer. What counts as read-only, and why: docs/shell.md.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from functools import partial
from typing import Final

from loopfuse.detector._shell_rules import compile_commands, line_is_read_only
from loopfuse.detector._shell_waits import line_waits
from loopfuse.detector._textcache import TextCache
from loopfuse.detector.tools import name_words
from loopfuse.errors import ConfigError
from loopfuse.harness.generic import DEFAULT_READ_ONLY_COMMANDS, DEFAULT_SHELL_TOOLS
from loopfuse.intent import json_loads

__all__ = [
    "COMMAND_KEYS",
    "DEFAULT_READ_ONLY_COMMANDS",
    "DEFAULT_SHELL_TOOLS",
    "MAX_COMMAND_LENGTH",
    "READ_ONLY",
    "STATE_CHANGING",
    "WAITS",
    "ShellClassifier",
    "classify_call",
    "command_of",
    "is_read_only_command",
    "is_shell_tool",
]

COMMAND_KEYS: Final[tuple[str, ...]] = (
    "command", "cmd", "commands", "script", "input", "command_line", "CommandLine",
    "commandLine", "argv",
)  # fmt: skip
"""Argument keys that hold the command line, tried in this order."""

MAX_COMMAND_LENGTH: Final = 4096
"""Longest command line (characters) that is read; a longer one is state-changing.

Reading is one linear pass: the costliest 4 KiB lines (thousands of short commands) take
a few milliseconds, and real read-only polls are far shorter (docs/shell.md)."""

STATE_CHANGING: Final = 0
"""What :meth:`ShellClassifier.reading` says of a line that changes state (or was not read)."""
READ_ONLY: Final = 1
"""... of a line that only reads."""
WAITS: Final = 2
"""... of a line that only reads and waits (for time, or for a condition)."""

_MAX_JSON_ARGUMENTS: Final = 65536  # an arguments string parsed to find its command
# The limit itself is bounded: at 64 KiB the worst line costs about 0.1 s (docs/shell.md).
_LONGEST_LIMIT: Final = 65536


class ShellClassifier:
    """Compiled shell-tool patterns and read-only command list, with a per-command cache.

    ``shell_tools`` and ``read_only_commands`` replace the defaults (extend them with
    ``(*DEFAULT_SHELL_TOOLS, "my_runner")``); invalid settings raise
    :class:`~loopfuse.errors.ConfigError` naming the setting. Thread-safe.

    >>> shells = ShellClassifier()
    >>> shells.classify_call("bash", {"command": "tail -5 build.log"})
    True
    >>> shells.classify_call("shell", {"command": ["bash", "-lc", "rm -rf build"]})
    False
    >>> shells.classify_call("read_file", {"path": "a.py"}) is None
    True
    >>> custom = ShellClassifier(read_only_commands=(*DEFAULT_READ_ONLY_COMMANDS, "make -n"))
    >>> custom.is_read_only("make -n all"), custom.is_read_only("make all")
    (True, False)
    >>> ShellClassifier(shell_tools=["", "bash"])
    Traceback (most recent call last):
        ...
    loopfuse.errors.ConfigError: shell_tools pattern '' has no letters or digits
    """

    __slots__ = (
        "_max_length",
        "_patterns",
        "_read",
        "_table",
    )

    def __init__(
        self,
        shell_tools: Iterable[str] | None = None,
        read_only_commands: Iterable[str] | None = None,
        *,
        max_command_length: int = MAX_COMMAND_LENGTH,
        cache_size: int = 4096,
    ) -> None:
        self._patterns = _shell_patterns(
            DEFAULT_SHELL_TOOLS if shell_tools is None else shell_tools
        )
        entries = DEFAULT_READ_ONLY_COMMANDS if read_only_commands is None else read_only_commands
        self._table = compile_commands(entries)
        self._max_length = _bounded_int(max_command_length, "max_command_length", _LONGEST_LIMIT)
        table = self._table
        # Command lines are the client's (up to max_command_length): keyed by digest.
        self._read: TextCache[int] = TextCache(
            partial(_reading, table=table), _bounded_int(cache_size, "cache_size")
        )

    def is_shell_tool(self, name: str) -> bool:
        """True when the tool's own name is one of the shell patterns (False for a non-str).

        >>> s = ShellClassifier()
        >>> s.is_shell_tool("Bash"), s.is_shell_tool("mcp__desktop__execute_command")
        (True, True)
        >>> s.is_shell_tool("BashOutput"), s.is_shell_tool("bash_history_search")
        (False, False)
        """
        return isinstance(name, str) and name_words(name)[1] in self._patterns

    def command_of(self, arguments: object) -> str | None:
        """The command line in a shell call's arguments, or None when there is none.

        A string is the command itself (or a JSON object holding it); an argv list
        (``["bash", "-lc", "tail -5 x"]``, as Codex sends) is joined with shell quoting; an
        object gives the first of :data:`COMMAND_KEYS` it holds — a string, an argv list,
        or for ``commands`` a list of command lines. OpenHands' ``is_input`` (text typed
        into a running program) is not a command line.

        >>> s = ShellClassifier()
        >>> s.command_of({"command": "ls -la", "timeout": 30})
        'ls -la'
        >>> s.command_of({"command": ["bash", "-lc", "tail -5 x"]})
        "bash -lc 'tail -5 x'"
        >>> s.command_of('{"cmd": "git status"}'), s.command_of({"path": "a.py"})
        ('git status', None)
        """
        return _command_of(arguments, 0)

    def is_read_only(self, command: str) -> bool:
        """True only when every part of the command line is a read-only program.

        >>> s = ShellClassifier()
        >>> s.is_read_only("sleep 60 && tail -n 3 train.log")
        True
        >>> s.is_read_only("ls; rm -rf x"), s.is_read_only("git log > out.txt")
        (False, False)
        """
        return self.reading(command) != STATE_CHANGING

    def is_wait(self, command: str) -> bool:
        """True when the command line only reads and waits: led by ``sleep`` (``sleep 30
        && tail -5 build.log``), or waiting for a condition (``kubectl wait``, ``gh run
        watch``, ``until [ -f done ]; do sleep 5; done``, any of them under ``timeout``).

        >>> s = ShellClassifier()
        >>> s.is_wait("sleep 60 && tail -n 3 train.log"), s.is_wait("tail -n 3 train.log")
        (True, False)
        >>> s.is_wait("sleep 5 && rm -rf build")  # a wait only reads
        False
        """
        return self.reading(command) == WAITS

    def reading(self, command: str) -> int:
        """:data:`STATE_CHANGING`, :data:`READ_ONLY` or :data:`WAITS` for one command
        line (one pass, cached)."""
        if not isinstance(command, str) or len(command) > self._max_length:
            return STATE_CHANGING
        if type(command) is not str:
            command = str.__str__(command)  # a plain copy: a subclass's hash is not trusted
        return self._read.call(command)

    def call_reading(self, name: str, arguments: object) -> int | None:
        """``None`` for a tool that is not a shell; for a shell call, :meth:`reading` of
        its command line (:data:`STATE_CHANGING` when it has none).

        >>> ShellClassifier().call_reading("bash", {"command": "sleep 5 && cat out.txt"})
        2
        """
        if not self.is_shell_tool(name):
            return None
        command = self.command_of(arguments)
        return STATE_CHANGING if command is None else self.reading(command)

    def classify_call(self, name: str, arguments: object) -> bool | None:
        """None for a tool that is not a shell; for a shell, whether the call only reads.

        >>> s = ShellClassifier()
        >>> s.classify_call("run_shell_command", {"command": "kubectl get pods -l app=web"})
        True
        >>> s.classify_call("bash", {"command": "sed -i 's/a/b/' f"})
        False
        >>> s.classify_call("bash", {"restart": True})  # no command line: state-changing
        False
        """
        found = self.call_reading(name, arguments)
        return None if found is None else found != STATE_CHANGING


def _reading(text: str, table: dict[str, tuple[tuple[str, ...], ...]]) -> int:
    """What one command line is (:meth:`ShellClassifier.reading`), uncached."""
    if not line_is_read_only(text, table):
        return STATE_CHANGING
    return WAITS if line_waits(text) else READ_ONLY


def _shell_patterns(patterns: Iterable[str]) -> frozenset[tuple[str, ...]]:
    if isinstance(patterns, str):
        raise ConfigError("shell_tools must be a collection of names, not a single str")
    words = set()
    try:
        for pattern in patterns:
            if not isinstance(pattern, str):
                raise ConfigError(
                    f"shell_tools must hold str patterns, got {type(pattern).__name__}"
                )
            own = name_words(pattern)[1]
            if not own:
                raise ConfigError(f"shell_tools pattern {pattern!r} has no letters or digits")
            words.add(own)
    except TypeError as error:
        raise ConfigError(f"shell_tools must be a collection of names: {error}") from None
    return frozenset(words)


def _bounded_int(value: object, setting: str, most: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{setting} must be an int >= 0, got {value!r}")
    if most is not None and value > most:
        raise ConfigError(f"{setting} must be an int from 0 to {most}, got {value!r}")
    return value


def _argv_line(argv: list[object]) -> str | None:
    if not argv or not all(isinstance(word, str) for word in argv):
        return None
    return shlex.join(str(word) for word in argv)


def _command_of(arguments: object, depth: int) -> str | None:
    if isinstance(arguments, str):
        if (
            depth == 0
            and arguments.lstrip()[:1] in ("{", "[")
            and (len(arguments) <= _MAX_JSON_ARGUMENTS)
        ):
            try:
                parsed = json_loads(arguments)
            except (ValueError, RecursionError):
                return arguments  # "[ -f x ] && cat x" is a command line, not JSON
            if isinstance(parsed, dict | list):
                return _command_of(parsed, 1)
        return arguments
    if isinstance(arguments, list):
        return _argv_line(arguments)
    if not isinstance(arguments, dict):
        return None
    is_input = arguments.get("is_input")
    if is_input is True or (isinstance(is_input, str) and is_input.lower() == "true"):
        return None
    for key in COMMAND_KEYS:
        if key in arguments:
            value = arguments[key]
            if isinstance(value, str):
                return value
            if key == "commands" and isinstance(value, list) and value:
                lines = [line for line in value if isinstance(line, str)]
                return "\n".join(lines) if len(lines) == len(value) else None
            return _argv_line(value) if isinstance(value, list) else None
    action = arguments.get("action")  # {"action": {"type": "exec", "command": [...]}}
    return _command_of(action, depth + 1) if isinstance(action, dict) and depth < 2 else None


_DEFAULT: Final = ShellClassifier()


def is_shell_tool(name: str) -> bool:
    """:meth:`ShellClassifier.is_shell_tool` with the defaults.

    >>> is_shell_tool("exec_command"), is_shell_tool("write_file")
    (True, False)
    """
    return _DEFAULT.is_shell_tool(name)


def command_of(arguments: object) -> str | None:
    """:meth:`ShellClassifier.command_of` (the same for every configuration).

    >>> command_of({"commands": ["cd repo", "git status"]})
    'cd repo\\ngit status'
    """
    return _DEFAULT.command_of(arguments)


def is_read_only_command(command: str) -> bool:
    """:meth:`ShellClassifier.is_read_only` with the defaults.

    >>> is_read_only_command("gh run view 4242"), is_read_only_command("gh pr merge 7")
    (True, False)
    """
    return _DEFAULT.is_read_only(command)


def classify_call(name: str, arguments: object) -> bool | None:
    """:meth:`ShellClassifier.classify_call` with the defaults.

    >>> classify_call("Bash", {"command": "git status"}), classify_call("Bash", {"command": "make"})
    (True, False)
    """
    return _DEFAULT.classify_call(name, arguments)
