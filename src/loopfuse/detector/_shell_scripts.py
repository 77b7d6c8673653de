"""Whether a ``sed`` or ``awk`` invocation only prints: the programs inside their arguments.

``sed -n '10,20p' f`` is the most common way coding agents page through a file, so sed
scripts are read properly: addresses, commands and ``s///`` flags, refusing ``w``/``W``
(write a file), ``e`` (run a command) and ``s///w`` / ``s///e``; anything this parser does
not know is refused too. awk programs are not parsed: a program is read-only when, once its
``>=`` and ``||`` are set aside, it holds none of ``>``, ``|``, ``system``, ``getline`` and
``@``. That rules out writing to files and pipes, running commands and gawk's extensions,
at the price of refusing the comparison ``$3 > 5`` (``$3 >= 6`` is fine). Both work in one
pass over the text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

__all__ = ["awk_is_read_only", "sed_is_read_only", "sed_script_is_read_only"]

_DIGITS: Final = "0123456789"
_SED_PLAIN_COMMANDS: Final = frozenset("{}=dDgGhHnNpPxzF")
_SED_NUMBER_COMMANDS: Final = frozenset("qQlL")
_SED_LINE_COMMANDS: Final = frozenset("aicrR#")  # text, or a file to read, to the line's end
_SED_LABEL_COMMANDS: Final = frozenset("btT:")
_SED_SAFE_S_FLAGS: Final = frozenset("gpiImM" + _DIGITS)
_SED_FLAGS: Final = frozenset("nErsuzb")
_SED_LONG_FLAGS: Final = frozenset(
    {"--quiet", "--silent", "--regexp-extended", "--separate", "--unbuffered", "--null-data",
     "--posix", "--debug", "--sandbox", "--binary", "--follow-symlinks"}
)  # fmt: skip


def _delimited_end(script: str, i: int, delimiter: str) -> int:
    """Index after the unescaped ``delimiter`` at or after ``i``, or -1."""
    n = len(script)
    while i < n:
        c = script[i]
        if c == "\\":
            i += 2
        elif c == delimiter:
            return i + 1
        elif c == "\n":
            return -1
        else:
            i += 1
    return -1


def _skip(script: str, i: int, chars: str) -> int:
    while i < len(script) and script[i] in chars:
        i += 1
    return i


def _address_end(script: str, i: int) -> int:
    """Index after one sed address at ``i`` (none is fine), or -1."""
    if i >= len(script):
        return i
    c = script[i]
    if c in _DIGITS or c in "+~":
        i = _skip(script, i + (c in "+~"), _DIGITS)
        if script.startswith("~", i):
            i = _skip(script, i + 1, _DIGITS)
        return i
    if c == "$":
        return i + 1
    if c == "/":
        i = _delimited_end(script, i + 1, "/")
    elif c == "\\" and i + 1 < len(script):
        i = _delimited_end(script, i + 2, script[i + 1])
    else:
        return i
    return i if i < 0 else _skip(script, i, "IM")


def _line_end(script: str, i: int) -> int:
    """Index of the newline ending a text argument (``a\\`` lines continue with ``\\``)."""
    while True:
        end = script.find("\n", i)
        if end < 0:
            return len(script)
        if not script[i:end].endswith("\\"):
            return end
        i = end + 1


def _command_end(script: str, c: str, i: int) -> int:
    """Index after the arguments of command ``c`` whose name ends at ``i``, or -1."""
    if c in _SED_PLAIN_COMMANDS:
        return i
    if c in _SED_NUMBER_COMMANDS:
        return _skip(script, _skip(script, i, " \t"), _DIGITS)
    if c in _SED_LINE_COMMANDS:
        return _line_end(script, i)
    if c in _SED_LABEL_COMMANDS:
        while i < len(script) and script[i] not in ";\n":
            i += 1
        return i
    if c not in "sy" or i >= len(script) or script[i] in "\\\n":
        return -1  # w, W, e, and everything unknown
    delimiter = script[i]
    i = _delimited_end(script, i + 1, delimiter)
    if i >= 0:
        i = _delimited_end(script, i, delimiter)
    if i >= 0 and c == "s":
        i = _skip(script, i, "".join(_SED_SAFE_S_FLAGS))
        if i < len(script) and script[i] in "wWe":
            return -1
    return i


def sed_script_is_read_only(script: str) -> bool:
    """True when a GNU sed script only prints (no ``w``, ``W``, ``e``, ``s///w``, ``s///e``).

    >>> sed_script_is_read_only("10,20p"), sed_script_is_read_only("/^def /,/^$/{p;q}")
    (True, True)
    >>> sed_script_is_read_only("s/a/b/g;5q"), sed_script_is_read_only("s/a/b/w out.txt")
    (True, False)
    >>> sed_script_is_read_only("1e rm -rf x"), sed_script_is_read_only("$!N;P;D")
    (False, True)
    """
    i, n = 0, len(script)
    while i < n:
        if script[i] in " \t\n;":
            i += 1
            continue
        i = _address_end(script, i)
        if 0 <= i < n and script[i] == ",":
            i = _address_end(script, i + 1)
        if i < 0:
            return False
        i = _skip(script, i, " \t!")
        if i >= n:
            return False  # an address without a command
        i = _command_end(script, script[i], i + 1)
        if i < 0:
            return False
    return True


def sed_is_read_only(args: Sequence[str]) -> bool:
    """True when ``sed`` with these arguments prints only: no ``-i``/``--in-place``, no
    script file (``-f``), and every script passes :func:`sed_script_is_read_only`.

    >>> sed_is_read_only(["-n", "10,20p", "f.py"]), sed_is_read_only(["-i", "s/a/b/", "f"])
    (True, False)
    >>> sed_is_read_only(["-ne", "1p", "-e", "$p", "f"]), sed_is_read_only(["-f", "x.sed"])
    (True, False)
    """
    scripts: list[str] = []
    positional: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            positional.extend(args[i + 1 :])
            break
        if arg.startswith("--"):
            name, equals, value = arg.partition("=")
            if name in ("--expression", "--line-length"):
                if not equals:
                    i += 1
                    if i >= len(args):
                        return False
                    value = args[i]
            elif name not in _SED_LONG_FLAGS:
                return False  # --in-place, --file and what this reader does not know
            if name == "--expression":
                scripts.append(value)
        elif arg.startswith("-") and arg != "-":
            cluster = _short_options(arg, args, i)
            if cluster is None:
                return False
            script, used_next = cluster
            i += used_next
            if script is not None:
                scripts.append(script)
        else:
            positional.append(arg)
        i += 1
    if not scripts:
        if not positional:
            return False
        scripts.append(positional[0])
    return all(sed_script_is_read_only(script) for script in scripts)


def _short_options(arg: str, args: Sequence[str], i: int) -> tuple[str | None, bool] | None:
    """``(script given by -e or None, whether the next argument was used)`` for a cluster
    of sed's short options such as ``-ne``, or None for ``-i``, ``-f`` and unknown ones."""
    for j in range(1, len(arg)):
        flag = arg[j]
        if flag in _SED_FLAGS:
            continue
        if flag not in "el":
            return None
        attached = arg[j + 1 :]
        if not attached and i + 1 >= len(args):
            return None
        value = attached or args[i + 1]
        return (value if flag == "e" else None), not attached
    return None, False


_AWK_UNSAFE: Final = (">", "|", "system", "getline", "@")


def awk_is_read_only(args: Sequence[str]) -> bool:
    """True when an ``awk`` program only prints (see the module docs for the rule).

    Options other than ``-F`` and ``-v`` (``-f`` program files, gawk's ``-i``, ``-l``,
    ``-o``, ``-p``, ``-d`` which write or load files) make it state-changing.

    >>> awk_is_read_only(["-F:", "{print $1}", "/etc/passwd"])
    True
    >>> awk_is_read_only(["NR >= 10 && NR <= 20 || /x/", "f"]), awk_is_read_only(["$3 > 5"])
    (True, False)
    >>> awk_is_read_only(["{print > \\"out\\"}"]), awk_is_read_only(["BEGIN{system(\\"id\\")}"])
    (False, False)
    """
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if arg in ("-F", "-v", "--field-separator", "--assign"):
            i += 2
        elif arg.startswith(("-F", "-v", "--field-separator=", "--assign=")):
            i += 1
        elif arg.startswith("-") and arg != "-":
            return False
        else:
            break
    if i >= len(args):
        return False
    # ">=" is always a comparison and "||" always a logical or: neither redirects.
    program = args[i].replace(">=", "").replace("||", "")
    return not any(unsafe in program for unsafe in _AWK_UNSAFE)
