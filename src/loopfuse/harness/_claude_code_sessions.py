"""Claude Code's transcripts, as ``loopfuse scan`` reads them: :data:`SESSIONS`, the
``sessions`` of :data:`loopfuse.harness.claude_code.CLI`. Apart from the CLI's module
because only ``scan`` reads transcripts: the hook, which imports the CLI's module
at every tool call, imports no transcript reader."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from loopfuse.harness.transcripts import (
    AgentRun,
    Lines,
    SessionFolder,
    SessionFormat,
    run_meta,
    text_or_none,
)

__all__ = ["SESSIONS", "ClaudeCodeSessions"]


# --- its transcripts --------------------------------------------------------------------

_SESSION_ID: Final = re.compile(r"[0-9A-Za-z][0-9A-Za-z_-]{0,127}")
_ONLY_TYPES: Final = frozenset({"summary", "file-history-snapshot"})


class ClaudeCodeSessions(SessionFormat):
    """Claude Code's transcripts: one record a line, each with its ``sessionId``."""

    agent = "claude-code"
    priority = 40
    starts = (re.compile(rb'\{\s*"parentUuid"\s*:'),)

    def folder(self, env: Mapping[str, str]) -> SessionFolder:
        """``projects`` in ``$CLAUDE_CONFIG_DIR`` (default ``~/.claude``)."""
        home = Path(env.get("HOME") or Path.home())
        base = Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else home / ".claude"
        return SessionFolder(self.agent, (base / "projects",), "CLAUDE_CONFIG_DIR")

    def recognises(self, record: dict[str, Any]) -> bool:
        """Any record with a ``sessionId`` (the loosest test: asked after the CLIs that
        share the envelope), or a summary or file snapshot."""
        kind = record.get("type")
        return "sessionId" in record or (isinstance(kind, str) and kind in _ONLY_TYPES)

    def read_runs(self, name: str, path: Path | None, lines: Lines) -> list[AgentRun]:
        """The session's run, and each subagent's of its file."""
        return _claude_runs(name, path, lines)


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
            model = text_or_none(message.get("model"))
            if model is not None and model != "<synthetic>":  # Claude Code's own notes
                self.model = model
            answer_id = text_or_none(message.get("id"))
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
        self.sessions.append(text_or_none(record.get("sessionId")))
        self.times.append(text_or_none(record.get("timestamp")))

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


def _claude_runs(name: str, path: Path | None, lines: Lines) -> list[AgentRun]:
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
        uuid = text_or_none(record.get("uuid"))
        if uuid is not None:
            if uuid in seen:
                continue  # written twice
            seen.add(uuid)
        key = ""
        if record.get("isSidechain") is True:
            parent = text_or_none(record.get("parentUuid"))
            key = (
                text_or_none(record.get("agentId"))
                or chains.get(parent or "")
                or uuid
                or "sidechain"
            )
            if uuid is not None:
                chains[uuid] = key
        runs.setdefault(key, _ClaudeRun()).add(record, message)
    folder = path.parent if path is not None else None
    out = []
    for key, run in runs.items():
        if not run.messages:
            continue
        history, continues = run.history(folder) if not key else (0, None)
        meta = run_meta(
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


SESSIONS: Final = ClaudeCodeSessions()
"""Claude Code's transcripts."""
