"""Codex CLI (OpenAI's terminal coding agent): its tools, and how its answers fail.

Facts observed with Codex 0.169 (``../shared/agent-clis``) and in real rollouts:

- ``exec_command {cmd}`` runs a command line (``shell``, ``shell_command``,
  ``local_shell`` in older versions). A command still running after its
  ``yield_time_ms`` answers ``Process running with session ID N``; the model then polls it
  with ``write_stdin {session_id, chars}``: with empty ``chars`` that is a **wait** (it
  types nothing and reads what the process printed since), with text it types into the
  process (state-changing). A poll answered ``Process running …`` is progress however
  quiet the process is; ``Process exited with code N`` ends the wait.
- ``apply_patch`` edits files; ``read_file``, ``list_dir``, ``grep_files``,
  ``view_image`` read; ``web_search`` reads the web; ``update_plan`` keeps its plan.
- Results carry no error flag: a command's answer starts with ``Process exited with code
  N`` (``Exit code: N`` in older versions, or JSON ``metadata.exit_code``): a non-zero
  one is a failure whatever the output says; exit 0 is left to the other evidence (a
  reproduction script exits 0 and prints the bug). Its hooks see ``tool_response`` as
  one string.

>>> HARNESS.kind("write_stdin", {"session_id": 7, "chars": ""})
<ToolKind.WAIT: 'wait'>
>>> HARNESS.kind("write_stdin", {"session_id": 7, "chars": "q"})
<ToolKind.OTHER: 'other'>
>>> HARNESS.failed("exec_command", "Process exited with code 0\\nOutput:\\nok\\n") is None
True
>>> HARNESS.failed("exec_command", "Exit code: 2\\nWall time: 1 seconds\\nOutput:\\n")
True

Its hooks (:data:`CLI`): Claude Code's protocol (:mod:`~loopfuse.harness.json_hooks`), in
``$CODEX_HOME/hooks.json`` only.

Its transcripts (:data:`SESSIONS`): ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl``
(and ``archived_sessions``; ``CODEX_HOME`` defaults to ``~/.codex``), replayed as
Responses ``input`` items. A resumed session is appended to the same rollout file: one
run. Its ``response_item`` lines are the conversation; ``compacted`` lines (a copy of
the history) and the other ``event_msg`` lines are not; each response's ``token_count``
(or ``token_usage_record``) is its usage. A command's output is what the model saw,
without the two lines that differ on every call (``Chunk ID``, ``Wall time``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from loopfuse.errors import ConfigError
from loopfuse.harness.base import FileAccess, Harness, Tool, ToolKind
from loopfuse.harness.installers import HooksMap
from loopfuse.harness.json_hooks import JsonHooksCli
from loopfuse.harness.transcripts import (
    AgentRun,
    Lines,
    SessionFolder,
    SessionFormat,
    run_meta,
    text_or_none,
)

__all__ = ["CLI", "HARNESS", "SESSIONS", "CodexCli", "CodexSessions", "exit_code"]

_READ, _WAIT, _SHELL, _EDITOR, _COSTLY, _OTHER = (
    ToolKind.READ, ToolKind.WAIT, ToolKind.SHELL, ToolKind.EDITOR, ToolKind.COSTLY,
    ToolKind.OTHER,
)  # fmt: skip

# The header Codex writes before a command's output: an exit line within its first lines.
_EXIT: Final = re.compile(r"^(?:Process exited with code|Exit code:) (-?\d{1,4})\s*$", re.M)
_OUTPUT: Final = re.compile(r"^Output:", re.M)
_HEADER: Final = 512  # characters of an answer read for its header
_JSON_EXIT: Final = re.compile(r'"exit_code"\s*:\s*(-?\d{1,4})\b')


def exit_code(text: str) -> int | None:
    """The exit status Codex wrote in a command's answer, or ``None``.

    >>> exit_code("Chunk ID: a1\\nWall time: 0.1 seconds\\nProcess exited with code 1\\n")
    1
    >>> exit_code('{"output": "ok", "metadata": {"exit_code": 0, "duration_seconds": 1}}')
    0
    >>> exit_code("Process running with session ID 4\\nOutput:\\n") is None
    True
    """
    head = text[:_HEADER]
    if "xit" not in head and '"exit_code"' not in head:
        return None  # no exit line: most answers, settled by two substring searches
    output = _OUTPUT.search(head)  # the command's own words start there
    found = _EXIT.search(head, 0, output.start() if output is not None else len(head))
    if found is None and head.startswith("{"):
        found = _JSON_EXIT.search(head)
    return int(found.group(1)) if found is not None else None


def _answer_failed(text: str) -> bool | None:
    # A command that exited 0 may still print its failure (a reproduction script): only
    # a non-zero exit is the convention's word; the rest is left to the other evidence.
    code = exit_code(text)
    return True if code is not None and code != 0 else None


HARNESS: Final = Harness(
    "codex",
    "Codex CLI",
    tools=(
        Tool("exec_command", _SHELL, prose=("description",)),
        # Its hooks name the shell call "Bash" (tool_input {command}).
        Tool("Bash", _SHELL, prose=("description",)),
        Tool("shell", _SHELL, prose=("description",)),
        Tool("shell_command", _SHELL),
        Tool("local_shell", _SHELL),
        Tool("write_stdin", _OTHER, argument="chars", when_empty=_WAIT),
        Tool("apply_patch", _EDITOR, files=FileAccess.EDITS),
        Tool("read_file", _READ, files=FileAccess.READS),
        Tool("list_dir", _READ, files=FileAccess.READS),
        Tool("grep_files", _READ, files=FileAccess.READS),
        Tool("view_image", _READ),
        Tool("web_search", _COSTLY),
        Tool("update_plan", _OTHER),
    ),
    running=("Process running with session ID",),
    answer_failed=_answer_failed,
    failure_fields=("metadata.exit_code",),
)
"""Codex CLI's tools and conventions."""


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


