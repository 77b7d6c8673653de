"""Coding-agent CLIs' transcripts, whatever the CLI: what ``loopfuse scan`` reads of them.

Each CLI keeps the sessions it ran in files of its own format. What a CLI knows of its
own files is its :class:`SessionFormat` (``sessions`` of the CLI's
:class:`~loopfuse.harness.agent_cli.AgentCli`): where they are (:meth:`SessionFormat.folder`),
which files are transcripts, how its records are told from another CLI's, and how a
file's records become the runs (:class:`AgentRun`) that ``scan`` replays. What every CLI
shares is here: the file as ``scan`` found it (:class:`AgentSession`), the line reader
(:class:`Lines`: several records on one line, bad lines reported and skipped) and the
registry (:func:`session_format`, :func:`session_formats`).

Recognition asks the formats in the order of their :attr:`SessionFormat.priority`
(lowest first): the first that claims a record names the CLI.

>>> [f.agent for f in session_formats()]
['codex', 'gemini', 'qwen', 'claude-code', 'copilot', 'opencode', 'kimi', 'pi']
>>> agent_of_record({"type": "session_meta", "payload": {"id": "t1"}})
'codex'
>>> agent_of_record({"sessionId": "s", "type": "user", "message": {"parts": []}})
'qwen'
"""

from __future__ import annotations

import abc
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import IO, Any, Final

from loopfuse._jsonlines import LineProblem, parse_line, read_line, size_text
from loopfuse.harness.agent_cli import AGENT_CLIS, agent_cli

__all__ = [
    "PROBLEMS_SHOWN",
    "AgentRun",
    "AgentSession",
    "Lines",
    "SessionFolder",
    "SessionFormat",
    "agent_of_database",
    "agent_of_document",
    "agent_of_record",
    "agent_of_start",
    "run_meta",
    "scanned_agents",
    "session_format",
    "session_formats",
    "text_or_none",
]

PROBLEMS_SHOWN: Final = 5
"""How many of a file's problems are listed (the rest are counted)."""

_LISTED: Final = ("claude-code", "codex", "gemini", "copilot", "opencode", "qwen")
"""The order ``scan --agent`` has always listed the CLIs in (its help, ``all``); a CLI
not named here comes after them, in :data:`AGENT_CLIS` order."""


@dataclass(frozen=True, slots=True)
class AgentSession:
    """A CLI's transcript file, recognised by its content; ``open()`` reads it again."""

    name: str
    agent: str
    size: int
    open: Callable[[], IO[bytes]]
    whole: bool = False
    """One JSON document (an older Gemini CLI's session), not JSON Lines."""
    kind: str = "session"
    """``"session"``, or ``"database"``: a file of sessions read by its format alone."""
    max_line: int | None = None
    """The longest line read whole; a longer one is skipped, read a piece at a time."""


@dataclass(frozen=True, slots=True)
class AgentRun:
    """One run of a session (the session itself, or one subagent), as a request body.

    ``body`` is the conversation in the CLI's API dialect; ``meta`` names the run
    (``agent``, ``session``, ``project``, ``started``, ``model``, ``subagent``,
    ``continues``). The first ``history`` items of the conversation are a copy of an
    earlier session that its own file reports: replayed as context, not counted.
    ``bad_lines`` counts the lines of the file that were skipped.
    """

    name: str
    body: dict[str, Any]
    meta: dict[str, str]
    history: int = 0
    bad_lines: int = 0
    kind: str = "session"


@dataclass(frozen=True, slots=True)
class SessionFolder:
    """Where a CLI keeps its transcripts, and which of its files are transcripts."""

    agent: str
    roots: tuple[Path, ...]
    setting: str
    """The environment variable that moves the folder (for the message when it is missing)."""

    def files(self) -> Iterator[Path]:
        """The transcripts under the roots that exist, in name order."""
        found = session_format(self.agent)
        for root in self.roots:
            if root.is_dir():
                yield from found.transcripts(root)


