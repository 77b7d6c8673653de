r"""Coding-agent CLIs' own transcripts (Claude Code, Codex, Gemini CLI, Copilot CLI,
OpenCode, Qwen Code), as conversations.

Each CLI keeps every session it ran as a JSON Lines file. ``loopfuse scan`` recognises
them by their content (:func:`agent_of`) and turns each run they hold into the request
body of the CLI's own API dialect, so that the replay, the detector and the reports that
read request bodies read them too, and judge every tool call by the agent's own tool
name and arguments (``Bash {"command": ...}``, ``exec_command {"cmd": ...}``,
``run_shell_command {"command": ...}``), as ``loopfuse hook`` does:

==============  ===============================================  =========================
CLI             transcript                                       replayed as
==============  ===============================================  =========================
Claude Code     ``~/.claude/projects/<cwd>/<session>.jsonl``     Anthropic ``messages``
                (``$CLAUDE_CONFIG_DIR`` moves ``~/.claude``);
                subagents in ``<session>/subagents/*.jsonl``
Codex           ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*``    Responses ``input`` items
                (``CODEX_HOME`` defaults to ``~/.codex``)
Gemini CLI      ``~/.gemini/tmp/<project>/chats/session-*``      Gemini ``contents``
                (``$GEMINI_CLI_HOME`` moves the home folder)
Copilot CLI     ``~/.copilot/session-state/<id>/events.jsonl``   Anthropic ``messages``
                (``$COPILOT_HOME`` moves ``~/.copilot``)
OpenCode        ``~/.local/share/opencode/opencode.db``          Anthropic ``messages``
                (``$XDG_DATA_HOME``), or ``opencode export``
Qwen Code       ``~/.qwen/projects/<cwd>/chats/<session>.jsonl`` Gemini ``contents``
==============  ===============================================  =========================

How each CLI records a session, and how it is read:

- **Claude Code** writes one line per content block: the blocks of one answer share its
  ``message.id`` and are joined back into one assistant message (its ``usage`` counted
  once); a line whose ``uuid`` was already read is a duplicate and skipped. Subagents
  are their own runs: their own file (``subagents/agent-*.jsonl``) or, in older
  versions, ``isSidechain`` lines of the session's file (one run per ``agentId``, or per
  chain). A resumed session (``--resume``, ``--continue``) is written to a new file that
  starts with a copy of the session it continues (lines keeping the earlier
  ``sessionId``): when that earlier session's file is beside it, the copy is replayed
  as context only (the earlier file reports it), so nothing is counted twice.
- **Codex** appends a resumed session to the same rollout file: one run. Its
  ``response_item`` lines are the conversation; ``compacted`` lines (a copy of the
  history) and the other ``event_msg`` lines are not; each response's ``token_count``
  (or ``token_usage_record``) is its usage. A command's output is what the model saw,
  without the two lines that differ on every call (``Chunk ID``, ``Wall time``).
- **Gemini CLI** appends a record each time a message changes, under the same ``id``
  (a model message, then the same message with its tool calls and their results): the
  last version counts, at the place of the first. ``{"$set": ...}`` lines patch the
  session; when they list the messages again (the model's context rewritten: compressed,
  old outputs masked) only the records not seen before count. ``{"$rewindTo": id}`` is
  kept out: the
  calls before a rewind were made and paid for. A tool's answer is its ``llmContent``
  without ``Process Group PGID: N`` (a new number on every call). Subagents have their
  own files. Whole-file JSON sessions of older versions are read too.

- **Copilot CLI** writes one event a line: an ``assistant.message`` with its
  ``toolRequests``, each call's ``tool.execution_complete`` (``success: false``: a
  failed call, flagged ``is_error``); the rest (hooks, turns, permissions) is not part
  of the conversation.
- **OpenCode** keeps a session as messages of parts; one assistant message holds each
  step of an answer (``step-start`` ... ``step-finish``): one turn each. Its database
  is read read-only, each session as ``opencode export`` would print it.
- **Qwen Code** (0.24.4) writes one record a line, Claude Code's envelope (``uuid``,
  ``parentUuid``, ``sessionId``) around Gemini's messages: ``user``, ``assistant``
  (``message.parts`` with ``functionCall``) and ``tool_result``
  (``functionResponse``, ``{"output"}`` or ``{"error"}``) are the conversation, the
  answers of one turn's calls one message; ``system`` records (telemetry, snapshots)
  are not.

A line that is not JSON, or not what the CLI writes there, is a problem reported as
``"line N: ..."`` and skipped; the rest of the file is still read. A line holding
several records one after the other (a writer that missed a newline) is those records.

>>> agent_of(b'{"type":"session_meta","payload":{"id":"t1"}}\n')
'codex'
>>> agent_of(b'{"model": "m", "messages": []}\n') is None
True
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Final

from loopfuse.cli.loglines import CONVERSATION_KEYS, LineProblem, parse_line, read_line, size_text
from loopfuse.cli.seen_calls import seeming_calls_in
from loopfuse.harness import opencode

__all__ = [
    "AGENTS",
    "AgentRun",
    "AgentSession",
    "SessionFolder",
    "agent_of",
    "agent_of_document",
    "read_runs",
    "session_calls",
    "sessions_folder",
]

AGENTS: Final = ("claude-code", "codex", "gemini", "copilot", "opencode", "qwen")
"""The CLIs whose transcripts ``scan`` reads, as ``--agent`` names them."""

_PROBLEMS_SHOWN: Final = 5
_LINES_SNIFFED: Final = 3

_CODEX_TYPES: Final = frozenset(
    {
        "session_meta",
        "response_item",
        "turn_context",
        "event_msg",
        "compacted",
        "token_usage_record",
    }
)
_GEMINI_TYPES: Final = frozenset({"user", "gemini", "info", "error", "warning"})
_CLAUDE_ONLY_TYPES: Final = frozenset({"summary", "file-history-snapshot"})
_COPILOT_PREFIXES: Final = ("session.", "user.", "assistant.", "tool.", "system.", "hook.")

# A first line longer than the head read to recognise a file (Codex's session_meta
# carries the whole system prompt; a Claude prompt can be a pasted file) is told by
# how it starts: each CLI writes its keys in a fixed order.
_STARTS: Final = (
    (re.compile(rb'\{\s*"timestamp"\s*:\s*"[^"]*"\s*,(?:\s*"ordinal"\s*:\s*\d+\s*,)?'
                rb'\s*"type"\s*:\s*"session_meta"'), "codex"),
    (re.compile(rb'\{\s*"parentUuid"\s*:'), "claude-code"),
    (re.compile(rb'\{\s*"id"\s*:\s*"[^"]*"\s*,\s*"timestamp"\s*:\s*"[^"]*"\s*,'
                rb'\s*"type"\s*:\s*"(?:user|gemini)"'), "gemini"),
)  # fmt: skip

_SESSION_ID: Final = re.compile(r"[0-9A-Za-z][0-9A-Za-z_-]{0,127}")

# Volatile lines of a tool's answer: a new value on every call, whatever the command did.
_GEMINI_PGID: Final = re.compile(r"^Process Group PGID: \d+\n?", re.MULTILINE)
_CODEX_HEADER: Final = re.compile(r"\A(?:Chunk ID: \S+\n)?(?:Wall time: [^\n]*\n)?")


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
        for root in self.roots:
            if root.is_dir():
                yield from _transcripts(root, self.agent)


def sessions_folder(agent: str, environ: Mapping[str, str] | None = None) -> SessionFolder:
    """Where ``agent`` keeps its transcripts, as the CLI itself decides it from the
    environment (``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``, ``GEMINI_CLI_HOME``, ``HOME``)."""
    env = os.environ if environ is None else environ
    home = Path(env.get("HOME") or Path.home())
    if agent == "claude-code":
        base = Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else home / ".claude"
        return SessionFolder(agent, (base / "projects",), "CLAUDE_CONFIG_DIR")
    if agent == "codex":
        base = Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else home / ".codex"
        return SessionFolder(agent, (base / "sessions", base / "archived_sessions"), "CODEX_HOME")
    if agent == "gemini":
        base = Path(env["GEMINI_CLI_HOME"]) if env.get("GEMINI_CLI_HOME") else home
        return SessionFolder(agent, (base / ".gemini" / "tmp",), "GEMINI_CLI_HOME")
    if agent == "copilot":
        base = Path(env["COPILOT_HOME"]) if env.get("COPILOT_HOME") else home / ".copilot"
        return SessionFolder(agent, (base / "session-state",), "COPILOT_HOME")
    if agent == "opencode":
        data = Path(env["XDG_DATA_HOME"]) if env.get("XDG_DATA_HOME") else home / ".local/share"
        return SessionFolder(agent, (data / "opencode",), "XDG_DATA_HOME")
    if agent == "qwen":
        return SessionFolder(agent, (home / ".qwen" / "projects",), "HOME")
    raise ValueError(f"unknown agent {agent!r}; one of {', '.join(AGENTS)}")


def _transcripts(root: Path, agent: str) -> Iterator[Path]:
    if agent == "opencode":  # its database (and a release channel's: opencode-beta.db)
        for path in sorted(root.glob("opencode*.db")):
            if path.is_file():
                yield path
        return
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        here = Path(folder)
        in_chats = "chats" in here.relative_to(root).parts
        for name in sorted(files):
            # A FIFO or a device named like a transcript is not one (reading it could block).
            if _is_transcript(agent, name, in_chats) and (here / name).is_file():
                yield here / name


def _is_transcript(agent: str, name: str, in_chats: bool) -> bool:
    """Whether a file of the CLI's folder is a transcript (Codex keeps other files
    beside them; Gemini's project folders hold logs and checkpoints too)."""
    if agent == "codex":
        return name.startswith("rollout-") and name.endswith(".jsonl")
    if agent == "gemini":
        return in_chats and name.endswith((".jsonl", ".json"))
    if agent == "qwen":
        return in_chats and name.endswith(".jsonl")
    return name.endswith(".jsonl")  # Claude Code; Copilot CLI: <session>/events.jsonl


