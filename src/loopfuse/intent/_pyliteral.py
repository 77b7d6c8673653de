"""Python literals read without Python's parser: a bounded, linear, stack-safe reader.

Some agents write their tool calls into the conversation as the ``str()`` of a Python
list (smolagents: ``Calling tools:\\n[{'id': ..., 'function': {...}}]``). That text comes
from the client, so it never reaches the standard library's literal evaluator (in
:mod:`ast`, which runs CPython's parser): that parser recurses in C (about 1.8 KB of
stack per level: ~70 brackets, parentheses or unary signs kill a 128 KiB thread) and
reads some texts in quadratic time (f-strings, in 3.11). This reader takes the shapes
such texts hold and nothing else:

- lists ``[...]``, tuples ``(...)`` (and parentheses around one value), dicts
  ``{k: v}`` and sets ``{v, ...}``, with trailing commas;
- strings in ``'``, ``"``, ``'''`` or ``\"\"\"``, with the prefixes ``r``, ``u`` (either
  case) or none, adjacent ones joined; escapes ``\\\\ \\' \\" \\a \\b \\f \\n \\r \\t \\v``,
  ``\\<newline>``, octal up to ``\\377``, ``\\xhh``, ``\\uhhhh``, ``\\Uhhhhhhhh``;
- ``int`` and ``float`` literals (decimal, ``0x``, ``0o``, ``0b``, underscores, exponents;
  at most :data:`MAX_NUMBER` characters), with one ``-`` or ``+`` before them;
- ``True``, ``False``, ``None``; blanks, tabs and (inside brackets) newlines between tokens.

On every text it accepts it gives what :mod:`ast`'s literal evaluator gives (a differential
test checks it). Everything else raises :class:`NotALiteral`, and the caller keeps the
text as text: bytes and f-strings, ``\\N{...}`` and unknown escapes, complex numbers,
``set()``, a sign before anything but a number, comments, ``\\r``, NUL or a lone
surrogate anywhere, containers nested deeper than ``max_depth``, and a bare top-level
tuple ``1, 2``. The reader keeps its own stack of open containers (no recursion), reads
each character a bounded number of times (linear regular expressions with possessive
quantifiers, no backtracking across tokens), and holds at most one Python object per
token, so its cost is linear in the text and its C stack constant.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["MAX_NUMBER", "NotALiteral", "read_literal"]

MAX_NUMBER: Final = 4300
"""The longest number token read (Python's own default limit on decimal digits): each
costs at most tens of microseconds to convert, so a text of numbers stays linear."""


class NotALiteral(ValueError):
    """The text is not one of the literal shapes :func:`read_literal` reads."""


_BLANKS_INSIDE: Final = re.compile(r"[ \t\n]*+")  # inside brackets lines join
_BLANKS_OUTSIDE: Final = re.compile(r"[ \t]*+")
_DIGITS: Final = r"[0-9](?:_?[0-9])*+"
_EXPONENT: Final = rf"(?:[eE][+-]?{_DIGITS})?"
_NUMBER: Final = re.compile(
    r"0[xX](?:_?[0-9a-fA-F])++|0[oO](?:_?[0-7])++|0[bB](?:_?[01])++"
    rf"|(?:{_DIGITS})?\.{_DIGITS}{_EXPONENT}"
    rf"|{_DIGITS}\.?{_EXPONENT}"
)
# What may follow a token: a blank, a separator, a closing bracket (or the end).
_AFTER: Final = frozenset(" \t\n,:)]}")
_PREFIXES: Final = frozenset("rRuU")
_QUOTES: Final = frozenset("'\"")
# The body of each kind of string, through its closing quote: a backslash always takes
# the next character with it (raw strings included), so each match is one pass.
_BODY: Final = {
    "'": re.compile(r"(?:[^'\\\n]++|\\[\s\S])*+'"),
    '"': re.compile(r'(?:[^"\\\n]++|\\[\s\S])*+"'),
    "'''": re.compile(r"(?:[^'\\]++|\\[\s\S]|'(?!''))*+'''"),
    '"""': re.compile(r'(?:[^"\\]++|\\[\s\S]|"(?!""))*+"""'),
}
# The escapes read (the ones ``repr`` writes, and a few more); octal only up to \377,
# whose meaning no Python version changes.
_ESCAPES: Final = re.compile(
    r"(?:[^\\]++|\\(?:[\n\\'\"abfnrtv]|[0-3][0-7]{0,2}|[4-7][0-7]?(?![0-7])"
    r"|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}))*+"
)
_NAMES: Final = {"True": True, "False": False, "None": None}
# Plain items (see _run): what each is, and runs of them with their commas (in a list
# or a dict, the last may be followed by the closing bracket instead).
_PLAIN: Final = re.compile(
    r"""(-?[0-9]++)|'([^'\\\n]*+)'|"([^"\\\n]*+)"|(True|False|None)"""
    r"|(\[[ \t\n]*+\])|(\{[ \t\n]*+\})|(\([ \t\n]*+\))"
)
_PLAIN_ITEM: Final = (
    r"""(?:-?(?:[1-9][0-9]{0,17}|0)|'[^'\\\n]*+'|"[^"\\\n]*+"|True|False|None"""
    r"|\[[ \t\n]*+\]|\{[ \t\n]*+\}|\([ \t\n]*+\))[ \t\n]*+"
)
_RUNS: Final = {
    "(": re.compile(rf"(?:{_PLAIN_ITEM},[ \t\n]*+)++"),
    "[": re.compile(rf"(?:{_PLAIN_ITEM}(?:,[ \t\n]*+|(?=\])))++"),
    "{": re.compile(rf"(?:{_PLAIN_ITEM}:[ \t\n]*+{_PLAIN_ITEM}(?:,[ \t\n]*+|(?=\}})))++"),
}
_EMPTY: Final = {5: list, 6: dict, 7: tuple}
_CLOSER: Final = {"[": "]", "(": ")", "{": "}"}


