"""The table of a settings file: the TOML file ``loopfuse scan --config``, ``loopfuse hook``,
``loopfuse init`` and :func:`loopfuse.load_settings` read (light: ``loopfuse hook`` reads
it without the guards).

The file is the user's, but it may come from anywhere (a repository's ``pyproject.toml``):
before ``tomllib`` sees it, it is bounded by a reader of our own, so that no file costs
more than a small one. At most :data:`MAX_FILE_BYTES` are read (from a regular file only:
a FIFO is never waited on), and one linear pass over the text (:func:`check_shape`)
refuses nesting deeper than :data:`MAX_DEPTH`: ``tomllib`` reads nested arrays and
tables by recursion (about 500 levels end in ``RecursionError``) and keeps every prefix
of a dotted key (memory quadratic in its length: a 31 KB key took 1 GB). Within these
bounds a file is parsed in time and memory linear in its size.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final, Literal

from loopfuse.errors import ConfigError

if TYPE_CHECKING:
    from os import PathLike

    FileName = str | PathLike[str]  # a str or a pathlib.Path

__all__ = ["MAX_DEPTH", "MAX_FILE_BYTES", "MODES", "check_shape", "load_toml", "read_text"]

MODES: Final[tuple[Literal["refuse", "warn", "note"], ...]] = ("refuse", "warn", "note")
"""The modes a file's ``mode`` (and its ``[hook]`` table's) may name: the guard's
(:data:`loopfuse.guard.guard.MODES`), written here so that ``loopfuse hook`` reads them
without importing the guard (a test keeps them the same)."""

MAX_FILE_BYTES: Final = 256 * 1024
"""The largest settings file read, in bytes: a ``pyproject.toml`` of many tools' tables
fits many times over."""

MAX_DEPTH: Final = 32
"""The deepest nesting a settings file may have: open brackets (arrays, inline tables,
table headers) and the dots of a dotted key, counted together. ``[tool.loopfuse.hook]``
is 3 deep; a value of loopfuse's at most 2 more."""


def read_text(path: FileName) -> str:
    """The text of the file at ``path`` (at most :data:`MAX_FILE_BYTES`, UTF-8, from a
    regular file), or :class:`~loopfuse.errors.ConfigError` naming the file."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder, not a TOML file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        import stat

        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise ConfigError(f"{path}: is a folder, not a TOML file")
        if not stat.S_ISREG(mode):
            raise ConfigError(f"{path}: not a regular file")
        chunks = []
        left = MAX_FILE_BYTES + 1
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_FILE_BYTES // 1024} KiB, not a settings file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None


def check_shape(text: str, source: str) -> None:
    """Refuse ``text`` (TOML) nested deeper than :data:`MAX_DEPTH`, in one linear pass:
    brackets and dots are counted outside strings and comments, strings read as TOML
    reads them (escapes in basic strings; a multi-line string's closing quotes may be
    followed by up to two more of its own). A file that is not TOML is left to the
    parser to refuse; this pass only bounds what the parser will do.

    >>> check_shape("a.b = [1.5, {c = 2}]  # [[[", "f.toml")
    >>> check_shape("x = " + "[" * 40, "f.toml")
    Traceback (most recent call last):
        ...
    loopfuse.errors.ConfigError: f.toml: line 1: nested deeper than 32 (arrays, tables and \
dotted keys together)
    """
    depth = dots = 0
    line = 1
    i, end = 0, len(text)
    while i < end:
        char = text[i]
        if char == "\n":
            line += 1
            dots = 0
        elif char == "#":
            newline = text.find("\n", i)
            i = end if newline < 0 else newline
            continue
        elif char in "\"'":
            i, lines = _skip_string(text, i)
            line += lines
            continue
        elif char in "[{":
            depth += 1
            dots = 0
        elif char in "]}":
            depth = max(0, depth - 1)
        elif char in "=,":
            dots = 0
        elif char == ".":
            dots += 1
        if depth + dots > MAX_DEPTH:
            raise ConfigError(
                f"{source}: line {line}: nested deeper than {MAX_DEPTH} "
                "(arrays, tables and dotted keys together)"
            )
        i += 1


def _skip_string(text: str, start: int) -> tuple[int, int]:
    """The index just past the string that opens at ``start``, and the newlines in it. A
    single-line string ends at its line's end at the latest (the parser refuses it)."""
    quote = text[start]
    escapes = quote == '"'
    if text.startswith(quote * 3, start):
        i = start + 3
        close = text.find(quote * 3, i)
        # Each find starts past the last one's answer and stops at the closing quotes:
        # linear in the string's length, whatever it holds.
        slash = _find_before(text, "\\", i, close) if escapes else -1
        while slash >= 0:
            i = slash + 2  # the escaped character is content, whatever it is
            if 0 <= close < i:
                close = text.find(quote * 3, i)
            slash = _find_before(text, "\\", i, close)
        if close < 0:
            return len(text), text.count("\n", start)
        stop = close + 3
        for _ in range(2):  # """a"""" holds a": up to two more quotes are content
            if text.startswith(quote, stop):
                stop += 1
        return stop, text.count("\n", start, stop)
    i = start + 1
    while i < len(text):
        char = text[i]
        if char == quote:
            return i + 1, 0
        if char == "\n":
            return i, 0
        i += 2 if escapes and char == "\\" else 1
    return len(text), 0


def _find_before(text: str, needle: str, start: int, stop: int) -> int:
    """Where ``needle`` is in ``text`` from ``start`` and before ``stop`` (``stop < 0``:
    to the end), or ``-1``."""
    return text.find(needle, start) if stop < 0 else text.find(needle, start, stop)


def load_toml(path: FileName) -> dict[str, object]:
    """The settings table of a TOML file; ``ConfigError`` naming the file when unusable.

    The table is ``[tool.loopfuse]`` if present, else ``[loopfuse]``, else the top level.
    The file is bounded (:func:`read_text`, :func:`check_shape`) before it is parsed.
    """
    import tomllib  # here, not above: ``loopfuse hook`` without a settings file skips it

    text = read_text(path)
    check_shape(text, str(path))
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:  # pragma: no cover - check_shape bounds the nesting first
        raise ConfigError(f"{path}: nested too deep") from None
    table: object = data
    tool = data.get("tool")
    if isinstance(tool, dict) and isinstance(tool.get("loopfuse"), dict):
        table = tool["loopfuse"]
    elif isinstance(data.get("loopfuse"), dict):
        table = data["loopfuse"]
    assert isinstance(table, dict)
    return {str(key): value for key, value in table.items()}
