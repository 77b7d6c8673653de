"""OpenCode's sessions, as ``loopfuse scan`` reads them: :data:`SESSIONS`, the
``sessions`` of :data:`loopfuse.harness.opencode.CLI` (its database, read read-only, or
one session as ``opencode export`` prints it). Apart from the CLI's module because only
``scan`` reads transcripts: the hook, which imports the CLI's module at every tool call,
imports no transcript reader."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from loopfuse.harness.opencode import stored_answer
from loopfuse.harness.transcripts import (
    PROBLEMS_SHOWN,
    AgentRun,
    AgentSession,
    Lines,
    SessionFolder,
    SessionFormat,
    agent_of_document,
    run_meta,
    text_or_none,
)

if TYPE_CHECKING:
    import sqlite3

__all__ = ["SESSIONS", "OpenCodeSessions"]


class OpenCodeSessions(SessionFormat):
    """OpenCode's database, or one session as ``opencode export`` prints it."""

    agent = "opencode"
    priority = 60
    database = True

    def folder(self, env: Mapping[str, str]) -> SessionFolder:
        """``opencode`` in ``$XDG_DATA_HOME`` (default ``~/.local/share``)."""
        home = Path(env.get("HOME") or Path.home())
        data = Path(env["XDG_DATA_HOME"]) if env.get("XDG_DATA_HOME") else home / ".local/share"
        return SessionFolder(self.agent, (data / "opencode",), "XDG_DATA_HOME")

    def transcripts(self, root: Path) -> Iterator[Path]:
        """Its database (and a release channel's: ``opencode-beta.db``)."""
        for path in sorted(root.glob("opencode*.db")):
            if path.is_file():
                yield path

    def recognises_document(self, document: dict[str, Any]) -> bool:
        """An export: ``{"info": {"id"}, "messages": [{"info": {"role"}, "parts"}]}``."""
        info = document.get("info")
        return (
            isinstance(info, dict)
            and isinstance(info.get("id"), str)
            and _opencode_messages(document)
        )

    def read_runs(self, name: str, path: Path | None, lines: Lines) -> list[AgentRun]:
        """The export's session."""
        del path
        return _opencode_runs(name, lines)

    def read_session(self, session: AgentSession) -> tuple[list[AgentRun], list[str]]:
        """Every session of the database, or the export's."""
        if session.kind == "database":
            return _opencode_database_runs(session)
        return super().read_session(session)


def _opencode_runs(name: str, lines: Lines) -> list[AgentRun]:
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
    ``tool_use`` blocks, their answers (``state.output``; ``state.error`` when
    ``state.status`` is ``"error"``, flagged ``is_error``) the user message after it,
    and the step's ``tokens`` its usage."""
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
            model = text_or_none(about.get("modelID")) or model
            messages.extend(_opencode_steps(parts))
        elif about.get("role") == "user":
            text = [
                {"type": "text", "text": part["text"]}
                for part in parts
                if part.get("type") == "text" and text_or_none(part.get("text"))
            ]
            if text:
                messages.append({"role": "user", "content": text})
    if not messages:
        return None
    created = _object(info.get("time")).get("created")
    meta = run_meta(
        agent="opencode",
        session=info.get("id"),
        project=info.get("directory"),
        started=_epoch_text(created),
        model=model,
        subagent="yes" if text_or_none(info.get("parentID")) else None,
    )
    body = {"model": model or "", "system": [], "messages": messages}
    return AgentRun(name, body, meta)


def _opencode_database_runs(session: AgentSession) -> tuple[list[AgentRun], list[str]]:
    """Every session of OpenCode's database (``opencode.db``: tables ``session``,
    ``message`` and ``part``, each message's and part's fields as JSON in ``data``),
    oldest first, each read as its export would be. Opened read-only; a subagent's
    session (``parent_id``) is a run of its own."""
    import sqlite3  # here: a hook never reads a database

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
    return runs, problems[:PROBLEMS_SHOWN]


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
        elif kind == "text" and text_or_none(part.get("text")) and not part.get("synthetic"):
            blocks.append({"type": "text", "text": part["text"]})
        elif kind == "tool":
            call_id = text_or_none(part.get("callID")) or text_or_none(part.get("id")) or ""
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
            answer = stored_answer(blocks[-1]["name"], state)
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
    from datetime import UTC, datetime

    if not isinstance(milliseconds, int | float) or isinstance(milliseconds, bool):
        return None
    try:
        moment = datetime.fromtimestamp(milliseconds / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _opencode_messages(value: dict[str, Any]) -> bool:
    """Whether the messages are OpenCode's: each ``{"info": {"role": ...}, "parts": [...]}``."""
    return all(
        isinstance(message, dict)
        and isinstance(message.get("info"), dict)
        and isinstance(message.get("parts"), list)
        and "role" in message["info"]
        for message in value["messages"]
    )


SESSIONS: Final = OpenCodeSessions()
"""OpenCode's sessions, as ``loopfuse scan`` reads them."""
