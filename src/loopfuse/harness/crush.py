"""Crush (Charm's terminal coding agent, ``@charmland/crush``): its tools and its hook
protocol (:data:`CLI`).

Nothing here was run: Crush's npm package only downloads its Go binary from GitHub at
install, which this project's machines cannot reach (docs/agent-clis-verified.md,
"Crush"). Every fact below is read from Crush's own source, files and commits named in
``tests/recorded/agent-clis/crush/README.md``:

- a hook is an entry ``{"name", "matcher", "command", "timeout"}`` (flat: no ``hooks``
  level, no ``type``) in the list ``hooks.PreToolUse`` of ``crush.json`` (the project's
  ``crush.json`` or ``.crush.json``, or the user's ``$CRUSH_GLOBAL_CONFIG/crush.json``,
  ``$XDG_CONFIG_HOME/crush/crush.json``, ``~/.config/crush/crush.json``); Crush runs it
  through its embedded POSIX shell with one JSON object on stdin,
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
  never their answers (:attr:`CrushCli.answers_reach_hook`; the hook then judges with
  :meth:`loopfuse.detector.LoopDetector.check`'s ``answered=False``). Crush's open pull
  request #3146 adds ``PostToolUse`` with ``tool_response: {"content", "is_error"}``:
  read here too, for a Crush that ships it (a session that sends answers is judged with
  them).

>>> HARNESS.kind("view", {"file_path": "a.go"}), HARNESS.kind("bash", {"command": "ls"})
(<ToolKind.READ: 'read'>, <ToolKind.SHELL: 'shell'>)
>>> HARNESS.still_running("job_output", "Status: running\\n\\nbuilding...")
True
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Final

from loopfuse.harness.agent_cli import (
    PROBE_TOOL,
    Action,
    AgentCli,
    HookEvent,
    HookPayloadError,
)
from loopfuse.harness.base import Harness, Tool, ToolKind

if TYPE_CHECKING:
    from pathlib import Path

    from loopfuse.harness.agent_cli import HookInstaller

__all__ = ["CLI", "HALT_EXIT", "HARNESS", "HOOK_NAME", "HOOK_TIMEOUT", "CrushCli"]

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

HOOK_NAME: Final = "loopfuse"
"""The ``name`` of the entry ``init`` writes: what Crush's UI shows for the hook."""
HOOK_TIMEOUT: Final = 10
"""Seconds Crush gives the hook (its default is 30): past them the call goes on."""
HALT_EXIT: Final = 49
"""Crush's exit status that halts the turn (``hooks.HaltExitCode``); not used: a halt is
written as JSON (see :meth:`CrushCli.render`)."""


