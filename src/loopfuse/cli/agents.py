"""The coding-agent CLIs ``loopfuse hook`` guards: what each sends to a hook, and
how each wants to be answered.

Claude Code, Codex, Gemini CLI and Qwen Code run a command before and after every tool
call, with one JSON object on stdin. :func:`parse_event` reads it into a :class:`HookEvent`
(the CLI is told apart by the payload, never by the environment, which Qwen Code fills
with Claude's and Gemini's variables too: Gemini's events are ``BeforeTool``/``AfterTool``,
Codex's carry a ``turn_id``, Qwen Code's a ``tool_call_id``);
:func:`render` writes the answer (allow, a note for the model, a refusal, or the end of
the session) in that CLI's own format.

Facts these rely on (observed with Claude Code 2.1, Codex 0.169, Gemini CLI 0.61, Qwen
Code 0.24.4):

- a refusal is JSON on stdout with exit status 0: ``permissionDecision: "deny"`` in
  ``hookSpecificOutput`` (Claude Code, Codex, Qwen Code; exit status 2 would show the model the
  hook's command line), ``{"decision": "deny"}`` (Gemini CLI);
- a note reaches the model as ``additionalContext`` from an after-tool event;
- Claude Code ends a session on ``continue: false`` from PreToolUse (with the deny, or
  the call runs once more) but ignores it in PostToolUseFailure; Gemini CLI honours it
  from BeforeTool; **Codex cannot be ended by a hook**: ``continue: false`` with a deny
  makes it run the command, so it is never sent to Codex; **Qwen Code cannot be ended
  either**: it ignores ``continue: false`` from PreToolUse, and from PostToolUse puts the
  stop reason in place of the call's answer (so neither is sent to it); its own detector
  halts a session at the 5th identical call, so loopfuse refuses by the 4th.

>>> event = parse_event({"hook_event_name": "BeforeTool", "session_id": "s",
...     "tool_name": "run_shell_command", "tool_input": {"command": "ls", "description": "x"}})
>>> event.agent, event.phase, event.tool_input
('gemini', 'before', {'command': 'ls'})
"""

from __future__ import annotations

import json
from typing import Final, Literal, NamedTuple

from loopfuse.harness import Harness, claude_code, codex, gemini_cli, qwen_code

__all__ = [
    "AFTER_EVENTS",
    "AGENTS",
    "BATCH_EVENTS",
    "BEFORE_EVENTS",
    "TURN_EVENTS",
    "Action",
    "HookEvent",
    "HookPayloadError",
    "NotAUserPrompt",
    "can_end_session",
    "parse_event",
    "render",
    "render_user_message",
]

Agent = Literal["claude-code", "codex", "gemini", "qwen"]
Action = Literal["allow", "note", "deny", "end"]

AGENTS: Final[tuple[Agent, ...]] = ("claude-code", "codex", "gemini", "qwen")
"""The CLIs, as ``--agent`` names them."""

BEFORE_EVENTS: Final[dict[Agent, tuple[str, ...]]] = {
    "claude-code": ("PreToolUse",),
    "codex": ("PreToolUse",),
    "gemini": ("BeforeTool",),
    "qwen": ("PreToolUse",),
}
"""Each CLI's hook events that come before a tool call."""

AFTER_EVENTS: Final[dict[Agent, tuple[str, ...]]] = {
    "claude-code": ("PostToolUse", "PostToolUseFailure"),
    "codex": ("PostToolUse",),
    "gemini": ("AfterTool",),
    "qwen": ("PostToolUse", "PostToolUseFailure"),
}
"""Each CLI's hook events that come after a tool call (with its answer)."""

BATCH_EVENTS: Final[dict[Agent, tuple[str, ...]]] = {
    "claude-code": ("PostToolBatch",),
    "codex": (),
    "gemini": (),
    "qwen": (),
}
"""Each CLI's hook event for the end of a batch of parallel calls, listing them (Claude
Code only): it runs a turn's state-changing shell calls one after the other, hooks and
all, so only this event tells them from the calls of separate turns."""

TURN_EVENTS: Final[dict[Agent, tuple[str, ...]]] = {
    "claude-code": ("UserPromptSubmit",),
    "codex": ("UserPromptSubmit",),
    "gemini": ("BeforeAgent",),
    "qwen": ("UserPromptSubmit",),
}
"""Each CLI's hook event for a prompt the user sent: a new run starts (the detector's
``break_run``), so that "try again" is not refused for the loop before it."""

# What each CLI's tools are, and how its answers read: its module of loopfuse.harness
# (a shell's ``description`` is prose, not the call; Gemini CLI's process group is new on
# every call; the exit status each writes).
_HARNESS: Final[dict[Agent, Harness]] = {
    "claude-code": claude_code.HARNESS,
    "codex": codex.HARNESS,
    "gemini": gemini_cli.HARNESS,
    "qwen": qwen_code.HARNESS,
}


