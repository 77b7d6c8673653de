"""Kimi Code (Moonshot AI's terminal coding agent): its tools, how its answers fail, what
its hooks send, and the sessions it keeps.

Facts observed with Kimi Code 2.1.0 (docs/agent-clis-verified.md, "Kimi Code"; its
``dist/main.mjs``):

- ``Bash {command, cwd, timeout, description, run_in_background}`` runs a command line
  (``description`` is the model's prose about it); ``Read`` (Claude Code's name and
  meaning: left to :mod:`~loopfuse.harness.claude_code`), ``Glob``, ``Grep``,
  ``TaskList``, ``GetGoal``, ``CronList`` read; ``Edit``, ``Write`` are its editors;
  ``FetchURL``, ``WebSearch`` read the web; ``TaskOutput`` (a snapshot of a background
  task: ``retrieval_status: not_ready`` while it runs) and ``WaitFor`` (``wait_status:
  timed_out`` while it runs) are **waits**;
- a failed call is flagged (``isError``; its hooks get ``PostToolUseFailure``); a shell
  command that exits non-zero is one, its answer ending ``Command failed with exit code:
  N.``; the model reads a failed answer after ``<system>ERROR: Tool execution
  failed.</system>``;
- what the model reads changes on every call whatever the tool did: ``Wall time: 0.017
  seconds`` heads the answer of ``Bash``, ``Glob``, ``Grep``, ``FetchURL`` … and of a
  task's snapshot; from the 3rd identical call in a row Kimi Code adds its own nudge,
  ``<system-reminder>The same tool call has been repeated …</system-reminder>``, whose
  words change again at the 5th, 6th, 7th … call. Both are the harness's words, not the
  tool's: :attr:`HARNESS.volatile <loopfuse.harness.base.Harness.volatile>` takes them
  out, so that identical answers compare equal (its hooks see neither).

>>> HARNESS.kind("TaskOutput", {"task_id": "b1"}), HARNESS.kind("Bash", {"command": "ls"})
(<ToolKind.WAIT: 'wait'>, <ToolKind.SHELL: 'shell'>)
>>> HARNESS.failed("Bash", "ls: x: No such file\\nCommand failed with exit code: 2.")
True
>>> HARNESS.without_volatile("Wall time: 0.017 seconds\\nhi\\n\\n\\n<system-reminder>\\n"
...     "The same tool call has been repeated several times in a row.\\n</system-reminder>")
'hi\\n'
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Final

from loopfuse.errors import ConfigError
from loopfuse.harness.agent_cli import PROBE_TOOL, Action, HookEvent, reader_names
from loopfuse.harness.base import FileAccess, Harness, Tool, ToolKind
from loopfuse.harness.json_hooks import JsonHooksCli

if TYPE_CHECKING:
    from pathlib import Path

    from loopfuse.harness.agent_cli import HookInstaller

__all__ = ["CLI", "HARNESS", "KimiCodeCli", "answer", "exit_code"]

_READ, _WAIT, _SHELL, _EDITOR, _COSTLY, _OTHER = (
    ToolKind.READ, ToolKind.WAIT, ToolKind.SHELL, ToolKind.EDITOR, ToolKind.COSTLY,
    ToolKind.OTHER,
)  # fmt: skip

ERROR_STATUS: Final = "<system>ERROR: Tool execution failed."
"""How the model's copy of a failed call's answer starts (after its wall time)."""
_EXIT: Final = re.compile(r"Command failed with exit code: (-?\d{1,4})\.?")
_TAIL: Final = 256  # the exit line ends a shell answer
_HEAD: Final = 256  # the error status heads a failed answer
# Kimi Code's own words in an answer, new on every call: its wall time (first line) and
# its nudges (joined to the answer by a blank line; their text has no "<", so each match
# is bounded and the scan linear: an opening not closed within 4,000 characters is left).
_VOLATILE: Final = re.compile(
    r"\AWall time: \d{1,12}(?:\.\d{1,9})? seconds?\n?"
    r"|\n{0,2}<system-reminder>[^<]{0,4000}</system-reminder>"
)


def exit_code(text: str) -> int | None:
    """The exit status of a failed ``Bash`` call, from the line its answer ends with.

    >>> exit_code("boom\\nCommand failed with exit code: 127."), exit_code("ok\\n") is None
    (127, True)
    """
    tail = text[-_TAIL:].rstrip()
    last = tail[tail.rfind("\n") + 1 :]
    found = _EXIT.fullmatch(last)
    return int(found.group(1)) if found else None


def _answer_failed(text: str) -> bool | None:
    # The model's copy says so in its first lines; the answer itself in its last (a
    # shell's exit status). A command that exited 0 is left to the other evidence.
    if ERROR_STATUS in text[:_HEAD]:
        return True
    code = exit_code(text)
    return True if code is not None and code != 0 else None


HARNESS: Final = Harness(
    "kimi_code",
    "Kimi Code",
    tools=(
        Tool("Bash", _SHELL, prose=("description",)),
        Tool("TaskOutput", _WAIT),
        Tool("WaitFor", _WAIT),
        Tool("TaskList", _READ),
        Tool("TaskStop", _OTHER),
        # Its Read {path, ...} is Claude Code's name, which harness="auto" judges by Claude
        # Code's declaration (a Read of a file is a read there too; Claude Code's Read of
        # a background command's output file, its file_path, is a wait): declared here
        # too, two harnesses would disagree on that wait, and neither would judge it.
        Tool("Glob", _READ, files=FileAccess.READS),
        Tool("Grep", _READ, files=FileAccess.READS),
        Tool("Edit", _EDITOR, files=FileAccess.EDITS),
        Tool("Write", _EDITOR, files=FileAccess.EDITS),
        Tool("FetchURL", _COSTLY),
        Tool("WebSearch", _COSTLY),
        Tool("GetGoal", _READ),
        Tool("CronList", _READ),
        Tool("Agent", _OTHER),
        Tool("AgentSwarm", _OTHER),
        Tool("AskUserQuestion", _OTHER),
        Tool("TodoList", _OTHER),
        Tool("Skill", _OTHER),
    ),
    running=("retrieval_status: not_ready", "wait_status: timed_out"),
    answer_failed=_answer_failed,
    volatile=_VOLATILE,
    failure_fields=("isError",),
)
"""Kimi Code's tools and conventions."""


