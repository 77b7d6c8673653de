"""Reading a POSIX shell command line without running it: the lexical half.

:func:`read_commands` cuts a command line into simple commands — the words of each, quotes
removed, redirections checked and dropped — and hands each to a check, stopping at the
first one refused. It is one left-to-right pass of one regular expression over the line
(the caller caps its length), so the work is linear in the length of the line.

A word is *literal* when bash runs it as written, or *expanding* when bash would change
it before running: parameter expansion (``$X``, ``${X}``, ``$1``, ``$?``, in or out of
double quotes), pathname expansion (an unquoted ``*``, ``?`` or ``[``), brace expansion
(``{a,b}``, ``{1..3}``) and the tilde forms that read a variable or the directory stack
(``~+``, ``~-``, ``~2``). An expanding word may become any text, several words or none
(``$IFS`` alone splits into nothing): the check is told which words expand, and decides.
``~`` and ``~/…`` are read as the home directory, a path.

What this reader cannot see through refuses the whole line: command and process
substitution, arithmetic (``$((…))``, ``$[…]``), ``${…}`` holding more than a name
(``${X:-w}``, ``${X@P}``, ``${a[i]}``, ``${!X}``: defaults, prompt expansion and array
subscripts produce text or run arithmetic, and a subscript can run a command), ANSI-C and
locale quoting (``$'…'``, ``$"…"``), heredocs, subshells, ``{var}>file`` redirections
(the variable may be an array element), unbalanced quotes and NUL bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final

__all__ = ["SAFE_SINKS", "Accept", "read_commands", "simple_commands"]

SAFE_SINKS: Final = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
"""Files a redirection may write to without the line counting as state-changing."""

Accept = Callable[[list[str], Sequence[int]], bool]
"""A check of one simple command: its words, and the indices of the expanding ones."""

# One token at a time; a position where none matches (a backtick, an unclosed quote, a
# backslash at the very end) makes the line unreadable. Operators: longest first, as
# bash's lexer cuts a run of operator characters.
_TOKEN: Final = re.compile(
    r"(?P<blank>[ \t\r]+)"
    r"|(?P<op>&>>|;;&|<<<|<<-|&&|\|\||\|&|;;|;&|&>|>>|>\||>&|<&|<>|<<|[()<>;&|\n])"
    r"|(?P<plain>[^ \t\r\n()<>;&|'\"\\$`]+)"
    r"|'(?P<single>[^']*)'"
    r'|"(?P<double>(?:[^"\\]|\\.)*)"'
    r"|\\(?P<escaped>.)"
    r"|(?P<dollar>\$)",
    re.DOTALL,
)
# What may follow "$" in a parameter expansion this reader accepts: a name, one digit, a
# special parameter, or one of those in braces. "$(", "${…}" beyond that, "$[", "$'"
# and '$"' refuse the line; "$" before anything else is a literal dollar sign.
_PARAMETER: Final = re.compile(
    r"\{(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[-@*#?$!])\}|[A-Za-z_][A-Za-z0-9_]*|[0-9]|[-@*#?$!]"
)
_DOLLAR_REFUSED: Final = frozenset("({['\"")
_DOLLAR_REFUSED_QUOTED: Final = frozenset("({[")  # in double quotes "$'" is two characters
_DOUBLE_PART: Final = re.compile(r"[^\\$]+|\\(.)|\$", re.DOTALL)
_DOUBLE_ESCAPES: Final = frozenset('$`"\\')
# Unquoted characters that may make a word expand (globs, braces, tildes); a word
# without any of them needs no closer look.
_MAYBE_EXPANDS: Final = re.compile(r"[*?\[{~]")
_BRACE_MARK: Final = re.compile(r"[{},]|\.\.")
# "~+", "~-", "~2" at the start of a word, or after "=" or ":" (bash expands tildes in
# words that look like assignments, "a=~-/x", even as arguments)
_TILDE_AT_START: Final = re.compile(r"~[-+0-9]")
_TILDE_INSIDE: Final = re.compile(r"[=:]~[-+0-9]")

# Continuations ("\\" and a newline) are removed before the line is read, as bash does,
# except in single quotes and from an unquoted "#" to the end of its line (a comment ends
# at the newline; a "#" inside a word keeps its continuation too, which the reader then
# joins: never more text swallowed than bash would).
_CONTINUATION_CONTEXT: Final = re.compile(
    r"""'[^']*'|"(?:[^"\\]|\\.)*"|\\\n|\\.|#[^\n]*|[^'"\\#]+|.""", re.DOTALL
)
_ESCAPE: Final = re.compile(r"\\(.)", re.DOTALL)