class _Open:
    """A container being read: its opening bracket, the items so far, and for ``{`` the
    dict it turned out to be (``None`` until its first item says) or the pending key."""

    __slots__ = ("bracket", "comma", "items", "key", "mapping")

    def __init__(self, bracket: str) -> None:
        self.bracket = bracket
        self.items: list[object] = []
        self.mapping: dict[object, object] | None = None
        self.key: object = _NO_KEY
        self.comma = False  # a "(" holding one value is a tuple only after a comma


_NO_KEY: Final = object()


def read_literal(text: str, max_depth: int) -> object:
    """The value of the Python literal ``text``, as :mod:`ast`'s evaluator gives it.

    Raises :class:`NotALiteral` for any text outside the shapes this module reads,
    and for containers nested deeper than ``max_depth``.

    >>> read_literal("[{'id': 'c1', 'args': {'q': \\"it's\\", 'n': -2, 'ok': True}}]", 10)
    [{'id': 'c1', 'args': {'q': "it's", 'n': -2, 'ok': True}}]
    >>> read_literal("('a' 'b', 0x_1F, 1_0.5e1, (None,), {1, 2}, r'\\\\d', '\\\\u00e9')", 10)
    ('ab', 31, 105.0, (None,), {1, 2}, '\\\\d', 'é')
    >>> read_literal("[" * 11 + "]" * 11, 10)
    Traceback (most recent call last):
        ...
    loopfuse.intent._pyliteral.NotALiteral: nested deeper than 10
    >>> read_literal("f'{x}'", 10)
    Traceback (most recent call last):
        ...
    loopfuse.intent._pyliteral.NotALiteral: not a literal at 0
    """
    if type(text) is not str:
        raise NotALiteral("not a str")
    if "\0" in text or "\r" in text:
        raise NotALiteral("a NUL or a carriage return")  # Python refuses or rewrites them
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise NotALiteral("a lone surrogate") from None  # Python cannot read it either
    end = len(text)
    i = _BLANKS_OUTSIDE.match(text).end()  # type: ignore[union-attr]  # always matches
    stack: list[_Open] = []
    value: object
    while True:
        # A value starts at i.
        char = text[i] if i < end else ""
        # (Not at the deepest level allowed, where an empty container is one too deep.)
        if 0 < len(stack) < max_depth and (after := _run(stack[-1], text, i)) != i:
            i = after  # a run of plain items, each with its comma
            if i < end and text[i] == _CLOSER[stack[-1].bracket]:
                value = _closed(stack.pop())
                i += 1
            else:
                continue
        elif char in _CLOSER:
            if len(stack) >= max_depth:
                raise NotALiteral(f"nested deeper than {max_depth}")
            stack.append(_Open(char))
            i = _BLANKS_INSIDE.match(text, i + 1).end()  # type: ignore[union-attr]
            if i < end and text[i] == _CLOSER[char]:
                value = _empty(stack.pop())
                i += 1
            else:
                continue
        else:
            value, i = _atom(text, i, end, inside=bool(stack))
        # A value ended at i: hand it to the containers it completes.
        while True:
            if not stack:
                i = _BLANKS_OUTSIDE.match(text, i).end()  # type: ignore[union-attr]
                if i != end:
                    raise NotALiteral(f"text after the value at {i}")
                return value
            top = stack[-1]
            i = _BLANKS_INSIDE.match(text, i).end()  # type: ignore[union-attr]
            char = text[i] if i < end else ""
            value, done = _add(top, value, char, i)
            i += 1
            if not done:
                i = _BLANKS_INSIDE.match(text, i).end()  # type: ignore[union-attr]
                if i < end and text[i] == _CLOSER[top.bracket] and char == ",":
                    value = _closed(stack.pop())  # a trailing comma
                    i += 1
                    continue
                break  # the next value of this container
            stack.pop()
            if i < end and text[i] not in _AFTER:
                raise NotALiteral(f"not a literal at {i}")


