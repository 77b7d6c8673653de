"""pi (``@mariozechner/pi-coding-agent``, Mario Zechner's terminal coding agent): its
tools, how its answers fail, the extension that guards it, and how its sessions read.

Facts observed with pi 0.73.1 (docs/agent-clis-verified.md, "pi"; its own
``dist/core/tools``):

- ``bash {command, timeout}`` runs a command line; ``read {path, offset, limit}``,
  ``grep {pattern, path, …}``, ``find {pattern, path}`` and ``ls {path}`` only read;
  ``edit {path, edits: [{oldText, newText}]}`` and ``write {path, content}`` are its
  editors. An extension may add tools of its own (judged by the generic vocabulary).
- A result carries ``isError`` (a bool), in the extension's ``tool_result`` event and in
  the session file: the flag decides. A command that exits non-zero is a failure whose
  text ends ``Command exited with code N`` (``Command timed out after N seconds``,
  ``Command aborted``): the text convention, for where the flag is missing.
- An output too long for the model (over 2,000 lines or 50 KB) is cut, and its answer
  names the whole output's file, ``/tmp/pi-bash-<16 hex digits>.log``: a new name on
  every call, whatever the command printed (:attr:`Harness.volatile`).
- pi has no hooks of commands: its **extensions** (TypeScript, loaded in-process) see
  each call before it runs (``tool_call``: may refuse it, ``{block: true, reason}``;
  the model reads the reason as the call's result) and after (``tool_result``, failed
  calls included: may add to the result), and may end the run (``ctx.abort()``). A
  refused call has no ``tool_result``. loopfuse's extension (``pi_extension.ts``, beside
  this module) runs ``loopfuse hook --agent pi`` with each event as JSON
  (:func:`extension_text`).
- Its sessions are JSON Lines files, a tree of entries (``id`` / ``parentId``) under a
  ``session`` header (:func:`session_body`).

>>> HARNESS.kind("bash", {"command": "ls"}), HARNESS.kind("grep", {"pattern": "x"})
(<ToolKind.SHELL: 'shell'>, <ToolKind.READ: 'read'>)
>>> HARNESS.failed("bash", "make: *** [all] Error 2\\n\\n\\nCommand exited with code 2")
True
>>> HARNESS.without_volatile("[… Full output: /tmp/pi-bash-0123456789abcdef.log]")
'[… Full output: /tmp/pi-bash-.log]'
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, Final

from loopfuse.harness.agent_cli import (
    PROBE_TOOL,
    Action,
    AgentCli,
    HookEvent,
    HookPayloadError,
    reader_names,
)
from loopfuse.harness.base import FileAccess, Harness, Tool, ToolKind

if TYPE_CHECKING:
    from pathlib import Path

    from loopfuse.harness.installers import WholeFile

__all__ = [
    "CLI",
    "EXTENSION_FILE",
    "HARNESS",
    "PiCli",
    "agent_dir",
    "answer_text",
    "exit_code",
    "is_session_record",
    "session_body",
    "sessions_dir",
]

_READ, _SHELL, _EDITOR = ToolKind.READ, ToolKind.SHELL, ToolKind.EDITOR

# The status line pi's bash tool ends a failed command's answer with.
_STATUS: Final = re.compile(
    r"(?:\A|\n)(?:Command exited with code (-?\d{1,4})|Command timed out after \d+ seconds"
    r"|Command aborted)\s*\Z"
)
_TAIL: Final = 160  # characters of an answer's end read for its status line


def exit_code(text: str) -> int | None:
    """The exit status a failed ``bash`` call's answer ends with, or ``None``.

    >>> exit_code("ls: cannot access 'x'\\n\\n\\nCommand exited with code 2")
    2
    >>> exit_code("Command exited with code 2 is what it printed\\nok") is None
    True
    """
    found = _STATUS.search(text[-_TAIL:]) if type(text) is str else None
    return int(found.group(1)) if found is not None and found.group(1) else None


def _answer_failed(text: str) -> bool | None:
    # Only a failure ends with the status line (pi throws it as the call's error); a
    # success says nothing of its status: the other evidence decides.
    return True if _STATUS.search(text[-_TAIL:]) else None


HARNESS: Final = Harness(
    "pi",
    "pi",
    tools=(
        Tool("bash", _SHELL),
        Tool("read", _READ, files=FileAccess.READS),
        Tool("grep", _READ),
        Tool("find", _READ),
        Tool("ls", _READ),
        Tool("edit", _EDITOR, files=FileAccess.EDITS),
        Tool("write", _EDITOR, files=FileAccess.EDITS),
    ),
    answer_failed=_answer_failed,
    failure_fields=("isError",),
    volatile=re.compile(r"(?<=/pi-bash-)[0-9a-f]{16}(?=\.log)"),
)
"""pi's tools and conventions."""