class CrushCli(AgentCli):
    """Crush's hooks: ``PreToolUse`` only in every released Crush (``PostToolUse`` of
    its open pull request #3146 read too), answered with JSON on stdout and exit
    status 0.

    **No answer reaches the hook** (:attr:`answers_reach_hook`): a loop's note goes
    with the before-call answer, as ``context``, which Crush appends to the call's
    answer once it ran, so the model reads it right after the call; and a session that
    never sent an answer is judged without answers (a missing answer is not read as a
    repeated one). Crush reports no user prompt (no turn event): a "try again" goes on
    with the run before it.
    """

    name = "crush"
    title = "Crush"
    harness = HARNESS
    before_events = ("PreToolUse",)
    after_events = ("PostToolUse",)
    answers_reach_hook = False
    sessions_unread = (
        "Crush keeps them in a SQLite database whose schema is not established here: Crush "
        "cannot be installed on this project's machines"
    )

    @cached_property
    def installer(self) -> HookInstaller:  # type: ignore[override]
        """One flat entry ``{"name", "timeout", "command"}`` in ``hooks.PreToolUse``, no
        ``type``, no matcher (every tool), built on first use (``init`` and ``doctor``
        need it; the hook imports no installer)."""
        from loopfuse.harness.installers import HooksMap

        return HooksMap(
            ("PreToolUse",),
            comments=True,
            grouped=False,
            kind=(),
            extra=(("name", HOOK_NAME), ("timeout", HOOK_TIMEOUT)),
        )

    @property
    def events(self) -> tuple[str, ...]:
        """``PreToolUse`` only: what ``init`` installs (no released Crush fires
        ``PostToolUse``, and an event it does not know could be refused in its
        settings)."""
        return self.before_events

    def parse(self, payload: dict[str, object]) -> HookEvent:
        """The tool event in Crush's hook input ``payload`` (its event name read as Crush
        normalises it: any case, ``_`` ignored); :class:`HookPayloadError` for anything
        else (``PreCompact``, a field missing or of the wrong type).

        >>> e = CLI.parse({"event": "PreToolUse", "session_id": "s", "cwd": "/p",
        ...     "tool_name": "bash", "tool_input": {"command": "ls", "description": "list"}})
        >>> e.phase, e.tool_input
        ('before', {'command': 'ls'})
        """
        name = payload.get("event", payload.get("hook_event_name"))
        if not isinstance(name, str):
            raise HookPayloadError("the hook input has no event")
        event_name = _canonical(name)
        phase = self.phase_of(event_name)
        session = payload.get("session_id")
        if not isinstance(session, str) or not session:
            raise HookPayloadError("the hook input has no session_id")
        tool = payload.get("tool_name")
        if not isinstance(tool, str) or not tool:
            raise HookPayloadError("the hook input has no tool_name")
        arguments = self.harness.call(tool, payload.get("tool_input"))
        event = HookEvent(self.name, phase, event_name, session, tool, arguments)
        if phase == "before":
            return event
        answer, failed = _answer_of(payload)
        return event._replace(answer=answer, error=failed)

    def render(self, event: HookEvent, action: Action, reason: str) -> tuple[str, int]:
        """The hook's stdout and exit status for ``action`` on ``event``, as Crush reads
        them.

        Everything is JSON on stdout with exit status 0, the one form every Crush with
        hooks reads the same way (an exit status 49 is "no opinion" to a Crush older than
        its halt, so the call would run): ``"note"`` before a call is ``context``
        without a decision (the call runs as it would have, the permission prompt
        included, and the model reads the note appended to its answer; after the call
        the note was given already: nothing); ``"deny"`` is ``decision: "deny"`` with the
        ``reason``; ``"end"`` adds ``halt: true`` (the turn ends; a Crush without halt
        still refuses). After a call nothing is refused, but a halt still ends the turn.

        >>> e = CLI.parse({"event": "PreToolUse", "session_id": "s", "tool_name": "bash",
        ...     "tool_input": {"command": "ls"}})
        >>> CLI.render(e, "deny", "stop")
        ('{"decision": "deny", "reason": "stop"}', 0)
        >>> CLI.render(e, "note", "careful")
        ('{"context": "careful"}', 0)
        """
        if action == "allow":
            return "", 0
        if event.phase != "before":
            if action == "end":  # it ran: nothing to refuse; the turn can still end
                return json.dumps({"halt": True, "reason": reason}), 0
            return "", 0
        if action == "note":
            return json.dumps({"context": reason}), 0
        refusal: dict[str, object] = {"decision": "deny", "reason": reason}
        if action == "end":
            refusal["halt"] = True
        return json.dumps(refusal), 0

    def render_user_message(self, event: HookEvent, text: str) -> tuple[str, int]:
        """Allow the call and leave ``text`` for the user, not the model.

        Crush has no field for the user alone. A ``reason`` without a decision is the
        closest: the call goes on as it would have (no opinion), Crush sends the model a
        reason only with a refusal or a halt, and it keeps the reason in the call's hook
        metadata (``HookInfo.reason``), which is what its UI shows of the hooks that ran.
        """
        del event
        return json.dumps({"reason": text}), 0

    def probe_event(self, session: str) -> dict[str, object]:
        """A ``PreToolUse`` input of Crush's shape, for ``loopfuse doctor``."""
        return {
            "event": "PreToolUse",
            "session_id": session,
            "cwd": os.getcwd(),
            "tool_name": PROBE_TOOL,
            "tool_input": {"command": "loopfuse doctor"},
        }

    def settings_path(self, project: bool, env: Mapping[str, str], cwd: Path) -> Path:
        """The ``crush.json`` a hook goes into, as Crush finds it: the project's
        (``crush.json``, or the ``.crush.json`` already there when there is no
        ``crush.json``), or the user's (``$CRUSH_GLOBAL_CONFIG/crush.json``,
        ``$XDG_CONFIG_HOME/crush/crush.json``, ``~/.config/crush/crush.json``).

        >>> from pathlib import Path
        >>> CLI.settings_path(False, {"HOME": "/h"}, Path("/p")).as_posix()
        '/h/.config/crush/crush.json'
        >>> CLI.settings_path(True, {}, Path("/p")).as_posix()
        '/p/crush.json'
        """
        from pathlib import Path  # here: the hook never asks, and imports no pathlib

        if project:
            plain, hidden = cwd / "crush.json", cwd / ".crush.json"
            if not os.path.lexists(plain) and os.path.lexists(hidden):
                return hidden
            return plain
        folder = env.get("CRUSH_GLOBAL_CONFIG")
        if folder:
            return Path(folder) / "crush.json"
        config = env.get("XDG_CONFIG_HOME")
        if config:
            return Path(config) / "crush" / "crush.json"
        home = env.get("HOME") or str(Path.home())
        return Path(home) / ".config" / "crush" / "crush.json"


def _canonical(name: str) -> str:
    """Crush's event name as it normalises it: case-insensitive, ``_`` ignored."""
    plain = name.replace("_", "").lower()
    for event in (*CrushCli.before_events, *CrushCli.after_events):
        if plain == event.lower():
            return event
    return name


def _answer_of(payload: Mapping[str, object]) -> tuple[object, bool | None]:
    """A ``PostToolUse`` payload's answer and failure flag: ``tool_response`` (pull
    request #3146: ``{"content", "is_error"}``), else a bare ``tool_result``."""
    response = payload.get("tool_response", payload.get("tool_result"))
    if isinstance(response, dict):
        flag = response.get("is_error")
        content = response.get("content", response)
        return content, flag if isinstance(flag, bool) else None
    return response, None


CLI: Final = CrushCli()
"""Crush's hook protocol."""
