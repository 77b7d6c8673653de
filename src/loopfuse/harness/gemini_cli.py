"""Gemini CLI (Google's terminal coding agent): its tools, and how its answers fail.

Facts observed with Gemini CLI 0.61 (``../shared/agent-clis``) and in real sessions:

- ``run_shell_command`` runs a command line; ``read_file``, ``read_many_files``,
  ``list_directory``, ``glob``, ``search_file_content`` (``grep``) read; ``replace``,
  ``write_file`` (``edit``) are its editors; ``web_fetch`` and ``google_web_search`` read
  the web.
- A call's record carries ``status`` (``"success"``, ``"error"``, ``"cancelled"``) and its
  ``functionResponse.response`` is ``{"output": ...}`` or ``{"error": ...}`` (the Gemini
  API's own convention): a call the CLI refused (``Command rejected because it could not
  be parsed safely``) is an error by that structure alone, with no error word in it
  (:mod:`loopfuse.intent.gemini` carries it as the tool message's ``is_error``).
- Older releases end every shell answer with ``Error: (none)``, ``Exit Code: 0``,
  ``Signal: (none)`` lines: that frame is the CLI's, not the command's words, and is
  never read as an error (:attr:`~loopfuse.harness.base.Harness.frame`); a non-zero
  ``Exit Code`` is a failure. Newer ones write ``Exit Code: N`` only on failure.

>>> HARNESS.failed("run_shell_command", "Command: x\\nError: (none)\\nExit Code: 127\\n")
True
>>> HARNESS.failed("run_shell_command", "Command: ls\\nError: (none)\\nExit Code: 0\\n") is None
True
>>> HARNESS.unframed("run_shell_command", "Stdout: a\\nError: (none)\\nExit Code: 0\\n")
'Stdout: a\\n'

Its hooks (:data:`CLI`): Claude Code's protocol with its own event names and refusal
(:mod:`~loopfuse.harness.json_hooks`), in ``~/.gemini/settings.json`` or a project's
``.gemini/settings.json`` (comments allowed).

Its transcripts (:data:`SESSIONS`): ``~/.gemini/tmp/<project>/chats/session-*.jsonl``
(``$GEMINI_CLI_HOME`` moves the home folder), replayed as Gemini ``contents``. It appends
a record each time a message changes, under the same ``id`` (a model message, then the
same message with its tool calls and their results): the last version counts, at the
place of the first. ``{"$set": ...}`` lines patch the session; when they list the
messages again (the model's context rewritten: compressed, old outputs masked) only the
records not seen before count. ``{"$rewindTo": id}`` is kept out: the calls before a
rewind were made and paid for. A tool's answer is its ``llmContent`` without ``Process
Group PGID: N`` (a new number on every call). Subagents have their own files. Whole-file
JSON sessions of older versions are read too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from loopfuse.harness.agent_cli import HookEvent
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

__all__ = [
    "CLI",
    "HARNESS",
    "SESSIONS",
    "GeminiCliHooks",
    "GeminiCliSessions",
    "exit_code",
    "gemini_parts",
    "gemini_result",
]

_READ, _SHELL, _EDITOR, _COSTLY, _OTHER = (
    ToolKind.READ, ToolKind.SHELL, ToolKind.EDITOR, ToolKind.COSTLY, ToolKind.OTHER,
)  # fmt: skip

_EXIT: Final = re.compile(r"^Exit Code: (-?\d{1,4}|\(none\))[ \t]*$", re.M)
_TAIL: Final = 1024  # the exit line is among the last lines of a shell answer
# The lines the CLI frames a shell answer with when they say nothing went wrong.
_FRAME: Final = re.compile(
    r"^(?:Error: \(none\)|Exit Code: 0|Signal: \(none\)|Background PIDs: [^\n]*"
    r"|Process Group PGID: [^\n]*)[ \t]*(?:\n|$)",
    re.M,
)


# Lines of a shell answer new on every call, whatever the command did.
_VOLATILE: Final = re.compile(r"^(?:Process Group PGID|Background PIDs): .*$\n?", re.M)
_ANY_EXIT: Final = re.compile(r"^Exit Code: (-?\d+)\s*$", re.M)


def exit_code(text: str) -> int | None:
    """The ``Exit Code: N`` a shell answer names, or ``None``.

    >>> exit_code("Output: x\\nExit Code: 3\\n"), exit_code("x") is None
    (3, True)
    """
    found = _ANY_EXIT.search(text)
    return int(found.group(1)) if found else None


def _answer_failed(text: str) -> bool | None:
    """A non-zero ``Exit Code:`` line of a shell answer is a failure; anything else is
    left to the other evidence (the words of a command that exited 0 may still say it
    failed: a reproduction script printing the bug)."""
    tail = text[-_TAIL:]
    if "Exit Code: " not in tail:
        return None
    found = _EXIT.search(tail)
    if found is None or found.group(1) == "(none)":
        return None
    return True if int(found.group(1)) != 0 else None


HARNESS: Final = Harness(
    "gemini_cli",
    "Gemini CLI",
    tools=(
        Tool("run_shell_command", _SHELL, prose=("description",)),
        Tool("read_file", _READ, files=FileAccess.READS),
        Tool("read_many_files", _READ, files=FileAccess.READS),
        Tool("list_directory", _READ, files=FileAccess.READS),
        Tool("glob", _READ, files=FileAccess.READS),
        Tool("search_file_content", _READ, files=FileAccess.READS),
        Tool("grep", _READ),
        Tool("replace", _EDITOR, files=FileAccess.EDITS),
        Tool("write_file", _EDITOR, files=FileAccess.EDITS),
        Tool("edit", _EDITOR, files=FileAccess.EDITS),
        Tool("web_fetch", _COSTLY),
        Tool("google_web_search", _COSTLY),
        Tool("save_memory", _OTHER),
        Tool("write_todos", _OTHER),
    ),
    answer_failed=_answer_failed,
    frame=_FRAME,
    volatile=_VOLATILE,
    # Only the "Error: (none)" line reads as a failure to the generic heuristics: without
    # it, the rest of the frame says nothing they would misread.
    frame_hints=("Error: (none)",),
    failure_fields=("status", "functionResponse.response.error"),
)
"""Gemini CLI's tools and conventions."""