# --- recognising a transcript -----------------------------------------------------------


def agent_of(head: bytes, whole: bool = False) -> str | None:
    """Which CLI wrote the JSON Lines text that starts with ``head`` (the whole text
    when ``whole``), from its first line that is a JSON object (a line or two that are
    not, at the start of a damaged file, are passed over): ``None`` when no CLI did."""
    text = head[3:] if head.startswith(b"\xef\xbb\xbf") else head
    for _ in range(_LINES_SNIFFED):
        text = text.lstrip()
        end = text.find(b"\n")
        if end < 0 and whole:
            end = len(text)  # the last line
        if end < 0:  # longer than the head: its first keys tell
            return next((agent for start, agent in _STARTS if start.match(text)), None)
        try:
            return _agent_of_line(parse_line(text[:end].strip()))
        except LineProblem:
            text = text[end + 1 :]
    return None


def _agent_of_line(value: dict[str, Any]) -> str | None:
    if "body" in value or any(key in value for key in CONVERSATION_KEYS):
        return None  # a request body or a proxy-log entry
    kind = value.get("type")
    if not isinstance(kind, str):
        kind = None
    if "payload" in value and kind in _CODEX_TYPES:
        return "codex"
    if "$set" in value or "$rewindTo" in value:
        return "gemini"
    if "sessionId" in value and "projectHash" in value:
        return "gemini"
    if "id" in value and kind in _GEMINI_TYPES and "content" in value and "message" not in value:
        return "gemini"
    if "sessionId" in value and _qwen_record(value):
        return "qwen"
    if "sessionId" in value or kind in _CLAUDE_ONLY_TYPES:
        return "claude-code"
    if (
        kind is not None
        and kind.startswith(_COPILOT_PREFIXES)
        and isinstance(value.get("data"), dict)
    ):
        return "copilot"
    return None


