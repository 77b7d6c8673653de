"""Hook entries as TOML ``[[hooks]]`` tables, added to and taken out of a settings file
as text (Kimi Code's ``config.toml``).

A CLI that reads its hooks from an array of tables::

    [[hooks]]
    event = "PreToolUse"
    command = "/home/me/.venv/bin/loopfuse hook --agent kimi"

gets one table per event, appended at the end of the file between two marker comments
(:data:`BEGIN`, :data:`END`); every other byte of the file stays as it was written
(comments, key order, spacing, the user's own hooks). Taking them out removes the lines
between the markers, and also any ``[[hooks]]`` table whose command is loopfuse's without
them: a CLI that writes its settings out again (Kimi Code's ``/login``, its model
switch) drops comments but keeps the tables.

The text is never parsed by anything but the standard library's TOML reader
(:mod:`tomllib`), which checks every edit: the edited text must read as the original
with exactly loopfuse's tables added (or taken out), or the edit is refused with
:class:`TomlHooksError` and nothing is written. Finding the tables is a line scan (linear,
no regular expression run on more than one line).

>>> hooks, mine = TomlTables(("PreToolUse", "PostToolUse")), lambda c: c.startswith("lf ")
>>> text = hooks.install('default_model = "m"\\n', "lf hook", mine)
>>> print(text, end="")
default_model = "m"
# >>> loopfuse: hooks added by `loopfuse init` (`loopfuse init --remove` takes them out)
[[hooks]]
event = "PreToolUse"
command = "lf hook"
<BLANKLINE>
[[hooks]]
event = "PostToolUse"
command = "lf hook"
# <<< loopfuse: end of its hooks
>>> hooks.commands(text, mine), hooks.uninstall(text, mine)
({'PreToolUse': ['lf hook'], 'PostToolUse': ['lf hook']}, 'default_model = "m"\\n')
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["BEGIN", "END", "TomlHooksError", "TomlTables", "toml_string"]

Ours = Callable[[str], bool]
"""Whether a command line is one of loopfuse's hook commands."""

BEGIN: Final = (
    "# >>> loopfuse: hooks added by `loopfuse init` (`loopfuse init --remove` takes them out)"
)
"""The comment line before loopfuse's tables."""
END: Final = "# <<< loopfuse: end of its hooks"
"""The comment line after them."""


class TomlHooksError(ValueError):
    """The TOML text cannot be edited safely (the message says why; nothing changes)."""


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string: quotes, backslashes and control characters
    escaped, everything else as it is.

    >>> print(toml_string('say "hi"\\\\now\\t'))
    "say \\"hi\\"\\\\now\\t"
    """
    out = ['"']
    for char in text:
        if char == '"':
            out.append('\\"')
        elif char == "\\":
            out.append("\\\\")
        elif char == "\t":
            out.append("\\t")
        elif char < " " or char == "\x7f":
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _read(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise TomlHooksError(f"not valid TOML ({exc})") from None


@dataclass(frozen=True, slots=True)
class TomlTables:
    """loopfuse's ``[[hooks]]`` tables in a CLI's TOML settings: one per event of
    ``events``, each with ``event`` and ``command`` keys (no ``matcher``: every tool).

    What is there is kept, byte for byte; a second install changes nothing; uninstall
    takes out loopfuse's tables (``ours`` says which commands are loopfuse's), marked or
    not. Each edit is checked: the edited text must read as the same edit made on the
    parsed value, or :class:`TomlHooksError`."""

    events: tuple[str, ...]

    def check(self, text: str) -> None:
        """:class:`TomlHooksError` if ``text`` is not TOML these edits can read."""
        _hooks(_read(text))

    def tables(self, command: str) -> str:
        """The text of loopfuse's tables for ``command``, markers included."""
        body = "\n".join(
            f"[[hooks]]\nevent = {toml_string(event)}\ncommand = {toml_string(command)}\n"
            for event in self.events
        )
        return f"{BEGIN}\n{body}{END}\n"

    def install(self, text: str, command: str, ours: Ours) -> str:
        """``text`` with loopfuse's tables for ``command``, and no other of loopfuse's
        (an earlier run's, between its markers, replaced where they were; else added at
        the end; a blank ``text``, no file, gets the tables alone)."""
        original = _read(text)
        _hooks(original)  # a hooks key that is not an array of tables: refused
        block = self.tables(command)
        lines = text.splitlines(keepends=True)
        span = _marked(lines)
        if span is None:
            edited = _unmarked_removed(text, ours) if text.strip() else ""
            if edited and not edited.endswith("\n"):
                edited += "\n"
            edited += block
        else:  # the earlier run's place, held by its first marker while the rest is read
            held = "".join(lines[: span[0]]) + BEGIN + "\n" + "".join(lines[span[1] :])
            kept = _unmarked_removed(held, ours).splitlines(keepends=True)
            at = next(i for i, line in enumerate(kept) if line.rstrip("\r\n") == BEGIN)
            edited = "".join(kept[:at]) + block + "".join(kept[at + 1 :])
        wanted = _without(original, ours)
        added = [{"event": event, "command": command} for event in self.events]
        wanted["hooks"] = [*_hooks(wanted), *added]
        _verify(edited, wanted)
        return edited

    def uninstall(self, text: str, ours: Ours) -> str:
        """``text`` without loopfuse's tables (and their markers); the rest as it was
        (``text`` itself when it has none)."""
        original = _read(text)
        lines = text.splitlines(keepends=True)
        span = _marked(lines)
        if span is None and not _has_ours(original, ours):
            return text
        if span is not None:
            del lines[span[0] : span[1]]
        edited = _unmarked_removed("".join(lines), ours)
        _verify(edited, _without(original, ours))
        return edited

    def commands(self, text: str, ours: Ours) -> dict[str, list[str]]:
        """loopfuse's commands in ``text``, by event (each command in the order found)."""
        found: dict[str, list[str]] = {}
        for entry in _hooks(_read(text)):
            event, command = entry.get("event"), entry.get("command")
            if isinstance(event, str) and isinstance(command, str) and ours(command):
                found.setdefault(event, []).append(command)
        return found

    def same(self, text: str, other: str) -> bool:
        """Whether the CLI reads the two texts alike (a blank one as no settings)."""
        try:
            return _read(text) == _read(other)
        except TomlHooksError:
            return False

    def same_but_spacing(self, text: str, other: str) -> bool:
        """Whether the two texts differ at most in spacing (and read alike)."""
        if re.sub(r"\s+", "", text) != re.sub(r"\s+", "", other):
            return False
        return self.same(text, other)


