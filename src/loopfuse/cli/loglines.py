r"""The lines of a JSON Lines log of requests, read one at a time.

A line is a bare request body, or a proxy-log entry ``{"session": ..., "path": ...,
"time": ..., "status": ..., "usage": ..., "body": {...}}`` (every key but ``body``
optional; ``body`` may also be the request's JSON text; ``response`` may stand for
``usage``). A bare body is not parsed here: the guard parses it, once. A line that is
not a request is a :class:`BadLine`, reported and skipped.

>>> import io
>>> log = b'{"model": "m", "messages": []}\n\n[1]\n{"body": {"input": "hi"}, "time": 3}\n'
>>> lines = io.BytesIO(log)
>>> [type(item).__name__ for item in read_lines(lines)]
['LogEntry', 'BadLine', 'LogEntry']
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any, Final

from loopfuse import intent
from loopfuse._jsonlines import LineProblem, json_type, parse_line, read_line, size_text
from loopfuse.intent.dialect import ALL_DIALECTS

__all__ = [
    "CONVERSATION_KEYS",
    "BadLine",
    "LineProblem",
    "LogEntry",
    "entry_of",
    "entry_problem",
    "is_wrapper",
    "json_type",
    "not_a_request",
    "parse_line",
    "read_line",
    "read_lines",
    "size_text",
]

CONVERSATION_KEYS: Final = tuple(dict.fromkeys(dialect.conversation for dialect in ALL_DIALECTS))
"""Top-level keys that hold a conversation in some dialect (``loopfuse.intent`` knows
which: ``messages``, ``contents``, ``input``)."""

_WRAPPER_KEYS: Final = frozenset({"session", "path", "time", "status", "usage", "response", "body"})


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One request of a log. ``body`` is the line's bytes when the line is a bare body
    (the guard parses it, once), else the entry's parsed ``body``; ``session``,
    ``path``, ``time``, ``status`` and ``usage`` are ``None`` when the line has none.
    ``offset`` is how far into the file the line ends (for progress)."""

    line: int
    body: object
    offset: int
    session: str | None = None
    path: str | None = None
    time: float | None = None
    status: int | None = None
    usage: object = None


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line of a log that is not a request: reported, skipped."""

    line: int
    problem: str
    offset: int


def not_a_request(value: dict[str, Any]) -> str:
    """Why a JSON object is not an LLM request, for an error message."""
    keys = ", ".join(sorted(str(key) for key in value)[:8]) or "none"
    if any(key in value for key in CONVERSATION_KEYS):
        return f"not an LLM request of a known dialect (keys: {keys})"
    return f"JSON, but not an LLM request, a trajectory or a log entry (keys: {keys})"


def is_wrapper(value: dict[str, Any]) -> bool:
    """Whether a JSON object is a proxy-log entry (rather than a request body)."""
    return "body" in value and not any(key in value for key in CONVERSATION_KEYS)


def read_lines(handle: IO[bytes], max_line: int | None = None) -> Iterator[LogEntry | BadLine]:
    """Each line of a log, read one at a time: memory holds one line, not the file.

    A line longer than ``max_line`` bytes is a :class:`BadLine`; it is skipped without
    ever being held whole (a line of gigabytes costs ``max_line`` bytes, not its size).
    """
    with handle:
        offset = 0
        number = 0
        while True:
            raw, size = read_line(handle, max_line)
            if not size:
                break
            number += 1
            offset += size
            if raw is None:
                problem = f"longer than {size_text(max_line or 0)} (the limit of one request)"
                yield BadLine(number, problem, offset)
                continue
            line = raw.strip()
            if number == 1 and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]  # a UTF-8 byte order mark
            if not line:
                continue
            if b'"body"' not in line and line.startswith(b"{"):
                # Not a proxy-log entry: a bare body, handed to the guard as bytes (one
                # parse). A line that turns out not to be a request is diagnosed then.
                yield LogEntry(number, line, offset)
                continue
            try:
                yield entry_of(number, parse_line(line), offset)
            except LineProblem as exc:
                yield BadLine(number, str(exc), offset)


def entry_problem(body: object) -> str | None:
    """Why the body of a log entry the guard could not read is not a request; ``None``
    when it is one nested deeper than loopfuse reads (it then goes through unchecked)."""
    if isinstance(body, str):
        return "body is not the JSON text of an LLM request"
    if isinstance(body, bytes):
        try:
            body = parse_line(body)
        except LineProblem as exc:
            return str(exc)
    if not isinstance(body, dict):
        return f"expected a JSON object, got {json_type(body)}"
    if any(key in body for key in CONVERSATION_KEYS) and intent.parse(body) is None:
        return None
    return not_a_request(body)


def entry_of(number: int, value: dict[str, Any], offset: int) -> LogEntry:
    if not is_wrapper(value):
        return LogEntry(number, value, offset)
    unknown = sorted(str(key) for key in value.keys() - _WRAPPER_KEYS)
    if unknown:
        raise LineProblem(f"unknown keys in a log entry: {', '.join(unknown)}")
    body = value["body"]
    if not isinstance(body, dict | str):
        raise LineProblem("body must be an object or JSON text")
    status = value.get("status")
    if status is not None and not (isinstance(status, int) and 100 <= status <= 599):
        raise LineProblem(f"status must be an HTTP status code, got {status!r}"[:200])
    return LogEntry(
        number,
        body,
        offset,
        session=_session(value.get("session")),
        path=_optional_str("path", value.get("path")),
        time=_time(value.get("time")),
        status=status,
        usage=value.get("usage", value.get("response")),
    )


def _session(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise LineProblem(f"session must be a string, got {value!r}"[:200])


def _optional_str(key: str, value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise LineProblem(f"{key} must be a string, got {value!r}"[:200])


def _time(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    raise LineProblem(f"time must be a number of seconds, got {value!r}"[:200])