def _run(top: _Open, text: str, i: int) -> int:
    """Read the plain items starting at ``text[i]`` into ``top`` (small ints, strings
    without escapes, names, each followed by its comma; in a dict, such keys and values):
    where a text is mostly such items, one regular expression reads them, not a Python
    step per token. The index after them (``i`` when there are none)."""
    bracket = top.bracket
    if bracket != "{":
        found = _RUNS[bracket].match(text, i)
        if found is None:
            return i
        top.items.extend([_plain(item) for item in _PLAIN.finditer(text, i, found.end())])
        top.comma = True  # "(" runs end with a comma; for the others it does not matter
        return found.end()
    if top.key is not _NO_KEY or (top.mapping is None and top.items):
        return i  # a dict's value comes next, or this is a set
    found = _RUNS[bracket].match(text, i)
    if found is None:
        return i
    if top.mapping is None:
        top.mapping = {}
    plain = iter([_plain(item) for item in _PLAIN.finditer(text, i, found.end())])
    try:
        top.mapping.update(zip(plain, plain, strict=True))  # key, value, key, value...
    except TypeError:  # an empty list or dict as a key
        raise NotALiteral(f"an unhashable key after {i}") from None
    return found.end()


def _plain(item: re.Match[str]) -> object:
    group = item.lastindex
    if group == 1:
        return int(item.group(1))
    if group == 4:
        return _NAMES[item.group(4)]
    if group in _EMPTY:
        return _EMPTY[group]()
    return item.group(group)  # type: ignore[arg-type]


def _empty(container: _Open) -> object:
    return {"[": [], "(": (), "{": {}}[container.bracket]


def _add(top: _Open, value: object, char: str, at: int) -> tuple[object, bool]:
    """Add ``value`` to ``top``, followed by ``char``: ``(container, True)`` when that
    closes it, ``(None, False)`` when another item follows (``,``, or ``:`` in a dict)."""
    bracket = top.bracket
    try:
        if bracket == "{":
            if top.key is not _NO_KEY:  # a dict's value
                assert top.mapping is not None
                top.mapping[top.key] = value
                top.key = _NO_KEY
                if char == ":":
                    raise NotALiteral(f"not a literal at {at}")
            elif char == ":":  # a dict's key
                if top.mapping is None:
                    if top.items:
                        raise NotALiteral(f"a key in a set at {at}")
                    top.mapping = {}
                hash(value)  # unhashable: refused as Python refuses it
                top.key = value
                return None, False
            elif top.mapping is not None:
                raise NotALiteral(f"a key without a value at {at}")
            else:
                hash(value)
                top.items.append(value)
        else:
            top.items.append(value)
    except TypeError:
        raise NotALiteral(f"an unhashable key at {at}") from None
    if char == ",":
        top.comma = True
        return None, False
    if char == _CLOSER[bracket] and top.key is _NO_KEY:
        return _closed(top), True
    raise NotALiteral(f"not a literal at {at}")