def _qwen_record(value: dict[str, Any]) -> bool:
    """Whether a record with Claude Code's envelope is Qwen Code's: its messages are
    Gemini's (``parts``, not ``content``), its own records ``systemPayload``."""
    message = value.get("message")
    return "systemPayload" in value or (isinstance(message, dict) and "parts" in message)


def agent_of_document(value: object) -> str | None:
    """The CLI whose whole-file JSON session ``value`` is: ``"gemini"`` for an older
    Gemini CLI's session, ``"opencode"`` for an ``opencode export``; else ``None``."""
    if not isinstance(value, dict) or not isinstance(value.get("messages"), list):
        return None
    if "sessionId" in value and "projectHash" in value:
        return "gemini"
    info = value.get("info")
    if isinstance(info, dict) and isinstance(info.get("id"), str) and _opencode_messages(value):
        return "opencode"
    return None


def _opencode_messages(value: dict[str, Any]) -> bool:
    """Whether the messages are OpenCode's: each ``{"info": {"role": ...}, "parts": [...]}``."""
    return all(
        isinstance(message, dict)
        and isinstance(message.get("info"), dict)
        and isinstance(message.get("parts"), list)
        and "role" in message["info"]
        for message in value["messages"]
    )


# --- reading one -------------------------------------------------------------------------


class _Lines:
    """A transcript's JSON objects, line by line, with the problems met on the way."""

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
        self.bad.append((number, text))

    def problems(self) -> list[str]:
        shown = [f"line {number}: {text}" for number, text in self.bad[:_PROBLEMS_SHOWN]]
        if len(self.bad) > _PROBLEMS_SHOWN:
            more = len(self.bad) - _PROBLEMS_SHOWN
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


def session_calls(session: AgentSession) -> int:
    """How many tool calls ``session``'s records seem to hold, whatever ``scan`` made of
    them (:func:`~loopfuse.cli.seen_calls.seeming_calls`): a second pass, made only
    for a file read without a single call."""
    if session.kind == "database":
        return 0  # its rows are read as the sessions they are, or not at all
    try:
        lines = _Lines(session.open(), session.whole, session.max_line)
        return seeming_calls_in(record for _, record in lines)
    except (OSError, ValueError, RecursionError):
        return 0


def read_runs(session: AgentSession) -> tuple[list[AgentRun], list[str]]:
    """The runs ``session`` holds, and the problems met (``"line N: ..."``). Raises
    ``OSError`` when the file cannot be read."""
    if session.kind == "database":
        return _opencode_database_runs(session)
    lines = _Lines(session.open(), session.whole, session.max_line)
    path = None if session.name == "<stdin>" else Path(session.name)
    if session.agent == "claude-code":
        runs = _claude_runs(session.name, path, lines)
    elif session.agent == "codex":
        runs = _codex_runs(session.name, lines)
    elif session.agent == "copilot":
        runs = _copilot_runs(session.name, lines)
    elif session.agent == "opencode":
        runs = _opencode_runs(session.name, lines)
    elif session.agent == "qwen":
        runs = _qwen_runs(session.name, lines)
    else:
        runs = _gemini_runs(session.name, path, lines)
    bad = len(lines.bad)
    if bad and runs:
        runs[0] = _with_bad_lines(runs[0], bad)
    return runs, lines.problems()


def _with_bad_lines(run: AgentRun, bad: int) -> AgentRun:
    return AgentRun(run.name, run.body, run.meta, run.history, bad)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _meta(**values: object) -> dict[str, str]:
    return {key: value for key, value in values.items() if isinstance(value, str) and value}


# --- Claude Code --------------------------------------------------------------------------