class HookPayloadError(ValueError):
    """What a CLI sent is not a tool event this hook can read (the call is allowed)."""


class NotAUserPrompt(HookPayloadError):
    """The CLI's prompt event, fired when no user spoke: Qwen Code fires
    ``UserPromptSubmit`` with an empty ``prompt`` each time it sends the model the
    answers of its calls (observed with 0.24.4; the user's own prompt carries its text
    and ``submitted_prompt``). Not a new run, and nothing wrong: the hook answers
    nothing and logs nothing."""


class HookEvent(NamedTuple):
    """One hook invocation, read: which CLI, before or after which tool call.

    ``answer`` and ``error`` are set after a call: the answer's text (or JSON value) with
    its volatile parts removed, and whether the call failed (``None``: not known). The
    end of a batch (phase ``"batch"``) has the CLI's ids of its calls in ``tool_input``.
    """

    agent: Agent
    phase: Literal["before", "after", "turn", "batch"]
    event_name: str
    session: str
    tool_name: str
    tool_input: object
    call_id: str | None = None
    answer: object = None
    error: bool | None = None
    exit_code: int | None = None


def _agent_of(payload: dict[str, object], event_name: str) -> Agent:
    if event_name in ("BeforeTool", "AfterTool"):
        return "gemini"
    if "turn_id" in payload:
        return "codex"
    # Qwen Code's tool events carry the model's call id beside its own ``tool_use_id``,
    # and its prompt ids end ``########N`` (Claude Code's are bare UUIDs).
    prompt = payload.get("prompt_id")
    if "tool_call_id" in payload or (isinstance(prompt, str) and "########" in prompt):
        return "qwen"
    return "claude-code"


def parse_event(payload: object, agent: str | None = None) -> HookEvent:
    """The tool event in ``payload`` (a CLI's hook input); ``agent`` forces the CLI.

    Raises :class:`HookPayloadError` for anything that is not a before- or after-tool
    event of the CLI, or its event for a user's prompt.
    """
    if not isinstance(payload, dict):
        raise HookPayloadError("the hook input is not a JSON object")
    event_name = payload.get("hook_event_name")
    if not isinstance(event_name, str):
        raise HookPayloadError("the hook input has no hook_event_name")
    who: Agent
    if agent is None:
        who = _agent_of(payload, event_name)
    elif agent in AGENTS:
        who = agent
    else:
        raise HookPayloadError(f"unknown agent {agent!r}")
    if event_name in BEFORE_EVENTS[who]:
        phase: Literal["before", "after", "turn", "batch"] = "before"
    elif event_name in AFTER_EVENTS[who]:
        phase = "after"
    elif event_name in TURN_EVENTS[who]:
        phase = "turn"
    elif event_name in BATCH_EVENTS[who]:
        phase = "batch"
    else:
        raise HookPayloadError(f"{who} event {event_name!r} is not a tool event")
    session = payload.get("session_id")
    if not isinstance(session, str) or not session:
        raise HookPayloadError("the hook input has no session_id")
    if phase == "turn":
        if who == "qwen" and not (payload.get("prompt") or payload.get("submitted_prompt")):
            raise NotAUserPrompt("Qwen Code sends the model its calls' answers")
        return HookEvent(who, phase, event_name, session, "", None)
    if phase == "batch":
        calls = payload.get("tool_calls")
        if not isinstance(calls, list):
            raise HookPayloadError("the hook input has no tool_calls")
        ids = [c.get("tool_use_id") for c in calls if isinstance(c, dict)]
        return HookEvent(
            who, phase, event_name, session, "", [i for i in ids if isinstance(i, str)]
        )
    tool_name = payload.get("tool_name")
    if not isinstance(tool_name, str) or not tool_name:
        raise HookPayloadError("the hook input has no tool_name")
    tool_input = _HARNESS[who].call(tool_name, payload.get("tool_input"))
    call_id = payload.get("tool_use_id")
    event = HookEvent(
        who,
        phase,
        event_name,
        session,
        tool_name,
        tool_input,
        call_id if isinstance(call_id, str) and call_id else None,
    )
    if phase == "before":
        return event
    answer, error, code = _answer(who, event_name, payload)
    return event._replace(answer=answer, error=error, exit_code=code)


