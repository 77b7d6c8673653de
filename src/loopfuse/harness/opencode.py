"""OpenCode (``opencode-ai``, the terminal coding agent of anomalyco/opencode): its tools,
how its answers fail, and how ``loopfuse hook`` guards it through a plugin.

Facts observed with OpenCode 1.18.33 (docs/agent-clis-verified.md, "OpenCode"):

- its tools: ``bash`` runs a command line (``command``, ``timeout``, ``workdir``; a
  model's ``description`` beside them is prose); ``read``, ``glob``, ``grep``, ``list``
  and ``lsp`` read; ``edit``, ``write``, ``apply_patch`` (``patch``, ``multiedit`` in
  other releases) are its editors; ``webfetch``, ``websearch`` and ``codesearch`` read the
  web; ``task`` starts a subagent (a session of its own), ``todowrite``, ``todoread``,
  ``question``, ``skill``, ``plan_exit`` the rest;
- a ``bash`` answer is the command's output as it came (``(no output)`` when it printed
  nothing), its exit status in the call's ``metadata.exit``: a command that exits
  non-zero is a call that *completed*; a long output is cut and starts ``...output
  truncated...`` and ``Full output saved to: <a new file each call>`` (volatile);
- a tool that fails (``read`` of a missing file: ``File not found: ...``) *throws*: the
  call's part ends with ``state.status: "error"`` and its ``error``, which the model
  reads as the call's answer;
- there are no hook commands: plugins (JavaScript modules in ``plugins/`` of the user's
  or a project's OpenCode folder) get ``tool.execute.before`` and
  ``tool.execute.after``; the latter **only for a call whose tool returned**: a failed
  call has none. loopfuse's plugin (``opencode_plugin.js`` beside this module) runs
  ``loopfuse hook --agent opencode`` with one JSON event on stdin (:func:`parse` reads
  it) and acts on its answer (:func:`render`): ``throw new Error(reason)`` refuses the
  call (the model's answer is exactly the reason), text appended to ``output.output``
  after a call is read by the model, ``client.session.abort()`` ends the session. The
  plugin reads a failed call from the event OpenCode publishes when the call's part
  ends in ``"error"`` (``tool.execute.error``, loopfuse's name), and the user's prompt
  from ``chat.message`` (a new run).

>>> HARNESS.kind("bash", {"command": "ls"}), HARNESS.kind("read", {"filePath": "a"})
(<ToolKind.SHELL: 'shell'>, <ToolKind.READ: 'read'>)
>>> HARNESS.call("bash", {"command": "ls", "description": "List files"})
{'command': 'ls'}
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Final

from loopfuse.harness.agent_cli import (
    PROBE_TOOL,
    Action,
    AgentCli,
    HookEvent,
    HookPayloadError,
    NotAUserPrompt,
    reader_names,
)
from loopfuse.harness.base import Harness, Tool, ToolKind

if TYPE_CHECKING:
    from pathlib import Path

    from loopfuse.harness.installers import WholeFile

__all__ = [
    "CLI",
    "HARNESS",
    "PLUGIN_FILE",
    "OpenCode",
    "stored_answer",
]

_READ, _SHELL, _EDITOR, _COSTLY, _OTHER = (
    ToolKind.READ, ToolKind.SHELL, ToolKind.EDITOR, ToolKind.COSTLY, ToolKind.OTHER,
)  # fmt: skip

# The path of a cut output's full text: a new file at every call, whatever the command did.
_VOLATILE: Final = re.compile(r"^Full output saved to: .*$\n?", re.M)

HARNESS: Final = Harness(
    "opencode",
    "OpenCode",
    tools=(
        Tool("bash", _SHELL, prose=("description",)),
        Tool("read", _READ),
        Tool("glob", _READ),
        Tool("grep", _READ),
        Tool("list", _READ),
        Tool("lsp", _READ),
        Tool("skill", _READ),
        Tool("edit", _EDITOR),
        Tool("multiedit", _EDITOR),
        Tool("write", _EDITOR),
        Tool("patch", _EDITOR),
        Tool("apply_patch", _EDITOR),
        Tool("webfetch", _COSTLY),
        Tool("websearch", _COSTLY),
        Tool("codesearch", _COSTLY),
        Tool("task", _OTHER),
        Tool("todowrite", _OTHER),
        Tool("todoread", _READ),
        Tool("question", _OTHER),
        Tool("plan_exit", _OTHER),
    ),
    failure_fields=("status", "exit"),
    volatile=_VOLATILE,
)
"""OpenCode's tools and conventions."""