# --- its transcripts --------------------------------------------------------------------

_TYPES: Final = frozenset({"user", "gemini", "info", "error", "warning"})
# A volatile line of a tool's answer: a new value on every call, whatever the command did.
_GEMINI_PGID: Final = re.compile(r"^Process Group PGID: \d+\n?", re.MULTILINE)


class GeminiCliSessions(SessionFormat):
    """Gemini CLI's sessions: message records a line, ``$set`` / ``$rewindTo`` patches,
    or (older versions) the whole session as one JSON document."""

    agent = "gemini"
    priority = 20
    starts = (
        re.compile(rb'\{\s*"id"\s*:\s*"[^"]*"\s*,\s*"timestamp"\s*:\s*"[^"]*"\s*,'
                   rb'\s*"type"\s*:\s*"(?:user|gemini)"'),
    )  # fmt: skip

    def folder(self, env: Mapping[str, str]) -> SessionFolder:
        """``.gemini/tmp`` in ``$GEMINI_CLI_HOME`` (default: the home folder)."""
        home = Path(env.get("HOME") or Path.home())
        base = Path(env["GEMINI_CLI_HOME"]) if env.get("GEMINI_CLI_HOME") else home
        return SessionFolder(self.agent, (base / ".gemini" / "tmp",), "GEMINI_CLI_HOME")

    def is_transcript(self, name: str, folders: tuple[str, ...]) -> bool:
        """A ``.jsonl`` or ``.json`` file in a ``chats`` folder (the project folders
        hold logs and checkpoints too)."""
        return "chats" in folders and name.endswith((".jsonl", ".json"))

    def recognises(self, record: dict[str, Any]) -> bool:
        """A patch, the session's first record (``sessionId`` and ``projectHash``), or a
        message record (``id``, one of its types, ``content``, no Claude ``message``)."""
        if "$set" in record or "$rewindTo" in record:
            return True
        if "sessionId" in record and "projectHash" in record:
            return True
        kind = record.get("type")
        return (
            "id" in record
            and isinstance(kind, str)
            and kind in _TYPES
            and "content" in record
            and "message" not in record
        )

    def recognises_document(self, document: dict[str, Any]) -> bool:
        """An older version's whole session (``sessionId``, ``projectHash``, ``messages``)."""
        return _whole_session(document)

    def read_runs(self, name: str, path: Path | None, lines: Lines) -> list[AgentRun]:
        """The session's one run (a subagent's file is its own)."""
        return _gemini_runs(name, path, lines)


