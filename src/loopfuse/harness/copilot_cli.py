"""GitHub Copilot CLI (``@github/copilot``, GitHub's terminal coding agent): its tools, how
its answers fail, and how its hooks speak.

Facts observed with Copilot CLI 1.0.102 (docs/agent-clis-verified.md, "GitHub Copilot
CLI"; its payloads in tests/recorded/agent-clis/copilot/) and in real sessions of
1.0.64 to 1.0.68:

- ``bash {command, description, shellId, mode, detach, initial_wait}`` runs a command
  line (``description`` is the model's prose about it). A command still running after its
  ``initial_wait`` (or started with ``mode: "async"``) answers ``<command with shellId: N
  is still running after S seconds. …>``; the model then reads it with ``read_bash
  {shellId, delay}``: a **wait**, whose answer says the same while the command runs, and
  ``stop_bash`` stops it; ``list_bash`` lists the shells (reads).
- ``view`` reads a file or folder; ``grep``, ``glob`` search; ``create`` and ``edit``
  (``path``, ``old_str``, ``new_str``) are its editors; ``task`` starts a sub-agent,
  ``read_agent`` waits on one (or reads what it did), ``list_agents`` lists them,
  ``write_agent`` talks to one; ``sql`` keeps the session's own tables (its todos),
  ``session_store_sql`` reads past sessions (read-only);
  ``fetch_copilot_cli_documentation`` reads the CLI's own bundled documentation.
- **Every shell answer ends** ``<shellId: N completed with exit code C>``, and ``N``
  counts up with every call of the session: two identical calls with identical output
  never answer the same text. That number is volatile (:data:`VOLATILE`, removed before
  answers are compared, by the hook and by ``scan``); the exit code is kept, and a
  non-zero one is a failure (:func:`exit_code`). A command that exits non-zero is still a
  *success* to Copilot (``resultType: "success"``, ``success: true``): only the text says
  it failed. Exit 0 is left to the other evidence (a reproduction script exits 0 and
  prints the bug).
- Any other tool's ``success`` (its transcript) or ``resultType`` (its hooks) says
  whether the call failed (:func:`call_failed`): ``view`` of a missing path is a
  failure (``postToolUseFailure``, ``error: "Path does not exist"``).

>>> HARNESS.kind("read_bash", {"shellId": "0", "delay": 5})
<ToolKind.WAIT: 'wait'>
>>> HARNESS.without_volatile("hi\\n<shellId: 7 completed with exit code 0>")
'hi\\n<completed with exit code 0>'
>>> HARNESS.failed("bash", "boom\\n<shellId: 3 completed with exit code 2>")
True
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Final, NamedTuple

from loopfuse.harness.agent_cli import (
    PROBE_TOOL,
    Action,
    AgentCli,
    HookEvent,
    HookPayloadError,
    reader_names,
)
from loopfuse.harness.base import Harness, Tool, ToolKind

if TYPE_CHECKING:
    from pathlib import Path

    from loopfuse.harness.agent_cli import HookInstaller

__all__ = [
    "AFTER_EVENTS",
    "BEFORE_EVENTS",
    "CLI",
    "HARNESS",
    "SHELL_TOOLS",
    "TURN_EVENTS",
    "VOLATILE",
    "HookInput",
    "call_failed",
    "exit_code",
    "hook_answer",
    "read_hook_input",
    "sent_by_copilot",
]

_READ, _WAIT, _SHELL, _EDITOR, _OTHER = (
    ToolKind.READ, ToolKind.WAIT, ToolKind.SHELL, ToolKind.EDITOR, ToolKind.OTHER,
)  # fmt: skip

SHELL_TOOLS: Final = frozenset({"bash", "read_bash"})
"""The tools whose answers end with the shell's exit line: their ``success`` says only
that the tool ran, not that the command succeeded."""

# The exit line a shell answer ends with; within its last characters.
_EXIT: Final = re.compile(r"<(?:shellId: [^\s>]{1,64} )?completed with exit code (-?\d{1,4})>\s*\Z")
_TAIL: Final = 256

VOLATILE: Final = re.compile(
    r"(?<=<)shellId: \d{1,9} (?=completed with exit code -?\d{1,4}>)"
    r"|(?<=<command with )(?:shellId|id): \d{1,9} (?=is still running|stopped>)"
    r"|(?<=<command started in background with )shellId: \d{1,9}(?=>)"
    r'|\n\nTool "[^"\n]{1,200}" succeeded\. Additional guidance from postToolUse hooks:\n[\s\S]*\Z'
)
"""What in a Copilot CLI answer changes whatever the tool did: the session's shell
number in its own lines of a shell answer (``<shellId: N completed with exit code C>``,
``<command with shellId: N is still running …>``, ``<command started in background with
shellId: N>``, ``<command with id: N stopped>``), new on every call (a ``shellId`` the
model chose itself, a word, is part of its call and stays); and the words of
``postToolUse`` hooks it appends to an answer (``Tool "bash" succeeded. Additional
guidance from postToolUse hooks:`` and theirs), which its session files keep as part of
the answer, and which a hook never sees in the answer it is given."""


def exit_code(text: str) -> int | None:
    """The exit status a shell answer's last line names (with its shell number or
    without it: :data:`VOLATILE`), or ``None``.

    >>> exit_code("ok\\n<shellId: 0 completed with exit code 0>"), exit_code("hi") is None
    (0, True)
    >>> exit_code("x\\n<completed with exit code 127>")  # without its volatile number
    127
    """
    tail = text[-_TAIL:]
    if "completed with exit code" not in tail:
        return None  # most answers: settled by one substring search
    found = _EXIT.search(tail)
    return int(found.group(1)) if found is not None else None


def _answer_failed(text: str) -> bool | None:
    # A non-zero exit is the convention's word; exit 0 is left to the other evidence.
    code = exit_code(text)
    return True if code is not None and code != 0 else None


def call_failed(tool: str, succeeded: bool | None, text: object) -> tuple[bool | None, int | None]:
    """Whether one answer of ``tool`` failed, and its exit status when it names one.

    ``succeeded`` is what Copilot said of the call (its hooks' ``resultType``, its
    transcript's ``success``; ``None``: it said nothing). A failure it reports is a
    failure; a shell's "success" is only that the command ran, so its exit line decides
    (non-zero: failed; zero: ``None``, left to the other evidence); any other tool's
    success is a success.

    >>> call_failed("bash", True, "x\\n<shellId: 1 completed with exit code 1>")
    (True, 1)
    >>> call_failed("bash", True, "x\\n<shellId: 1 completed with exit code 0>")
    (None, 0)
    >>> call_failed("view", True, "1. # notes"), call_failed("view", False, "")
    ((False, None), (True, None))
    """
    if type(text) is str and tool in SHELL_TOOLS:
        code = exit_code(HARNESS.without_volatile(text))
    else:
        code = None
    if succeeded is False:
        return True, code
    if tool in SHELL_TOOLS:
        return (True if code else None), code
    return (False if succeeded else None), code


HARNESS: Final = Harness(
    "copilot_cli",
    "Copilot CLI",
    tools=(
        Tool("bash", _SHELL, prose=("description",)),
        Tool("read_bash", _WAIT),
        Tool("stop_bash", _OTHER),
        Tool("list_bash", _READ),
        Tool("view", _READ),
        Tool("grep", _READ),
        Tool("glob", _READ),
        Tool("create", _EDITOR),
        Tool("edit", _EDITOR),
        Tool("fetch_copilot_cli_documentation", _READ),
        Tool("task", _OTHER),
        Tool("read_agent", _WAIT),
        Tool("list_agents", _READ),
        Tool("write_agent", _OTHER),
        Tool("ask_user", _OTHER),
        Tool("skill", _OTHER),
        Tool("sql", _OTHER, prose=("description",)),
        Tool("session_store_sql", _READ, prose=("description",)),
    ),
    running=("is still running after",),
    answer_failed=_answer_failed,
    failure_fields=("success", "toolResult.resultType"),
    volatile=VOLATILE,
)
"""Copilot CLI's tools and conventions."""


# --- its hooks ------------------------------------------------------------------------------

BEFORE_EVENTS: Final = ("preToolUse",)
AFTER_EVENTS: Final = ("postToolUse", "postToolUseFailure")
TURN_EVENTS: Final = ("userPromptSubmitted",)


class HookInput(NamedTuple):
    """One of Copilot CLI's hook inputs, read: the ``event`` it came for (one of
    :data:`BEFORE_EVENTS`, :data:`AFTER_EVENTS`, :data:`TURN_EVENTS`), the session, the
    call (without its prose), and after it the answer (without its volatile shell
    number), whether it failed and its exit status."""

    event: str
    session: str
    tool_name: str = ""
    tool_input: object = None
    answer: object = None
    error: bool | None = None
    exit_code: int | None = None


def read_hook_input(payload: object) -> HookInput:
    """Read one hook input of Copilot CLI's own (camelCase) events.

    Those inputs carry no event name, and one command serves every event (so that
    ``init``, ``doctor`` and ``--remove`` find one command in every entry, and an entry a
    user copies cannot name the wrong event): the event is told by the input's shape,
    each event having a key of its own (observed with 1.0.102, in
    tests/recorded/agent-clis/copilot/): ``toolResult`` after a call that succeeded,
    ``error`` after one that failed, ``prompt`` for the user's prompt; a tool's input
    with neither is the one before the call. The PascalCase events (Claude Code's names,
    ``hook_event_name``, snake_case fields, tools renamed ``Bash``, ``Read``) are not
    read: they name the tools otherwise than the session files and the other events do.

    Raises :class:`ValueError` (with the reason) for anything else.

    >>> read = read_hook_input({"sessionId": "s", "toolName": "bash",
    ...     "toolArgs": {"command": "ls", "description": "List"}})
    >>> read.event, read.tool_name, read.tool_input
    ('preToolUse', 'bash', {'command': 'ls'})
    """
    if not isinstance(payload, dict):
        raise ValueError("the hook input is not a JSON object")
    if "hook_event_name" in payload:
        raise ValueError(
            "a PascalCase event (hook_event_name): loopfuse reads Copilot CLI's own "
            "camelCase events, which `loopfuse init --agent copilot` installs"
        )
    session = payload.get("sessionId")
    if not isinstance(session, str) or not session:
        raise ValueError("the hook input has no sessionId")
    tool = payload.get("toolName")
    if tool is None and "prompt" in payload:
        return HookInput(TURN_EVENTS[0], session)
    if not isinstance(tool, str) or not tool:
        raise ValueError("the hook input is not a tool call's (no toolName)")
    arguments = HARNESS.call(tool, payload.get("toolArgs"))
    if "toolResult" in payload:
        result = payload["toolResult"]
        if isinstance(result, dict):
            kind = result.get("resultType")
            succeeded = kind == "success" if isinstance(kind, str) else None
            text = result.get("textResultForLlm")
        else:  # a bare string is a tool's whole result (the SDK's ToolResult)
            succeeded, text = None, result
        return _after(AFTER_EVENTS[0], session, tool, arguments, succeeded, text)
    if "error" in payload:
        error = payload["error"]
        text = error if isinstance(error, str) else json.dumps(error)
        return _after(AFTER_EVENTS[1], session, tool, arguments, False, text)
    return HookInput(BEFORE_EVENTS[0], session, tool, arguments)


def sent_by_copilot(payload: Mapping[str, object]) -> bool:
    """Whether a hook input in Claude Code's form (``hook_event_name``, ``session_id``,
    ``tool_name`` …) is Copilot CLI's: Copilot CLI also runs the hooks of a project's
    ``.claude/settings.json`` (and ``settings.local.json``), with its PascalCase events,
    whose inputs carry a ``timestamp`` (ISO text) and no ``transcript_path``, which
    Claude Code's always carry; its answers are in ``tool_result``, not Claude Code's
    ``tool_response``. Read as Claude Code's, every answer would be missing, and a poll
    whose output moves would look like the same call with the same (no) answer.

    >>> sent_by_copilot({"hook_event_name": "PreToolUse", "session_id": "s",
    ...     "timestamp": "2026-12-06T11:26:17.742Z", "cwd": "/w", "tool_name": "Bash"})
    True
    >>> sent_by_copilot({"hook_event_name": "PreToolUse", "session_id": "s",
    ...     "transcript_path": "/t.jsonl", "tool_name": "Bash", "tool_use_id": "t1"})
    False
    """
    if "transcript_path" in payload or "tool_use_id" in payload:
        return False
    result = payload.get("tool_result")
    if isinstance(result, dict) and "result_type" in result:
        return True
    return isinstance(payload.get("timestamp"), str)


def _after(
    event: str, session: str, tool: str, arguments: object, succeeded: bool | None, text: object
) -> HookInput:
    failed, code = call_failed(tool, succeeded, text)
    answer = HARNESS.without_volatile(text) if isinstance(text, str) else text
    return HookInput(event, session, tool, arguments, answer, failed, code)


def hook_answer(event: str, action: str, reason: str) -> str:
    """What a hook prints for ``action`` on ``event`` (its exit status is always 0).

    - a refusal (``"deny"``; ``"end"`` too, since no hook can end a Copilot CLI
      session: ``continue: false`` and ``interrupt: true`` were ignored by 1.0.102) is
      top-level ``permissionDecision: "deny"`` with the reason, which the model reads as
      the call's answer: ``Denied by preToolUse hook: <reason>`` (the Claude Code form,
      in ``hookSpecificOutput``, is ignored for the camelCase events: the call would run);
    - a note after a call is top-level ``additionalContext``, which Copilot appends to
      the call's answer (``postToolUse``) or adds as a message of its own
      (``postToolUseFailure``); ``hookSpecificOutput.additionalContext`` is ignored;
    - anything else prints nothing: the call goes on.

    >>> hook_answer("preToolUse", "deny", "stop")
    '{"permissionDecision": "deny", "permissionDecisionReason": "stop"}'
    >>> hook_answer("postToolUse", "note", "loop"), hook_answer("postToolUse", "deny", "x")
    ('{"additionalContext": "loop"}', '')
    """
    if action in ("deny", "end") and event in BEFORE_EVENTS:
        return json.dumps({"permissionDecision": "deny", "permissionDecisionReason": reason})
    if action == "note" and event in AFTER_EVENTS:
        return json.dumps({"additionalContext": reason})
    return ""


# --- loopfuse hook, init and doctor ----------------------------------------------------------


def _hooks_file() -> str:
    """``loopfuse.json``, the hooks file ``loopfuse init`` writes (Copilot CLI's own format:
    ``version`` 1, each event's list of command hooks, run with ``bash``)."""
    from loopfuse.harness.installers import COMMAND

    return (
        "{\n"
        '  "version": 1,\n'
        '  "hooks": {\n'
        + ",\n".join(
            f'    "{event}": [{{"type": "command", "bash": {COMMAND}, "timeoutSec": 30}}]'
            for event in (*BEFORE_EVENTS, *AFTER_EVENTS, *TURN_EVENTS)
        )
        + "\n  }\n}\n"
    )


class CopilotCli(AgentCli):
    """GitHub Copilot CLI's hooks: its own camelCase events (``preToolUse``,
    ``postToolUse``, ``postToolUseFailure``, ``userPromptSubmitted``), read by their
    input's shape (:func:`read_hook_input`), answered at the top level
    (:func:`hook_answer`).

    ``loopfuse init`` writes a hooks file of loopfuse's own, the same in both scopes:
    ``$COPILOT_HOME/hooks/loopfuse.json`` (default ``~/.copilot/hooks/``), which Copilot
    runs in every session, or ``.github/hooks/loopfuse.json`` with ``--project``, which
    it runs only in a folder the user trusts. **Any exit status but 0 refuses the call**
    (1.0.102: ``Denied by preToolUse hook … (hook errored)``), so the command it writes
    ends ``|| true``: a hook that cannot even start (loopfuse uninstalled, a broken
    Python) lets the call run, as the hook does whatever fails inside it. **A hook cannot
    end a Copilot CLI session** (``continue: false``, ``interrupt: true`` are ignored):
    ``--end-session`` is not written. A hook's words reach the user nowhere (no
    ``systemMessage``, stderr not shown): a settings error is in ``hook.log`` and
    ``loopfuse doctor``.
    """

    name = "copilot"
    title = "Copilot CLI"
    harness = HARNESS
    before_events = BEFORE_EVENTS
    after_events = AFTER_EVENTS
    turn_events = TURN_EVENTS
    can_end_session = False

    sessions_module = "_copilot_sessions"

    @cached_property
    def installer(self) -> HookInstaller:  # type: ignore[override]
        """``loopfuse.json`` (:func:`_hooks_file`), written whole, failing open; built on
        first use (``init`` and ``doctor`` need it; the hook imports no installer)."""
        from loopfuse.harness.installers import FailOpen, WholeFile

        return FailOpen(WholeFile(_hooks_file(), (*BEFORE_EVENTS, *AFTER_EVENTS, *TURN_EVENTS)))

    after_install = (
        "Copilot CLI runs a project's hooks (.github/hooks/) only in a folder you trust "
        "(it asks the first time it runs there); yours (~/.copilot/hooks/) everywhere."
    )

    def parse(self, payload: dict[str, object]) -> HookEvent:
        """The tool or prompt event in ``payload`` (:func:`read_hook_input`)."""
        try:
            read = read_hook_input(payload)
        except ValueError as exc:
            raise HookPayloadError(str(exc)) from None
        phase = self.phase_of(read.event)
        return HookEvent(
            self.name,
            phase,
            read.event,
            read.session,
            read.tool_name,
            read.tool_input,
            None,  # Copilot CLI gives a hook no id of the call
            read.answer,
            read.error,
            read.exit_code,
        )

    def render(self, event: HookEvent, action: Action, reason: str) -> tuple[str, int]:
        """:func:`hook_answer`, exit status 0 always."""
        return hook_answer(event.event_name, action, reason), 0

    def probe_event(self, session: str) -> dict[str, object]:
        """A ``preToolUse`` input of the test tool."""
        return {
            "sessionId": session,
            "timestamp": int(time.time() * 1000),
            "cwd": os.getcwd(),
            "toolName": PROBE_TOOL,
            "toolArgs": {"command": "loopfuse doctor"},
        }

    def settings_path(self, project: bool, env: Mapping[str, str], cwd: Path) -> Path:
        """``.github/hooks/loopfuse.json`` in the project, else in ``$COPILOT_HOME/hooks``
        (default ``~/.copilot/hooks``)."""
        from pathlib import Path  # here: the hook never asks, and imports no pathlib

        if project:
            return cwd / ".github" / "hooks" / "loopfuse.json"
        base = env.get("COPILOT_HOME")
        home = Path(base) if base else Path(env.get("HOME") or Path.home()) / ".copilot"
        return home / "hooks" / "loopfuse.json"


CLI: Final = CopilotCli()
"""Copilot CLI's hook protocol."""


__getattr__ = reader_names("_copilot_sessions", ["CopilotSessions", "SESSIONS"], __name__)
"""Its transcript reader's names, read there on first use
(:func:`~loopfuse.harness.agent_cli.reader_names`)."""
