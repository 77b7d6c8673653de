"""Whether a command line only reads: wrappers, sub-commands and the configured list.

:func:`line_is_read_only` reads a line into simple commands (:mod:`._shell_lex`) and asks
of each: after its ``NAME=value`` assignments and ``!``, and through the wrappers that
only run another command (``timeout``, ``nice``, ``time``, ``env``, ``command``,
``stdbuf``, ``xargs``, ``watch``, ``bash -c``), is it a configured read-only program or
sub-command whose arguments pass its guard (:mod:`._shell_programs`)? Command lines given
to ``bash -c`` or ``watch`` are read again, at most :data:`MAX_NESTING` levels deep, so the
work stays linear in the length of the outer line. The words of a ``while`` or ``until``
loop (``until [ -f done ]; do sleep 5; done``) open and close its parts: each command in
them is judged as any other (:data:`LOOP_WORDS`).

A word that expands (``$X``, ``*.py``, ``{a,b}``) may become any words at all, so it may
only be an argument of a program in :data:`ANY_ARGUMENTS`, after that program's name: not
the program, not a wrapper's option or command line, not anything a guard has to read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Final

from loopfuse.detector._shell_lex import read_commands
from loopfuse.detector._shell_programs import (
    ANY_ARGUMENTS,
    OPTION_SPECS,
    PROGRAM_GUARDS,
    SUB_COMMAND_GUARDS,
)
from loopfuse.errors import ConfigError

__all__ = [
    "LOOP_WORDS",
    "MAX_NESTING",
    "CommandTable",
    "command_words",
    "compile_commands",
    "line_is_read_only",
    "program_name",
    "sub_command",
    "wrapped",
]

MAX_NESTING: Final = 2
"""How many ``bash -c '…'`` / ``watch '…'`` levels are read; a deeper one is unreadable."""

LOOP_WORDS: Final = frozenset({"while", "until", "do"})
"""The reserved words that open a part of a ``while`` / ``until`` loop, before the command
they run; ``done`` closes it. A loop runs nothing but its commands: it only reads when
each of them does. (``for``, ``if`` and ``case`` are not read: their words run nothing
either, but ``for`` assigns a variable and none of them was needed by a wait.)"""

CommandTable = dict[str, tuple[tuple[str, ...], ...]]
"""Program -> the sub-command word sequences that are read-only (``()``: any use)."""

# A wrapper gives back where in the argv the program it runs starts, a command line it
# runs through a shell, or a decision (True: it runs nothing, e.g. "env" alone; False: it
# cannot be read).
Inner = int | str | bool

_ASSIGNMENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
# Variables that make a reading program run or load something else (a pager, an editor,
# a browser, a preprocessor, a library, a startup file, another PATH): assigning one in
# front of a command makes the command unreadable. A pager may still be set to a pager.
_RISKY_VARIABLE: Final = re.compile(
    r"(?:PATH|ENV|BASH_ENV|SHELLOPTS|BASHOPTS|PROMPT_COMMAND|PS4|IFS|RIPGREP_CONFIG_PATH"
    r"|GCONV_PATH|(?:LD|DYLD|BASH_FUNC|GIT|LESS|PIP|PYTHON)\w*"
    r"|\w*(?:PAGER|EDITOR|VISUAL|BROWSER|_COMMAND))\+?="
)
_PAGER_ASSIGNMENT: Final = re.compile(r"\w*PAGER=(?:cat|less|more)?")
_TRUSTED_DIRS: Final = frozenset({"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin"})
_SHELLS: Final = frozenset({"bash", "sh", "dash", "zsh", "ksh"})
_SHELL_FLAGS: Final = frozenset("lexuvco")


def compile_commands(entries: Iterable[str], setting: str = "read_only_commands") -> CommandTable:
    """The lookup table for read-only command entries such as ``"cat"`` or ``"git log"``.

    >>> compile_commands(["cat", "git log", "git  show"])
    {'cat': ((),), 'git': (('log',), ('show',))}
    >>> compile_commands("cat", "commands")
    Traceback (most recent call last):
        ...
    loopfuse.errors.ConfigError: commands must be a collection of commands, not a single str
    """
    if isinstance(entries, str):
        raise ConfigError(f"{setting} must be a collection of commands, not a single str")
    table: dict[str, list[tuple[str, ...]]] = {}
    try:
        for entry in entries:
            if not isinstance(entry, str):
                raise ConfigError(f"{setting} must hold str commands, got {type(entry).__name__}")
            words = entry.split()
            if not words:
                raise ConfigError(f"{setting} entry {entry!r} names no program")
            subs = table.setdefault(words[0], [])
            if tuple(words[1:]) not in subs:
                subs.append(tuple(words[1:]))
    except TypeError as error:
        raise ConfigError(f"{setting} must be a collection of commands: {error}") from None
    return {program: tuple(subs) for program, subs in table.items()}


def line_is_read_only(text: str, table: CommandTable, depth: int = 0) -> bool:
    """True when every simple command of ``text`` is read-only under ``table``."""
    if depth > MAX_NESTING:
        return False
    return read_commands(
        text, lambda argv, expanding: _command_is_read_only(argv, expanding, table, depth)
    )


def command_words(argv: Sequence[str], expanding: Sequence[int] = ()) -> int | None:
    """Where the command of one simple command starts, past the loop words that open it
    (:data:`LOOP_WORDS`, written literally); ``None`` when it is a loop word alone (``do``
    with no command is a syntax error: not read). ``done`` alone is ``len(argv)``: it runs
    nothing.

    >>> command_words(["until", "[", "-f", "x", "]"]), command_words(["done"])
    (1, 1)
    >>> command_words(["do"]) is None, command_words(["while"], expanding=[0])
    (True, 0)
    """
    start = 0
    while start < len(argv) and argv[start] in LOOP_WORDS and start not in expanding:
        start += 1
    if start == len(argv):
        return None if start else 0
    if start == 0 and len(argv) == 1 and argv[0] == "done" and 0 not in expanding:
        return 1
    return start


def _command_is_read_only(
    argv: list[str], expanding: Sequence[int], table: CommandTable, depth: int
) -> bool:
    opened = command_words(argv, expanding)
    if opened is None:
        return False
    if opened == len(argv) and argv:
        return True  # "done": closes a loop, runs nothing
    start = opened
    # An assignment's value is one word whatever it expands to (no splitting, no globs).
    while start < len(argv) and (argv[start] == "!" or _ASSIGNMENT.match(argv[start])):
        if not _assignment_is_harmless(argv[start]):
            return False
        start += 1
    if not argv:
        return True  # only safe redirections ("< f")
    if start == len(argv):
        return False  # "X=1" alone sets a variable of the shell (or "while !" alone)
    first_expanding = next((i - start for i in expanding if i >= start), len(argv) - start)
    return _argv_is_read_only(argv[start:], first_expanding, table, depth)


def _assignment_is_harmless(word: str) -> bool:
    """``LANG=C`` and ``GIT_PAGER=cat`` are; ``PATH=…``, ``LD_PRELOAD=…``, ``PAGER=sh`` not.

    >>> [_assignment_is_harmless(w) for w in ("LANG=C", "GIT_PAGER=cat", "PAGER=./x", "!")]
    [True, True, False, True]
    """
    return not _RISKY_VARIABLE.match(word) or bool(_PAGER_ASSIGNMENT.fullmatch(word))


def program_name(word: str) -> str:
    """``/usr/bin/cat`` is ``cat``; ``./cat`` stays ``./cat`` (a script of that name).

    >>> program_name("/usr/bin/sleep"), program_name("./sleep")
    ('sleep', './sleep')
    """
    directory, _, name = word.rpartition("/")
    return name if directory in _TRUSTED_DIRS else word


_program = program_name


def wrapped(argv: Sequence[str], i: int = 0) -> Inner | None:
    """What the wrapper ``argv[i]`` runs (``timeout 60 kubectl …``, ``bash -c '…'``): the
    index of the program, a command line it hands a shell, or a decision (``True``: it
    runs nothing, ``False``: it cannot be read); ``None`` when ``argv[i]`` is no wrapper.

    >>> wrapped(["timeout", "60", "tail", "-f", "log"]), wrapped(["sh", "-c", "ls"])
    (2, 'ls')
    >>> wrapped(["tail", "-f", "log"]) is None
    True
    """
    wrapper = _WRAPPERS.get(_program(argv[i])) if i < len(argv) else None
    return None if wrapper is None else wrapper(argv, i + 1)


def _argv_is_read_only(
    argv: list[str], first_expanding: int, table: CommandTable, depth: int
) -> bool:
    """``argv[first_expanding]`` is the first expanding word (``len(argv)``: none)."""
    i = 0  # argv[i] is the program; a wrapper moves i to the program it runs
    while i < min(len(argv), first_expanding):
        program = _program(argv[i])
        wrapper = _WRAPPERS.get(program)
        if wrapper is None:
            if first_expanding < len(argv) and program not in ANY_ARGUMENTS:
                return False
            return _program_is_read_only(program, argv[i + 1 :], table)
        inner = wrapper(argv, i + 1)
        if isinstance(inner, bool | str) and first_expanding < len(argv):
            return False  # what it runs, or its command line, is not all on the line
        if isinstance(inner, bool):
            return inner
        if isinstance(inner, str):
            return line_is_read_only(inner, table, depth + 1)
        if program == "xargs" and (
            inner >= first_expanding or _program(argv[inner]) not in ANY_ARGUMENTS
        ):
            return False
        i = inner
    return False


def _program_is_read_only(program: str, args: list[str], table: CommandTable) -> bool:
    subs = table.get(program)
    if subs is None:
        return False
    guard = PROGRAM_GUARDS.get(program)
    if guard is not None and not guard(args):
        return False
    if () in subs:
        return True
    words, rest = _sub_command(program, args, max(len(sub) for sub in subs))
    for sub in subs:
        if tuple(words[: len(sub)]) == sub:
            sub_guard = SUB_COMMAND_GUARDS.get((program, *sub))
            return sub_guard is None or sub_guard(args[rest[len(sub) - 1] :])
    return False


def sub_command(program: str, args: list[str], limit: int) -> list[str]:
    """The first ``limit`` sub-command words of ``program``'s ``args``, past its known
    global options (``kubectl -n prod rollout status`` → ``rollout``, ``status``).

    >>> sub_command("kubectl", ["-n", "prod", "rollout", "status", "deploy/web"], 2)
    ['rollout', 'status']
    """
    return _sub_command(program, args, limit)[0]


def _sub_command(program: str, args: list[str], limit: int) -> tuple[list[str], list[int]]:
    """The first ``limit`` sub-command words of ``args`` and, for each, the index just
    after it. Known global options (``git -C dir``) are skipped; after an unknown one the
    words stop, so nothing is matched that the program might read as an option's value."""
    path: tuple[str, ...] = (program,)
    words: list[str] = []
    ends: list[int] = []
    i = 0
    while i < len(args) and len(words) < limit:
        arg = args[i]
        spec = OPTION_SPECS.get(path)
        if spec is not None and arg.startswith("-"):
            flags, values = spec
            name = arg.split("=", 1)[0]
            if arg in flags or (name in values and "=" in arg):
                i += 1
            elif arg in values:
                i += 2
            else:
                break
            continue
        words.append(arg)
        path = (*path, arg)
        i += 1
        ends.append(i)
    return words, ends