# --- what its hooks send --------------------------------------------------------------------


def answer(event_name: str, payload: dict[str, object]) -> tuple[object, bool, int | None]:
    """The answer of a call a hook was told of after it ran, whether it failed, and its
    exit status when it names one.

    ``PostToolUse`` carries ``tool_output`` (the first 2,000 characters of the answer,
    without Kimi Code's wall time and nudges); ``PostToolUseFailure`` an ``error``
    object whose ``message`` is the answer (a shell command's ends with its exit status;
    a call a ``PreToolUse`` hook refused gets the refusal's reason).

    >>> answer("PostToolUseFailure", {"error": {"code": "internal", "message":
    ...     "cat: x: No such file or directory\\nCommand failed with exit code: 1."}})
    ('cat: x: No such file or directory\\nCommand failed with exit code: 1.', True, 1)
    >>> answer("PostToolUse", {"tool_output": "hi\\n"})
    ('hi\\n', False, None)
    """
    if event_name == "PostToolUseFailure":
        error = payload.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        if not isinstance(message, str):
            return message, True, None
        return HARNESS.without_volatile(message), True, exit_code(message)
    output = payload.get("tool_output")
    if isinstance(output, str):
        output = HARNESS.without_volatile(output)
    return output, False, None


# --- its hooks, as loopfuse answers them --------------------------------------------------


