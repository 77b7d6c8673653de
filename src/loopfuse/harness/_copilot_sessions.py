"""Copilot CLI's (GitHub's terminal coding agent) transcripts, as ``loopfuse scan`` reads them.

``~/.copilot/session-state/<id>/events.jsonl`` (``$COPILOT_HOME`` moves ``~/.copilot``),
replayed as Anthropic ``messages``. It writes one event a line: an ``assistant.message``
with its ``toolRequests``, each call's ``tool.execution_complete`` (``success: false``: a
failed call, flagged ``is_error``); the rest (hooks, turns, permissions) is not part of
the conversation.

A reader of its own until Copilot CLI's harness module (``copilot_cli``) gives its
``CLI`` these ``sessions``; :data:`~loopfuse.harness.transcripts.SCAN_ONLY` registers it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
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

__all__ = ["SESSIONS", "CopilotSessions"]

_PREFIXES: Final = ("session.", "user.", "assistant.", "tool.", "system.", "hook.")


class CopilotSessions(SessionFormat):
    """Copilot CLI's ``events.jsonl``: one ``{"type", "data"}`` event a line."""

    agent = "copilot"
    priority = 50

    def folder(self, env: Mapping[str, str]) -> SessionFolder:
        """``session-state`` in ``$COPILOT_HOME`` (default ``~/.copilot``)."""
        home = Path(env.get("HOME") or Path.home())
        base = Path(env["COPILOT_HOME"]) if env.get("COPILOT_HOME") else home / ".copilot"
        return SessionFolder(self.agent, (base / "session-state",), "COPILOT_HOME")

    def recognises(self, record: dict[str, Any]) -> bool:
        """An event of one of its kinds (``session.``, ``assistant.`` ...) with a ``data``
        object."""
        kind = record.get("type")
        return (
            isinstance(kind, str)
            and kind.startswith(_PREFIXES)
            and isinstance(record.get("data"), dict)
        )

    def read_runs(self, name: str, path: Path | None, lines: Lines) -> list[AgentRun]:
        """The session's one run."""
        del path
        return _copilot_runs(name, lines)


def _copilot_runs(name: str, lines: Lines) -> list[AgentRun]:
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
            model = text_or_none(data.get("newModel")) or model
        elif kind == "user.message":
            text = text_or_none(data.get("content"))
            if text:
                messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
        elif kind == "assistant.message":
            model = text_or_none(data.get("model")) or model
            blocks: list[dict[str, Any]] = []
            text = text_or_none(data.get("content"))
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
    meta = run_meta(
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


SESSIONS: Final = CopilotSessions()
"""Copilot CLI's transcripts."""
