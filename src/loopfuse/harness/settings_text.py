"""A coding-agent CLI's JSON settings file, edited in place as text.

``loopfuse init`` adds and removes its hook entries (through
:class:`~loopfuse.harness.installers.HooksMap`) by splicing the text, never by writing the
file out again from parsed values: every byte of the user's file that is
not one of loopfuse's entries stays as it was written, numbers (``1e400``, ``1.50``),
escapes (a lone ``\\ud800``), key order, spacing and, where the CLI accepts them (Gemini
CLI reads its settings through ``strip-json-comments``), ``//`` and ``/* */`` comments.

The text is read twice: by :func:`load` (the standard library's JSON parser, on the text
with its comments blanked, with ``NaN`` and ``Infinity`` refused as the CLIs'
``JSON.parse`` refuses them), and by :func:`outline`, which finds where each element of
the containers loopfuse edits starts and ends. Both are linear and iterative.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final, NamedTuple

__all__ = [
    "Container",
    "SettingsTextError",
    "append",
    "delete",
    "load",
    "outline",
    "strip_comments",
]


class SettingsTextError(ValueError):
    """The text is not a JSON object this module can edit (the message says why)."""


_TOKEN: Final = re.compile(
    r"""(?P<space>\s+)
      | (?P<line>//[^\n]*)
      | (?P<block>/\*.*?\*/)
      | (?P<string>"(?:[^"\\]|\\.)*")
      | (?P<punct>[{}\[\]:,])
      | (?P<scalar>[^\s{}\[\]:,"/]+)""",
    re.VERBOSE | re.DOTALL,
)


class Token(NamedTuple):
    """One token of the text: its kind (``{}[]:,``, ``string`` or ``scalar``) and span."""

    kind: str
    start: int
    end: int


def _tokens(text: str, comments: bool) -> tuple[list[Token], list[tuple[int, int]]]:
    """The tokens of ``text`` and the spans of its comments (``comments``: allowed)."""
    tokens: list[Token] = []
    notes: list[tuple[int, int]] = []
    at = 0
    while at < len(text):
        found = _TOKEN.match(text, at)
        if found is None:
            raise SettingsTextError(f"unexpected {text[at]!r} at character {at}")
        kind = found.lastgroup
        assert kind is not None
        if kind in ("line", "block"):
            if not comments:
                raise SettingsTextError(f"a comment at character {at}: not JSON")
            notes.append(found.span())
        elif kind == "punct":
            tokens.append(Token(found.group(), *found.span()))
        elif kind != "space":
            tokens.append(Token(kind, *found.span()))
        at = found.end()
    return tokens, notes


def strip_comments(text: str, comments: bool = True) -> str:
    """``text`` with each comment's characters blanked (newlines kept), so that every
    value is where it was.

    >>> strip_comments('{"a": 1 // one\\n}')
    '{"a": 1       \\n}'
    """
    _, notes = _tokens(text, comments)
    parts = []
    at = 0
    for start, end in notes:
        parts.append(text[at:start])
        parts.append(re.sub(r"[^\n]", " ", text[start:end]))
        at = end
    parts.append(text[at:])
    return "".join(parts)


def _refuse_constant(name: str) -> object:
    raise SettingsTextError(f"{name} is not JSON (the CLI cannot read it either)")


def load(text: str, comments: bool = False) -> Any:
    """The value of the JSON ``text`` (with ``comments``: ``//`` and ``/* */`` allowed).

    :class:`SettingsTextError` for anything a CLI's ``JSON.parse`` would refuse, or
    nested too deep to read."""
    try:
        return json.loads(strip_comments(text, comments), parse_constant=_refuse_constant)
    except RecursionError:
        raise SettingsTextError("nested too deep") from None
    except SettingsTextError:
        raise
    except ValueError as exc:
        raise SettingsTextError(str(exc)) from None


class Container(NamedTuple):
    """An object or an array of the text: where its brackets are, and each element's
    span (for an object, from its key to the end of its value) with its key."""

    open: int
    close: int
    elements: list[tuple[int, int]]
    keys: list[str | None]
    values: list[tuple[int, int]]
    commas: list[int | None]

    def find(self, key: str) -> int | None:
        """The index of the member ``key`` (objects only), else ``None``."""
        return self.keys.index(key) if key in self.keys else None


def outline(text: str, start: int, comments: bool) -> Container:
    """The container whose opening bracket is at ``start`` in ``text``."""
    tokens, _ = _tokens(text, comments)
    index = {token.start: i for i, token in enumerate(tokens)}
    if start not in index or tokens[index[start]].kind not in ("{", "["):
        raise SettingsTextError(f"no object or array at character {start}")
    at = index[start]
    is_object = tokens[at].kind == "{"
    closer = "}" if is_object else "]"
    elements: list[tuple[int, int]] = []
    keys: list[str | None] = []
    values: list[tuple[int, int]] = []
    commas: list[int | None] = []
    at += 1
    while tokens[at].kind != closer:
        first = tokens[at]
        key = None
        if is_object:
            key = json.loads(text[first.start : first.end])
            if key in keys:
                raise SettingsTextError(f"the key {key!r} is there twice; fix it by hand")
            at += 2  # the key and its colon
        value_start = tokens[at].start
        at = _skip(tokens, at)
        value_end = tokens[at - 1].end
        elements.append((first.start, value_end))
        keys.append(key)
        values.append((value_start, value_end))
        commas.append(tokens[at].start if tokens[at].kind == "," else None)
        if tokens[at].kind == ",":
            at += 1
    return Container(start, tokens[at].start, elements, keys, values, commas)


def _skip(tokens: list[Token], at: int) -> int:
    """The index of the token after the value that starts at ``at`` (iterative)."""
    depth = 0
    while True:
        kind = tokens[at].kind
        at += 1
        if kind in ("{", "["):
            depth += 1
        elif kind in ("}", "]"):
            depth -= 1
        if depth == 0:
            return at


def _splice(text: str, start: int, end: int, new: str = "") -> str:
    return text[:start] + new + text[end:]


def _line_indent(text: str, at: int) -> str:
    """The spaces and tabs that start the line holding ``at``."""
    line = text.rfind("\n", 0, at) + 1
    return re.match(r"[ \t]*", text[line:]).group()  # type: ignore[union-attr]


def _style(text: str) -> tuple[str, str]:
    """The text's newline and its indentation step (two spaces if it has none)."""
    newline = "\r\n" if "\r\n" in text else "\n"
    step = re.search(r"\n([ \t]+)\S", text)
    return newline, step.group(1) if step else "  "


def _render(value: object, indent: str, step: str, newline: str) -> str:
    lines = json.dumps(value, indent=step, ensure_ascii=False).split("\n")
    return (newline + indent).join(lines)


def append(text: str, container: Container, value: object, key: str | None = None) -> str:
    """``text`` with ``value`` (as member ``key`` of an object) added at the end of
    ``container``, written in the text's own newline and indentation; on one line where
    the container is written on one line."""
    newline, step = _style(text)
    if container.elements:
        last = container.elements[-1]
        one_line = "\n" not in text[container.open : last[0]]
        indent = _line_indent(text, last[0])
    else:
        one_line = False
        indent = _line_indent(text, container.open) + step
    if one_line:
        rendered = json.dumps(value, ensure_ascii=False)
    else:
        rendered = _render(value, indent, step, newline)
    if key is not None:
        rendered = f"{json.dumps(key, ensure_ascii=False)}: {rendered}"
    if not container.elements:
        outer = _line_indent(text, container.open)
        inserted = f"{newline}{indent}{rendered}{newline}{outer}"
        inside = text[container.open + 1 : container.close]
        end = container.close if not inside.strip() else container.open + 1  # comments stay
        return _splice(text, container.open + 1, end, inserted)
    end = container.elements[-1][1]
    joint = ", " if one_line else f",{newline}{indent}"
    return _splice(text, end, end, joint + rendered)


def delete(text: str, container: Container, index: int) -> str:
    """``text`` without element ``index`` of ``container`` and the comma and spacing
    that joined it to the others; comments around it stay."""
    start, end = container.elements[index]
    count = len(container.elements)
    if count == 1:
        inside = text[container.open + 1 : start] + text[end : container.close]
        if not inside.strip():  # nothing else in it: the container is left empty
            return _splice(text, container.open + 1, container.close)
        return _splice(text, start, end)
    if index > 0:
        comma = container.commas[index - 1]
        assert comma is not None
        spaced = start
        while spaced > comma + 1 and text[spaced - 1].isspace():
            spaced -= 1
        text = _splice(text, spaced, end)
        return _splice(text, comma, comma + 1)
    comma = container.commas[0]
    assert comma is not None
    after = comma + 1
    while after < container.elements[1][0] and text[after].isspace():
        after += 1
    return _splice(text, start, after)