class _Options:
    """A wrapper's options: flags, options taking the next word (or ``--name=v``, ``-xV``)
    as their value, and options taking an attached value only (``-i{}``, ``-d``)."""

    __slots__ = ("flags", "optional", "values")

    def __init__(self, flags: str, values: str = "", optional: str = "") -> None:
        self.flags = frozenset(flags.split())
        self.values = frozenset(values.split())
        self.optional = tuple(optional.split())

    def skip(self, argv: Sequence[str], i: int) -> int | None:
        """Index of the first word after the options from ``argv[i]`` on, or None for an
        option not listed."""
        while i < len(argv):
            arg = argv[i]
            if arg == "--":
                return i + 1
            if not arg.startswith("-") or arg == "-":
                return i
            if arg in self.flags or (self.optional and arg.startswith(self.optional)):
                i += 1
            elif arg in self.values:
                i += 2
            elif arg.split("=", 1)[0] in self.values or (arg[:2] in self.values and arg[1] != "-"):
                i += 1
            else:
                return None
        return i


def _runs(argv: Sequence[str], start: int | None, nothing: bool = False) -> Inner:
    """The index of the program a wrapper runs; ``nothing`` when it runs none."""
    if start is None:
        return False
    return start if start < len(argv) else nothing


_TIMEOUT: Final = _Options(
    "--preserve-status --foreground -v --verbose", "-s --signal -k --kill-after"
)
_NICE: Final = _Options("", "-n --adjustment")
_TIME: Final = _Options("-p --portability -v --verbose -q --quiet", "-f --format")
_COMMAND_LETTERS: Final = frozenset("pvV")
_STDBUF: Final = _Options("", "-i -o -e --input --output --error")
_ENV: Final = _Options("-i --ignore-environment -0 --null -v --debug", "-u --unset -C --chdir")
_XARGS: Final = _Options(
    "-0 --null -r --no-run-if-empty -t --verbose -p --interactive -x --exit -o --open-tty",
    "-I -n --max-args -L --max-lines -P --max-procs -d --delimiter -s --max-chars -E -a --arg-file",
    "-i -l -e --replace --eof",
)
_WATCH: Final = _Options(
    "-t --no-title -b --beep -e --errexit -g --chgexit -c --color -C --no-color -p --precise "
    "-w --no-wrap -x --exec -r --no-rerun",
    "-n --interval -q --equexit",
    "-d --differences",
)