def _whole_session(value: dict[str, Any]) -> bool:
    return (
        isinstance(value.get("messages"), list) and "sessionId" in value and "projectHash" in value
    )


def _gemini_runs(name: str, path: Path | None, lines: Lines) -> list[AgentRun]:
    info: dict[str, Any] = {}
    records: dict[str, dict[str, Any]] = {}  # id -> its last version, in first-seen order

    def upsert(number: int, record: object, again: bool = True) -> None:
        """Add a record, or (``again``) take its new version. A ``$set`` of the whole
        list rewrites the model's context (compression, masked old outputs): what it
        lists again is not what the model saw then, so only its new records count."""
        if not isinstance(record, dict) or not isinstance(record.get("id"), str):
            lines.problem(number, "a message record without an id")
            return
        if again or record["id"] not in records:
            records[record["id"]] = record

    first = True
    for number, record in lines:
        if first and _whole_session(record):  # an older whole-file session
            info.update({k: v for k, v in record.items() if k != "messages"})
            for message in record["messages"]:
                upsert(number, message)
            first = False
            continue
        first = False
        if "$rewindTo" in record:
            continue  # what came before the rewind was sent and paid for: kept
        patch = record.get("$set")
        if isinstance(patch, dict):
            messages = patch.get("messages")
            info.update({k: v for k, v in patch.items() if k != "messages"})
            for message in messages if isinstance(messages, list) else ():
                upsert(number, message, again=False)
        elif "id" in record:
            upsert(number, record)
        elif "sessionId" in record:
            info.update(record)
        else:
            lines.problem(number, "not a Gemini CLI session record")
    contents = _gemini_contents(records.values())
    if not contents:
        return []
    directories = info.get("directories")
    project = directories[0] if isinstance(directories, list) and directories else None
    model = next(
        (r["model"] for r in reversed(records.values()) if isinstance(r.get("model"), str)), None
    )
    meta = run_meta(
        agent="gemini",
        session=info.get("sessionId"),
        project=project if isinstance(project, str) else _gemini_project(path),
        started=info.get("startTime"),
        model=model,
        subagent="yes" if info.get("kind") == "subagent" else None,
    )
    return [AgentRun(name, {"contents": contents}, meta)]


def _gemini_project(path: Path | None) -> str | None:
    """The project folder's name (``tmp/<project>/chats/...``)."""
    if path is None:
        return None
    for folder in path.parents:
        if folder.name == "chats":
            return folder.parent.name or None
    return None


def _gemini_contents(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    contents: list[dict[str, Any]] = []
    answered: set[str] = set()
    for record in records:
        kind = record.get("type")
        if kind == "gemini":
            parts = [p for p in gemini_parts(record.get("content")) if not p.get("thought")]
            results: list[Any] = []
            calls = record.get("toolCalls")
            for call in calls if isinstance(calls, list) else ():
                if not isinstance(call, dict):
                    continue
                function = {
                    "id": call.get("id"),
                    "name": call.get("name"),
                    "args": call.get("args"),
                }
                parts.append({"functionCall": function})
                result = [gemini_result(p) for p in gemini_parts(call.get("result"))]
                results.extend(result)
                if result and isinstance(call.get("id"), str):
                    answered.add(call["id"])
            model: dict[str, Any] = {"role": "model", "parts": parts}
            usage = _gemini_usage(record.get("tokens"))
            if usage:
                model["usageMetadata"] = usage
            contents.append(model)
            if results:
                contents.append({"role": "user", "parts": results})
        elif kind == "user":
            parts = [
                gemini_result(part)
                for part in gemini_parts(record.get("content"))
                if _response_id(part) not in answered
            ]
            if parts:
                contents.append({"role": "user", "parts": parts})
        # info, error and warning records are the CLI's own notes: never sent
    return contents


def gemini_parts(content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}] if content else []
    if isinstance(content, dict):
        return [content]
    if isinstance(content, list):
        return [
            part if isinstance(part, dict) else {"text": part}
            for part in content
            if isinstance(part, dict | str)
        ]
    return []