# --- answers ------------------------------------------------------------------------------


def answer_text(content: object) -> object:
    """A result's content parts as the model reads them: the texts joined by newlines
    (an image as its type, size and hash, which the extension sends instead of its
    data); anything else as it came.

    >>> answer_text([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
    'a\\nb'
    """
    if not isinstance(content, list):
        return content
    texts: list[str] = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "text":
            text = part.get("text")
            texts.append(text if isinstance(text, str) else json.dumps(text))
        else:
            texts.append(json.dumps(part, sort_keys=True, default=str))
    return "\n".join(texts)


# --- the hook -------------------------------------------------------------------------------

EXTENSION_FILE: Final = "loopfuse.ts"
"""The name of loopfuse's extension in pi's extension folders."""


@cache
def _extension() -> WholeFile:
    """loopfuse's extension, as ``loopfuse init`` writes it. Read on first use: every
    before-hook imports this module (its tools are "auto"'s), and none needs the file
    (nor ``importlib.resources``, about 10 ms of imports)."""
    from importlib import resources

    from loopfuse.harness.installers import WholeFile

    template = resources.files("loopfuse.harness").joinpath("pi_extension.ts").read_text("utf-8")
    return WholeFile(template, ("before_agent_start", "tool_call", "tool_result"))


class PiCli(AgentCli):
    """pi as ``loopfuse hook``, ``init`` and ``doctor`` see it.

    pi runs no command at a tool call: loopfuse's extension (``pi_extension.ts``, which
    ``loopfuse init --agent pi`` writes to ``~/.pi/agent/extensions/loopfuse.ts``, or
    ``.pi/extensions/loopfuse.ts`` with ``--project``) runs ``loopfuse hook --agent pi``
    at each of its events, with one JSON object on stdin:

    - ``before_agent_start`` (the user sent a prompt: a new run): ``prompt``;
    - ``tool_call`` (before a call): ``tool_name``, ``tool_call_id``, ``tool_input``
      (the arguments the model gave);
    - ``tool_result`` (after it, failed calls too): the same, and ``tool_response`` (the
      result's parts) and ``is_error`` (pi's flag);

    each with ``session_id``, ``transcript_path`` and ``cwd``. The hook answers one JSON
    object, or nothing (allow): ``{"block": true, "reason": R}`` refuses the call (the
    model reads ``R`` as its result), with ``"end": true`` it also ends the run (pi's
    ``ctx.abort()``: the run stops, exit status 1); ``{"note": T}`` adds ``T`` to the
    call's result; ``{"message": M}`` shows ``M`` to the user.

    >>> event = CLI.parse({"hook_event_name": "tool_result", "session_id": "s",
    ...     "tool_name": "bash", "tool_call_id": "c1", "tool_input": {"command": "make"},
    ...     "tool_response": [{"type": "text", "text": "make: *** Error 2\\n\\n\\n"
    ...     "Command exited with code 2"}], "is_error": True})
    >>> event.phase, event.error, event.exit_code
    ('after', True, 2)
    >>> CLI.render(event, "note", "[loopfuse] a loop")
    ('{"note": "[loopfuse] a loop"}', 0)
    """

    name = "pi"
    title = "pi"
    harness = HARNESS
    before_events = ("tool_call",)
    after_events = ("tool_result",)
    turn_events = ("before_agent_start",)

    sessions_module = "_pi_sessions"

    @property
    def installer(self) -> WholeFile:  # type: ignore[override]
        """loopfuse's extension (:func:`_extension`)."""
        return _extension()

    def parse(self, payload: dict[str, object]) -> HookEvent:
        """Read one event of loopfuse's extension."""
        event_name = payload.get("hook_event_name")
        if not isinstance(event_name, str):
            raise HookPayloadError("the hook input has no hook_event_name")
        phase = self.phase_of(event_name)
        session = payload.get("session_id")
        if not isinstance(session, str) or not session:
            raise HookPayloadError("the hook input has no session_id")
        if phase != "before" and phase != "after":
            return HookEvent(self.name, phase, event_name, session, "", None)
        tool_name = payload.get("tool_name")
        if not isinstance(tool_name, str) or not tool_name:
            raise HookPayloadError("the hook input has no tool_name")
        call_id = payload.get("tool_call_id")
        event = HookEvent(
            self.name,
            phase,
            event_name,
            session,
            tool_name,
            self.harness.call(tool_name, payload.get("tool_input")),
            call_id if isinstance(call_id, str) and call_id else None,
        )
        if phase == "before":
            return event
        answer = answer_text(payload.get("tool_response"))
        flag = payload.get("is_error")
        error = flag if isinstance(flag, bool) else None
        code: int | None = None
        if isinstance(answer, str):
            if tool_name == "bash" and error is not None:
                code = exit_code(answer) if error else 0
            answer = self.harness.without_volatile(answer)
        return event._replace(answer=answer, error=error, exit_code=code)

    def render(self, event: HookEvent, action: Action, reason: str) -> tuple[str, int]:
        """The extension's answer: see the class's docstring."""
        if action == "allow" or event.phase in ("turn", "batch"):
            return "", 0
        if event.phase == "after":
            if action == "note":
                return json.dumps({"note": reason}), 0
            return (json.dumps({"end": True}), 0) if action == "end" else ("", 0)
        if action == "note":
            return "", 0
        answer: dict[str, object] = {"block": True, "reason": reason}
        if action == "end":
            answer["end"] = True
        return json.dumps(answer), 0

    def render_user_message(self, event: HookEvent, text: str) -> tuple[str, int]:
        """Allow, and show ``text`` to the user (pi's notice; on stderr with ``-p``)."""
        del event
        return json.dumps({"message": text}), 0

    def probe_event(self, session: str) -> dict[str, object]:
        """A ``tool_call`` event as the extension sends it."""
        return {
            "hook_event_name": "tool_call",
            "session_id": session,
            "transcript_path": None,
            "cwd": None,
            "tool_name": PROBE_TOOL,
            "tool_call_id": "loopfuse-doctor",
            "tool_input": {},
        }

    def settings_path(self, project: bool, env: Mapping[str, str], cwd: Path) -> Path:
        """The extension's file: ``.pi/extensions/`` of the project, or the user's
        extension folder (``$PI_CODING_AGENT_DIR``, else ``~/.pi/agent``)."""

        if project:
            return cwd / ".pi" / "extensions" / EXTENSION_FILE
        return agent_dir(env) / "extensions" / EXTENSION_FILE


