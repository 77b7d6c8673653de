"""Gemini CLI's transcripts, as ``loopfuse scan`` reads them: :data:`SESSIONS`, the
``sessions`` of :data:`loopfuse.harness.gemini_cli.CLI`. Apart from the CLI's module
because only ``scan`` reads transcripts: the hook, which imports the CLI's module
at every tool call, imports no transcript reader."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
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

__all__ = ["SESSIONS", "GeminiCliSessions", "gemini_parts", "gemini_result"]


# --- its transcripts --------------------------------------------------------------------

_TYPES: Final = frozenset({"user", "gemini", "info", "error", "warning"})
# A volatile line of a tool's answer: a new value on every call, whatever the command did.
_GEMINI_PGID: Final = re.compile(r"^Process Group PGID: \d+\n?", re.MULTILINE)


class GeminiCliSessions(SessionFormat):
    """Gemini CLI's sessions: message records a line, ``$set`` / ``$rewindTo`` patches,
    or (older versions) the whole session as one JSON document."""

    agent = "gemini"
    priority = 20
    starts = (
        re.compile(rb'\{\s*"id"\s*:\s*"[^"]*"\s*,\s*"timestamp"\s*:\s*"[^"]*"\s*,'
                   rb'\s*"type"\s*:\s*"(?:user|gemini)"'),
    )  # fmt: skip

    def folder(self, env: Mapping[str, str]) -> SessionFolder:
        """``.gemini/tmp`` in ``$GEMINI_CLI_HOME`` (default: the home folder)."""
        home = Path(env.get("HOME") or Path.home())
        base = Path(env["GEMINI_CLI_HOME"]) if env.get("GEMINI_CLI_HOME") else home
        return SessionFolder(self.agent, (base / ".gemini" / "tmp",), "GEMINI_CLI_HOME")

    def is_transcript(self, name: str, folders: tuple[str, ...]) -> bool:
        """A ``.jsonl`` or ``.json`` file in a ``chats`` folder (the project folders
        hold logs and checkpoints too)."""
        return "chats" in folders and name.endswith((".jsonl", ".json"))

    def recognises(self, record: dict[str, Any]) -> bool:
        """A patch, the session's first record (``sessionId`` and ``projectHash``), or a
        message record (``id``, one of its types, ``content``, no Claude ``message``)."""
        if "$set" in record or "$rewindTo" in record:
            return True
        if "sessionId" in record and "projectHash" in record:
            return True
        kind = record.get("type")
        return (
            "id" in record
            and isinstance(kind, str)
            and kind in _TYPES
            and "content" in record
            and "message" not in record
        )

    def recognises_document(self, document: dict[str, Any]) -> bool:
        """An older version's whole session (``sessionId``, ``projectHash``, ``messages``)."""
        return _whole_session(document)

    def read_runs(self, name: str, path: Path | None, lines: Lines) -> list[AgentRun]:
        """The session's one run (a subagent's file is its own)."""
        return _gemini_runs(name, path, lines)


def _whole_session(value: dict[str, Any]) -> bool:
    return (
        isinstance(value.get("messages"), list) and "sessionId" in value and "projectHash" in value
    )


def _gemini_runs(name: str, path: Path | None, lines: Lines) -> list[AgentRun]:
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
        if first and _whole_session(record):  # an older whole-file session
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
    meta = run_meta(
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
            parts = [p for p in gemini_parts(record.get("content")) if not p.get("thought")]
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
                result = [gemini_result(p) for p in gemini_parts(call.get("result"))]
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
                gemini_result(part)
                for part in gemini_parts(record.get("content"))
                if _response_id(part) not in answered
            ]
            if parts:
                contents.append({"role": "user", "parts": parts})
        # info, error and warning records are the CLI's own notes: never sent
    return contents


def gemini_parts(content: object) -> list[dict[str, Any]]:
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
    return text_or_none(response.get("id")) if isinstance(response, dict) else None


def gemini_result(part: dict[str, Any]) -> dict[str, Any]:
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


SESSIONS: Final = GeminiCliSessions()
"""Gemini CLI's transcripts."""