def _response_id(part: dict[str, Any]) -> str | None:
    response = part.get("functionResponse")
    return text_or_none(response.get("id")) if isinstance(response, dict) else None


def gemini_result(part: dict[str, Any]) -> dict[str, Any]:
    """A ``functionResponse`` part with the text the model saw as its answer, less the
    process group id that changes on every call."""
    response = part.get("functionResponse")
    if not isinstance(response, dict):
        return part
    answer = response.get("response")
    if isinstance(answer, dict) and len(answer) == 1:
        # {"output": text} is the answer's text; {"error": text} stays as it is: the
        # Gemini dialect reads it as a failed call (issue 27: a refused call says no
        # error word), whatever the text.
        text = answer.get("output")
        if isinstance(text, str):
            answer = text
        elif isinstance(answer.get("error"), str):
            answer = {"error": _GEMINI_PGID.sub("", answer["error"])}
    if isinstance(answer, str):
        answer = _GEMINI_PGID.sub("", answer)
    return {"functionResponse": {**response, "response": answer}}


def _gemini_usage(tokens: object) -> dict[str, int]:
    if not isinstance(tokens, dict):
        return {}
    names = {"input": "promptTokenCount", "output": "candidatesTokenCount"}
    names["thoughts"] = "thoughtsTokenCount"
    return {
        names[key]: value
        for key, value in tokens.items()
        if key in names and isinstance(value, int) and not isinstance(value, bool)
    }


SESSIONS: Final = GeminiCliSessions()
"""Gemini CLI's transcripts."""


class GeminiCliHooks(JsonHooksCli):
    """Gemini CLI's hooks: ``BeforeTool``, ``AfterTool`` (``tool_response``
    ``{llmContent, returnDisplay, error?}``; a shell's ``llmContent`` names the exit code
    and a process group new on every call), ``BeforeAgent`` (the user's prompt).

    A refusal is ``{"decision": "deny", "reason": ...}``; it honours ``continue: false``
    from ``BeforeTool`` and ``AfterTool``. It reads its settings through
    ``strip-json-comments``.
    """

    name = "gemini"
    title = "Gemini CLI"
    harness = HARNESS
    before_events = ("BeforeTool",)
    after_events = ("AfterTool",)
    turn_events = ("BeforeAgent",)
    end_after_events = ("AfterTool",)
    installer = HooksMap(
        ("BeforeTool", "AfterTool", "BeforeAgent"),
        untargeted=frozenset({"BeforeAgent"}),
        comments=True,
    )
    sessions = SESSIONS

    def recognises(self, payload: dict[str, object]) -> bool:
        """Its tool events' names are its own."""
        return payload.get("hook_event_name") in (*self.before_events, *self.after_events)

    def answer(
        self, event_name: str, payload: dict[str, object]
    ) -> tuple[object, bool | None, int | None]:
        """``llmContent`` without its volatile lines; failed when ``error`` is set or
        the exit code is not 0."""
        del event_name
        response = payload.get("tool_response")
        if not isinstance(response, dict):
            return response, None, None
        failure = response.get("error")
        content = response.get("llmContent")
        if isinstance(content, str):
            code = exit_code(content)
            text = HARNESS.without_volatile(content)
            if failure not in (None, "", {}):
                return text, True, code
            return text, (code != 0) if code is not None else None, code
        if failure not in (None, "", {}):
            return failure, True, None
        return content if content is not None else response.get("returnDisplay"), None, None

    def refusal(self, event: HookEvent, reason: str) -> dict[str, object]:
        """``{"decision": "deny", "reason": reason}``."""
        del event
        return {"decision": "deny", "reason": reason}

    def settings_path(self, project: bool, env: Mapping[str, str], cwd: Path) -> Path:
        """``.gemini/settings.json`` in the project or the home folder."""
        home = Path(env.get("HOME") or Path.home())
        return (cwd if project else home) / ".gemini" / "settings.json"


CLI: Final = GeminiCliHooks()
"""Gemini CLI's hook protocol."""