@dataclass(slots=True)
class _ClaudeRun:
    """The messages of one Claude Code run (the session, or one subagent)."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    sessions: list[str | None] = field(default_factory=list)  # each message's sessionId
    times: list[str | None] = field(default_factory=list)  # each message's timestamp
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)  # message.id -> message
    first: dict[str, Any] = field(default_factory=dict)
    last: dict[str, Any] = field(default_factory=dict)
    model: str | None = None

    def add(self, record: dict[str, Any], message: dict[str, Any]) -> None:
        if not self.first:
            self.first = record
        self.last = record
        content = message.get("content")
        if record.get("type") == "assistant":
            model = _text(message.get("model"))
            if model is not None and model != "<synthetic>":  # Claude Code's own notes
                self.model = model
            answer_id = _text(message.get("id"))
            same = self.answers.get(answer_id) if answer_id else None
            if same is not None:  # the next content block of an answer already read
                same["content"].extend(_blocks(content))
                if isinstance(message.get("usage"), dict):
                    same["usage"] = message["usage"]
                return
            answer: dict[str, Any] = {"role": "assistant", "content": _blocks(content)}
            if isinstance(message.get("usage"), dict):
                answer["usage"] = message["usage"]
            if answer_id:
                self.answers[answer_id] = answer
            self._append(answer, record)
        else:
            self._append({"role": "user", "content": content}, record)

    def _append(self, message: dict[str, Any], record: dict[str, Any]) -> None:
        self.messages.append(message)
        self.sessions.append(_text(record.get("sessionId")))
        self.times.append(_text(record.get("timestamp")))

    def history(self, folder: Path | None) -> tuple[int, str | None]:
        """How many leading messages copy earlier sessions and are reported by a file
        in ``folder``, and the session they continue. A copy can hold several sessions
        (a resumed session resumed again): the file of the last one found beside holds
        all that comes before it."""
        current = self.sessions[-1] if self.sessions else None
        if folder is None or current is None:
            return 0, None
        count, continues = 0, None
        beside: dict[str, bool] = {}
        for index, session in enumerate(self.sessions):
            if session == current:
                break
            if session is None or not _SESSION_ID.fullmatch(session):
                continue  # not a name Claude Code gives a file
            if session not in beside:
                beside[session] = (folder / f"{session}.jsonl").is_file()
            if beside[session]:
                count, continues = index + 1, session
        return count, continues


def _blocks(content: object) -> list[Any]:
    if isinstance(content, list):
        return list(content)
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return []


def _claude_runs(name: str, path: Path | None, lines: _Lines) -> list[AgentRun]:
    runs: dict[str, _ClaudeRun] = {}
    seen: set[str] = set()
    chains: dict[str, str] = {}  # a sidechain line's uuid -> its run
    for number, record in lines:
        if record.get("type") not in ("user", "assistant"):
            continue  # summaries, snapshots, system notes, attachments: not sent as turns
        message = record.get("message")
        if not isinstance(message, dict):
            lines.problem(number, f"a {record.get('type')} line without a message object")
            continue
        uuid = _text(record.get("uuid"))
        if uuid is not None:
            if uuid in seen:
                continue  # written twice
            seen.add(uuid)
        key = ""
        if record.get("isSidechain") is True:
            parent = _text(record.get("parentUuid"))
            key = _text(record.get("agentId")) or chains.get(parent or "") or uuid or "sidechain"
            if uuid is not None:
                chains[uuid] = key
        runs.setdefault(key, _ClaudeRun()).add(record, message)
    folder = path.parent if path is not None else None
    out = []
    for key, run in runs.items():
        if not run.messages:
            continue
        history, continues = run.history(folder) if not key else (0, None)
        meta = _meta(
            agent="claude-code",
            session=run.last.get("sessionId"),
            project=run.first.get("cwd"),
            started=run.times[min(history, len(run.times) - 1)],
            model=run.model,
            subagent=key or None,
            continues=continues,
        )
        body = {"model": run.model or "", "system": [], "messages": run.messages}
        label = name if len(runs) == 1 or not key else f"{name} (subagent {key})"
        out.append(AgentRun(label, body, meta, history))
    return out


# --- Codex -------------------------------------------------------------------------------


def _codex_runs(name: str, lines: _Lines) -> list[AgentRun]:
    items: list[dict[str, Any]] = []
    info: dict[str, Any] = {}
    model: str | None = None
    response: dict[str, Any] | None = None  # the first item of the latest response
    answering = False  # the last item read is the model's
    for number, record in lines:
        kind = record.get("type")
        payload = record.get("payload")
        if not isinstance(kind, str) or kind not in _CODEX_TYPES:
            continue
        if not isinstance(payload, dict):
            lines.problem(number, f"a {kind} line without a payload object")
            continue
        if kind == "session_meta" and not info:
            info = payload
        elif kind == "turn_context":
            model = _text(payload.get("model")) or model
        elif kind == "response_item":
            searched = payload.get("type") == "web_search_call"
            item = _codex_web_search(payload, len(items)) if searched else _codex_item(payload)
            if item is None:
                continue
            output = _codex_answers(item)
            if output and not answering:
                response = item
            answering = output
            items.append(item)
        elif kind == "event_msg" and payload.get("type") == "token_count":
            usage = payload.get("info")
            _give_usage(
                response, usage.get("last_token_usage") if isinstance(usage, dict) else None
            )
        elif kind == "token_usage_record":
            _give_usage(response, payload.get("usage"))
    if not items:
        return []
    source = info.get("source")
    meta = _meta(
        agent="codex",
        session=info.get("id") or info.get("session_id"),
        project=info.get("cwd"),
        started=info.get("timestamp"),
        model=model,
        subagent="yes" if isinstance(source, dict) and "subagent" in source else None,
        forked_from=info.get("forked_from_id"),
    )
    return [AgentRun(name, {"model": model or "", "input": items}, meta)]


def _give_usage(response: dict[str, Any] | None, usage: object) -> None:
    """A response's usage, once (Codex may record it twice, in two kinds of line)."""
    if response is not None and isinstance(usage, dict) and "usage" not in response:
        response["usage"] = usage


