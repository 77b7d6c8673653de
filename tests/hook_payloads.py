"""Hook inputs shaped like what Claude Code 2.1, Codex 0.169, Gemini CLI 0.61 and Qwen Code
0.24.4 send
(field for field as recorded from the real CLIs; paths and ids made up)."""

from __future__ import annotations

from typing import Any

CLAUDE_COMMON: dict[str, Any] = {
    "session_id": "55c05628-467e-4fc2-bb1d-069f10823cee",
    "transcript_path": "/home/dev/.claude/projects/-home-dev-p/55c05628.jsonl",
    "cwd": "/home/dev/p",
    "prompt_id": "52280539-7529-490e-b06a-5eb1b7b13356",
    "permission_mode": "default",
    "effort": {"level": "medium"},
}
CODEX_COMMON: dict[str, Any] = {
    "session_id": "01a233b5-13a8-70e1-825d-ce525db4dc71",
    "turn_id": "01a233b5-1405-7c70-9c39-d3cf416e3f08",
    "transcript_path": "/home/dev/sessions/2026/12/01/rollout-x.jsonl",
    "cwd": "/home/dev/p",
    "model": "fake-model",
    "permission_mode": "bypassPermissions",
}
GEMINI_COMMON: dict[str, Any] = {
    "session_id": "86f7cf88-6e27-45fb-863e-2273496a43b5",
    "transcript_path": "/home/dev/.gemini/tmp/g2/chats/session-x.jsonl",
    "cwd": "/home/dev/p",
    "timestamp": "2026-12-01T22:28:45.769Z",
}
QWEN_COMMON: dict[str, Any] = {
    "session_id": "3f1c2a90-1b7e-4c55-9d2a-6a0e8c4b7f11",
    "transcript_path": "/home/dev/.qwen/projects/-home-dev-p/chats/3f1c2a90.jsonl",
    "cwd": "/home/dev/p",
    "timestamp": "2026-12-06T11:23:26.998Z",
    "permission_mode": "yolo",
    "prompt_id": "3f1c2a90-1b7e-4c55-9d2a-6a0e8c4b7f11########0",
}


def claude_pre(command: str, call_id: str, description: str = "Run it") -> dict[str, Any]:
    return {
        **CLAUDE_COMMON,
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": description},
        "tool_use_id": call_id,
    }


def claude_post(command: str, call_id: str, stdout: str) -> dict[str, Any]:
    return {
        **CLAUDE_COMMON,
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": "Run it"},
        "tool_response": {
            "stdout": stdout,
            "stderr": "",
            "interrupted": False,
            "isImage": False,
            "noOutputExpected": False,
        },
        "tool_use_id": call_id,
        "duration_ms": 118,
    }


def claude_failure(command: str, call_id: str, output: str, code: int = 1) -> dict[str, Any]:
    return {
        **CLAUDE_COMMON,
        "hook_event_name": "PostToolUseFailure",
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": "Run it"},
        "tool_use_id": call_id,
        "error": f"Exit code {code}\n{output}",
        "is_interrupt": False,
        "duration_ms": 108,
    }


def codex_pre(command: str, call_id: str) -> dict[str, Any]:
    return {
        **CODEX_COMMON,
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": call_id,
    }


def codex_post(command: str, call_id: str, output: str) -> dict[str, Any]:
    return {
        **CODEX_COMMON,
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_response": output,
        "tool_use_id": call_id,
    }


def gemini_before(command: str) -> dict[str, Any]:
    return {
        **GEMINI_COMMON,
        "hook_event_name": "BeforeTool",
        "tool_name": "run_shell_command",
        "tool_input": {"command": command, "description": "Run it"},
    }


def gemini_after(command: str, output: str, code: int, pgid: int) -> dict[str, Any]:
    return {
        **GEMINI_COMMON,
        "hook_event_name": "AfterTool",
        "tool_name": "run_shell_command",
        "tool_input": {"command": command, "description": "Run it"},
        "tool_response": {
            "llmContent": "<untrusted_context>\n"
            f"Output: {output}\nExit Code: {code}\nProcess Group PGID: {pgid}\n"
            "</untrusted_context>",
            "returnDisplay": output,
        },
    }


