"""Codex's transcripts, as ``loopfuse scan`` reads them: :data:`SESSIONS`, the
``sessions`` of :data:`loopfuse.harness.codex.CLI`. Apart from the CLI's module
because only ``scan`` reads transcripts: the hook, which imports the CLI's module
at every tool call, imports no transcript reader."""

from __future__ import annotations

import json
import re
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

__all__ = ["SESSIONS", "CodexSessions"]


# --- its transcripts --------------------------------------------------------------------

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
# Volatile lines of a command's answer: a new value on every call, whatever it did.
_CODEX_HEADER: Final = re.compile(r"\A(?:Chunk ID: \S+\n)?(?:Wall time: [^\n]*\n)?")


class CodexSessions(SessionFormat):
    """Codex's rollouts: one ``{"timestamp", "type", "payload"}`` record a line."""

    agent = "codex"
    priority = 10
    starts = (
        re.compile(rb'\{\s*"timestamp"\s*:\s*"[^"]*"\s*,(?:\s*"ordinal"\s*:\s*\d+\s*,)?'
                   rb'\s*"type"\s*:\s*"session_meta"'),
    )  # fmt: skip

    def folder(self, env: Mapping[str, str]) -> SessionFolder:
        """``sessions`` and ``archived_sessions`` in ``$CODEX_HOME`` (default ``~/.codex``)."""
        home = Path(env.get("HOME") or Path.home())
        base = Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else home / ".codex"
        return SessionFolder(
            self.agent, (base / "sessions", base / "archived_sessions"), "CODEX_HOME"
        )

    def is_transcript(self, name: str, folders: tuple[str, ...]) -> bool:
        """``rollout-*.jsonl`` (Codex keeps other files beside them)."""
        del folders
        return name.startswith("rollout-") and name.endswith(".jsonl")

    def recognises(self, record: dict[str, Any]) -> bool:
        """A record of one of its types, with a ``payload``."""
        kind = record.get("type")
        return "payload" in record and isinstance(kind, str) and kind in _CODEX_TYPES

    def read_runs(self, name: str, path: Path | None, lines: Lines) -> list[AgentRun]:
        """The rollout's one run."""
        del path
        return _codex_runs(name, lines)


def _codex_runs(name: str, lines: Lines) -> list[AgentRun]:
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
            model = text_or_none(payload.get("model")) or model
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
    meta = run_meta(
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
    call_id = (
        text_or_none(payload.get("call_id")) or text_or_none(payload.get("id")) or f"ws-{position}"
    )
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
        label = text_or_none(tool.get("name")) or "?"
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


SESSIONS: Final = CodexSessions()
"""Codex's transcripts."""