def failed(tool: str, code: object) -> bool | None:
    """Whether a call of ``tool`` whose tool returned failed, by its exit status ``code``
    (``metadata.exit``): a command failed when it exited non-zero; one without an exit
    status (cut at its timeout, aborted) is not known; any other tool succeeded.

    >>> failed("bash", 2), failed("bash", 0), failed("bash", None), failed("grep", None)
    (True, False, None, False)
    """
    if type(code) is int:
        return code != 0
    return None if tool == "bash" else False


def stored_answer(tool: str, state: Mapping[str, object]) -> tuple[str, bool | None] | None:
    """The answer of a call of ``tool`` as OpenCode stores it (a ``tool`` part's
    ``state``, in its database and in ``opencode export``): what the model read, without
    its volatile lines, and whether it failed (:func:`failed`; ``status: "error"``: its
    tool threw); ``None`` for a call that has no answer yet.

    >>> stored_answer("bash", {"status": "completed", "output": "x", "metadata": {"exit": 1}})
    ('x', True)
    >>> stored_answer("read", {"status": "error", "error": "File not found: a"})
    ('File not found: a', True)
    """
    status = state.get("status")
    if status == "error":
        error = state.get("error")
        return (error if isinstance(error, str) else ""), True
    if status != "completed":
        return None
    output = state.get("output")
    metadata = state.get("metadata")
    code = metadata.get("exit") if isinstance(metadata, dict) else None
    text = HARNESS.without_volatile(output) if isinstance(output, str) else ""
    return text, failed(tool, code)


PLUGIN_FILE: Final = "loopfuse.js"
"""The name of loopfuse's plugin in OpenCode's ``plugins`` folder."""

BEFORE: Final = "tool.execute.before"
AFTER: Final = "tool.execute.after"
FAILED: Final = "tool.execute.error"
"""loopfuse's name for a call whose tool failed (OpenCode has no hook for it: the plugin
reads it from the call's part, see the module docstring)."""
PROMPT: Final = "chat.message"

SDK_INSTALL: Final = (
    "OpenCode installs its plugin SDK (@opencode-ai/plugin, from the npm registry) into the "
    "folder that holds plugins/ at its next start, unless that folder has it already: once, "
    "a start some seconds slower. Offline, every start waits for that install to fail (over "
    "a minute). loopfuse's plugin itself needs nothing of it."
)
"""What ``loopfuse init`` tells the user once the plugin is written."""


