"""Crush (Charm's terminal coding agent, ``@charmland/crush``): its tools, its hook
protocol, and how its settings file takes a hook.

Nothing here was run: Crush's npm package only downloads its Go binary from GitHub at
install, which this project's machines cannot reach (docs/agent-clis-verified.md,
"Crush"). Every fact below is read from Crush's own source, files and commits named in
``tests/recorded/agent-clis/crush/README.md``:

- a hook is an entry ``{"name", "matcher", "command", "timeout"}`` (flat: no ``hooks``
  level, no ``type``; written by :mod:`loopfuse.cli.crush_settings`) in the list
  ``hooks.PreToolUse`` of ``crush.json`` (the project's, or
  ``$XDG_CONFIG_HOME/crush/crush.json``, ``~/.config/crush/crush.json``); Crush runs
  it through its embedded POSIX shell with one JSON object on stdin,
  ``{"event", "session_id", "cwd", "tool_name", "tool_input"}`` (no ``hook_event_name``,
  no call id) and ``CRUSH_EVENT``, ``CRUSH_SESSION_ID``, ``CRUSH_TOOL_NAME`` … set;
- exit 0: stdout is read as ``{"decision": "allow"|"deny", "reason", "halt", "context"}``
  (or Claude Code's ``hookSpecificOutput``); exit 2 refuses with stderr as the reason;
  exit 49 halts the turn; any other exit, a timeout, or output that is not JSON is "no
  opinion": the call goes on;
- a refusal reaches the model as the call's failed answer ``Tool call blocked by hook.
  Reason: R``; ``halt: true`` ends the turn (``Turn halted by hook. Reason: R``); a
  ``context`` from an allowed call is appended to that call's answer after it ran: the
  model reads it right after the call, a note;
- **no released Crush (up to 0.96.1) runs a hook after a call**: the guard sees the calls,
  never their answers (:meth:`loopfuse.detector.LoopDetector.check`'s
  ``answered=False``). Crush's open pull request #3146 adds ``PostToolUse`` with
  ``tool_response: {"content", "is_error"}``: read here too, for a Crush that ships it.

>>> HARNESS.kind("view", {"file_path": "a.go"}), HARNESS.kind("bash", {"command": "ls"})
(<ToolKind.READ: 'read'>, <ToolKind.SHELL: 'shell'>)
>>> HARNESS.still_running("job_output", "Status: running\\n\\nbuilding...")
True
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final, Literal, NamedTuple

from loopfuse.harness.base import Harness, Tool, ToolKind

__all__ = [
    "AFTER_EVENTS",
    "BEFORE_EVENTS",
    "HARNESS",
    "HOOK_NAME",
    "CrushEvent",
    "CrushPayloadError",
    "answer",
    "probe_payload",
    "read_payload",
    "settings_path",
    "user_message",
]

_READ, _WAIT, _SHELL, _EDITOR, _COSTLY, _OTHER = (
    ToolKind.READ, ToolKind.WAIT, ToolKind.SHELL, ToolKind.EDITOR, ToolKind.COSTLY,
    ToolKind.OTHER,
)  # fmt: skip

HARNESS: Final = Harness(
    "crush",
    "Crush",
    tools=(
        Tool("bash", _SHELL, prose=("description",)),
        Tool("job_output", _WAIT),  # a background shell's output: "Status: running" …
        Tool("job_kill", _OTHER),
        Tool("view", _READ),
        Tool("ls", _READ),
        Tool("glob", _READ),
        Tool("grep", _READ),
        Tool("lsp_diagnostics", _READ),
        Tool("lsp_references", _READ),
        Tool("edit", _EDITOR),
        Tool("multiedit", _EDITOR),
        Tool("write", _EDITOR),
        Tool("fetch", _COSTLY),
        Tool("agentic_fetch", _COSTLY),
        Tool("web_fetch", _COSTLY),
        Tool("web_search", _COSTLY),
        Tool("sourcegraph", _COSTLY),
        Tool("download", _OTHER),
        Tool("agent", _OTHER),
        Tool("todos", _OTHER),
    ),
    running=("Status: running",),
    failure_fields=("is_error",),
)
"""Crush's tools (``internal/agent/tools``) and conventions."""

BEFORE_EVENTS: Final = ("PreToolUse",)
AFTER_EVENTS: Final = ("PostToolUse",)
"""``PostToolUse``: not in any released Crush (pull request #3146), read when it comes."""

HOOK_NAME: Final = "loopfuse"
"""The ``name`` of the entry ``init`` writes: what Crush's TUI shows for the hook."""
HOOK_TIMEOUT: Final = 10
"""Seconds Crush gives the hook (its default is 30): past them the call goes on."""
HALT_EXIT: Final = 49
"""Crush's exit status that halts the turn (``hooks.HaltExitCode``)."""


class CrushPayloadError(ValueError):
    """What Crush sent is not a tool event of its hooks."""


class CrushEvent(NamedTuple):
    """One Crush hook input, read. ``answer`` and ``error`` only after a call."""

    phase: Literal["before", "after"]
    event_name: str
    session: str
    tool_name: str
    tool_input: object
    answer: object = None
    error: bool | None = None


def _canonical(name: str) -> str:
    """Crush's event name as it normalises it: case-insensitive, ``_`` ignored."""
    plain = name.replace("_", "").lower()
    for event in (*BEFORE_EVENTS, *AFTER_EVENTS):
        if plain == event.lower():
            return event
    return name