def agent_dir(env: Mapping[str, str]) -> Path:
    """pi's own folder: ``$PI_CODING_AGENT_DIR``, else ``~/.pi/agent``.

    >>> agent_dir({"HOME": "/h"}), agent_dir({"HOME": "/h", "PI_CODING_AGENT_DIR": "~/p"})
    (PosixPath('/h/.pi/agent'), PosixPath('/h/p'))
    """
    given = env.get("PI_CODING_AGENT_DIR")
    return _home_path(given, env) if given else _home(env) / ".pi" / "agent"


def sessions_dir(env: Mapping[str, str]) -> Path:
    """Where pi keeps its sessions: ``$PI_CODING_AGENT_SESSION_DIR``, else ``sessions/``
    of :func:`agent_dir`."""
    given = env.get("PI_CODING_AGENT_SESSION_DIR")
    return _home_path(given, env) if given else agent_dir(env) / "sessions"


def _home(env: Mapping[str, str]) -> Path:
    from pathlib import Path  # here: the hook never asks, and imports no pathlib

    return Path(env.get("HOME") or Path.home())


def _home_path(given: str, env: Mapping[str, str]) -> Path:
    """A folder a variable of pi's names (a leading ``~`` is the home, as pi reads it)."""
    from pathlib import Path  # here: the hook never asks, and imports no pathlib

    if given == "~" or given.startswith("~/"):
        return _home(env) / given[2:]
    return Path(given)


CLI: Final = PiCli()
"""pi's hook protocol (through loopfuse's extension)."""


# --- sessions -----------------------------------------------------------------------------

_ENTRY_TYPES: Final = frozenset(
    {
        "message",
        "model_change",
        "thinking_level_change",
        "compaction",
        "branch_summary",
        "custom",
        "custom_message",
        "label",
        "session_info",
    }
)
_ROLES: Final = frozenset(
    {"user", "assistant", "toolResult", "bashExecution", "custom", "branchSummary",
     "compactionSummary"}
)  # fmt: skip


def is_session_record(value: dict[str, Any]) -> bool:
    """Whether a JSON object is a record of a pi session file: its header
    (``{"type": "session", "version", "id", "cwd"}``) or one of its entries (``type``,
    ``id``, ``parentId``; a message's ``role`` one of pi's).

    >>> is_session_record({"type": "session", "version": 3, "id": "u", "cwd": "/w"})
    True
    >>> is_session_record({"type": "message", "id": "a", "parentId": None,
    ...     "message": {"role": "toolResult", "toolCallId": "c", "content": []}})
    True
    >>> is_session_record({"type": "message", "message": {"role": "user"}})
    False
    """
    kind = value.get("type")
    if kind == "session":
        return "id" in value and "cwd" in value and "version" in value
    if type(kind) is not str or kind not in _ENTRY_TYPES:
        return False
    if "parentId" not in value or "id" not in value:
        return False
    if kind != "message":
        return True
    message = value.get("message")
    role = message.get("role") if isinstance(message, dict) else None
    return type(role) is str and role in _ROLES