def _closed(top: _Open) -> object:
    """The value of a container whose closing bracket was read."""
    if top.bracket == "[":
        return top.items
    if top.bracket == "(":
        if len(top.items) == 1 and not top.comma:
            return top.items[0]  # parentheses around one value
        return tuple(top.items)
    if top.mapping is not None:
        return top.mapping
    return set(top.items)


def _atom(text: str, i: int, end: int, inside: bool) -> tuple[object, int]:
    """The number, string(s) or name at ``text[i]`` and the index after it."""
    char = text[i] if i < end else ""
    value: object
    if _string_starts(text, i, end):
        value, i = _strings(text, i, end, inside)
    elif char == "-" or char == "+":
        blanks = _BLANKS_INSIDE if inside else _BLANKS_OUTSIDE
        number, i = _number(text, blanks.match(text, i + 1).end(), end)  # type: ignore[union-attr]
        value = -number if char == "-" else +number
    elif char.isdigit() or char == ".":
        value, i = _number(text, i, end)
    else:
        for name, named in _NAMES.items():
            if text.startswith(name, i):
                value, i = named, i + len(name)
                break
        else:
            raise NotALiteral(f"not a literal at {i}")
    if i < end and text[i] not in _AFTER:
        raise NotALiteral(f"not a literal at {i}")
    return value, i


def _number(text: str, i: int, end: int) -> tuple[int | float, int]:
    found = _NUMBER.match(text, i)
    if found is None:
        raise NotALiteral(f"not a number at {i}")
    token = found.group()
    stop = found.end()
    if len(token) > MAX_NUMBER or (stop < end and text[stop] not in _AFTER):
        raise NotALiteral(f"not a number at {i}")
    digits = token.replace("_", "")
    base = {"x": 16, "o": 8, "b": 2}.get(digits[1:2].lower()) if token[0] == "0" else None
    if base is not None:
        return int(digits[2:], base), stop
    if "." in digits or "e" in digits or "E" in digits:
        return float(digits), stop
    if digits[0] == "0" and digits.strip("0"):
        raise NotALiteral(f"a decimal with a leading zero at {i}")  # Python refuses it too
    try:
        return int(digits), stop
    except ValueError:  # past the interpreter's limit on digits
        raise NotALiteral(f"a number too long at {i}") from None


def _string_starts(text: str, i: int, end: int) -> bool:
    """Whether a string (perhaps with a prefix) starts at ``text[i]``."""
    char = text[i] if i < end else ""
    return char in _QUOTES or (char in _PREFIXES and i + 1 < end and text[i + 1] in _QUOTES)


def _strings(text: str, i: int, end: int, inside: bool) -> tuple[str, int]:
    """One string, or adjacent strings joined (``'a' 'b'`` is ``'ab'``)."""
    pieces: list[str] = []
    blanks = _BLANKS_INSIDE if inside else _BLANKS_OUTSIDE
    while True:
        raw = text[i] in "rR"
        if text[i] in _PREFIXES:
            i += 1
        quote = text[i] * 3 if text.startswith(text[i] * 3, i) else text[i]
        start = i + len(quote)
        found = _BODY[quote].match(text, start)
        if found is None:
            raise NotALiteral(f"an unterminated string at {i}")
        i = found.end()
        body = text[start : i - len(quote)]
        if not raw and "\\" in body:
            body = _unescaped(body, start)
        pieces.append(body)
        after = blanks.match(text, i).end()  # type: ignore[union-attr]
        if not _string_starts(text, after, end):
            return "".join(pieces), i
        i = after


def _unescaped(body: str, at: int) -> str:
    """``body`` with its escapes read, by the decoder CPython's compiler uses for them."""
    if _ESCAPES.fullmatch(body) is None:
        raise NotALiteral(f"an escape this reader does not take in the string at {at}")
    try:
        # Characters past Latin-1 become escapes themselves, read back unchanged.
        return body.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError:  # \U past U+10FFFF
        raise NotALiteral(f"an escape out of range in the string at {at}") from None
