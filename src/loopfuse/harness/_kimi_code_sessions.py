"""Kimi Code's transcripts, as ``loopfuse scan`` reads them: :data:`SESSIONS`, the
``sessions`` of :data:`loopfuse.harness.kimi_code.CLI`. Apart from the CLI's module
because only ``scan`` reads transcripts: the hook, which imports the CLI's module
at every tool call, imports no transcript reader."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path, PurePath
from typing import Any, Final

from loopfuse.harness.kimi_code import HARNESS
from loopfuse.harness.transcripts import (
    AgentRun,
    Lines,
    SessionFolder,
    SessionFormat,
    run_meta,
    text_or_none,
)

__all__ = ["PROTOCOL_MAJOR", "SESSIONS", "KimiCodeSessions", "wire_runs"]


# --- its sessions ---------------------------------------------------------------------------

PROTOCOL_MAJOR: Final = "1"
"""The ``protocol_version`` of its session files read here (1.5 with Kimi Code 2.1.0)."""


def wire_runs(
    name: str,
    records: Iterable[tuple[int, dict[str, Any]]],
    problem: Callable[[int, str], None],
) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """The run one session file holds, as an Anthropic ``messages`` body and its
    ``meta``: empty when it holds no conversation.

    Kimi Code keeps each agent of a session (the main one, each subagent) in
    ``<session>/agents/<agent>/wire.jsonl``: a ``metadata`` record (its
    ``protocol_version``), then the agent's events. Its conversation is read from the
    events of its loop (``context.append_loop_event``): ``step.begin`` opens the
    model's answer, ``content.part`` is its text, ``tool.call`` a call (``toolCallId``,
    ``name``, ``args``), ``tool.result`` that call's answer (``result.output``, flagged
    ``isError`` when it failed, refused calls too), without Kimi Code's nudges; the
    user's prompts are the ``context.append_message`` records of a user (its own
    reminders, ``origin.kind: injection``, are not). A file of another protocol
    version is a problem, not read (never taken for a session without calls).
    """
    messages: list[dict[str, Any]] = []
    model: str | None = None
    project: str | None = None
    started: str | None = None
    step_open = False
    for number, record in records:
        kind = record.get("type")
        if kind == "metadata":
            version = record.get("protocol_version")
            if not isinstance(version, str) or version.split(".", 1)[0] != PROTOCOL_MAJOR:
                problem(number, f"Kimi Code session protocol {version!r}: not one loopfuse reads")
                return []
            started = _epoch_text(record.get("created_at")) or started
        elif kind == "llm.request":
            model = text_or_none(record.get("model")) or model
        elif kind == "context.append_message":
            text = _user_prompt(record.get("message"))
            if text is not None:
                messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
                step_open = False
        elif kind == "context.append_loop_event":
            event = record.get("event")
            if not isinstance(event, dict):
                problem(number, "a loop event without an event object")
                continue
            step = event.get("type")
            if step == "step.begin":
                step_open = False
            elif step in ("content.part", "tool.call"):
                block = _text_block(event) if step == "content.part" else _call(event)
                if block is None:
                    continue
                if not step_open or not messages or messages[-1]["role"] != "assistant":
                    messages.append({"role": "assistant", "content": []})
                    step_open = True
                messages[-1]["content"].append(block)
                display = event.get("display")
                if project is None and isinstance(display, dict):
                    project = text_or_none(display.get("cwd"))
            elif step == "tool.result":
                _result(messages, event)
    if not any(m["role"] == "assistant" for m in messages):
        return []
    parts = PurePath(name).parts
    session = subagent = None
    if len(parts) >= 4 and parts[-3] == "agents":
        session = parts[-4]
        subagent = parts[-2] if parts[-2] != "main" else None
    meta = run_meta(
        agent="kimi",
        session=session,
        subagent=subagent,
        project=project,
        started=started,
        model=model,
    )
    return [({"model": model or "", "system": [], "messages": messages}, meta)]


def _epoch_text(milliseconds: object) -> str | None:
    from datetime import UTC, datetime  # here: a hook imports this module, and reads no dates

    if not isinstance(milliseconds, int | float) or isinstance(milliseconds, bool):
        return None
    try:
        moment = datetime.fromtimestamp(milliseconds / 1000, UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.isoformat().replace("+00:00", "Z")


def _user_prompt(message: object) -> str | None:
    """The text of a user's prompt (not Kimi Code's own reminders to the model)."""
    if not isinstance(message, dict) or message.get("role") != "user":
        return None
    origin = message.get("origin")
    if not isinstance(origin, dict) or origin.get("kind") != "user":
        return None
    return _joined(message.get("content"))


def _joined(content: object) -> str | None:
    """The text of a string or of a list of parts (its text parts)."""
    if isinstance(content, str):
        return content or None
    if not isinstance(content, list):
        return None
    texts = [
        part["text"]
        for part in content
        if isinstance(part, dict)
        and part.get("type") == "text"
        and isinstance(part.get("text"), str)
    ]
    return "\n".join(texts) if texts else None


def _text_block(event: dict[str, Any]) -> dict[str, Any] | None:
    part = event.get("part")
    if not isinstance(part, dict) or part.get("type") != "text":
        return None  # its thinking, say: not a part of the conversation's calls
    text = text_or_none(part.get("text"))
    return {"type": "text", "text": text} if text is not None else None


def _call(event: dict[str, Any]) -> dict[str, Any]:
    arguments = event.get("args")
    if isinstance(arguments, str):  # JSON text, as the model sent it
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            arguments = {"input": arguments}
    call_id = event.get("toolCallId")
    name = event.get("name")
    return {
        "type": "tool_use",
        "id": call_id if isinstance(call_id, str) else "",
        "name": name if isinstance(name, str) else "",
        "input": arguments if isinstance(arguments, dict) else {},
    }


def _result(messages: list[dict[str, Any]], event: dict[str, Any]) -> None:
    """A call's answer, as a ``tool_result`` (``is_error`` when Kimi Code flagged it), the
    answers of one step in one user message."""
    result = event.get("result")
    result = result if isinstance(result, dict) else {}
    output = result.get("output")
    text = _joined(output) if not isinstance(output, str) else output
    call_id = event.get("toolCallId")
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": call_id if isinstance(call_id, str) else "",
        "content": HARNESS.without_volatile(text or ""),
    }
    if result.get("isError") is True:
        block["is_error"] = True
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "user" and _answers_only(last["content"]):
        last["content"].append(block)
    else:
        messages.append({"role": "user", "content": [block]})


def _answers_only(blocks: list[dict[str, Any]]) -> bool:
    return bool(blocks) and all(block.get("type") == "tool_result" for block in blocks)


class KimiCodeSessions(SessionFormat):
    """Kimi Code's sessions: ``sessions/wd_<folder>_<hash>/<session>/agents/<agent>/
    wire.jsonl`` in ``$KIMI_CODE_HOME`` (default ``~/.kimi-code``), one file per agent of
    a session (the main one, each subagent), each read by :func:`wire_runs`."""

    agent = "kimi"
    priority = 70  # its first record (metadata, protocol_version) is no other CLI's

    def folder(self, env: Mapping[str, str]) -> SessionFolder:
        """``$KIMI_CODE_HOME/sessions`` (default ``~/.kimi-code/sessions``)."""
        base = env.get("KIMI_CODE_HOME")
        home = Path(base) if base else Path(env.get("HOME") or Path.home()) / ".kimi-code"
        return SessionFolder(self.agent, (home / "sessions",), "KIMI_CODE_HOME")

    def is_transcript(self, name: str, folders: tuple[str, ...]) -> bool:
        """A ``wire.jsonl`` (beside it: ``state.json``, logs)."""
        del folders
        return name == "wire.jsonl"

    def recognises(self, record: dict[str, Any]) -> bool:
        """Its first record: ``{"type": "metadata", "protocol_version": ...}`` (any
        version: one it does not read is said so by :func:`wire_runs`)."""
        return record.get("type") == "metadata" and "protocol_version" in record

    def read_runs(self, name: str, path: Path | None, lines: Lines) -> list[AgentRun]:
        """The agent's one run."""
        del path
        return [AgentRun(name, body, meta) for body, meta in wire_runs(name, lines, lines.problem)]


SESSIONS: Final = KimiCodeSessions()
"""Kimi Code's sessions, as ``loopfuse scan`` reads them."""