def read_payload(payload: object) -> CrushEvent:
    """The tool event in Crush's hook input ``payload``.

    Raises :class:`CrushPayloadError` for anything else (``PreCompact``, a payload of
    another CLI, a field of the wrong type).

    >>> e = read_payload({"event": "PreToolUse", "session_id": "s", "cwd": "/p",
    ...     "tool_name": "bash", "tool_input": {"command": "ls", "description": "list"}})
    >>> e.phase, e.tool_input
    ('before', {'command': 'ls'})
    """
    if not isinstance(payload, dict):
        raise CrushPayloadError("the hook input is not a JSON object")
    name = payload.get("event", payload.get("hook_event_name"))
    if not isinstance(name, str):
        raise CrushPayloadError("the hook input has no event")
    event = _canonical(name)
    if event in BEFORE_EVENTS:
        phase: Literal["before", "after"] = "before"
    elif event in AFTER_EVENTS:
        phase = "after"
    else:
        raise CrushPayloadError(f"crush event {name!r} is not a tool event")
    session = payload.get("session_id")
    if not isinstance(session, str) or not session:
        raise CrushPayloadError("the hook input has no session_id")
    tool = payload.get("tool_name")
    if not isinstance(tool, str) or not tool:
        raise CrushPayloadError("the hook input has no tool_name")
    arguments = HARNESS.call(tool, payload.get("tool_input"))
    found = CrushEvent(phase, event, session, tool, arguments)
    if phase == "before":
        return found
    answer_text, failed = _answer_of(payload)
    return found._replace(answer=answer_text, error=failed)


def _answer_of(payload: Mapping[str, object]) -> tuple[object, bool | None]:
    """A ``PostToolUse`` payload's answer and failure flag: ``tool_response`` (pull
    request #3146: ``{"content", "is_error"}``), else a bare ``tool_result``."""
    response = payload.get("tool_response", payload.get("tool_result"))
    if isinstance(response, dict):
        flag = response.get("is_error")
        content = response.get("content", response)
        return content, flag if isinstance(flag, bool) else None
    return response, None


Action = Literal["allow", "note", "deny", "end"]


def answer(event: CrushEvent, action: Action, reason: str) -> tuple[str, int]:
    """The hook's stdout and exit status for ``action`` on ``event``, as Crush reads it.

    Everything is JSON on stdout with exit status 0, the one form every Crush with hooks
    reads the same way (an exit status 49 is "no opinion" to a Crush older than its
    halt, so the call would run): ``"note"`` is ``context`` without a decision (the call
    runs as it would have, the permission prompt included, and the model reads the note
    appended to its answer); ``"deny"`` is ``decision: "deny"`` with the ``reason``;
    ``"end"`` adds ``halt: true`` (the turn ends; a Crush without halt still refuses).
    After a call (``PostToolUse``), a note is ``context`` too and an end a ``halt``.

    >>> e = read_payload({"event": "PreToolUse", "session_id": "s", "tool_name": "bash",
    ...     "tool_input": {"command": "ls"}})
    >>> answer(e, "deny", "stop")
    ('{"decision": "deny", "reason": "stop"}', 0)
    >>> answer(e, "note", "careful")
    ('{"context": "careful"}', 0)
    """
    if action == "allow":
        return "", 0
    if action == "note":
        return json.dumps({"context": reason}), 0
    if event.phase == "after":  # it ran: nothing to refuse; the turn can still end
        if action == "end":
            return json.dumps({"halt": True, "reason": reason}), 0
        return "", 0
    refusal: dict[str, object] = {"decision": "deny", "reason": reason}
    if action == "end":
        refusal["halt"] = True
    return json.dumps(refusal), 0


def user_message(text: str) -> tuple[str, int]:
    """Allow the call and leave ``text`` for the user, not the model.

    Crush has no field for the user alone. A ``reason`` without a decision is the
    closest: the call goes on as it would have (no opinion), Crush sends the model a
    reason only with a refusal or a halt, and it keeps the reason in the call's hook
    metadata (``HookInfo.reason``), which is what its UI shows of the hooks that ran.

    >>> user_message("settings refused")
    ('{"reason": "settings refused"}', 0)
    """
    return json.dumps({"reason": text}), 0


def probe_payload(session: str, cwd: str = "/") -> dict[str, object]:
    """A ``PreToolUse`` input of Crush's shape, for ``loopfuse doctor``."""
    return {
        "event": "PreToolUse",
        "session_id": session,
        "cwd": cwd,
        "tool_name": "bash",
        "tool_input": {"command": "true", "description": "loopfuse doctor"},
    }


def settings_path(project: bool, env: Mapping[str, str], cwd: Path) -> Path:
    """The ``crush.json`` a hook goes into: the project's (``crush.json``, or the
    ``.crush.json`` already there when there is no ``crush.json``), or the user's
    (``$XDG_CONFIG_HOME/crush/crush.json``, ``~/.config/crush/crush.json``).

    >>> settings_path(False, {"HOME": "/h"}, Path("/p")).as_posix()
    '/h/.config/crush/crush.json'
    >>> settings_path(True, {}, Path("/p")).as_posix()
    '/p/crush.json'
    """
    if project:
        plain, hidden = cwd / "crush.json", cwd / ".crush.json"
        if not os.path.lexists(plain) and os.path.lexists(hidden):
            return hidden
        return plain
    config = env.get("XDG_CONFIG_HOME")
    if config:
        return Path(config) / "crush" / "crush.json"
    home = env.get("HOME") or str(Path.home())
    return Path(home) / ".config" / "crush" / "crush.json"