def _qwen_shell(command: str, code: int, output: str) -> str:
    """A shell answer in Qwen Code's frame (its process group was ``(none)`` in every
    recorded run)."""
    return (
        f"Command: {command}\nDirectory: (root)\nOutput: {output}\nError: (none)\n"
        f"Exit Code: {code}\nSignal: (none)\nProcess Group PGID: (none)"
    )


def _qwen_tool(event: str, command: str, call: int) -> dict[str, Any]:
    return {
        **QWEN_COMMON,
        "hook_event_name": event,
        "tool_name": "run_shell_command",
        "tool_input": {"command": command, "description": "Run a command"},
        "tool_use_id": f"toolu_17965562069{call:02d}_lgo4efeb5",
        "tool_call_id": f"call_{call:020d}",
    }


def qwen_pre(command: str, call: int) -> dict[str, Any]:
    return _qwen_tool("PreToolUse", command, call)


def qwen_post(command: str, call: int, output: str) -> dict[str, Any]:
    """A command that exited 0."""
    return {
        **_qwen_tool("PostToolUse", command, call),
        "tool_response": {"llmContent": _qwen_shell(command, 0, output), "returnDisplay": output},
        "duration_ms": 14,
    }


def qwen_failure(command: str, call: int, output: str, code: int = 1) -> dict[str, Any]:
    """A command that exited non-zero: Qwen Code's failure event."""
    return {
        **_qwen_tool("PostToolUseFailure", command, call),
        "error": _qwen_shell(command, code, output),
        "is_interrupt": False,
        "duration_ms": 25,
    }


def prompt(common: dict[str, Any], event: str, text: str = "try again") -> dict[str, Any]:
    """The user's prompt: Claude Code's and Codex's UserPromptSubmit, Gemini's BeforeAgent."""
    return {**common, "hook_event_name": event, "prompt": text}


def claude_batch(calls: list[tuple[str, str, str]]) -> dict[str, Any]:
    """Claude Code's end of a batch: ``(command, call id, response)`` of each call."""
    return {
        **CLAUDE_COMMON,
        "hook_event_name": "PostToolBatch",
        "tool_calls": [
            {
                "tool_name": "Bash",
                "tool_input": {"command": command, "description": "Run it"},
                "tool_use_id": call_id,
                "tool_response": response,
            }
            for command, call_id, response in calls
        ],
    }


# --- GitHub Copilot CLI 1.0.102 (its own camelCase events: no event name, no call id) ---------

COPILOT_COMMON: dict[str, Any] = {
    "sessionId": "2f6c1d0e-4b8a-4c1e-9d3f-7a5b6c8d9e0f",
    "timestamp": 1796556339192,
    "cwd": "/home/dev/p",
}


def copilot_pre(command: str, description: str = "Run it") -> dict[str, Any]:
    """``preToolUse`` of a ``bash`` call."""
    return {
        **COPILOT_COMMON,
        "toolName": "bash",
        "toolArgs": {"command": command, "description": description},
    }


def copilot_post(command: str, shell: int, output: str, code: int = 0) -> dict[str, Any]:
    """``postToolUse`` of a ``bash`` call, the ``shell``-th of its session: a command that
    exits non-zero is a success too, its exit code only in the answer's last line."""
    return {
        **copilot_pre(command),
        "toolResult": {
            "resultType": "success",
            "textResultForLlm": f"{output}\n<shellId: {shell} completed with exit code {code}>",
        },
    }


def copilot_failure(path: str, error: str = "Path does not exist") -> dict[str, Any]:
    """``postToolUseFailure``: a ``view`` of a missing path."""
    return {**COPILOT_COMMON, "toolName": "view", "toolArgs": {"path": path}, "error": error}


def copilot_prompt(text: str = "try again") -> dict[str, Any]:
    """``userPromptSubmitted``: the user's prompt."""
    return {**COPILOT_COMMON, "prompt": text}


