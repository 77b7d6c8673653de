"""Reading JSON Lines text safely: one line at a time, each bounded, each a JSON object.

Shared by ``loopfuse scan``'s log reader (:mod:`loopfuse.cli.loglines`) and the
coding-agent CLIs' transcript readers (:mod:`loopfuse.harness.transcripts`), which sit
below the command line. Nothing here is imported by ``loopfuse hook`` on its way to a
decision but the names: :func:`parse_line` imports the JSON reader it uses
(:func:`loopfuse.intent.json_loads`) when it is first called.

>>> parse_line(b'{"a": 1}')
{'a': 1}
>>> parse_line(b"[1]")
Traceback (most recent call last):
    ...
loopfuse._jsonlines.LineProblem: expected a JSON object, got an array
"""

from __future__ import annotations

import json
from typing import IO, Any, Final

__all__ = ["LineProblem", "json_type", "parse_line", "read_line", "size_text"]

_PIECE: Final = 1024 * 1024


class LineProblem(ValueError):
    """What is wrong with one line."""


def json_type(value: object) -> str:
    """What kind of JSON value ``value`` is, for a message ("an array", "null" ...)."""
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def read_line(handle: IO[bytes], max_line: int | None) -> tuple[bytes | None, int]:
    """The next line and its size in bytes (``0``: the end of the file). A line longer
    than ``max_line`` is ``None``: it is read a piece at a time and each piece dropped
    once the line is known to be too long, so it never costs more than ``max_line``."""
    if max_line is None:
        raw = handle.readline()
        return raw, len(raw)
    pieces: list[bytes] = []
    size = 0
    while piece := handle.readline(_PIECE):
        size += len(piece)
        if size - piece.endswith(b"\n") > max_line:
            pieces.clear()  # too long: what was read goes, the rest is only counted
            if piece.endswith(b"\n"):
                return None, size
            while piece := handle.readline(_PIECE):
                size += len(piece)
                if piece.endswith(b"\n"):
                    break
            return None, size
        pieces.append(piece)
        if piece.endswith(b"\n"):
            break
    return (pieces[0] if len(pieces) == 1 else b"".join(pieces)), size


def size_text(size: int) -> str:
    """A size limit as people read it: ``256 MiB``, or ``100 bytes``.

    >>> size_text(256 * 1024 * 1024), size_text(100)
    ('256 MiB', '100 bytes')
    """
    mib = 1024 * 1024
    return f"{size // mib:,} MiB" if size >= mib and size % mib == 0 else f"{size:,} bytes"


def parse_line(line: bytes) -> dict[str, Any]:
    """One line of a JSON Lines file as a JSON object, or :class:`LineProblem` saying why
    it is not one."""
    # Imported here: the hook imports the CLIs' harness modules (and so this one) and
    # never reads a line; loopfuse.intent costs tens of milliseconds to import.
    from loopfuse.intent import json_loads

    try:
        value = json_loads(line)
    except UnicodeDecodeError as exc:
        raise LineProblem(f"not UTF-8 text (byte 0x{line[exc.start]:02x})") from None
    except json.JSONDecodeError as exc:
        raise LineProblem(f"not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise LineProblem("JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer over the int/str digit limit
        raise LineProblem(f"not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise LineProblem(f"expected a JSON object, got {json_type(value)}")
    return value