class CodexCli(JsonHooksCli):
    """Codex's hooks: ``PreToolUse``, ``PostToolUse`` (``tool_response`` one string, no
    exit status: the detector judges), ``UserPromptSubmit``; its payloads carry a
    ``turn_id``.

    **A hook cannot end a Codex session**: ``continue: false`` with a deny makes it run
    the command, so it is never sent. Codex runs a new hook only once the user trusts it.
    """

    name = "codex"
    title = "Codex"
    harness = HARNESS
    before_events = ("PreToolUse",)
    after_events = ("PostToolUse",)
    turn_events = ("UserPromptSubmit",)
    can_end_session = False
    scopes = ("user",)  # Codex reads hooks from $CODEX_HOME/hooks.json only
    installer = HooksMap(
        ("PreToolUse", "PostToolUse", "UserPromptSubmit"),
        untargeted=frozenset({"UserPromptSubmit"}),
    )
    sessions = SESSIONS
    after_install = (
        "Codex runs a new hook only once you trust it: start `codex`, review its hooks and "
        "trust the loopfuse entries; for `codex exec` in automation that vets its hooks, "
        "add `--dangerously-bypass-hook-trust`."
    )

    def recognises(self, payload: dict[str, object]) -> bool:
        """Its payloads carry a ``turn_id``."""
        return "turn_id" in payload

    def probe_ids(self, session: str) -> dict[str, object]:
        """Its turn and call ids."""
        return {"turn_id": session, "tool_use_id": f"{session}-call"}

    def settings_path(self, project: bool, env: Mapping[str, str], cwd: Path) -> Path:
        """``$CODEX_HOME/hooks.json`` (default ``~/.codex``); no project scope."""
        if project:
            raise ConfigError(
                "Codex reads hooks from $CODEX_HOME/hooks.json only: run without --project"
            )
        base = env.get("CODEX_HOME")
        home = Path(env.get("HOME") or Path.home())
        return (Path(base) if base else home / ".codex") / "hooks.json"


CLI: Final = CodexCli()
"""Codex's hook protocol."""