# --- Kimi Code 2.1.0 (tests/recorded/agent-clis/kimi/) ---------------------------------------

KIMI_COMMON: dict[str, Any] = {
    "session_id": "session_e9077566-eff1-41a0-9840-28e99d9833cb",
    "cwd": "/home/dev/p",
    "client_type": "kimi_code_cli",
}


def _kimi_tool(event: str, command: str, call: int) -> dict[str, Any]:
    return {
        **KIMI_COMMON,
        "hook_event_name": event,
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": "Run a command"},
        "tool_call_id": f"call_{call:020d}",
    }


def kimi_pre(command: str, call: int) -> dict[str, Any]:
    return _kimi_tool("PreToolUse", command, call)


def kimi_post(command: str, call: int, output: str) -> dict[str, Any]:
    """A command that exited 0: its output (the first 2,000 characters)."""
    return {**_kimi_tool("PostToolUse", command, call), "tool_output": output[:2000]}


def kimi_failure(command: str, call: int, output: str, code: int | None = 1) -> dict[str, Any]:
    """A command that exited non-zero (or a call a hook refused: ``output`` its reason,
    ``code`` None): Kimi Code's failure event."""
    message = output if code is None else f"{output}\nCommand failed with exit code: {code}."
    return {
        **_kimi_tool("PostToolUseFailure", command, call),
        "error": {"code": "internal", "message": message, "retryable": False},
    }


def kimi_prompt(text: str = "try again") -> dict[str, Any]:
    """The user's prompt: its text as a list of parts."""
    return {
        **KIMI_COMMON,
        "hook_event_name": "UserPromptSubmit",
        "prompt": [{"type": "text", "text": text}],
    }


# --- pi (loopfuse's extension: tests/recorded/agent-clis/pi/loopfuse-events.jsonl) ---------

PI_SESSION = "01a24bb4-fae0-76b4-9aea-a77cdb6c686f"


def _pi(event: str, **fields: Any) -> dict[str, Any]:
    return {
        "hook_event_name": event,
        "session_id": PI_SESSION,
        "transcript_path": f"/home/dev/.pi/agent/sessions/--home-dev-p--/t_{PI_SESSION}.jsonl",
        "cwd": "/home/dev/p",
        **fields,
    }


def pi_pre(command: str, call_id: str) -> dict[str, Any]:
    """The extension's ``tool_call`` of pi's ``bash``."""
    return _pi("tool_call", tool_name="bash", tool_call_id=call_id, tool_input={"command": command})


def pi_post(command: str, call_id: str, output: str, code: int = 0) -> dict[str, Any]:
    """The extension's ``tool_result`` of pi's ``bash`` (a non-zero ``code``: pi's failure,
    its status line last)."""
    text = output if code == 0 else f"{output}\n\nCommand exited with code {code}"
    return {
        **pi_pre(command, call_id),
        "hook_event_name": "tool_result",
        "tool_response": [{"type": "text", "text": text}],
        "is_error": code != 0,
    }


# --- OpenCode: the events of loopfuse's plugin (tests/recorded/agent-clis/opencode/) ----------

OPENCODE_SESSION = "ses_db43e92b8ffevG9qovRZJTHc2D"


def _opencode_call(event: str, command: str, call: int) -> dict[str, Any]:
    return {
        "loopfuse": 1,
        "hook_event_name": event,
        "sessionID": OPENCODE_SESSION,
        "callID": f"call_{call:020d}",
        "tool": "bash",
        "args": {"command": command, "description": "Run a command"},
    }


def opencode_pre(command: str, call: int) -> dict[str, Any]:
    return _opencode_call("tool.execute.before", command, call)


def opencode_post(command: str, call: int, output: str, code: int = 0) -> dict[str, Any]:
    """A command that ran (whatever its exit status: OpenCode's after-event)."""
    return {
        **_opencode_call("tool.execute.after", command, call),
        "output": output,
        "metadata": {"exit": code},
    }
