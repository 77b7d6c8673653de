"""Copilot CLI's transcripts, as ``loopfuse scan`` reads them: :data:`SESSIONS`, the
``sessions`` of :data:`loopfuse.harness.copilot_cli.CLI`. Apart from the CLI's module
because only ``scan`` reads transcripts: the hook, which imports the CLI's module
at every tool call, imports no transcript reader."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from loopfuse.harness.copilot_cli import HARNESS, call_failed
from loopfuse.harness.transcripts import (
    AgentRun,
    Lines,
    SessionFolder,
    SessionFormat,
    run_meta,
    text_or_none,
)

__all__ = ["SESSIONS", "CopilotSessions"]


# --- its session files (``loopfuse scan --agent copilot``) ------------------------------------

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
    ``tool.execution_complete`` as a ``tool_result`` (:func:`_copilot_result`), the
    results of one answer in one user message, as the model was sent them."""
    messages: list[dict[str, Any]] = []
    info: dict[str, Any] = {}
    model: str | None = None
    asked: dict[str, str] = {}  # the calls already in an assistant message: their tools
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
                    asked[call["id"]] = call["name"]
            if blocks:
                messages.append({"role": "assistant", "content": blocks})
        elif kind == "tool.execution_start":
            call = _copilot_call(data.get("toolCallId"), {**data, "name": data.get("toolName")})
            if call["id"] not in asked:  # a call no answer listed: it joins the last answer
                asked[call["id"]] = call["name"]
                if not messages or messages[-1]["role"] != "assistant":
                    messages.append({"role": "assistant", "content": []})
                messages[-1]["content"].append(call)
        elif kind == "tool.execution_complete":
            _copilot_result(messages, data, asked)
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


def _copilot_result(
    messages: list[dict[str, Any]], data: dict[str, Any], tools: Mapping[str, str]
) -> None:
    """A finished call's answer: the text the model was given (``result.content``; the
    error's message for a failed call) without what changes whatever the tool did
    (:data:`VOLATILE`: the shell number, a hook's appended words), and ``is_error`` as
    its conventions say (:func:`call_failed`: ``success``, and a shell's exit line)."""
    result = data.get("result")
    error = data.get("error")
    text = result.get("content") if isinstance(result, dict) else None
    if not isinstance(text, str) and isinstance(error, dict):
        text = error.get("message")
    given = data.get("toolCallId")
    call_id = given if isinstance(given, str) else ""
    succeeded = data.get("success")
    failed, _ = call_failed(
        tools.get(call_id, ""), succeeded if isinstance(succeeded, bool) else None, text
    )
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": call_id,
        "content": HARNESS.without_volatile(text) if isinstance(text, str) else "",
    }
    if failed is not None:
        block["is_error"] = failed
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "user" and _answers_only(last["content"]):
        last["content"].append(block)  # the answers to one turn's calls: one message
    else:
        messages.append({"role": "user", "content": [block]})


def _answers_only(blocks: list[dict[str, Any]]) -> bool:
    return all(block.get("type") == "tool_result" for block in blocks)


SESSIONS: Final = CopilotSessions()
"""Copilot CLI's transcripts."""