def session_body(
    records: Iterable[tuple[int, dict[str, Any]]],
) -> tuple[dict[str, Any], dict[str, str], list[tuple[int, str]]] | None:
    """A pi session's records as one Anthropic ``messages`` body, its run's names
    (``session``, ``project``, ``started``, ``model``) and the problems met (line,
    text); ``None`` when it holds no message.

    The entries are read in the order pi wrote them, the order its calls were made and
    paid for: a branch left for an earlier point (``/tree``) keeps the calls made on it,
    as a rewind of Gemini CLI's does. The user's, the model's and the calls' messages
    are the conversation: each assistant ``toolCall`` a ``tool_use``, each
    ``toolResult`` a ``tool_result`` (``is_error`` from its flag), the results of one
    answer in one user message; the model's usage its usage. What pi adds around them
    (a command the user ran with ``!``, an extension's message, a summary of a branch or
    of a compaction) is not the model's call and is left out."""
    messages: list[dict[str, Any]] = []
    problems: list[tuple[int, str]] = []
    header: dict[str, Any] = {}
    model: str | None = None
    for number, record in records:
        if not is_session_record(record):
            problems.append((number, "not a pi session record"))
            continue
        kind = record.get("type")
        if kind == "session":
            header = header or record
            continue
        if kind == "model_change":
            model = _text(record.get("modelId")) or model
            continue
        if kind != "message":
            continue
        message = record.get("message")
        if not isinstance(message, dict):
            problems.append((number, "a message entry without a message object"))
            continue
        role = message.get("role")
        if role == "user":
            blocks = _user_blocks(message.get("content"))
            if blocks:
                messages.append({"role": "user", "content": blocks})
        elif role == "assistant":
            model = _text(message.get("model")) or model
            answer = _assistant(message)
            if answer is not None:
                messages.append(answer)
        elif role == "toolResult":
            _result(messages, message)
    if not messages:
        return None
    meta = {
        key: value
        for key, value in (
            ("session", header.get("id")),
            ("project", header.get("cwd")),
            ("started", header.get("timestamp")),
            ("model", model),
        )
        if isinstance(value, str) and value
    }
    return {"model": model or "", "system": [], "messages": messages}, meta, problems


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _user_blocks(content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        return []
    return [
        {"type": "text", "text": part["text"]}
        for part in content
        if isinstance(part, dict) and part.get("type") == "text" and _text(part.get("text"))
    ]


def _assistant(message: dict[str, Any]) -> dict[str, Any] | None:
    """One model answer: its text and its calls (its thinking is not sent back)."""
    blocks: list[dict[str, Any]] = []
    content = message.get("content")
    for part in content if isinstance(content, list) else ():
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and _text(part.get("text")):
            blocks.append({"type": "text", "text": part["text"]})
        elif part.get("type") == "toolCall":
            arguments = part.get("arguments")
            blocks.append(
                {
                    "type": "tool_use",
                    "id": part.get("id") if isinstance(part.get("id"), str) else "",
                    "name": part.get("name") if isinstance(part.get("name"), str) else "",
                    "input": arguments if isinstance(arguments, dict) else {},
                }
            )
    if not blocks:
        return None
    answer: dict[str, Any] = {"role": "assistant", "content": blocks}
    usage = _usage(message.get("usage"))
    if usage:
        answer["usage"] = usage
    return answer


def _usage(usage: object) -> dict[str, int]:
    if not isinstance(usage, dict):
        return {}
    names = {
        "input": "input_tokens",
        "output": "output_tokens",
        "cacheRead": "cache_read_input_tokens",
        "cacheWrite": "cache_creation_input_tokens",
    }
    return {
        names[key]: value
        for key, value in usage.items()
        if key in names and isinstance(value, int) and not isinstance(value, bool)
    }


def _result(messages: list[dict[str, Any]], message: dict[str, Any]) -> None:
    """A call's result: its text as the model read it, ``is_error`` as pi flagged it;
    the results of one answer's calls in one user message."""
    text = answer_text(message.get("content"))
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": _text(message.get("toolCallId")) or "",
        "content": text if isinstance(text, str) else "",
    }
    if isinstance(message.get("isError"), bool):
        block["is_error"] = message["isError"]
    last = messages[-1] if messages else None
    if (
        last is not None
        and last["role"] == "user"
        and all(b.get("type") == "tool_result" for b in last["content"])
    ):
        last["content"].append(block)
    else:
        messages.append({"role": "user", "content": [block]})


__getattr__ = reader_names("_pi_sessions", ["PiSessions", "SESSIONS"], __name__)
"""Its transcript reader's names, read there on first use
(:func:`~loopfuse.harness.agent_cli.reader_names`)."""