def _timeout(argv: Sequence[str], i: int) -> Inner:
    start = _TIMEOUT.skip(argv, i)
    return False if start is None else _runs(argv, start + 1)  # the duration comes first


def _nice(argv: Sequence[str], i: int) -> Inner:
    if i < len(argv) and re.fullmatch(r"-[0-9]+", argv[i]):
        return _runs(argv, i + 1, True)
    return _runs(argv, _NICE.skip(argv, i), True)


def _time(argv: Sequence[str], i: int) -> Inner:
    return _runs(argv, _TIME.skip(argv, i), True)


def _command(argv: Sequence[str], i: int) -> Inner:
    """``command [-pvV] name …``: with ``-v`` or ``-V`` among its own options it looks
    the names up; otherwise it runs ``name`` (``command rm -v x`` removes x)."""
    looks_up = False
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
        i += 1
        if argv[i - 1] == "--":
            break
        letters = argv[i - 1][1:]
        if not _COMMAND_LETTERS.issuperset(letters):
            return False
        looks_up = looks_up or "v" in letters or "V" in letters
    return True if looks_up else _runs(argv, i)


def _stdbuf(argv: Sequence[str], i: int) -> Inner:
    return _runs(argv, _STDBUF.skip(argv, i))


def _env(argv: Sequence[str], i: int) -> Inner:
    start = _ENV.skip(argv, i)
    if start is None:
        return False  # -S splits a string into a command line: not read here
    while start < len(argv) and _ASSIGNMENT.match(argv[start]):
        if not _assignment_is_harmless(argv[start]):
            return False
        start += 1
    return _runs(argv, start, True)


