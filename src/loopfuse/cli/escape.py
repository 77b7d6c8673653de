r"""Text a run wrote, made safe for each report format: one function per format.

Everything a recorded run controls (file names, a trajectory's outcome, agent, model
and task, tool names, commands, answers, messages, session ids, keys of a bad line)
may be hostile: an escape sequence that drives the terminal, HTML that runs in a
viewer, a table pipe that breaks a Markdown table, a bidi override that shows
``gnp.exe`` as ``exe.png``, a zero-width character that hides a difference. Each
report writes such text through its format's function, and only through it:

- :func:`printable`: the text report and standard error (a terminal);
- :func:`code`: Markdown, as an inline code span;
- :func:`esc`: HTML and SVG, text and attribute values;
- :func:`json_text`: the JSON report, which keeps the data exactly.

All four agree on what a reader must not be handed as it is: :data:`UNSAFE`, every
character of Unicode's control (``Cc``), format (``Cf``: bidi controls, zero-width
characters, the soft hyphen, tag characters), surrogate (``Cs``) and line and
paragraph separator (``Zl``, ``Zp``) categories, and the noncharacters U+FFFE and
U+FFFF. The first three formats show a line break or a tab as a space and any other
such character as U+FFFD; JSON writes it as a ``\uXXXX`` escape, which reads back as
the same text.

>>> printable("ls\x1b[2J\u202egnp.exe\nnext")
'ls\ufffd[2J\ufffdgnp.exe next'
>>> print(code("a`b|c\n<script>"))
`a'b\|c <script>`
>>> esc('<b title="x">\u200b</b>')
'&lt;b title=&quot;x&quot;&gt;\ufffd&lt;/b&gt;'
>>> json_text({"outcome": "a\u202eb\x00"})
'{\n  "outcome": "a\\u202eb\\u0000"\n}'
"""

from __future__ import annotations

import html
import json
import re
from typing import Final

__all__ = ["UNSAFE", "code", "esc", "json_text", "printable"]

UNSAFE: Final = re.compile(
    "[\x00-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ud800-\udfff\ufeff"
    "\ufff9-\ufffb\ufffe\uffff\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)
"""The characters no report hands a reader as they are (see the module docstring).
Written out rather than built from :mod:`unicodedata` at import;
``tests/test_cli_escaping.py`` checks it against the running Python's database."""

_BREAKS: Final = frozenset("\t\n\v\f\r\x1c\x1d\x1e\x1f\x85\u2028\u2029")
"""Of those, the ones that separate words or lines: shown as a space."""

_CELL: Final = 300  # characters of run text per Markdown code span


def _shown(match: re.Match[str]) -> str:
    return " " if match.group() in _BREAKS else "\ufffd"


def printable(text: str) -> str:
    """``text`` on one line, safe on a terminal: line breaks and tabs become spaces,
    every other :data:`UNSAFE` character (an escape sequence, a bidi override, a
    zero-width space, a lone surrogate) U+FFFD."""
    return UNSAFE.sub(_shown, text)


def code(text: str, room: int = _CELL) -> str:
    """``text`` as a Markdown inline code span on one line, safe in a table cell: inside
    a code span Markdown and HTML mean nothing; a backtick (which would end it) becomes
    ``'`` and a table pipe is escaped; at most ``room`` characters of it are kept."""
    flat = " ".join(printable(text).split())
    if len(flat) > room:
        flat = flat[: room - 3] + "..."
    flat = flat.replace("`", "'").replace("|", "\\|")
    return f"`{flat or ' '}`"


def esc(text: object) -> str:
    """``text`` safe anywhere in HTML or SVG text and attribute values: the
    :func:`printable` text, then ``& < > " '`` escaped."""
    return html.escape(printable(str(text)), quote=True)


def _escaped(match: re.Match[str]) -> str:
    point = ord(match.group())
    if point < 0x20:  # json.dumps escapes these in strings: one left is its indentation
        return match.group()
    if point <= 0xFFFF:
        return f"\\u{point:04x}"
    point -= 0x10000  # a UTF-16 surrogate pair, as JSON writes characters past U+FFFF
    return f"\\u{0xD800 + (point >> 10):04x}\\u{0xDC00 + (point & 0x3FF):04x}"


def json_text(document: object) -> str:
    """``document`` as indented JSON, UTF-8 text kept as it is but every :data:`UNSAFE`
    character written as a ``\\uXXXX`` escape: nothing a terminal acts on or a reader
    cannot see is in the output, and parsing it gives back exactly the same strings
    (a lone surrogate included)."""
    # Outside strings there is only ASCII punctuation, digits, words and indentation.
    return UNSAFE.sub(_escaped, json.dumps(document, indent=2, ensure_ascii=False))