_SEPARATORS: Final = frozenset({";", "&", "&&", "||", "|", "|&", "\n"})
_NEEDS_RIGHT_SIDE: Final = frozenset({"&&", "||", "|", "|&"})
_WRITES: Final = frozenset({">", ">>", ">|", "&>", "&>>"})
_READS: Final = frozenset({"<", "<<<"})
_DUPLICATES: Final = frozenset({">&", "<&"})
_REDIRECTIONS: Final = _WRITES | _READS | _DUPLICATES
_FD_TARGET: Final = re.compile(r"[0-9]+-?|-")
_FD_NUMBER: Final = re.compile(r"[0-9]+")  # ASCII digits only, as bash reads them


class _Word:
    """The word being read: its pieces of text and what makes it expand."""

    __slots__ = ("brace", "bracket", "expands", "parts")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.expands = False
        self.bracket = False  # an unquoted "[": a glob, unless the word is "[" or "[["
        self.brace = 0  # 1: an unquoted "{" seen; 2: then a "," or ".." (brace expansion)

    def unquoted(self, chunk: str, at_start: bool) -> None:
        """Add unquoted text: globs, braces and tildes in it make the word expand."""
        self.parts.append(chunk)
        if self.brace == 0 and not _MAYBE_EXPANDS.search(chunk):
            return
        if "*" in chunk or "?" in chunk:
            self.expands = True
        if "[" in chunk:
            self.bracket = True
        if "~" in chunk and (
            (at_start and _TILDE_AT_START.match(chunk)) or _TILDE_INSIDE.search(chunk)
        ):
            self.expands = True
        for mark in _BRACE_MARK.finditer(chunk):
            c = mark.group()
            if c == "{":
                self.brace = max(self.brace, 1)
            elif c == "}":
                if self.brace == 2:
                    self.expands = True
            elif self.brace:
                self.brace = 2

    def text(self) -> str:
        return "".join(self.parts)


def _parameter_end(text: str, i: int, refused: frozenset[str] = _DOLLAR_REFUSED) -> int:
    """After a "$" ending at ``i``: the end of an accepted parameter expansion, ``i`` for
    a literal dollar sign, or -1 for an expansion that refuses the line."""
    parameter = _PARAMETER.match(text, i)
    if parameter is not None:
        return parameter.end()
    return -1 if text[i : i + 1] in refused and i < len(text) else i


def _double_quoted(content: str, word: _Word) -> bool:
    """Add the text of a double-quoted string to ``word``; False when it cannot be read
    (a command substitution, a backtick, a refused ``${…}``). Inside double quotes only
    parameters expand, and ``\\`` escapes only ``$``, a backtick, ``"``, ``\\`` and a
    newline."""
    if "`" in content:
        return False
    if "$" not in content and "\\" not in content:
        word.parts.append(content)
        return True
    i, n = 0, len(content)
    while i < n:
        part = _DOUBLE_PART.match(content, i)
        if part is None:  # unreachable: every position starts one of its three forms
            return False
        piece, i = part.group(), part.end()
        if piece == "$":
            end = _parameter_end(content, i, _DOLLAR_REFUSED_QUOTED)
            if end < 0:
                return False
            if end > i:
                word.expands = True
                piece = content[i - 1 : end]
                i = end
        elif piece[0] == "\\":
            escaped = part.group(1)
            if escaped == "\n":
                continue
            if escaped in _DOUBLE_ESCAPES:
                piece = escaped
        word.parts.append(piece)
    return True


def _without_continuations(text: str) -> str:
    r"""``text`` with its line continuations removed where bash removes them.

    >>> _without_continuations("ls -l\\\na")
    'ls -la'
    >>> _without_continuations('"$\\\n(x)"'), _without_continuations("'a\\\nb'") == "'a\\\nb'"
    ('"$(x)"', True)
    """
    if "\\\n" not in text:
        return text
    kept: list[str] = []
    for part in _CONTINUATION_CONTEXT.finditer(text):
        piece = part.group()
        if piece == "\\\n":
            continue
        if piece[0] == '"' and "\\\n" in piece:
            piece = _ESCAPE.sub(lambda m: "" if m.group(1) == "\n" else m.group(), piece)
        kept.append(piece)
    return "".join(kept)


def _target_is_safe(op: str, target: str, expands: bool) -> bool:
    if op in _READS:
        return True
    if expands:
        return False
    if op in _DUPLICATES and _FD_TARGET.fullmatch(target):
        return True
    return op != "<&" and target in SAFE_SINKS


