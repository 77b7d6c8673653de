"""Synthetic transcripts of Claude Code, Codex and Gemini CLI, in the formats they write.

Each builder returns the lines (JSON objects) of one session file, as the CLI writes it
(compact JSON, one record a line; the field names and order of the versions observed:
Claude Code 2.1, Codex 0.169, Gemini CLI 0.61). A turn is ``(command, answer)``: the
model runs ``command`` in the CLI's shell tool and the tool answers ``answer`` (with a
failing exit code when ``failed``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple


class Turn(NamedTuple):
    command: str
    answer: str
    failed: bool = True


def looping(
    command: str = "make", answer: str = "make: *** No rule to make target 'all'"
) -> list[Turn]:
    """The same failing command, the same answer, ten times."""
    return [Turn(command, answer)] * 10


def healthy() -> list[Turn]:
    """Different commands, each answered differently, all passing."""
    return [
        Turn(f"sed -n {i},{i + 9}p src/app.py", f"line {i} of the app", False) for i in range(8)
    ]


def write_lines(path: Path, lines: Sequence[object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
    path.write_text(text, encoding="utf-8")
    return path


def _time(i: int) -> str:
    return f"2026-12-01T22:{12 + i // 60:02d}:{i % 60:02d}.000Z"


# --- Claude Code --------------------------------------------------------------------------


def claude_usage() -> dict[str, int]:
    return {
        "input_tokens": 50,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 100,
        "output_tokens": 20,
    }


def claude_session(
    session: str,
    turns: Sequence[Turn],
    *,
    cwd: str = "/home/dev/projects/c3",
    prompt: str = "Build the project",
    start: int = 0,
    sidechain: str | None = None,
    parent: str | None = None,
) -> list[dict[str, Any]]:
    """A Claude Code session: a prompt, a Bash call and its result per turn, "Done."."""
    tag = sidechain or session[:8]
    common = {
        "isSidechain": sidechain is not None,
        "userType": "external",
        "cwd": cwd,
        "sessionId": session,
        "version": "2.1.328",
        "gitBranch": "HEAD",
    }
    if sidechain is not None:
        common["agentId"] = sidechain
    lines: list[dict[str, Any]] = []
    uuid = f"{tag}-u{start}"
    lines.append(
        {
            "parentUuid": parent,
            **common,
            "type": "user",
            "message": {"role": "user", "content": prompt},
            "uuid": uuid,
            "timestamp": _time(start),
        }
    )
    for k, turn in enumerate(turns, start=start):
        call_id = f"toolu_{tag}_{k}"
        asked = f"{tag}-a{k}"
        lines.append(
            {
                "parentUuid": uuid,
                **common,
                "message": {
                    "id": f"msg_{tag}_{k}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-opus-5-5",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": call_id,
                            "name": "Bash",
                            "input": {"command": turn.command, "description": "Run it"},
                        }
                    ],
                    "stop_reason": "tool_use",
                    "usage": claude_usage(),
                },
                "requestId": f"req_{tag}_{k}",
                "type": "assistant",
                "uuid": asked,
                "timestamp": _time(k + 1),
            }
        )
        uuid = f"{tag}-r{k}"
        shown = f"Exit code 1\n{turn.answer}" if turn.failed else turn.answer
        lines.append(
            {
                "parentUuid": asked,
                **common,
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "content": shown,
                            "is_error": turn.failed,
                            "tool_use_id": call_id,
                        }
                    ],
                },
                "uuid": uuid,
                "timestamp": _time(k + 1),
                "toolUseResult": "Error: " + shown if turn.failed else {"stdout": turn.answer},
                "sourceToolAssistantUUID": asked,
            }
        )
    end = start + len(turns)
    lines.append(
        {
            "parentUuid": uuid,
            **common,
            "message": {
                "id": f"msg_{tag}_end{end}",
                "type": "message",
                "role": "assistant",
                "model": "claude-opus-5-5",
                "content": [{"type": "text", "text": "Done."}],
                "stop_reason": "end_turn",
                "usage": claude_usage(),
            },
            "type": "assistant",
            "uuid": f"{tag}-end{end}",
            "timestamp": _time(end + 1),
        }
    )
    return lines


def claude_extras(session: str) -> list[dict[str, Any]]:
    """Lines Claude Code writes beside the conversation (never sent as turns)."""
    return [
        {"type": "summary", "summary": "Build fails", "leafUuid": "x"},
        {
            "type": "file-history-snapshot",
            "messageId": "m",
            "snapshot": {"trackedFileBackups": {}},
            "isSnapshotUpdate": False,
        },
        {
            "parentUuid": None,
            "isSidechain": False,
            "type": "attachment",
            "attachment": {"type": "todo_reminder", "content": []},
            "uuid": "att-1",
            "sessionId": session,
            "timestamp": _time(0),
        },
    ]


# --- Codex ---------------------------------------------------------------------------------


def codex_usage(tokens: int) -> dict[str, int]:
    return {
        "input_tokens": tokens,
        "cached_input_tokens": 0,
        "output_tokens": 20,
        "reasoning_output_tokens": 0,
        "total_tokens": tokens + 20,
    }


def codex_session(
    thread: str, turns: Sequence[Turn], *, cwd: str = "/home/dev/projects/x3"
) -> list[dict[str, Any]]:
    """A Codex rollout: meta, context, a prompt, an ``exec_command`` call, its usage
    (recorded twice, as Codex does) and its output per turn, "Done."."""
    lines: list[dict[str, Any]] = []
    ordinal = 0

    def line(kind: str, payload: dict[str, Any]) -> None:
        nonlocal ordinal
        lines.append(
            {"timestamp": _time(ordinal), "ordinal": ordinal, "type": kind, "payload": payload}
        )
        ordinal += 1

    line(
        "session_meta",
        {
            "session_id": thread,
            "id": thread,
            "timestamp": "2026-12-01T22:23:54.802Z",
            "cwd": cwd,
            "originator": "codex_exec",
            "cli_version": "0.169.0",
            "source": "exec",
            "base_instructions": "You are Codex. " * 800,  # a first line longer than 8 KiB
        },
    )
    line("event_msg", {"type": "task_started", "turn_id": "t1"})
    line("turn_context", {"turn_id": "t1", "cwd": cwd, "model": "gpt-6-codex"})
    line(
        "response_item",
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "rules"}],
        },
    )
    line(
        "response_item",
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Build it"}],
        },
    )
    line("event_msg", {"type": "user_message", "message": "Build it"})
    for k, turn in enumerate(turns):
        call_id = f"call_{k:04d}"
        line(
            "response_item",
            {"type": "reasoning", "id": f"rs_{k}", "summary": [], "encrypted_content": f"e{k}"},
        )
        line(
            "response_item",
            {
                "type": "function_call",
                "status": "completed",
                "id": f"fc_{k}",
                "name": "exec_command",
                "arguments": json.dumps({"cmd": turn.command}),
                "call_id": call_id,
            },
        )
        line("token_usage_record", {"turn_id": "t1", "usage": codex_usage(50 + k)})
        code = 1 if turn.failed else 0
        line(
            "event_msg",
            {
                "type": "item_completed",
                "item": {"type": "CommandExecution", "id": call_id, "exit_code": code},
            },
        )
        output = (
            f"Chunk ID: {k * 7919 % 16**6:06x}\nWall time: 0.{k:04d} seconds\n"
            f"Process exited with code {code}\nOriginal token count: 11\nOutput:\n{turn.answer}\n"
        )
        line(
            "response_item", {"type": "function_call_output", "call_id": call_id, "output": output}
        )
        line(
            "event_msg",
            {"type": "token_count", "info": {"last_token_usage": codex_usage(50 + k)}},
        )
    line(
        "response_item",
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
        },
    )
    line("event_msg", {"type": "token_count", "info": {"last_token_usage": codex_usage(1)}})
    line("event_msg", {"type": "task_complete", "last_agent_message": "Done."})
    return lines


# --- Gemini CLI ------------------------------------------------------------------------------


def gemini_session(
    session: str, turns: Sequence[Turn], *, kind: str = "main"
) -> list[dict[str, Any]]:
    """A Gemini CLI session: metadata, the context set by ``$set``, a prompt; per turn
    the model's record, the same record again with its tool call and result, the result
    as a user record; "Done."."""
    tokens = {"input": 50, "output": 20, "cached": 0, "thoughts": 5, "tool": 0, "total": 75}
    lines: list[dict[str, Any]] = [
        {
            "sessionId": session,
            "projectHash": "74acd36249e2fb0b50eff57e16ce370e762488ec05c0764057eec1dde75575f2",
            "startTime": "2026-12-01T22:28:45.170Z",
            "lastUpdated": "2026-12-01T22:28:45.170Z",
            "kind": kind,
        },
        {
            "$set": {
                "messages": [
                    {
                        "id": "ctx",
                        "timestamp": _time(0),
                        "type": "user",
                        "content": [{"text": "<session_context>\nGemini CLI\n</session_context>"}],
                    }
                ],
                "lastUpdated": _time(0),
            }
        },
        {"id": "prompt", "timestamp": _time(0), "type": "user", "content": [{"text": "Build it"}]},
        {"$set": {"lastUpdated": _time(0)}},
    ]
    for k, turn in enumerate(turns):
        record = {
            "id": f"model-{k}",
            "timestamp": _time(k + 1),
            "type": "gemini",
            "content": "",
            "thoughts": [],
            "tokens": tokens,
            "model": "gemini-3.8-flash",
        }
        call_id = f"run_shell_command__run_shell_command_{1796164125483 + k}_0"
        code = 1 if turn.failed else 0
        response = {
            "output": f"<untrusted_context>\nOutput: {turn.answer}\nExit Code: {code}\n"
            f"Process Group PGID: {9034 + 13 * k}\n</untrusted_context>"
        }
        result = [
            {"functionResponse": {"id": call_id, "name": "run_shell_command", "response": response}}
        ]
        call = {
            "id": call_id,
            "name": "run_shell_command",
            "args": {"command": turn.command, "description": "Run it"},
            "result": result,
            "status": "success",
            "timestamp": _time(k + 1),
            "resultDisplay": turn.answer,
            "displayName": "Shell",
        }
        lines.append(record)
        lines.append({"$set": {"lastUpdated": _time(k + 1)}})
        lines.append({**record, "toolCalls": [call]})
        lines.append(
            {"id": f"answer-{k}", "timestamp": _time(k + 1), "type": "user", "content": result}
        )
        lines.append({"$set": {"lastUpdated": _time(k + 1)}})
    lines.append(
        {
            "id": "done",
            "timestamp": _time(len(turns) + 1),
            "type": "gemini",
            "content": "Done.",
            "tokens": tokens,
            "model": "gemini-3.8-flash",
        }
    )
    lines.append(
        {"id": "note", "timestamp": _time(len(turns) + 1), "type": "info", "content": "Saved."}
    )
    return lines


# --- GitHub Copilot CLI ---------------------------------------------------------------------


def copilot_session(session: str, turns: Sequence[Turn]) -> list[dict[str, Any]]:
    """A Copilot CLI ``events.jsonl``: ``session.start``, a prompt; per turn an
    ``assistant.message`` asking for a ``bash`` call, the call's start and completion
    (``success: false`` with an ``error`` when ``failed``, as the CLI records a failed
    call; a non-zero exit is a success with its output); hooks around; "Done."."""
    lines: list[dict[str, Any]] = []

    def event(kind: str, data: dict[str, Any]) -> None:
        parent = lines[-1]["id"] if lines else None
        number = len(lines)
        lines.append(
            {
                "type": kind,
                "data": data,
                "id": f"e{number:04d}",
                "timestamp": _time(number),
                "parentId": parent,
            }
        )

    event(
        "session.start",
        {
            "sessionId": session,
            "version": 1,
            "producer": "copilot-agent",
            "copilotVersion": "1.0.102",
            "startTime": "2026-12-01T22:31:05.000Z",
            "context": {"cwd": "/home/dev/projects/p4", "branch": "main"},
        },
    )
    event("session.model_change", {"newModel": "model-x"})
    event("system.message", {"role": "system", "content": "You are a coding agent."})
    event("user.message", {"content": "Build it", "attachments": []})
    for k, turn in enumerate(turns):
        call = f"toolu_{k:04d}"
        event("assistant.turn_start", {"turnId": str(k)})
        request = {
            "toolCallId": call,
            "name": "bash",
            "type": "function",
            "arguments": {"command": turn.command, "description": "Run it"},
        }
        event(
            "assistant.message",
            {
                "messageId": f"m{k}",
                "model": "model-x",
                "content": "",
                "toolRequests": [request],
                "outputTokens": 20,
            },
        )
        event("hook.start", {"hookType": "preToolUse"})
        event(
            "tool.execution_start",
            {
                "toolCallId": call,
                "toolName": "bash",
                "arguments": request["arguments"],
                "turnId": str(k),
            },
        )
        event("hook.end", {"hookType": "preToolUse"})
        done: dict[str, Any] = {"toolCallId": call, "turnId": str(k), "success": not turn.failed}
        if turn.failed:
            done["error"] = {"message": turn.answer, "code": "failure"}
        else:
            done["result"] = {"content": turn.answer, "detailedContent": turn.answer}
        event("tool.execution_complete", done)
        event("assistant.turn_end", {"turnId": str(k)})
    event(
        "assistant.message",
        {"messageId": "last", "model": "model-x", "content": "Done.", "toolRequests": []},
    )
    event("session.shutdown", {})
    return lines


# --- OpenCode ----------------------------------------------------------------------------


def opencode_export(session: str, turns: Sequence[Turn]) -> dict[str, Any]:
    """What ``opencode export`` prints: the session's ``info`` and its ``messages``, each
    ``{"info", "parts"}``; the assistant's one message holds every step (``step-start``,
    a ``bash`` tool part, ``step-finish`` with its tokens), a failed call's state
    ``status: "error"``; then "Done."."""
    start = 1_796_163_600_000  # 2026-12-01T22:20:00Z, in milliseconds
    asked, answer = f"msg_{session}_u", f"msg_{session}_a"

    def part(message: str, number: int, **fields: Any) -> dict[str, Any]:
        return {
            "id": f"prt_{message}_{number:03d}",
            "sessionID": session,
            "messageID": message,
            **fields,
        }

    tokens = {"input": 50, "output": 20, "reasoning": 0, "cache": {"read": 100, "write": 0}}
    parts: list[dict[str, Any]] = []
    for k, turn in enumerate(turns):
        parts.append(part(answer, len(parts), type="step-start"))
        state: dict[str, Any] = {
            "input": {"command": turn.command, "description": "Run it"},
            "time": {"start": start + k, "end": start + k + 1},
        }
        if turn.failed:
            state.update(status="error", error=turn.answer)
        else:
            state.update(status="completed", output=turn.answer, title=turn.command, metadata={})
        parts.append(
            part(answer, len(parts), type="tool", callID=f"call_{k:04d}", tool="bash", state=state)
        )
        parts.append(
            part(answer, len(parts), type="step-finish", reason="tool-calls", cost=0, tokens=tokens)
        )
    parts.append(part(answer, len(parts), type="step-start"))
    parts.append(part(answer, len(parts), type="text", text="Done."))
    parts.append(part(answer, len(parts), type="step-finish", reason="stop", cost=0, tokens=tokens))
    return {
        "info": {
            "id": session,
            "slug": "quiet-river",
            "projectID": "p1",
            "directory": "/home/dev/projects/o5",
            "title": "Build it",
            "version": "1.18.33",
            "time": {"created": start, "updated": start + 60_000},
        },
        "messages": [
            {
                "info": {
                    "id": asked,
                    "sessionID": session,
                    "role": "user",
                    "time": {"created": start},
                    "agent": "build",
                },
                "parts": [part(asked, 0, type="text", text="Build it")],
            },
            {
                "info": {
                    "id": answer,
                    "sessionID": session,
                    "role": "assistant",
                    "time": {"created": start + 1},
                    "parentID": asked,
                    "modelID": "model-y",
                    "providerID": "local",
                    "mode": "build",
                    "cost": 0,
                    "tokens": tokens,
                },
                "parts": parts,
            },
        ],
        "todos": [],
    }


# --- Qwen Code ----------------------------------------------------------------------------


def qwen_session(session: str, turns: Sequence[Turn]) -> list[dict[str, Any]]:
    """A Qwen Code 0.24.4 session (the shape of tests/recorded/agent-clis/qwen): Claude
    Code's envelope around Gemini's messages; a telemetry record between them; per turn
    the model's call and its ``tool_result``; "Done."."""
    parent: list[str | None] = [None]

    def record(i: int, kind: str, **fields: Any) -> dict[str, Any]:
        uuid = f"{session[:8]}-{i:04d}-4000-8000-000000000000"
        line = {
            "uuid": uuid,
            "parentUuid": parent[0],
            "sessionId": session,
            "timestamp": _time(i),
            "type": kind,
            "cwd": "/home/dev/projects/q1",
            "version": "0.24.4",
            **fields,
        }
        parent[0] = uuid
        return line

    usage = {"promptTokenCount": 100, "candidatesTokenCount": 20, "totalTokenCount": 120}
    lines = [record(0, "user", message={"role": "user", "parts": [{"text": "Fix the build."}]})]
    for i, turn in enumerate(turns):
        call_id = f"call_{i:020d}"
        args = {"command": turn.command, "description": "Run it"}
        lines.append(record(3 * i + 1, "system", subtype="ui_telemetry", systemPayload={}))
        call = {"functionCall": {"id": call_id, "name": "run_shell_command", "args": args}}
        lines.append(
            record(
                3 * i + 2,
                "assistant",
                model="qwen3-coder",
                message={"role": "model", "parts": [call]},
                usageMetadata=usage,
            )
        )
        code = 2 if turn.failed else 0
        text = (
            f"Command: {turn.command}\nDirectory: (root)\nOutput: {turn.answer}\n"
            f"Error: (none)\nExit Code: {code}\nSignal: (none)\nProcess Group PGID: (none)"
        )
        answer = {"error": text} if turn.failed else {"output": text}
        response = {"id": call_id, "name": "run_shell_command", "response": answer}
        lines.append(
            record(
                3 * i + 3,
                "tool_result",
                message={"role": "user", "parts": [{"functionResponse": response}]},
                toolCallResult={"callId": call_id, "status": "error" if turn.failed else "success"},
            )
        )
    done = {"role": "model", "parts": [{"text": "Done."}]}
    lines.append(
        record(
            3 * len(turns) + 1, "assistant", model="qwen3-coder", message=done, usageMetadata=usage
        )
    )
    return lines