def _unmarked_removed(text: str, ours: Ours) -> str:
    """``text`` without the ``[[hooks]]`` tables of loopfuse that no markers hold (the
    caller checks the result)."""
    entries = _hooks(_read(text))
    if not any(_is_ours(entry, ours) for entry in entries):
        return text
    lines = text.splitlines(keepends=True)
    headers = [i for i, kind in _headers(lines) if kind == "hooks"]
    if len(headers) != len(entries):
        raise TomlHooksError(
            "loopfuse's [[hooks]] tables could not be told apart from the rest of the "
            "file (hooks written inline?); take them out by hand"
        )
    starts = {i for i, _ in _headers(lines)}
    drop: set[int] = set()
    for header, entry in zip(headers, entries, strict=True):
        if not _is_ours(entry, ours):
            continue
        end = next((i for i in range(header + 1, len(lines)) if i in starts), len(lines))
        while end > header + 1 and _trivia(lines[end - 1]):
            end -= 1  # blank lines and comments before the next table are not its own
        drop.update(range(header, end))
    return "".join(line for i, line in enumerate(lines) if i not in drop)


def _verify(edited: str, wanted: dict[str, Any]) -> None:
    """The edited text must read as the edit wanted, or nothing is written."""
    if not wanted.get("hooks"):
        wanted.pop("hooks", None)
    try:
        got: object = tomllib.loads(edited)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        got = exc
    if got != wanted:
        raise TomlHooksError(
            "could not be edited in place (it would not read as before with only "
            "loopfuse's [[hooks]] tables changed); nothing was changed"
        )


def _has_ours(document: dict[str, Any], ours: Ours) -> bool:
    return any(_is_ours(entry, ours) for entry in _hooks(document))


def _hooks(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``hooks`` array of tables of a parsed file (empty when there is none)."""
    hooks = document.get("hooks", [])
    if not isinstance(hooks, list) or not all(isinstance(entry, dict) for entry in hooks):
        raise TomlHooksError("'hooks' is not an array of tables ([[hooks]]); fix it by hand")
    return hooks


def _is_ours(entry: dict[str, Any], ours: Ours) -> bool:
    command = entry.get("command")
    return isinstance(command, str) and ours(command)


def _without(document: dict[str, Any], ours: Ours) -> dict[str, Any]:
    """A copy of a parsed file without loopfuse's hook entries."""
    kept = [entry for entry in _hooks(document) if not _is_ours(entry, ours)]
    result = {key: value for key, value in document.items() if key != "hooks"}
    if kept:
        result["hooks"] = kept
    return result


def _marked(lines: list[str]) -> tuple[int, int] | None:
    """The lines ``[start, end)`` from loopfuse's first marker to its end marker."""
    begin = next((i for i, line in enumerate(lines) if line.rstrip("\r\n") == BEGIN), None)
    if begin is None:
        return None
    for i in range(begin + 1, len(lines)):
        if lines[i].rstrip("\r\n") == END:
            return begin, i + 1
    raise TomlHooksError(f"loopfuse's marker {BEGIN!r} has no end marker; fix it by hand")


def _trivia(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


_QUOTES: Final = ('"""', "'''")


def _headers(lines: list[str]) -> list[tuple[int, str]]:
    """The table headers among ``lines``: their index, and ``"hooks"`` for a
    ``[[hooks]]`` header (else ``""``). Lines inside a multi-line string are not
    headers; a line that only looks like one (an array's element on its own line) may
    be taken for one, which the caller's check then refuses."""
    found: list[tuple[int, str]] = []
    open_quote: str | None = None
    for index, line in enumerate(lines):
        if open_quote is None:
            stripped = line.strip()
            if stripped.startswith("["):
                found.append((index, "hooks" if _hooks_header(stripped) else ""))
        open_quote = _quote_after(line, open_quote)
    return found


def _hooks_header(stripped: str) -> bool:
    """Whether a line is the header ``[[hooks]]`` (spaces and a comment allowed)."""
    if not stripped.startswith("[["):
        return False
    end = stripped.find("]]")
    if end < 0:
        return False
    after = stripped[end + 2 :].strip()
    return stripped[2:end].strip() == "hooks" and (not after or after.startswith("#"))


def _quote_after(line: str, open_quote: str | None) -> str | None:
    """Which multi-line string is open after ``line`` (``None``: none), given the one
    open before it: a count of the triple quotes, read left to right."""
    at = 0
    while True:
        if open_quote is not None:
            end = line.find(open_quote, at)
            if end < 0:
                return open_quote
            at = end + 3
            open_quote = None
            continue
        hits = [(line.find(q, at), q) for q in _QUOTES]
        hits = [(i, q) for i, q in hits if i >= 0]
        comment = line.find("#", at)
        if not hits:
            return None
        first, quote = min(hits)
        if 0 <= comment < first:
            return None  # the rest of the line is a comment
        open_quote = quote
        at = first + 3
