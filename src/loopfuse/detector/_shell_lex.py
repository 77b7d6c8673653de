"""Reading a POSIX shell command line without running it: the lexical half.

:func:`read_commands` reads a command line into its simple commands (one argv each, the
redirections checked and removed) and hands each to a check, stopping at the first one
refused. A line that uses something this reader cannot see through (command or process
substitution, heredocs, subshells, unbalanced quotes) is refused: its callers then call
it state-changing. The text is attacker-controlled: nothing here raises on a ``str``, and
the work is one pass of :func:`_prescan` plus one of :mod:`shlex`, both linear in the
length of the line (the caller caps that length).

:mod:`shlex` (``punctuation_chars``) splits words and operators but forgets what a shell
knows, so :func:`_prescan` reads the line first, tracking quotes. It removes ``#``
comments and ``\\``-newline continuations (shlex would swallow the newline that separates
two commands), refuses ``$(``, backticks and ``<(``, and hides the operator characters
that are quoted or escaped (``';'``, ``\\;``) behind private-use characters, so shlex
cannot hand them back as bare operators; words get them back afterwards. A
file-descriptor number before a redirection (``2>``) is dropped: which descriptor is
redirected never decides whether the line writes.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from typing import Final

__all__ = ["SAFE_SINKS", "read_commands", "simple_commands"]

SAFE_SINKS: Final = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
"""Files a redirection may write to without the line counting as state-changing."""

_OPERATOR_CHARS: Final = "();<>|&\n"
# Longest first: a run of operator characters is cut the way a shell's lexer cuts it.
_OPERATORS: Final = (
    "&>>", ";;&", "<<<", "<<-", "&&", "||", "|&", ";;", ";&", "&>", ">>", ">|", ">&", "<&",
    "<>", "<<", "(", ")", ";", "&", "|", "<", ">", "\n",
)  # fmt: skip
_SEPARATORS: Final = frozenset({";", "&", "&&", "||", "|", "|&", "\n"})
_NEEDS_RIGHT_SIDE: Final = frozenset({"&&", "||", "|", "|&"})
_WRITES: Final = frozenset({">", ">>", ">|", "&>", "&>>"})
_READS: Final = frozenset({"<", "<<<"})
_DUPLICATES: Final = frozenset({">&", "<&"})
_FD_TARGET: Final = re.compile(r"[0-9]+-?|-")

_PLAIN: Final = re.compile(r"[^\\'\"`$#<>()&;|\n \t\r]+")
_SINGLE_QUOTED: Final = re.compile(r"[^']*'")
_DOUBLE_QUOTED_PLAIN: Final = re.compile(r'[^"\\`$]+')
_FD_NUMBER: Final = re.compile(r"[0-9]+(?=[<>])")
# Quoted and escaped operator characters travel through shlex as private-use characters.
_HIDE: Final = str.maketrans({c: chr(0xE000 + k) for k, c in enumerate(_OPERATOR_CHARS)})
_SHOW: Final = str.maketrans({chr(0xE000 + k): c for k, c in enumerate(_OPERATOR_CHARS)})
_HIDDEN: Final = re.compile(f"[{chr(0xE000)}-{chr(0xE000 + len(_OPERATOR_CHARS) - 1)}]")


def _prescan(text: str) -> tuple[str, int] | None:
    """``(text without comments and continuations, unquoted operator characters)``.

    ``None`` when the line substitutes a command (``$(``, backticks, ``<(``, ``>(``),
    uses ANSI-C quoting (``$'…'``, whose escapes shlex does not know), holds a NUL or
    one of the private-use characters that hide quoted operators, or leaves a quote open.

    >>> _prescan("tail -5 x.log 2>&1 # the log\\nls")
    ('tail -5 x.log >&1 \\nls', 3)
    >>> _prescan("grep 'a;b' f")[0] == "grep 'a\ue002b' f"
    True
    >>> _prescan("echo $(id)"), _prescan("echo 'open")
    (None, None)
    """
    if "\0" in text or "`" in text or _HIDDEN.search(text):
        return None
    out: list[str] = []
    operators = 0
    i, n = 0, len(text)
    word_start = True
    while i < n:
        c = text[i]
        if c in " \t\r":
            out.append(c)
            i += 1
            word_start = True
        elif c in _OPERATOR_CHARS:
            if c in "<>" and text.startswith("(", i + 1):
                return None
            if text.startswith("<<", i):
                if not text.startswith("<<<", i):
                    return None  # a heredoc: its body is not shell text; stop reading now
                c = "<<<"
            out.append(c)
            operators += len(c)
            i += len(c)
            word_start = True
        elif c == "#" and word_start:
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif c == "\\":
            if text.startswith("\n", i + 1):
                i += 2  # a continuation joins two lines; word_start is unchanged
                continue
            out.append(text[i : i + 2].translate(_HIDE))
            i += 2
            word_start = False
        elif c == "'":
            quoted = _SINGLE_QUOTED.match(text, i + 1)
            if quoted is None:
                return None
            out.append(text[i : quoted.end()].translate(_HIDE))
            i = quoted.end()
            word_start = False
        elif c == '"':
            end = _double_quoted_end(text, i + 1)
            if end < 0:
                return None
            out.append(text[i:end].translate(_HIDE))
            i = end
            word_start = False
        elif c == "$":
            if text.startswith(("(", "'"), i + 1):
                return None
            out.append(c)
            i += 1
            word_start = False
        else:
            fd = _FD_NUMBER.match(text, i) if word_start else None
            if fd is not None:
                i = fd.end()
                continue
            plain = _PLAIN.match(text, i)
            end = plain.end() if plain is not None else i + 1  # a "#" inside a word
            out.append(text[i:end])
            i = end
            word_start = False
    return "".join(out), operators


def _double_quoted_end(text: str, i: int) -> int:
    """Index after the ``"`` closing a double-quoted string opened before ``i``, or -1
    when it is open to the end or substitutes a command."""
    n = len(text)
    while True:
        plain = _DOUBLE_QUOTED_PLAIN.match(text, i)
        if plain is not None:
            i = plain.end()
        if i >= n:
            return -1
        c = text[i]
        if c == '"':
            return i + 1
        if c == "\\":
            i += 2
        elif text.startswith("(", i + 1):  # c is "$"; a backtick was refused earlier
            return -1
        else:
            i += 1


def _lexer(text: str) -> shlex.shlex:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=_OPERATOR_CHARS)
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    return lexer


def _is_operator_run(token: str) -> bool:
    return bool(token) and all(c in _OPERATOR_CHARS for c in token)


def _cut_operators(run: str) -> list[str]:
    """``";>"`` -> ``[";", ">"]``: shlex returns adjacent operator characters as one run."""
    cut = []
    i = 0
    while i < len(run):
        op = next(op for op in _OPERATORS if run.startswith(op, i))
        cut.append(op)
        i += len(op)
    return cut


def read_commands(text: str, accept: Callable[[list[str]], bool]) -> bool:
    """True when the line can be read and ``accept`` takes the argv of each of its simple
    commands; reading stops at the first one refused.

    Separators (``;``, ``&``, ``&&``, ``||``, ``|``, ``|&``, newlines) split the line. A
    redirection to a file other than :data:`SAFE_SINKS`, a heredoc, a read-write open
    (``<>``), a parenthesis or an empty command make it unreadable (False). A command made
    only of safe redirections (``< f``) reaches ``accept`` as an empty argv.

    >>> seen = []
    >>> read_commands("cd /repo && git log -3 2>/dev/null | head\\n", seen.append)
    False
    >>> seen  # None (what list.append returns) refused the first command
    [['cd', '/repo']]
    >>> read_commands("cat a > b", lambda argv: True)
    False
    """
    scanned = _prescan(text)
    if scanned is None:
        return False
    clean, unquoted_operators = scanned
    operator_chars = 0
    words: list[str] = []
    redirected = False  # the current simple command has a (safe) redirection
    pending = False  # the last separator needs a command after it
    target_of: str | None = None  # the redirection waiting for its target
    try:
        for token in _lexer(clean):
            if not _is_operator_run(token):
                if target_of is None:
                    words.append(token.translate(_SHOW))
                elif not _target_is_safe(target_of, token):
                    return False
                else:
                    target_of, redirected = None, True
                continue
            operator_chars += len(token)
            for op in _cut_operators(token):
                if target_of is not None:
                    return False  # a redirection without a target
                if op in _SEPARATORS:
                    if words or redirected:
                        if not accept(words):
                            return False
                        words, redirected = [], False
                        pending = op in _NEEDS_RIGHT_SIDE
                    elif op != "\n":
                        return False  # an empty command before ";", "&&", …: a syntax error
                elif op in _WRITES or op in _READS or op in _DUPLICATES:
                    target_of = op
                else:
                    return False  # heredoc, "<>", parentheses, case terminators
    except ValueError:  # an escape at the very end ("No escaped character")
        return False
    if target_of is not None or (pending and not (words or redirected)):
        return False
    # A safety net: every operator character shlex saw must be one the prescan counted as
    # unquoted (the quoted ones were hidden from shlex).
    if operator_chars != unquoted_operators:
        return False
    return not (words or redirected) or accept(words)


def simple_commands(text: str) -> list[list[str]] | None:
    """The argv of each simple command of a line, or None when it cannot be read
    (see :func:`read_commands`).

    >>> simple_commands("grep x <<< 'a' | wc -l"), simple_commands("echo ';' ok")
    ([['grep', 'x'], ['wc', '-l']], [['echo', ';', 'ok']])
    """
    commands: list[list[str]] = []

    def keep(argv: list[str]) -> bool:
        commands.append(argv)
        return True

    return commands if read_commands(text, keep) else None


def _target_is_safe(op: str, target: str) -> bool:
    if op in _READS:
        return True
    if op in _DUPLICATES and _FD_TARGET.fullmatch(target):
        return True
    return op != "<&" and target in SAFE_SINKS