def _xargs(argv: Sequence[str], i: int) -> Inner:
    return _runs(argv, _XARGS.skip(argv, i), True)  # alone, xargs runs echo


def _watch(argv: Sequence[str], i: int) -> Inner:
    start = _WATCH.skip(argv, i)
    if start is None or start >= len(argv):
        return False
    if any(arg in ("-x", "--exec") for arg in argv[i:start]):
        return start
    return " ".join(argv[start:])  # watch hands its words to "sh -c"


def _shell(argv: Sequence[str], i: int) -> Inner:
    """``bash -lc 'cmd'``: the command line; any other use of a shell runs a script."""
    while i < len(argv):
        arg = argv[i]
        letters = arg[1:]
        if arg in ("--login", "--norc", "--noprofile", "--posix"):
            i += 1
        elif arg[:1] not in ("-", "+") or not letters or not _SHELL_FLAGS.issuperset(letters):
            break
        elif "c" in letters and arg[0] == "-":
            # "-c" takes the next word as the command line; "-co" would be ambiguous
            return argv[i + 1] if i + 1 < len(argv) and "o" not in letters else False
        else:  # "-o pipefail" and "-euo pipefail" take the option's name next
            i += 2 if letters.endswith("o") else 1
    return False


_WRAPPERS: Final[dict[str, Callable[[Sequence[str], int], Inner]]] = {
    "timeout": _timeout,
    "nice": _nice,
    "time": _time,
    "command": _command,
    "stdbuf": _stdbuf,
    "env": _env,
    "xargs": _xargs,
    "watch": _watch,
    **dict.fromkeys(_SHELLS, _shell),
}