# --- pi -----------------------------------------------------------------------------------


def pi_session(session: str, turns: Sequence[Turn]) -> list[dict[str, Any]]:
    """A pi 0.73.1 session (the shape of tests/recorded/agent-clis/pi/session-sample.jsonl):
    its header, the model and thinking level chosen, then a tree of entries (``id``,
    ``parentId``): the prompt, per turn the model's ``bash`` call and its ``toolResult``
    (``isError`` and pi's status line when ``failed``), "Done."."""
    parent: list[str | None] = [None]

    def entry(i: int, kind: str, **fields: Any) -> dict[str, Any]:
        line = {"type": kind, "id": f"{i:08x}", "parentId": parent[0], "timestamp": _time(i)}
        parent[0] = line["id"]
        return line | fields

    usage = {"input": 100, "output": 20, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 120}
    about = {"api": "openai-completions", "provider": "fake", "model": "fake-model"}
    lines: list[dict[str, Any]] = [
        {"type": "session", "version": 3, "id": session, "timestamp": _time(0),
         "cwd": "/home/dev/projects/p1"},
        entry(1, "model_change", provider="fake", modelId="fake-model"),
        entry(2, "thinking_level_change", thinkingLevel="off"),
        entry(3, "message", message={"role": "user", "content": [
            {"type": "text", "text": "Fix the build."}], "timestamp": 0}),
    ]  # fmt: skip
    for i, turn in enumerate(turns):
        call_id = f"call_{i:020d}"
        call = {"type": "toolCall", "id": call_id, "name": "bash",
                "arguments": {"command": turn.command}}  # fmt: skip
        lines.append(
            entry(2 * i + 4, "message", message={"role": "assistant", "content": [call],
                  **about, "usage": usage, "stopReason": "toolUse", "timestamp": 0})
        )  # fmt: skip
        text = f"{turn.answer}\n\n\nCommand exited with code 2" if turn.failed else turn.answer
        result = {"role": "toolResult", "toolCallId": call_id, "toolName": "bash",
                  "content": [{"type": "text", "text": text}], "details": {},
                  "isError": turn.failed, "timestamp": 0}  # fmt: skip
        lines.append(entry(2 * i + 5, "message", message=result))
    done = {"role": "assistant", "content": [{"type": "text", "text": "Done."}], **about,
            "usage": usage, "stopReason": "stop", "timestamp": 0}  # fmt: skip
    lines.append(entry(2 * len(turns) + 4, "message", message=done))
    return lines
