"""What ``loopfuse scan`` reads: files and folders, recognised by their content.

A file is one of:

- a **request body** in any dialect :mod:`loopfuse.intent` knows (OpenAI Chat, OpenAI
  Responses, Anthropic, Gemini, Ollama): a :class:`Transcript` of kind ``"request"``;
- a **trajectory**: ``{"messages": [...], ...}`` plus at least one of
  :data:`TRAJECTORY_KEYS` (``outcome``, ``exit_reason``, ``agent``, ...), like the files
  of ``shared/corpus``: a :class:`Transcript` of kind ``"trajectory"``; those keys are
  metadata, not part of the request the agent sent;
- a **JSON Lines log** of requests, one per line, each a request body or a proxy-log
  entry ``{"session": ..., "path": ..., "time": ..., "status": ..., "usage": ...,
  "body": {...}}`` (every key but ``body`` optional; ``body`` may also be the request's
  JSON text; ``response`` may stand for ``usage``: only its usage is read): a
  :class:`Log`, read line by line. A file ending in ``.jsonl`` or ``.ndjson`` is read
  as a log (unless it is a CLI's transcript, below), any other file when it holds more
  than one JSON value;
- a **coding-agent CLI's transcript** (Claude Code, Codex, Gemini CLI, Copilot CLI),
  told from a log by its first line, a whole-file session (an older Gemini CLI's, an
  ``opencode export``; in a ``.jsonl`` file too, when it is one JSON document written
  over several lines) or OpenCode's SQLite database: an
  :class:`~loopfuse.cli.agent_sessions.AgentSession`, whose runs
  :mod:`loopfuse.cli.agent_sessions` reads.

JSON of a shape no reader here knows is :class:`NotUnderstood` (an :class:`InputError`
reported apart, with the tool calls it seems to hold), never a clean file.

Which dialect a body is in, and where its turns are, is :mod:`loopfuse.intent`'s
business: this module knows file formats only.

A folder is searched recursively for ``.json``, ``.jsonl``, ``.ndjson`` and ``.traj``
files (hidden files and folders are skipped; symbolic links to folders are not
followed). ``-`` reads standard input.

Whatever is wrong with a file raises :class:`InputError`, whose message is one line:
``"<file>: <what is wrong>"``; a bad line of a log is a :class:`BadLine`, reported and
skipped.

>>> body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
>>> read_bytes("x.json", body).kind
'request'
>>> read_bytes("y.json", b'[1]')  # doctest: +ELLIPSIS
Traceback (most recent call last):
    ...
loopfuse.cli.readers.InputError: y.json: expected a JSON object (a request body or ...
"""

from __future__ import annotations

import io
import json
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, Final

from loopfuse.cli.agent_sessions import (
    AgentSession,
    agent_of,
    agent_of_database,
    agent_of_document,
)
from loopfuse.cli.loglines import (
    CONVERSATION_KEYS,
    BadLine,
    LineProblem,
    LogEntry,
    entry_of,
    is_wrapper,
    json_type,
    not_a_request,
    read_lines,
    size_text,
)
from loopfuse.cli.seen_calls import seeming_calls
from loopfuse.errors import LoopfuseError
from loopfuse.intent import json_loads

__all__ = [
    "LOG_SUFFIXES",
    "MAX_FILE_BYTES",
    "NOT_UNDERSTOOD",
    "SCAN_SUFFIXES",
    "STDIN",
    "TRAJECTORY_KEYS",
    "InputError",
    "Log",
    "NotUnderstood",
    "Source",
    "Transcript",
    "collect",
    "read_bytes",
    "read_path",
    "read_stdin",
]

MAX_FILE_BYTES: Final = 256 * 1024 * 1024
"""A JSON document (a file or standard input, read whole) larger than this is refused;
a ``.jsonl``/``.ndjson`` log is read line by line, whatever its size, and a line larger
than this is skipped (reported as a bad line)."""

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

_META_SHOWN: Final = ("outcome", "exit_reason", "agent", "model", "task")