def _codex_answers(item: dict[str, Any]) -> bool:
    kind = item.get("type")
    if isinstance(kind, str) and kind.endswith("_call"):
        return True
    return kind == "message" and item.get("role") == "assistant"


def _codex_item(payload: dict[str, Any]) -> dict[str, Any] | None:
    """A rollout's response item as the Responses API takes it (``None``: not part of
    the conversation: reasoning, snapshots)."""
    kind = payload.get("type")
    if kind == "message":
        return {"type": "message", "role": payload.get("role"), "content": payload.get("content")}
    if kind == "function_call":
        return {
            "type": kind,
            "name": payload.get("name"),
            "arguments": payload.get("arguments"),
            "call_id": payload.get("call_id"),
        }
    if kind == "custom_tool_call":
        return {
            "type": kind,
            "name": payload.get("name"),
            "input": payload.get("input"),
            "call_id": payload.get("call_id"),
        }
    if kind == "local_shell_call":  # older versions: the shell as a built-in item
        action = payload.get("action")
        command = action.get("command") if isinstance(action, dict) else None
        return {
            "type": "function_call",
            "name": "local_shell",
            "arguments": json.dumps({"command": command}),
            "call_id": payload.get("call_id"),
        }
    if kind in ("function_call_output", "custom_tool_call_output"):
        return {"type": kind, "call_id": payload.get("call_id"), "output": _codex_output(payload)}
    if kind == "tool_search_call":  # the model looks for a tool (MCP, subagents) by query
        return {
            "type": "function_call",
            "name": "tool_search",
            "arguments": _json_text(payload.get("arguments")),
            "call_id": payload.get("call_id"),
        }
    if kind == "tool_search_output":
        return {
            "type": "function_call_output",
            "call_id": payload.get("call_id"),
            "output": _tools_found(payload.get("tools")),
        }
    if isinstance(kind, str) and kind.endswith("_call"):  # web search and the like
        return {key: value for key, value in payload.items() if key != "id"}
    return None


def _codex_web_search(payload: dict[str, Any], position: int) -> dict[str, Any]:
    """A web search the model ran (``web_search_call``: a search, a page opened, a find
    in it) as the call it is: ``web_search`` with its action as the arguments. The
    provider runs it within the response (no request of the client's follows it, so it
    has no output item and the response goes on: it stays in its turn). Codex records
    no id for it, nor its results: the id is its place in the run."""
    call_id = _text(payload.get("call_id")) or _text(payload.get("id")) or f"ws-{position}"
    return {
        "type": "function_call",
        "name": "web_search",
        "arguments": _json_text(payload.get("action")),
        "call_id": call_id,
    }


def _json_text(value: object) -> str:
    """Arguments as the JSON text a function call carries (a string is kept as it is)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value if value is not None else {}, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return "{}"


def _tools_found(tools: object) -> str:
    """What a tool search answered: each namespace found, with its tools' names."""
    found = []
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict):
            continue
        inner = tool.get("tools")
        names = (
            [t["name"] for t in inner if isinstance(t, dict) and isinstance(t.get("name"), str)]
            if isinstance(inner, list)
            else []
        )
        label = _text(tool.get("name")) or "?"
        found.append(f"{label}: {', '.join(names)}" if names else label)
    return "\n".join(found) or "no tools found"


def _codex_output(payload: dict[str, Any]) -> object:
    output = payload.get("output")
    if not isinstance(output, str):
        return output
    if output.startswith("{"):  # older versions: {"output": ..., "metadata": {...}}
        try:
            value = json.loads(output)
        except ValueError:
            return output
        metadata = value.get("metadata") if isinstance(value, dict) else None
        if isinstance(metadata, dict) and "duration_seconds" in metadata:
            metadata.pop("duration_seconds")
            return json.dumps(value, ensure_ascii=False)
        return output
    return _CODEX_HEADER.sub("", output, count=1)


# --- Gemini CLI ----------------------------------------------------------------------------


def _gemini_runs(name: str, path: Path | None, lines: _Lines) -> list[AgentRun]:
    info: dict[str, Any] = {}
    records: dict[str, dict[str, Any]] = {}  # id -> its last version, in first-seen order

    def upsert(number: int, record: object, again: bool = True) -> None:
        """Add a record, or (``again``) take its new version. A ``$set`` of the whole
        list rewrites the model's context (compression, masked old outputs): what it
        lists again is not what the model saw then, so only its new records count."""
        if not isinstance(record, dict) or not isinstance(record.get("id"), str):
            lines.problem(number, "a message record without an id")
            return
        if again or record["id"] not in records:
            records[record["id"]] = record

    first = True
    for number, record in lines:
        if first and agent_of_document(record) == "gemini":  # an older whole-file session
            info.update({k: v for k, v in record.items() if k != "messages"})
            for message in record["messages"]:
                upsert(number, message)
            first = False
            continue
        first = False
        if "$rewindTo" in record:
            continue  # what came before the rewind was sent and paid for: kept
        patch = record.get("$set")
        if isinstance(patch, dict):
            messages = patch.get("messages")
            info.update({k: v for k, v in patch.items() if k != "messages"})
            for message in messages if isinstance(messages, list) else ():
                upsert(number, message, again=False)
        elif "id" in record:
            upsert(number, record)
        elif "sessionId" in record:
            info.update(record)
        else:
            lines.problem(number, "not a Gemini CLI session record")
    contents = _gemini_contents(records.values())
    if not contents:
        return []
    directories = info.get("directories")
    project = directories[0] if isinstance(directories, list) and directories else None
    model = next(
        (r["model"] for r in reversed(records.values()) if isinstance(r.get("model"), str)), None
    )
    meta = _meta(
        agent="gemini",
        session=info.get("sessionId"),
        project=project if isinstance(project, str) else _gemini_project(path),
        started=info.get("startTime"),
        model=model,
        subagent="yes" if info.get("kind") == "subagent" else None,
    )
    return [AgentRun(name, {"contents": contents}, meta)]


