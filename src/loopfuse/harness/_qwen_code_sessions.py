"""Qwen Code's transcripts, as ``loopfuse scan`` reads them: :data:`SESSIONS`, the
``sessions`` of :data:`loopfuse.harness.qwen_code.CLI`. Apart from the CLI's module
because only ``scan`` reads transcripts: the hook, which imports the CLI's module
at every tool call, imports no transcript reader."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from loopfuse.harness._gemini_cli_sessions import gemini_parts, gemini_result
from loopfuse.harness.transcripts import (
    AgentRun,
    Lines,
    SessionFolder,
    SessionFormat,
    run_meta,
    text_or_none,
)

__all__ = ["SESSIONS", "QwenCodeSessions"]


# --- its transcripts --------------------------------------------------------------------


class QwenCodeSessions(SessionFormat):
    """Qwen Code's sessions: Claude Code's envelope around Gemini's messages."""

    agent = "qwen"
    priority = 30  # before Claude Code's, whose envelope (a sessionId) its records share

    def folder(self, env: Mapping[str, str]) -> SessionFolder:
        """``~/.qwen/projects``."""
        home = Path(env.get("HOME") or Path.home())
        return SessionFolder(self.agent, (home / ".qwen" / "projects",), "HOME")

    def is_transcript(self, name: str, folders: tuple[str, ...]) -> bool:
        """A ``.jsonl`` file in a ``chats`` folder."""
        return "chats" in folders and name.endswith(".jsonl")

    def recognises(self, record: dict[str, Any]) -> bool:
        """A record with a ``sessionId`` whose message is Gemini's, or its own
        ``systemPayload`` record."""
        return "sessionId" in record and _qwen_record(record)

    def read_runs(self, name: str, path: Path | None, lines: Lines) -> list[AgentRun]:
        """The session's one run."""
        del path
        return _qwen_runs(name, lines)


def _qwen_runs(name: str, lines: Lines) -> list[AgentRun]:
    """A Qwen Code session as Gemini ``contents``: its ``user``, ``assistant`` and
    ``tool_result`` messages as they are (Gemini's parts; a call's answer read as Gemini
    CLI's, see :func:`~loopfuse.harness._gemini_cli_sessions.gemini_result`), the answers of one
    turn in one message."""
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
        parts = gemini_parts(message.get("parts"))
        if kind == "assistant":
            model = text_or_none(record.get("model")) or model
            entry: dict[str, Any] = {"role": "model", "parts": parts}
            usage = record.get("usageMetadata")
            if isinstance(usage, dict):
                entry["usageMetadata"] = usage
            contents.append(entry)
            continue
        if kind == "tool_result":
            parts = [gemini_result(part) for part in parts]
            last = contents[-1] if contents else None
            if last is not None and last["role"] == "user" and _responses_only(last["parts"]):
                last["parts"].extend(parts)  # the answers to one turn's calls: one message
                continue
        if parts:
            contents.append({"role": "user", "parts": parts})
    if not contents:
        return []
    meta = run_meta(
        agent="qwen",
        session=info.get("sessionId"),
        project=info.get("cwd"),
        started=info.get("timestamp"),
        model=model,
    )
    return [AgentRun(name, {"contents": contents}, meta)]


def _responses_only(parts: list[dict[str, Any]]) -> bool:
    return bool(parts) and all("functionResponse" in part for part in parts)


def _qwen_record(value: dict[str, Any]) -> bool:
    """Whether a record with Claude Code's envelope is Qwen Code's: its messages are
    Gemini's (``parts``, not ``content``), its own records ``systemPayload``."""
    message = value.get("message")
    return "systemPayload" in value or (isinstance(message, dict) and "parts" in message)


SESSIONS: Final = QwenCodeSessions()
"""Qwen Code's transcripts."""
