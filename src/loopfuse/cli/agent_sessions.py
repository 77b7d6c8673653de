r"""Coding-agent CLIs' own transcripts, as conversations: what ``loopfuse scan`` reads.

Each CLI keeps every session it ran in files of its own (JSON Lines, mostly).
``loopfuse scan`` recognises them by their content (:func:`agent_of`) and turns each run
they hold into the request body of the CLI's own API dialect, so that the replay, the
detector and the reports that read request bodies read them too, and judge every tool
call by the agent's own tool name and arguments (``Bash {"command": ...}``,
``exec_command {"cmd": ...}``, ``run_shell_command {"command": ...}``), as ``loopfuse
hook`` does.

What each CLI writes, where, and how it is read is the CLI's own knowledge, in its
module of :mod:`loopfuse.harness` (the ``sessions`` of its ``CLI``, a
:class:`~loopfuse.harness.transcripts.SessionFormat`; docs/agents.md lists them); this
module asks them, in :mod:`loopfuse.harness.transcripts`' registry, and names none.

A line that is not JSON, or not what the CLI writes there, is a problem reported as
``"line N: ..."`` and skipped; the rest of the file is still read. A line holding
several records one after the other (a writer that missed a newline) is those records.

>>> agent_of(b'{"type":"session_meta","payload":{"id":"t1"}}\n')
'codex'
>>> agent_of(b'{"model": "m", "messages": []}\n') is None
True
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

from loopfuse._jsonlines import LineProblem, parse_line
from loopfuse.cli.loglines import CONVERSATION_KEYS
from loopfuse.cli.seen_calls import seeming_calls_in
from loopfuse.harness.transcripts import (
    AgentRun,
    AgentSession,
    Lines,
    SessionFolder,
    agent_of_database,
    agent_of_document,
    agent_of_record,
    agent_of_start,
    scanned_agents,
    session_format,
)

__all__ = [
    "AGENTS",
    "AgentRun",
    "AgentSession",
    "SessionFolder",
    "agent_of",
    "agent_of_database",
    "agent_of_document",
    "read_runs",
    "session_calls",
    "sessions_folder",
]

AGENTS: Final = scanned_agents()
"""The CLIs whose transcripts ``scan`` reads, as ``--agent`` names them."""

_LINES_SNIFFED: Final = 3


def sessions_folder(agent: str, environ: Mapping[str, str] | None = None) -> SessionFolder:
    """Where ``agent`` keeps its transcripts, as the CLI itself decides it from the
    environment (``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``, ``GEMINI_CLI_HOME``, ``HOME`` ...);
    ``ValueError`` for a CLI whose transcripts ``scan`` cannot read."""
    return session_format(agent).folder(os.environ if environ is None else environ)


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
            return agent_of_start(text)
        try:
            value = parse_line(text[:end].strip())
        except LineProblem:
            text = text[end + 1 :]
            continue
        if "body" in value or any(key in value for key in CONVERSATION_KEYS):
            return None  # a request body or a proxy-log entry
        return agent_of_record(value)
    return None


def session_calls(session: AgentSession) -> int:
    """How many tool calls ``session``'s records seem to hold, whatever ``scan`` made of
    them (:func:`~loopfuse.cli.seen_calls.seeming_calls`): a second pass, made only
    for a file read without a single call."""
    if session.kind == "database":
        return 0  # its rows are read as the sessions they are, or not at all
    try:
        lines = Lines(session.open(), session.whole, session.max_line)
        return seeming_calls_in(record for _, record in lines)
    except (OSError, ValueError, RecursionError):
        return 0


def read_runs(session: AgentSession) -> tuple[list[AgentRun], list[str]]:
    """The runs ``session`` holds, and the problems met (``"line N: ..."``). Raises
    ``OSError`` when the file cannot be read."""
    return session_format(session.agent).read_session(session)