def _gemini_project(path: Path | None) -> str | None:
    """The project folder's name (``tmp/<project>/chats/...``)."""
    if path is None:
        return None
    for folder in path.parents:
        if folder.name == "chats":
            return folder.parent.name or None
    return None


def _gemini_contents(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    contents: list[dict[str, Any]] = []
    answered: set[str] = set()
    for record in records:
        kind = record.get("type")
        if kind == "gemini":
            parts = [p for p in _gemini_parts(record.get("content")) if not p.get("thought")]
            results: list[Any] = []
            calls = record.get("toolCalls")
            for call in calls if isinstance(calls, list) else ():
                if not isinstance(call, dict):
                    continue
                function = {
                    "id": call.get("id"),
                    "name": call.get("name"),
                    "args": call.get("args"),
                }
                parts.append({"functionCall": function})
                result = [_gemini_result(p) for p in _gemini_parts(call.get("result"))]
                results.extend(result)
                if result and isinstance(call.get("id"), str):
                    answered.add(call["id"])
            model: dict[str, Any] = {"role": "model", "parts": parts}
            usage = _gemini_usage(record.get("tokens"))
            if usage:
                model["usageMetadata"] = usage
            contents.append(model)
            if results:
                contents.append({"role": "user", "parts": results})
        elif kind == "user":
            parts = [
                _gemini_result(part)
                for part in _gemini_parts(record.get("content"))
                if _response_id(part) not in answered
            ]
            if parts:
                contents.append({"role": "user", "parts": parts})
        # info, error and warning records are the CLI's own notes: never sent
    return contents


def _gemini_parts(content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}] if content else []
    if isinstance(content, dict):
        return [content]
    if isinstance(content, list):
        return [
            part if isinstance(part, dict) else {"text": part}
            for part in content
            if isinstance(part, dict | str)
        ]
    return []


def _response_id(part: dict[str, Any]) -> str | None:
    response = part.get("functionResponse")
    return _text(response.get("id")) if isinstance(response, dict) else None


def _gemini_result(part: dict[str, Any]) -> dict[str, Any]:
    """A ``functionResponse`` part with the text the model saw as its answer, less the
    process group id that changes on every call."""
    response = part.get("functionResponse")
    if not isinstance(response, dict):
        return part
    answer = response.get("response")
    if isinstance(answer, dict) and len(answer) == 1:
        # {"output": text} is the answer's text; {"error": text} stays as it is: the
        # Gemini dialect reads it as a failed call (issue 27: a refused call says no
        # error word), whatever the text.
        text = answer.get("output")
        if isinstance(text, str):
            answer = text
        elif isinstance(answer.get("error"), str):
            answer = {"error": _GEMINI_PGID.sub("", answer["error"])}
    if isinstance(answer, str):
        answer = _GEMINI_PGID.sub("", answer)
    return {"functionResponse": {**response, "response": answer}}


def _qwen_runs(name: str, lines: _Lines) -> list[AgentRun]:
    """A Qwen Code session as Gemini ``contents``: its ``user``, ``assistant`` and
    ``tool_result`` messages as they are (Gemini's parts; a call's answer read as Gemini
    CLI's, see :func:`_gemini_result`), the answers of one turn in one message."""
    contents: list[dict[str, Any]] = []
    info: dict[str, Any] = {}
    model: str | None = None
    for number, record in lines:
        kind = record.get("type")
        if kind == "system":
            continue  # the CLI's telemetry and snapshots: never sent
        message = record.get("message")
        if kind not in ("user", "assistant", "tool_result") or not isinstance(message, dict):
            lines.problem(number, "not a Qwen Code session record")
            continue
        info = info or record
        parts = _gemini_parts(message.get("parts"))
        if kind == "assistant":
            model = _text(record.get("model")) or model
            entry: dict[str, Any] = {"role": "model", "parts": parts}
            usage = record.get("usageMetadata")
            if isinstance(usage, dict):
                entry["usageMetadata"] = usage
            contents.append(entry)
            continue
        if kind == "tool_result":
            parts = [_gemini_result(part) for part in parts]
            last = contents[-1] if contents else None
            if last is not None and last["role"] == "user" and _responses_only(last["parts"]):
                last["parts"].extend(parts)  # the answers to one turn's calls: one message
                continue
        if parts:
            contents.append({"role": "user", "parts": parts})
    if not contents:
        return []
    meta = _meta(
        agent="qwen",
        session=info.get("sessionId"),
        project=info.get("cwd"),
        started=info.get("timestamp"),
        model=model,
    )
    return [AgentRun(name, {"contents": contents}, meta)]


def _responses_only(parts: list[dict[str, Any]]) -> bool:
    return bool(parts) and all("functionResponse" in part for part in parts)


def _gemini_usage(tokens: object) -> dict[str, int]:
    if not isinstance(tokens, dict):
        return {}
    names = {"input": "promptTokenCount", "output": "candidatesTokenCount"}
    names["thoughts"] = "thoughtsTokenCount"
    return {
        names[key]: value
        for key, value in tokens.items()
        if key in names and isinstance(value, int) and not isinstance(value, bool)
    }