class KimiCodeCli(JsonHooksCli):
    """Kimi Code's hooks: ``[[hooks]]`` tables in the user's ``config.toml``
    (``$KIMI_CODE_HOME``, default ``~/.kimi-code``) for ``PreToolUse``, ``PostToolUse``,
    ``PostToolUseFailure`` and ``UserPromptSubmit``, each given Claude Code's fields
    (``hook_event_name``, ``session_id``, ``tool_name``, ``tool_input``) and the model's
    call id as ``tool_call_id``; the answers: :func:`answer`.

    What a hook can do there (Kimi Code 2.1.0, its code and runs):

    - **refuse a call**: ``permissionDecision: "deny"`` in ``hookSpecificOutput`` (or exit
      status 2); the model reads ``<system>ERROR: Tool execution failed.</system>`` and
      the reason as the call's answer. A refused call then fires ``PostToolUseFailure``
      with the reason as its error: the hook pairs it with the refused call by its call
      id, and it is not counted as another failed call;
    - **nothing after a call**: its after-call hooks run in the background and what they
      print is thrown away (:attr:`notes_reach_model` is false: in ``warn`` mode the first
      loop found is refused at once, that refusal's reason being the note); the next
      call's before-hook may run while they do (:attr:`waits_for_after_hooks`), and the
      last ones before it exits are often never run;
    - **never end the session** (its hook answers have no such field);
    - **only in the user's settings**: hooks in a project's ``.kimi-code/`` do not run.
    """

    name = "kimi"
    title = "Kimi Code"
    harness = HARNESS
    before_events = ("PreToolUse",)
    after_events = ("PostToolUse", "PostToolUseFailure")
    turn_events = ("UserPromptSubmit",)
    can_end_session = False
    notes_reach_model = False
    waits_for_after_hooks = False
    scopes = ("user",)

    @cached_property
    def installer(self) -> HookInstaller:  # type: ignore[override]
        """Its hooks as ``[[hooks]]`` tables of ``config.toml``, built on first use (``init``
        and ``doctor`` need it; the hook imports no installer, nor ``tomllib``)."""
        from loopfuse.harness.installers import TomlTables

        return TomlTables(("PreToolUse", "PostToolUse", "PostToolUseFailure", "UserPromptSubmit"))

    sessions_module = "_kimi_code_sessions"

    def parse(self, payload: dict[str, object]) -> HookEvent:
        """Claude Code's fields, and the model's call id (``tool_call_id``)."""
        event = super().parse(payload)
        call_id = payload.get("tool_call_id")
        if event.phase in ("before", "after") and isinstance(call_id, str) and call_id:
            event = event._replace(call_id=call_id)
        return event

    def answer(
        self, event_name: str, payload: dict[str, object]
    ) -> tuple[object, bool | None, int | None]:
        """:func:`answer`."""
        return answer(event_name, payload)

    def render(self, event: HookEvent, action: Action, reason: str) -> tuple[str, int]:
        """Claude Code's refusal; nothing else (a note would be thrown away, and no
        answer ends a session)."""
        if action == "note":
            return "", 0
        return super().render(event, action, reason)

    def render_user_message(self, event: HookEvent, text: str) -> tuple[str, int]:
        """``message``: Kimi Code shows it (to the model too: its hook results are part
        of the conversation) only from ``UserPromptSubmit``, the first event of each
        session; after a tool event nothing is shown."""
        del event
        return json.dumps({"message": text}), 0

    def probe_event(self, session: str) -> dict[str, object]:
        """A ``PreToolUse`` of Kimi Code's shape (``client_type``, ``tool_call_id``)."""
        return {
            "hook_event_name": self.before_events[0],
            "session_id": session,
            "cwd": os.getcwd(),
            "client_type": "kimi_code_cli",
            "tool_name": PROBE_TOOL,
            "tool_input": {"command": "loopfuse doctor"},
            "tool_call_id": f"{session}-call",
        }

    def settings_path(self, project: bool, env: Mapping[str, str], cwd: Path) -> Path:
        """``config.toml`` in ``$KIMI_CODE_HOME`` (default ``~/.kimi-code``); Kimi Code
        reads no project's hooks."""
        from pathlib import Path  # here: the hook never asks, and imports no pathlib

        if project:
            raise ConfigError(
                "Kimi Code runs hooks only from your own settings ($KIMI_CODE_HOME/config.toml, "
                "default ~/.kimi-code/config.toml), never a project's: run without --project"
            )
        base = env.get("KIMI_CODE_HOME")
        if base:
            return cwd / base / "config.toml"  # a relative one: from where it runs
        return Path(env.get("HOME") or Path.home()) / ".kimi-code" / "config.toml"


CLI: Final = KimiCodeCli()
"""Kimi Code's hook protocol."""


__getattr__ = reader_names(
    "_kimi_code_sessions", ["KimiCodeSessions", "PROTOCOL_MAJOR", "SESSIONS", "wire_runs"], __name__
)
"""Its transcript reader's names, read there on first use
(:func:`~loopfuse.harness.agent_cli.reader_names`)."""