class Lines:
    """A transcript's JSON objects, line by line, with the problems met on the way.

    A line that is not JSON, or not one of the CLI's records (:meth:`problem`), is
    reported as ``"line N: ..."`` and skipped; a line holding several records one after
    the other (a writer that missed a newline) is those records.

    >>> import io
    >>> lines = Lines(io.BytesIO(b'{"a": 1}{"b": 2}\\nnope\\n'), whole=False)
    >>> list(lines), lines.problems()
    ([(1, {'a': 1}), (1, {'b': 2})], ['line 2: not valid JSON: Expecting value'])
    """

    def __init__(self, handle: IO[bytes], whole: bool, max_line: int | None = None) -> None:
        self.handle = handle
        self.whole = whole
        self.max_line = max_line
        self.bad: list[tuple[int, str]] = []

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any]]]:
        if self.whole:
            with self.handle as handle:
                value = json.loads(handle.read().decode("utf-8-sig"))
            yield 1, value
            return
        with self.handle as handle:
            number = 0
            while True:
                raw, size = read_line(handle, self.max_line)
                if not size:
                    break
                number += 1
                if raw is None:
                    limit = size_text(self.max_line or 0)
                    self.bad.append((number, f"longer than {limit} (the limit of one record)"))
                    continue
                line = raw.strip()
                if number == 1 and line.startswith(b"\xef\xbb\xbf"):
                    line = line[3:]
                if not line:
                    continue
                try:
                    yield number, parse_line(line)
                except LineProblem as exc:
                    records = _records(line)
                    if records is None:
                        self.bad.append((number, str(exc)))
                    for record in records or ():
                        yield number, record

    def problem(self, number: int, text: str) -> None:
        """Line ``number`` is not a record the reader can use: ``text`` says why."""
        self.bad.append((number, text))

    def problems(self) -> list[str]:
        """The first problems met, ``"line N: ..."``, and how many more there were."""
        shown = [f"line {number}: {text}" for number, text in self.bad[:PROBLEMS_SHOWN]]
        if len(self.bad) > PROBLEMS_SHOWN:
            more = len(self.bad) - PROBLEMS_SHOWN
            shown.append(f"{more} more lines that are not transcript records")
        return shown


def _records(line: bytes) -> list[dict[str, Any]] | None:
    """The JSON objects of a line that holds several, one after the other (a writer
    that missed a newline): ``None`` unless every piece of it is one."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return None
    decoder = json.JSONDecoder()
    records: list[dict[str, Any]] = []
    end = 0
    try:
        while end < len(text):
            value, end = decoder.raw_decode(text, end)
            if not isinstance(value, dict):
                return None
            records.append(value)
            while end < len(text) and text[end] in " \t\r\n":
                end += 1
    except (ValueError, RecursionError):
        return None
    return records if len(records) > 1 else None


def text_or_none(value: object) -> str | None:
    """``value`` if it is a non-empty string, else ``None``."""
    return value if isinstance(value, str) and value else None


def run_meta(**values: object) -> dict[str, str]:
    """An :attr:`AgentRun.meta`: the values given that are non-empty strings."""
    return {key: value for key, value in values.items() if isinstance(value, str) and value}


class SessionFormat(abc.ABC):
    """How one CLI keeps its sessions, and how ``scan`` reads them.

    Subclasses set :attr:`agent` and :attr:`priority`, implement :meth:`folder` and
    :meth:`read_runs`, and say how their files are told from the others' (at least one
    of :meth:`recognises`, :meth:`recognises_document`, :attr:`starts`).
    """

    agent: str
    """The CLI's ``--agent`` name (``meta["agent"]`` of its runs)."""
    priority: int
    """Where the format is asked in recognition, lowest first. A format whose test is
    loose must come after the stricter ones it overlaps: Claude Code's (any record with
    a ``sessionId``, 40) after Qwen Code's (the same envelope around Gemini's messages,
    30); Codex 10, Gemini CLI 20, Copilot CLI 50, OpenCode 60."""
    starts: tuple[re.Pattern[bytes], ...] = ()
    """How the CLI's first line starts, told without reading it whole (a first line
    longer than the head read to recognise a file: Codex's ``session_meta`` holds the
    system prompt): each CLI writes its first keys in a fixed order."""
    database: bool = False
    """Whether the CLI keeps its sessions in a SQLite database (OpenCode's
    ``opencode.db``), read as :attr:`AgentSession.kind` ``"database"``."""

    @abc.abstractmethod
    def folder(self, env: Mapping[str, str]) -> SessionFolder:
        """Where the CLI keeps its transcripts, as it decides it from ``env``."""

    def is_transcript(self, name: str, folders: tuple[str, ...]) -> bool:
        """Whether a file ``name`` in ``folders`` (the folders below a root of
        :meth:`folder`) is a transcript; default: a ``.jsonl`` file."""
        del folders
        return name.endswith(".jsonl")

    def transcripts(self, root: Path) -> Iterator[Path]:
        """The transcripts under ``root`` (a root of :meth:`folder` that exists), in
        name order; links to folders are not followed."""
        for folder, dirs, files in os.walk(root, followlinks=False):
            dirs.sort()
            here = Path(folder)
            parts = here.relative_to(root).parts
            for name in sorted(files):
                # A FIFO or a device named like a transcript is not one (reading it could block).
                if self.is_transcript(name, parts) and (here / name).is_file():
                    yield here / name

    def recognises(self, record: dict[str, Any]) -> bool:
        """Whether ``record``, the first JSON object of a JSON Lines file (never a
        request body or a proxy-log entry), is this CLI's."""
        del record
        return False

    def recognises_document(self, document: dict[str, Any]) -> bool:
        """Whether a file that is one JSON object with a ``messages`` list is a session
        this CLI saved whole."""
        del document
        return False

    @abc.abstractmethod
    def read_runs(self, name: str, path: Path | None, lines: Lines) -> list[AgentRun]:
        """The runs of the file ``name`` (``path``: where it is, ``None`` for standard
        input) whose records ``lines`` gives; a record the CLI would not write goes to
        :meth:`Lines.problem`."""

    def read_session(self, session: AgentSession) -> tuple[list[AgentRun], list[str]]:
        """The runs ``session`` holds and the problems met (``"line N: ..."``); the
        first run counts the lines skipped. Raises ``OSError`` when it cannot be read."""
        lines = Lines(session.open(), session.whole, session.max_line)
        path = None if session.name == "<stdin>" else Path(session.name)
        runs = self.read_runs(session.name, path, lines)
        bad = len(lines.bad)
        if bad and runs:
            first = runs[0]
            runs[0] = AgentRun(first.name, first.body, first.meta, first.history, bad, first.kind)
        return runs, lines.problems()