def _answer(
    agent: Agent, event_name: str, payload: dict[str, object]
) -> tuple[object, bool | None, int | None]:
    """The answer of the call, whether it failed, and its exit status when given."""
    if agent == "claude-code":
        if event_name == "PostToolUseFailure":
            text = payload.get("error")
            text = text if isinstance(text, str) else json.dumps(text)
            return text, True, claude_code.exit_code(text)
        response = payload.get("tool_response")
        if isinstance(response, dict) and isinstance(response.get("stdout"), str):
            parts = [response["stdout"], response.get("stderr")]
            return "\n".join(p for p in parts if isinstance(p, str) and p), False, 0
        return response, False, None
    if agent == "qwen":
        return _qwen_answer(event_name, payload)
    response = payload.get("tool_response")
    if agent == "codex":
        return response, None, None  # one string, no exit status: the detector judges
    # Gemini CLI: {llmContent, returnDisplay, error?}; the shell's llmContent names the
    # exit code and a process group that changes on every call.
    if not isinstance(response, dict):
        return response, None, None
    failure = response.get("error")
    content = response.get("llmContent")
    if isinstance(content, str):
        code = gemini_cli.exit_code(content)
        text = gemini_cli.HARNESS.without_volatile(content)
        if failure not in (None, "", {}):
            return text, True, code
        return text, (code != 0) if code is not None else None, code
    if failure not in (None, "", {}):
        return failure, True, None
    return content if content is not None else response.get("returnDisplay"), None, None


def _qwen_answer(
    event_name: str, payload: dict[str, object]
) -> tuple[object, bool | None, int | None]:
    """Qwen Code's answer: ``tool_response.llmContent`` after a success, ``error`` after a
    failure (a command that exited non-zero included), both in Gemini CLI's shell frame."""
    failed = event_name == "PostToolUseFailure"
    if failed:
        content = payload.get("error")
    else:
        response = payload.get("tool_response")
        content = response.get("llmContent") if isinstance(response, dict) else response
    if not isinstance(content, str):
        return content, (True if failed else None), None
    code = qwen_code.exit_code(content)
    text = qwen_code.HARNESS.without_volatile(content)
    if failed:
        return text, True, code
    return text, (code != 0) if code is not None else None, code


def can_end_session(agent: str) -> bool:
    """Whether a hook can end this CLI's session (Codex, Qwen Code: no, see the module
    docstring)."""
    return agent not in ("codex", "qwen")


def render(event: HookEvent, action: Action, reason: str = "") -> tuple[str, int]:
    """The hook's stdout and exit status for ``action`` on ``event``, in its CLI's format.

    ``"allow"`` prints nothing; ``"note"`` (after a call) adds ``reason`` for the model;
    ``"deny"`` (before a call) refuses it with ``reason``; ``"end"`` refuses it and ends
    the session where the CLI can (elsewhere it is a ``"deny"``).

    >>> e = parse_event({"hook_event_name": "PreToolUse", "session_id": "s",
    ...     "tool_name": "Bash", "tool_input": {"command": "ls"}})
    >>> render(e, "deny", "stop")
    ('{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", \
"permissionDecisionReason": "stop"}}', 0)
    """
    if action == "allow" or event.phase in ("turn", "batch"):
        return "", 0
    if action == "note" and event.phase != "after":
        return "", 0
    if action == "note":
        note = {"hookEventName": event.event_name, "additionalContext": reason}
        return json.dumps({"hookSpecificOutput": note}), 0
    if event.phase != "before":
        # A call that already ran cannot be refused; only Claude Code's PostToolUse and
        # Gemini's AfterTool can still end the session.
        ends = action == "end" and event.event_name in ("PostToolUse", "AfterTool")
        if ends and can_end_session(event.agent):
            return json.dumps({"continue": False, "stopReason": reason}), 0
        return "", 0
    answer: dict[str, object]
    if event.agent == "gemini":
        answer = {"decision": "deny", "reason": reason}
    else:
        answer = {
            "hookSpecificOutput": {
                "hookEventName": event.event_name,
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }
    if action == "end" and can_end_session(event.agent):
        answer = {**answer, "continue": False, "stopReason": reason}
    return json.dumps(answer), 0


def render_user_message(event: HookEvent, text: str) -> tuple[str, int]:
    """The hook's stdout and exit status that allow ``event``'s call (if any) and show
    ``text`` to the *user*, not the model: ``systemMessage``, a field every event's
    answer may carry in the three CLIs.

    Where each shows it (Claude Code 2.1.328, Codex 0.169.0, Gemini CLI 0.61.0):

    - Claude Code: in the session, as a hook message (the transcript keeps it as a
      ``hook_system_message`` attachment); the model does not get it;
    - Gemini CLI: in the terminal (headless, on stderr: ``Hook system message: ...``);
    - Codex: as a ``warning:`` entry of the hook's run, which its terminal UI lists;
      ``codex exec`` prints only the hook's status, not its entries.

    >>> e = parse_event({"hook_event_name": "BeforeTool", "session_id": "s",
    ...     "tool_name": "run_shell_command", "tool_input": {"command": "ls"}})
    >>> render_user_message(e, "settings refused")
    ('{"systemMessage": "settings refused"}', 0)
    """
    del event  # the same field in every CLI and event: allowed, with a message
    return json.dumps({"systemMessage": text}), 0
