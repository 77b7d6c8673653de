"""What ``loopfuse scan`` reads: files and folders, recognised by their content.

A file is one of:

- a **request body** in any dialect :mod:`loopfuse.intent` knows (OpenAI Chat, OpenAI
  Responses, Anthropic, Gemini, Ollama): a :class:`Transcript` of kind ``"request"``;
- a **trajectory**: ``{"messages": [...], ...}`` plus at least one of
  :data:`TRAJECTORY_KEYS` (``outcome``, ``exit_reason``, ``agent``, ...), like the files
  of ``shared/corpus``: a :class:`Transcript` of kind ``"trajectory"``; those keys are
  metadata, not part of the request the agent sent;
- a **JSON Lines log** of requests, one per line, each a request body or a proxy-log
  entry ``{"session": ..., "path": ..., "time": ..., "body": {...}}`` (every key but
  ``body`` optional; ``body`` may also be the request's JSON text): a :class:`Log`.
  A file ending in ``.jsonl`` or ``.ndjson`` is always read as a log, any other file
  when it holds more than one JSON value.

A folder is searched recursively for ``.json``, ``.jsonl``, ``.ndjson`` and ``.traj``
files (hidden files and folders are skipped; symbolic links to folders are not
followed). ``-`` reads standard input.

Whatever is wrong with a file raises :class:`InputError`, whose message is one line:
``"<file>: <what is wrong>"``.

>>> body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
>>> source = read_bytes("x.json", body)
>>> source.kind, source.dialect
('request', 'openai_chat')
>>> read_bytes("y.json", b'{"foo": 1}')  # doctest: +ELLIPSIS
Traceback (most recent call last):
    ...
loopfuse.cli.readers.InputError: y.json: JSON, but not an LLM request, ... (keys: foo)
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from loopfuse import intent
from loopfuse.errors import LoopfuseError
from loopfuse.intent._textdepth import json_loads  # json.loads, safe in small threads

__all__ = [
    "LOG_SUFFIXES",
    "MAX_FILE_BYTES",
    "SCAN_SUFFIXES",
    "STDIN",
    "TRAJECTORY_KEYS",
    "InputError",
    "Log",
    "LogEntry",
    "Source",
    "Transcript",
    "collect",
    "read_bytes",
    "read_path",
]

MAX_FILE_BYTES: Final = 256 * 1024 * 1024
"""Files larger than this are refused rather than read into memory."""

SCAN_SUFFIXES: Final = (".json", ".jsonl", ".ndjson", ".traj")
"""The files a folder scan picks up (any file named on the command line is read)."""

LOG_SUFFIXES: Final = (".jsonl", ".ndjson")

TRAJECTORY_KEYS: Final = frozenset(
    {
        "outcome",
        "exit_reason",
        "agent",
        "task",
        "source",
        "license",
        "truncated",
        "trajectory_format",
        "info",
        "instance_id",
        "reward",
    }
)
"""Top-level keys that mark a ``{"messages": [...]}`` document as a recorded trajectory."""

STDIN: Final = "-"

_WRAPPER_KEYS: Final = frozenset({"session", "path", "time", "body"})
_CONVERSATION_KEYS: Final = ("messages", "contents", "input")
_META_SHOWN: Final = ("outcome", "exit_reason", "agent", "model", "task")
_UNPARSED: Final = "unparsed"  # nested deeper than intent.MAX_DEPTH: the guards get bytes


class InputError(LoopfuseError):
    """A file or folder ``scan`` cannot use; ``str()`` is ``"<name>: <problem>"``."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"{name}: {problem}")
        self.name = name
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Transcript:
    """One conversation: a request body, or a trajectory with its metadata in ``meta``.

    ``body`` is the request as the agent would send it (for a trajectory: the file
    without its :data:`TRAJECTORY_KEYS`). ``raw`` is set when the body is nested deeper
    than :data:`loopfuse.intent.MAX_DEPTH` (``dialect`` is then ``"unparsed"``): the
    guards are given these bytes, as they would be live, and take their documented
    raw-bytes fallback; the body is not split into turns.
    """

    name: str
    kind: str
    dialect: str
    body: dict[str, Any]
    raw: bytes | None = None
    meta: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One request of a log. ``path`` and ``time`` are ``None`` when the line has none."""

    line: int
    session: str
    path: str | None
    time: float | None
    body: object
    dialect: str


@dataclass(frozen=True, slots=True)
class Log:
    """A JSON Lines log: requests in the order they were sent."""

    name: str
    entries: tuple[LogEntry, ...]
    kind: str = "log"

    @property
    def dialect(self) -> str:
        """The dialect of every entry, or ``"mixed"``."""
        dialects = sorted({entry.dialect for entry in self.entries})
        return dialects[0] if len(dialects) == 1 else "mixed" if dialects else "none"


Source = Transcript | Log


def collect(args: Sequence[str]) -> Iterator[Path | str | InputError]:
    """The files to scan, in order: a ``Path``, :data:`STDIN`, or an ``InputError``
    for a path that is missing, not a regular file, or a folder with nothing to scan."""
    for arg in args:
        if arg == STDIN:
            yield STDIN
            continue
        path = Path(arg)
        if path.is_dir():
            found = list(_walk(path))
            if not found:
                suffixes = ", ".join(SCAN_SUFFIXES)
                yield InputError(arg, f"folder holds no {suffixes} files")
            yield from found
        elif path.is_file():
            yield path
        elif path.exists():
            yield InputError(arg, "not a regular file")
        else:
            yield InputError(arg, "no such file or folder")


def _walk(folder: Path) -> Iterator[Path]:
    for root, dirs, files in os.walk(folder, onerror=None, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.startswith(".") and name.lower().endswith(SCAN_SUFFIXES):
                yield Path(root, name)


def read_path(path: Path) -> Source:
    """Read and recognise one file."""
    name = str(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            limit = MAX_FILE_BYTES // (1024 * 1024)
            raise InputError(name, f"too large ({size:,} bytes; the limit is {limit} MiB)")
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(name, "no such file or folder") from None
    except IsADirectoryError:
        raise InputError(name, "is a folder") from None
    except OSError as exc:
        raise InputError(name, f"cannot read: {exc.strerror or exc}") from None
    return read_bytes(name, data, log=path.suffix.lower() in LOG_SUFFIXES)


def read_bytes(name: str, data: bytes, *, log: bool = False) -> Source:
    """Recognise ``data`` read from ``name``; ``log`` forces JSON Lines."""
    text = _decode(name, data)
    if not text.strip():
        raise InputError(name, "empty file")
    if log:
        return _log(name, text)
    try:
        value = json_loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data" and _first_line_is_json(text):
            return _log(name, text)
        raise InputError(name, _json_problem(exc)) from None
    except RecursionError:
        raise InputError(name, "JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer over the int/str digit limit
        raise InputError(name, f"not valid JSON: {exc}") from None
    if isinstance(value, dict) and _is_wrapper(value):
        return Log(name, (_entry(name, 1, value),))
    return _transcript(name, value)


def _decode(name: str, data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise InputError(name, f"binary data, not JSON (NUL byte at offset {data.index(0)})")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad = data[exc.start]
        raise InputError(name, f"not UTF-8 text (byte 0x{bad:02x} at offset {exc.start})") from None


def _json_problem(exc: json.JSONDecodeError) -> str:
    return f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"


def _first_line_is_json(text: str) -> bool:
    first = next(line for line in text.splitlines() if line.strip())
    try:
        json_loads(first)
    except (ValueError, RecursionError):
        return False
    return True


def _transcript(name: str, value: object) -> Transcript:
    if not isinstance(value, dict):
        raise InputError(
            name,
            f"expected a JSON object (a request body or a trajectory), got {_type(value)}",
        )
    body = value
    kind = "request"
    meta: dict[str, str] = {}
    if isinstance(value.get("messages"), list) and TRAJECTORY_KEYS & value.keys():
        kind = "trajectory"
        body = {key: item for key, item in value.items() if key not in TRAJECTORY_KEYS}
        meta = {
            key: str(value[key])
            for key in _META_SHOWN
            if isinstance(value.get(key), str | int | float) and str(value[key])
        }
    raw = _raw_if_refused(body)
    dialect = _dialect(body) if raw is None else _UNPARSED
    if dialect is None or (raw is not None and not _has_conversation(body)):
        raise InputError(name, _not_a_request(body))
    return Transcript(name, kind, dialect, body, raw, meta)


def _dialect(body: object) -> str | None:
    try:
        return intent.detect_dialect(body)
    except LoopfuseError:  # a parsed value JSON cannot express: not a request
        return None


def _has_conversation(value: dict[str, Any]) -> bool:
    return any(key in value for key in _CONVERSATION_KEYS)


def _not_a_request(value: dict[str, Any]) -> str:
    keys = ", ".join(sorted(str(key) for key in value)[:8]) or "none"
    if _has_conversation(value):
        return f"not an LLM request of a known dialect (keys: {keys})"
    return f"JSON, but not an LLM request, a trajectory or a log entry (keys: {keys})"


def _raw_if_refused(body: dict[str, Any]) -> bytes | None:
    if intent.parse(body) is not None:
        return None
    # Live, such a body arrives as bytes and every guard takes its raw-bytes fallback.
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", "surrogatepass"
    )


def _type(value: object) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def _is_wrapper(value: dict[str, Any]) -> bool:
    return "body" in value and not any(key in value for key in _CONVERSATION_KEYS)


def _log(name: str, text: str) -> Log:
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json_loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(name, f"line {number}: not valid JSON: {exc.msg}") from None
        except RecursionError:
            raise InputError(name, f"line {number}: JSON nested too deeply") from None
        except ValueError as exc:  # e.g. an integer over the int/str digit limit
            raise InputError(name, f"line {number}: not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise InputError(name, f"line {number}: expected a JSON object, got {_type(value)}")
        entries.append(_entry(name, number, value))
    return Log(name, tuple(entries))


def _entry(name: str, number: int, value: dict[str, Any]) -> LogEntry:
    where = f"line {number}"
    session, path, time = "default", None, None
    body: object = value
    if _is_wrapper(value):
        unknown = sorted(str(key) for key in value.keys() - _WRAPPER_KEYS)
        if unknown:
            raise InputError(name, f"{where}: unknown keys in a log entry: {', '.join(unknown)}")
        session = _session(name, where, value.get("session", "default"))
        path = _optional_str(name, where, "path", value.get("path"))
        time = _time(name, where, value.get("time"))
        body = value["body"]
        if not isinstance(body, dict | str):
            raise InputError(name, f"{where}: body must be an object or JSON text")
    raw = _raw_if_refused(body) if isinstance(body, dict) else None
    dialect = _dialect(body) if raw is None else _UNPARSED
    if isinstance(body, dict) and (
        dialect is None or (raw is not None and not _has_conversation(body))
    ):
        raise InputError(name, f"{where}: {_not_a_request(body)}")
    if dialect is None:
        raise InputError(name, f"{where}: body is not the JSON text of an LLM request")
    return LogEntry(number, session, path, time, body if raw is None else raw, dialect)


def _session(name: str, where: str, value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise InputError(name, f"{where}: session must be a string, got {value!r}"[:200])


def _optional_str(name: str, where: str, key: str, value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise InputError(name, f"{where}: {key} must be a string, got {value!r}"[:200])


def _time(name: str, where: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    raise InputError(name, f"{where}: time must be a number of seconds, got {value!r}"[:200])