@cache
def session_format(agent: str) -> SessionFormat:
    """The format of the CLI ``--agent`` ``agent``: its ``CLI.sessions``; ``ValueError``
    when ``scan`` reads none for it."""
    if agent in AGENT_CLIS:
        found = agent_cli(agent).sessions
        if found is not None:
            return found
        raise ValueError(f"loopfuse scan cannot read {agent_cli(agent).title}'s transcripts")
    raise ValueError(f"unknown agent {agent!r}; one of {', '.join(scanned_agents())}")


@cache
def scanned_agents() -> tuple[str, ...]:
    """The CLIs whose transcripts ``scan`` reads, as ``--agent`` names them and in the
    order it lists them."""
    names = dict.fromkeys((*_LISTED, *AGENT_CLIS))
    return tuple(name for name in names if _has_format(name))


def _has_format(agent: str) -> bool:
    try:
        session_format(agent)
    except ValueError:
        return False
    return True


@cache
def session_formats() -> tuple[SessionFormat, ...]:
    """Every format ``scan`` reads, in the order recognition asks them."""
    formats = [session_format(name) for name in scanned_agents()]
    return tuple(sorted(formats, key=lambda found: found.priority))


def agent_of_record(record: dict[str, Any]) -> str | None:
    """The CLI whose transcript starts with ``record`` (the first JSON object of a JSON
    Lines file that is neither a request body nor a proxy-log entry), or ``None``."""
    return next((f.agent for f in session_formats() if f.recognises(record)), None)


def agent_of_start(text: bytes) -> str | None:
    """The CLI whose first line starts with ``text`` (a line longer than what was read
    of it), told by :attr:`SessionFormat.starts`; ``None`` when no CLI's does."""
    for found in session_formats():
        if any(start.match(text) for start in found.starts):
            return found.agent
    return None


def agent_of_database() -> str | None:
    """The CLI whose sessions a SQLite database holds (the first format that keeps a
    :attr:`~SessionFormat.database`), or ``None``."""
    return next((f.agent for f in session_formats() if f.database), None)


def agent_of_document(value: object) -> str | None:
    """The CLI whose whole-file JSON session ``value`` is (an older Gemini CLI's
    session, an ``opencode export``); else ``None``."""
    if not isinstance(value, dict) or not isinstance(value.get("messages"), list):
        return None
    return next((f.agent for f in session_formats() if f.recognises_document(value)), None)