# --- GitHub Copilot CLI -------------------------------------------------------------------


def _copilot_runs(name: str, lines: _Lines) -> list[AgentRun]:
    """A Copilot CLI session's events as Anthropic ``messages``: each
    ``assistant.message`` with its ``toolRequests`` as ``tool_use`` blocks, each
    ``tool.execution_complete`` as a ``tool_result`` (``is_error`` when the CLI says
    the call did not succeed, ``success: false``), the results of one answer in one
    user message, as the model was sent them."""
    messages: list[dict[str, Any]] = []
    info: dict[str, Any] = {}
    model: str | None = None
    asked: set[str] = set()  # the calls already in an assistant message
    for number, record in lines:
        kind = record.get("type")
        data = record.get("data")
        if not isinstance(kind, str):
            continue
        if not isinstance(data, dict):
            lines.problem(number, f"a {kind} event without a data object")
            continue
        if kind == "session.start" and not info:
            info = data
        elif kind == "session.model_change":
            model = _text(data.get("newModel")) or model
        elif kind == "user.message":
            text = _text(data.get("content"))
            if text:
                messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
        elif kind == "assistant.message":
            model = _text(data.get("model")) or model
            blocks: list[dict[str, Any]] = []
            text = _text(data.get("content"))
            if text:
                blocks.append({"type": "text", "text": text})
            requests = data.get("toolRequests")
            for request in requests if isinstance(requests, list) else ():
                if isinstance(request, dict):
                    call = _copilot_call(request.get("toolCallId"), request)
                    blocks.append(call)
                    asked.add(call["id"])
            if blocks:
                messages.append({"role": "assistant", "content": blocks})
        elif kind == "tool.execution_start":
            call = _copilot_call(data.get("toolCallId"), {**data, "name": data.get("toolName")})
            if call["id"] not in asked:  # a call no answer listed: it joins the last answer
                asked.add(call["id"])
                if not messages or messages[-1]["role"] != "assistant":
                    messages.append({"role": "assistant", "content": []})
                messages[-1]["content"].append(call)
        elif kind == "tool.execution_complete":
            _copilot_result(messages, data)
    if not messages:
        return []
    context = info.get("context")
    meta = _meta(
        agent="copilot",
        session=info.get("sessionId"),
        project=context.get("cwd") if isinstance(context, dict) else None,
        started=info.get("startTime"),
        model=model,
    )
    return [AgentRun(name, {"model": model or "", "system": [], "messages": messages}, meta)]


def _copilot_call(call_id: object, request: dict[str, Any]) -> dict[str, Any]:
    arguments = request.get("arguments")
    if isinstance(arguments, str):  # JSON text, in some versions
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            arguments = {"input": arguments}
    return {
        "type": "tool_use",
        "id": call_id if isinstance(call_id, str) else "",
        "name": request.get("name") if isinstance(request.get("name"), str) else "",
        "input": arguments if isinstance(arguments, dict) else {},
    }


def _copilot_result(messages: list[dict[str, Any]], data: dict[str, Any]) -> None:
    """A finished call's answer: the text the model was given (``result.content``; the
    error's message for a failed call), flagged ``is_error`` unless it succeeded."""
    result = data.get("result")
    error = data.get("error")
    text = result.get("content") if isinstance(result, dict) else None
    if not isinstance(text, str) and isinstance(error, dict):
        text = error.get("message")
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": data.get("toolCallId") if isinstance(data.get("toolCallId"), str) else "",
        "content": text if isinstance(text, str) else "",
    }
    if data.get("success") is False:
        block["is_error"] = True
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "user" and _answers_only(last["content"]):
        last["content"].append(block)  # the answers to one turn's calls: one message
    else:
        messages.append({"role": "user", "content": [block]})


def _answers_only(blocks: list[dict[str, Any]]) -> bool:
    return all(block.get("type") == "tool_result" for block in blocks)


# --- OpenCode -------------------------------------------------------------------------------


def _opencode_runs(name: str, lines: _Lines) -> list[AgentRun]:
    """An ``opencode export`` document: one run (:func:`_opencode_run`)."""
    runs = []
    for number, document in lines:
        if agent_of_document(document) != "opencode":
            lines.problem(number, "not an opencode export document")
            continue
        run = _opencode_run(name, document)
        if run is not None:
            runs.append(run)
    return runs


def _opencode_run(name: str, document: dict[str, Any]) -> AgentRun | None:
    """One OpenCode session (``{"info": session, "messages": [{"info", "parts"}]}``, as
    ``opencode export`` prints it) as Anthropic ``messages``. An assistant message of
    OpenCode holds every step of one answer (``step-start`` ... ``step-finish``, one
    model request each): each step is one assistant turn, its ``tool`` parts
    ``tool_use`` blocks, their answers the user message after it, read as
    :func:`loopfuse.harness.opencode.stored_answer` reads them (``is_error``: the tool
    threw, or a command exited non-zero, as ``loopfuse hook`` judges them), and the
    step's ``tokens`` its usage."""
    messages: list[dict[str, Any]] = []
    info = _object(document.get("info"))
    model: str | None = None
    for message in document["messages"]:
        if not isinstance(message, dict) or not isinstance(message.get("info"), dict):
            continue
        about = message["info"]
        parts = message.get("parts")
        parts = (
            [part for part in parts if isinstance(part, dict)] if isinstance(parts, list) else []
        )
        if about.get("role") == "assistant":
            model = _text(about.get("modelID")) or model
            messages.extend(_opencode_steps(parts))
        elif about.get("role") == "user":
            text = [
                {"type": "text", "text": part["text"]}
                for part in parts
                if part.get("type") == "text" and _text(part.get("text"))
            ]
            if text:
                messages.append({"role": "user", "content": text})
    if not messages:
        return None
    created = _object(info.get("time")).get("created")
    meta = _meta(
        agent="opencode",
        session=info.get("id"),
        project=info.get("directory"),
        started=_epoch_text(created),
        model=model,
        subagent="yes" if _text(info.get("parentID")) else None,
    )
    body = {"model": model or "", "system": [], "messages": messages}
    return AgentRun(name, body, meta)