class InputError(LoopfuseError):
    """A file or folder ``scan`` cannot use; ``str()`` is ``"<name>: <problem>"``."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"{name}: {problem}")
        self.name = name
        self.problem = problem

    def __reduce__(self) -> tuple[type[InputError], tuple[str, str]]:
        return (type(self), (self.name, self.problem))


NOT_UNDERSTOOD: Final = "format not understood"
"""How a report names a :class:`NotUnderstood` file."""


class NotUnderstood(InputError):
    """A file ``scan`` read but whose calls it could not: JSON (or JSON Lines) of a
    shape no reader knows, or of a known shape read without a single tool call while it
    plainly holds some. Never reported clean: reported apart from the unreadable files,
    with ``calls``, the tool calls it seems to hold
    (:func:`~loopfuse.cli.seen_calls.seeming_calls`), and an input error's exit status.
    ``str()`` is ``"<name>: format not understood: <why> (it seems to hold N tool
    calls)"``.
    """

    def __init__(self, name: str, why: str, calls: int = 0) -> None:
        held = f" (it seems to hold {calls:,} tool call{'s' * (calls != 1)})" if calls else ""
        super().__init__(name, f"{NOT_UNDERSTOOD}: {why}{held}")
        self.why = why
        self.calls = calls

    def __reduce__(self) -> tuple[type[InputError], tuple[str, str, int]]:  # type: ignore[override]
        return (type(self), (self.name, self.why, self.calls))


@dataclass(frozen=True, slots=True)
class Transcript:
    """One conversation: a request body, or a trajectory with its metadata in ``meta``.

    ``body`` is the request as the agent would send it (for a trajectory: the file
    without its :data:`TRAJECTORY_KEYS`).
    """

    name: str
    kind: str
    body: dict[str, Any]
    meta: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Log:
    """A JSON Lines log: requests in the order they were sent, read on demand.

    ``open()`` yields each line's :class:`LogEntry` (or :class:`BadLine`); ``size`` is
    the file's size in bytes.
    """

    name: str
    size: int
    open: Callable[[], Iterator[LogEntry | BadLine]]
    kind: str = "log"
    meta: dict[str, str] = field(default_factory=dict)


Source = Transcript | Log | AgentSession
"""What a file is; an :class:`~loopfuse.cli.agent_sessions.AgentSession` is a coding-agent
CLI's own transcript (Claude Code, Codex, Gemini CLI), recognised by its first line."""

_SQLITE: Final = b"SQLite format 3\x00"
"""How a SQLite database starts (OpenCode's ``opencode.db``)."""

_HEAD_BYTES: Final = 64 * 1024
"""Bytes read to recognise a CLI's transcript by its first line."""


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
    """Recognise one file; a ``.jsonl``/``.ndjson`` file is read line by line, later.

    Only a regular file is opened (see :func:`_open_regular`); a JSON document is read
    up to :data:`MAX_FILE_BYTES`, a log one line of at most that size at a time.
    """
    name = str(path)
    log = path.suffix.lower() in LOG_SUFFIXES
    try:
        with _open_regular(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            if path.suffix.lower() == ".db" or not log:
                magic = handle.read(len(_SQLITE))
                handle.seek(0)
                keeper = agent_of_database() if magic == _SQLITE else None
                if keeper is not None:  # a CLI's sessions database (OpenCode's)
                    return AgentSession(name, keeper, size, partial(_open_regular, path),
                                        kind="database")  # fmt: skip
            if log:
                head = handle.read(_HEAD_BYTES) or b""
                _check_start(name, head[:8192], size)
                agent = agent_of(head, whole=size <= len(head))
                if agent is not None:
                    # Opened (and checked) again when it is read, one bounded line at a time.
                    opener = partial(_open_regular, path)
                    return AgentSession(name, agent, size, opener, max_line=MAX_FILE_BYTES)
                if size <= MAX_FILE_BYTES and _pretty_document(head):
                    # One JSON document spread over lines (a session saved whole, named
                    # .jsonl): read as the document it is, whatever its name says.
                    data = head + _read_limited(name, handle, size - len(head), "")
                    document = _document(data)
                    if document is not None:
                        return read_bytes(name, data)
                return Log(name, size, lambda: _read_log(path))
            if size > MAX_FILE_BYTES:
                raise InputError(
                    name,
                    f"too large ({size:,} bytes; the limit is {size_text(MAX_FILE_BYTES)}, "
                    "or name it .jsonl)",
                )
            data = _read_limited(name, handle, size, ", or name it .jsonl")
    except OSError as exc:
        raise _unreadable(name, exc) from None
    return read_bytes(name, data)


def _pretty_document(head: bytes) -> bool:
    """Whether a ``.jsonl`` file starts like one JSON object written over several lines:
    its first line opens an object and is not a JSON value by itself."""
    text = head[3:] if head.startswith(b"\xef\xbb\xbf") else head
    end = text.find(b"\n")
    if end < 0:
        return False
    first = text[:end].strip()
    if not first.startswith(b"{"):
        return False
    try:
        json_loads(first)
    except (ValueError, RecursionError):
        return True
    return False


def _document(data: bytes) -> object | None:
    """``data`` as one JSON value, or ``None`` when it is not one (a log whose first
    line is damaged is read as a log)."""
    try:
        value: object = json_loads(data.decode("utf-8-sig"))
    except (ValueError, RecursionError):
        return None
    return value


def read_stdin(stream: BinaryIO) -> Source:
    """Recognise what standard input holds, read up to :data:`MAX_FILE_BYTES` (as a
    file is: a log longer than that is scanned from a ``.jsonl`` file, line by line)."""
    name = "<stdin>"
    try:
        data = _read_limited(name, stream, 0, "; save a log as a .jsonl file and scan that")
    except OSError as exc:
        raise _unreadable(name, exc) from None
    return read_bytes(name, data)


_OPEN_FLAGS: Final = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)  # a FIFO opens at once, with or without a writer
    | getattr(os, "O_NOCTTY", 0)  # a terminal never becomes the controlling one
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
_READ_AT_ONCE: Final = 1024 * 1024


def _looks_regular(path: Path) -> bool:
    """Whether ``path`` (what it links to) is a regular file, looked at without opening it."""
    return stat.S_ISREG(path.stat().st_mode)