class OpenCode(AgentCli):
    """OpenCode as ``loopfuse hook``, ``init`` and ``doctor`` see it: the events of
    loopfuse's plugin (``opencode_plugin.js``), its answers, and where ``init`` writes it.

    >>> event = CLI.parse({"hook_event_name": "tool.execute.after", "sessionID": "ses_1",
    ...     "callID": "call_1", "tool": "bash", "args": {"command": "make"},
    ...     "output": "make: *** No rule\\n", "metadata": {"exit": 2}})
    >>> event.phase, event.error, event.exit_code
    ('after', True, 2)
    >>> CLI.render(event, "note", "[loopfuse] a loop")
    ('{"action": "note", "reason": "[loopfuse] a loop"}', 0)
    """

    name = "opencode"
    title = "OpenCode"
    harness = HARNESS
    before_events = (BEFORE,)
    after_events = (AFTER, FAILED)
    turn_events = (PROMPT,)
    after_install = SDK_INSTALL

    sessions_module = "_opencode_sessions"

    @cached_property
    def installer(self) -> WholeFile:  # type: ignore[override]  # read on first use
        """The plugin file, written whole from the template (package data); read on
        first use (a hook never needs it)."""
        from importlib import resources

        from loopfuse.harness.installers import WholeFile

        template = resources.files("loopfuse.harness").joinpath("opencode_plugin.js")
        return WholeFile(template.read_text(encoding="utf-8"), self.events)

    def parse(self, payload: dict[str, object]) -> HookEvent:
        """Read one event of loopfuse's plugin: ``{"hook_event_name", "sessionID",
        "callID", "tool", "args"}`` before a call; after it also ``output`` and
        ``metadata.exit`` (a ``bash`` call's exit status) or, for a call whose tool
        failed, ``error``; for the user's prompt ``{"hook_event_name": "chat.message",
        "sessionID", "parts": [{"type", "synthetic"}]}`` (:class:`NotAUserPrompt` when
        every part is OpenCode's own making)."""
        event_name = payload.get("hook_event_name")
        if not isinstance(event_name, str):
            raise HookPayloadError("the hook input has no hook_event_name")
        phase = self.phase_of(event_name)
        session = payload.get("sessionID")
        if not isinstance(session, str) or not session:
            raise HookPayloadError("the hook input has no sessionID")
        if phase == "turn":
            parts = payload.get("parts")
            if isinstance(parts, list) and not any(
                isinstance(part, dict) and part.get("synthetic") is not True for part in parts
            ):
                raise NotAUserPrompt("a message OpenCode wrote itself")
            return HookEvent(self.name, phase, event_name, session, "", None)
        tool = payload.get("tool")
        if not isinstance(tool, str) or not tool:
            raise HookPayloadError("the hook input has no tool")
        call_id = payload.get("callID")
        event = HookEvent(
            self.name,
            phase,
            event_name,
            session,
            tool,
            HARNESS.call(tool, payload.get("args")),
            call_id if isinstance(call_id, str) and call_id else None,
        )
        if phase == "before":
            return event
        if event_name == FAILED:
            error = payload.get("error")
            return event._replace(answer=error if isinstance(error, str) else "", error=True)
        output = payload.get("output")
        answer = HARNESS.without_volatile(output) if isinstance(output, str) else output
        metadata = payload.get("metadata")
        code = metadata.get("exit") if isinstance(metadata, dict) else None
        exit_code = code if type(code) is int else None
        return event._replace(answer=answer, error=failed(tool, code), exit_code=exit_code)

    def render(self, event: HookEvent, action: Action, reason: str) -> tuple[str, int]:
        """The plugin's answer, on stdout (exit status 0 always: the plugin lets the call
        run on anything else): nothing to allow; ``{"action": "note", "reason"}`` after a
        call (appended to its answer); ``{"action": "deny" | "end", "reason"}`` before
        one (the reason is the call's answer; ``end`` also aborts the session)."""
        if action == "allow" or event.phase in ("turn", "batch"):
            return "", 0
        if action == "note":
            if event.phase != "after":
                return "", 0
            return json.dumps({"action": "note", "reason": reason}), 0
        if event.phase != "before":
            return "", 0  # a call that ran cannot be refused
        return json.dumps({"action": action, "reason": reason}), 0

    def render_user_message(self, event: HookEvent, text: str) -> tuple[str, int]:
        """Allow, and show ``text`` to the user: the plugin puts it in a toast of the
        terminal UI and in OpenCode's log, and on stderr under ``opencode run``."""
        del event
        return json.dumps({"action": "allow", "user": text}), 0

    def probe_event(self, session: str) -> dict[str, object]:
        """A before-call event of the plugin's shape, for ``loopfuse doctor``."""
        return {
            "loopfuse": 1,
            "hook_event_name": BEFORE,
            "sessionID": session,
            "callID": "loopfuse-doctor",
            "tool": PROBE_TOOL,
            "args": {},
        }

    def settings_path(self, project: bool, env: Mapping[str, str], cwd: Path) -> Path:
        """The plugin file: ``.opencode/plugins/loopfuse.js`` in the project, else in the
        user's OpenCode folder (``$XDG_CONFIG_HOME/opencode``, default
        ``~/.config/opencode``).

        >>> from pathlib import Path
        >>> CLI.settings_path(False, {"HOME": "/h"}, Path("/p")).as_posix()
        '/h/.config/opencode/plugins/loopfuse.js'
        >>> CLI.settings_path(True, {}, Path("/p")).as_posix()
        '/p/.opencode/plugins/loopfuse.js'
        """
        from pathlib import Path  # here: the hook never asks, and imports no pathlib

        if project:
            return cwd / ".opencode" / "plugins" / PLUGIN_FILE
        config = env.get("XDG_CONFIG_HOME")  # as OpenCode reads it (xdg-basedir)
        base = Path(config) if config else Path(env.get("HOME") or Path.home()) / ".config"
        return base / "opencode" / "plugins" / PLUGIN_FILE


CLI: Final = OpenCode()
"""OpenCode, for :func:`loopfuse.harness.agent_cli.agent_cli`."""


__getattr__ = reader_names("_opencode_sessions", ["OpenCodeSessions", "SESSIONS"], __name__)
"""Its transcript reader's names, read there on first use
(:func:`~loopfuse.harness.agent_cli.reader_names`)."""