def _opencode_database_runs(session: AgentSession) -> tuple[list[AgentRun], list[str]]:
    """Every session of OpenCode's database (``opencode.db``: tables ``session``,
    ``message`` and ``part``, each message's and part's fields as JSON in ``data``),
    oldest first, each read as its export would be. Opened read-only; a subagent's
    session (``parent_id``) is a run of its own."""
    uri = Path(session.name).resolve().as_uri() + "?mode=ro"
    runs: list[AgentRun] = []
    problems: list[str] = []
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as database:
            sessions = database.execute(
                "SELECT id, parent_id, directory, time_created FROM session "
                "ORDER BY time_created, id"
            ).fetchall()
            for session_id, parent, directory, created in sessions:
                document = _opencode_document(database, session_id, problems)
                document["info"] = {
                    "id": session_id,
                    "parentID": parent,
                    "directory": directory,
                    "time": {"created": created},
                }
                run = _opencode_run(f"{session.name} (session {session_id})", document)
                if run is not None:
                    runs.append(run)
    except sqlite3.Error as exc:
        raise OSError(f"not an OpenCode database it can read ({exc})") from None
    return runs, problems[:_PROBLEMS_SHOWN]


def _opencode_document(
    database: sqlite3.Connection, session_id: str, problems: list[str]
) -> dict[str, Any]:
    """One session's messages and parts from the database, as ``opencode export``
    would print them."""
    messages: dict[str, dict[str, Any]] = {}
    rows = database.execute(
        "SELECT id, data FROM message WHERE session_id = ? ORDER BY time_created, id",
        (session_id,),
    )
    for message_id, data in rows:
        value = _row_json(data, f"message {message_id}", problems)
        if value is not None:
            messages[message_id] = {"info": {**value, "id": message_id}, "parts": []}
    rows = database.execute(
        "SELECT message_id, id, data FROM part WHERE session_id = ? ORDER BY message_id, id",
        (session_id,),
    )
    for message_id, part_id, data in rows:
        value = _row_json(data, f"part {part_id}", problems)
        if value is not None and message_id in messages:
            messages[message_id]["parts"].append(value)
    return {"messages": list(messages.values())}


def _row_json(data: object, what: str, problems: list[str]) -> dict[str, Any] | None:
    try:
        value = json.loads(data) if isinstance(data, str | bytes) else None
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        problems.append(f"{what}: its data is not a JSON object")
        return None
    return value


def _opencode_steps(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The model requests of one OpenCode assistant message, with their answers."""
    out: list[dict[str, Any]] = []
    blocks: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    usage: dict[str, int] = {}

    def close() -> None:
        if blocks:
            answer: dict[str, Any] = {"role": "assistant", "content": list(blocks)}
            if usage:
                answer["usage"] = dict(usage)
            out.append(answer)
            if results:
                out.append({"role": "user", "content": list(results)})
        blocks.clear()
        results.clear()
        usage.clear()

    for part in parts:
        kind = part.get("type")
        if kind == "step-start":
            close()
        elif kind == "text" and _text(part.get("text")) and not part.get("synthetic"):
            blocks.append({"type": "text", "text": part["text"]})
        elif kind == "tool":
            call_id = _text(part.get("callID")) or _text(part.get("id")) or ""
            state = _object(part.get("state"))
            given = state.get("input")
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call_id,
                    "name": part.get("tool") if isinstance(part.get("tool"), str) else "",
                    "input": given if isinstance(given, dict) else {},
                }
            )
            answer = opencode.stored_answer(blocks[-1]["name"], state)
            if answer is not None:
                text, failed = answer
                result: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": call_id,
                    "content": text,
                }
                if failed is not None:
                    result["is_error"] = failed
                results.append(result)
        elif kind == "step-finish":
            usage.update(_opencode_usage(part.get("tokens")))
    close()
    return out


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _opencode_usage(tokens: object) -> dict[str, int]:
    if not isinstance(tokens, dict):
        return {}
    cache = _object(tokens.get("cache"))
    fields = {
        "input_tokens": tokens.get("input"),
        "output_tokens": tokens.get("output"),
        "cache_read_input_tokens": cache.get("read"),
        "cache_creation_input_tokens": cache.get("write"),
    }
    return {
        key: value
        for key, value in fields.items()
        if isinstance(value, int) and not isinstance(value, bool)
    }


def _epoch_text(milliseconds: object) -> str | None:
    """A time OpenCode records (milliseconds since 1970) as ISO 8601 UTC text."""
    if not isinstance(milliseconds, int | float) or isinstance(milliseconds, bool):
        return None
    try:
        moment = datetime.fromtimestamp(milliseconds / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