def _open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading, when it is a regular file.

    A FIFO, a device or a socket (a named pipe, ``/dev/zero``, ``/dev/stdin``, named or
    linked to) is refused without being opened: opening one may wait for a writer, read
    forever, or act on a device. The path may change between that look and the open, so
    the descriptor opened is checked too, and it is opened with ``O_NONBLOCK``: a FIFO
    put there in between is refused, not waited on.
    """
    name = str(path)
    if not _looks_regular(path):
        raise InputError(name, "is a folder" if path.is_dir() else "not a regular file")
    descriptor = os.open(path, _OPEN_FLAGS)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise InputError(name, "not a regular file")
        # A big buffer: a log's long lines are read in pieces of this size.
        return os.fdopen(descriptor, "rb", buffering=_READ_AT_ONCE)
    except BaseException:
        os.close(descriptor)
        raise


def _read_log(path: Path) -> Iterator[LogEntry | BadLine]:
    # Opened (and checked) again when it is read: it may have changed since.
    try:
        handle = _open_regular(path)
    except OSError as exc:
        raise _unreadable(str(path), exc) from None
    return read_lines(handle, MAX_FILE_BYTES)


def _read_limited(name: str, stream: BinaryIO, expected: int, advice: str) -> bytes:
    """All of ``stream``, refused past :data:`MAX_FILE_BYTES`: what is read is bounded,
    not only what ``stat`` said (a file may grow; a ``/proc`` file says 0; a pipe says
    nothing). ``expected`` is the size to read at once (one allocation, when right)."""
    limit = MAX_FILE_BYTES
    wanted = min(expected, limit) + 1 if expected > 0 else _READ_AT_ONCE
    chunks: list[bytes] = []
    total = 0
    while total <= limit:
        chunk = stream.read(min(wanted, limit + 1 - total))
        if chunk is None:  # a non-blocking descriptor with nothing to read yet
            raise InputError(name, "cannot read: no data ready (not a regular file?)")
        if not chunk:
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        wanted = _READ_AT_ONCE
    raise InputError(name, f"too large (over the limit of {size_text(limit)}{advice})")


def _unreadable(name: str, exc: OSError) -> InputError:
    if isinstance(exc, FileNotFoundError):
        return InputError(name, "no such file or folder")
    if isinstance(exc, IsADirectoryError):
        return InputError(name, "is a folder")
    return InputError(name, f"cannot read: {exc.strerror or exc}")


def read_bytes(name: str, data: bytes, *, log: bool = False) -> Source:
    """Recognise ``data`` read from ``name``; ``log`` forces JSON Lines."""
    _check_start(name, data[:8192], len(data))
    agent = agent_of(data[:_HEAD_BYTES], whole=len(data) <= _HEAD_BYTES)
    if agent is not None:
        return AgentSession(name, agent, len(data), lambda: io.BytesIO(data))
    if log:
        return _log_of(name, data)
    text = _decode(name, data)
    try:
        value = json_loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data" and _first_line_is_json(text):
            return _log_of(name, data)
        raise InputError(name, _json_problem(exc)) from None
    except RecursionError:
        raise InputError(name, "JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer over the int/str digit limit
        raise InputError(name, f"not valid JSON: {exc}") from None
    agent = agent_of_document(value)
    if agent is not None:  # a whole-file session: an older Gemini CLI's, an OpenCode export
        return AgentSession(name, agent, len(data), lambda: io.BytesIO(data), whole=True)
    if isinstance(value, dict) and is_wrapper(value):
        try:
            entry = entry_of(1, value, len(data))
        except LineProblem as exc:
            raise InputError(name, f"line 1: {exc}") from None
        return Log(name, len(data), lambda: iter([entry]))
    return _transcript(name, value)


def _log_of(name: str, data: bytes) -> Log:
    return Log(name, len(data), lambda: read_lines(io.BytesIO(data)))


def _check_start(name: str, head: bytes, size: int) -> None:
    if b"\x00" in head:
        raise InputError(name, f"binary data, not JSON (NUL byte at offset {head.index(0)})")
    if not head.strip() and size <= len(head):
        raise InputError(name, "empty file")


def _decode(name: str, data: bytes) -> str:
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
        problem = f"expected a JSON object (a request body or a trajectory), got {json_type(value)}"
        calls = seeming_calls(value)
        if calls:  # a list of messages, say: JSON whose calls no reader here reads
            raise NotUnderstood(name, problem, calls)
        raise InputError(name, problem)
    if isinstance(value.get("messages"), list) and TRAJECTORY_KEYS & value.keys():
        body = {key: item for key, item in value.items() if key not in TRAJECTORY_KEYS}
        meta = {
            key: str(value[key])
            for key in _META_SHOWN
            if isinstance(value.get(key), str | int | float) and str(value[key])
        }
        return Transcript(name, "trajectory", body, meta)
    if not any(key in value for key in CONVERSATION_KEYS):
        raise NotUnderstood(name, not_a_request(value), seeming_calls(value))
    return Transcript(name, "request", value)