def read_commands(text: str, accept: Accept) -> bool:
    """True when the line can be read and ``accept`` takes each of its simple commands;
    reading stops at the first one refused.

    Separators (``;``, ``&``, ``&&``, ``||``, ``|``, ``|&``, newlines) split the line. A
    redirection to a file other than :data:`SAFE_SINKS` (or to an expanding word), a
    heredoc, a read-write open (``<>``), a parenthesis or an empty command make it
    unreadable (False). A command made only of safe redirections (``< f``) reaches
    ``accept`` as an empty list of words.

    >>> seen = []
    >>> read_commands("cd /repo && git log -3 2>/dev/null | head\\n", lambda w, e: seen.append(w))
    False
    >>> seen  # None (what list.append returns) refused the first command
    [['cd', '/repo']]
    >>> read_commands("cat a > b", lambda words, expanding: True)
    False
    """
    if "\0" in text:
        return False
    text = _without_continuations(text)
    words: list[str] = []
    expanding: list[int] = []
    word: _Word | None = None
    redirected = False  # the current simple command has a (safe) redirection
    pending = False  # the last separator needs a command after it
    target_of: str | None = None  # the redirection waiting for its target
    i, n = 0, len(text)
    match = _TOKEN.match
    while True:
        token = match(text, i) if i < n else None
        kind = token.lastgroup if token is not None else None
        if word is not None and kind not in ("plain", "single", "double", "escaped", "dollar"):
            # the word ends here: a blank, an operator or the end of the line
            written = word.text()
            expands = word.expands or (word.bracket and written not in ("[", "[["))
            if (
                kind == "op"
                and token is not None
                and token.group() in _REDIRECTIONS
                and written[:1] == "{"
                and written[-1:] == "}"
            ):
                return False  # "{var}>file" assigns a variable (maybe an array element)
            if target_of is not None:
                if not _target_is_safe(target_of, written, expands):
                    return False
                target_of, redirected = None, True
            else:
                if expands:
                    expanding.append(len(words))
                words.append(written)
            word = None
        if token is None:
            if i < n:
                return False  # a backtick, an unclosed quote, a backslash at the end
            break
        i = token.end()
        if kind == "blank":
            continue
        if kind == "op":
            op = token.group()
            if target_of is not None:
                return False  # a redirection without a target
            if op in _SEPARATORS:
                if words or redirected:
                    if not accept(words, expanding):
                        return False
                    words, expanding, redirected = [], [], False
                    pending = op in _NEEDS_RIGHT_SIDE
                elif op != "\n":
                    return False  # an empty command before ";", "&&", …: a syntax error
            elif op in _REDIRECTIONS:
                target_of = op
            else:
                return False  # heredoc, "<>", parentheses, case terminators
            continue
        if kind == "plain":
            chunk = token.group()
            at_start = word is None
            if at_start:
                if chunk[0] == "#":  # a comment, up to the end of the line
                    end = text.find("\n", i)
                    i = n if end < 0 else end
                    continue
                if _FD_NUMBER.fullmatch(chunk) and text.startswith(("<", ">"), i):
                    continue  # "2>": which descriptor is redirected never decides
                word = _Word()
            assert word is not None
            word.unquoted(chunk, at_start)
            continue
        if kind == "escaped":
            escaped = token.group("escaped")
            if escaped == "\n":
                continue  # a continuation left after a "#" inside a word joins two lines
            if word is None:
                word = _Word()
            word.parts.append(escaped)
            continue
        if word is None:
            word = _Word()
        if kind == "single":
            word.parts.append(token.group("single"))
        elif kind == "double":
            if not _double_quoted(token.group("double"), word):
                return False
        else:  # "$"
            end = _parameter_end(text, i)
            if end < 0:
                return False
            if end > i:
                word.expands = True
            word.parts.append(text[i - 1 : end])
            i = end
    if target_of is not None or (pending and not (words or redirected)):
        return False
    return not (words or redirected) or accept(words, expanding)


def simple_commands(text: str) -> list[list[str]] | None:
    """The words of each simple command of a line, or None when it cannot be read
    (see :func:`read_commands`).

    >>> simple_commands("grep x <<< 'a' | wc -l"), simple_commands("echo ';' ok")
    ([['grep', 'x'], ['wc', '-l']], [['echo', ';', 'ok']])
    """
    commands: list[list[str]] = []

    def keep(words: list[str], expanding: Sequence[int]) -> bool:
        commands.append(words)
        return True

    return commands if read_commands(text, keep) else None
