"""The coding-agent CLIs ``loopfuse hook`` guards, as the command line sees them: the
registry of :mod:`loopfuse.harness.agent_cli`, asked by ``--agent`` name.

Each CLI's hook protocol (its events, how a payload reads, how the hook answers) is its
own module's ``CLI`` (:class:`~loopfuse.harness.agent_cli.AgentCli`); this module names
none: :func:`parse_event` reads a payload with the CLI the hook was told (or the one
that recognises it, never the environment, which Qwen Code fills with Claude's and
Gemini's variables too) and :func:`render` writes the answer in that CLI's format. The
tables (:data:`BEFORE_EVENTS` …) are computed from the registry, each CLI's module
imported when its row is first read.

>>> event = parse_event({"hook_event_name": "BeforeTool", "session_id": "s",
...     "tool_name": "run_shell_command", "tool_input": {"command": "ls", "description": "x"}})
>>> event.agent, event.phase, event.tool_input
('gemini', 'before', {'command': 'ls'})
>>> BEFORE_EVENTS["gemini"], AGENTS[:2]
(('BeforeTool',), ('claude-code', 'codex'))
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Final

from loopfuse.errors import ConfigError
from loopfuse.harness.agent_cli import (
    AGENT_CLIS,
    Action,
    AgentCli,
    HookEvent,
    HookPayloadError,
    NotAUserPrompt,
    agent_cli,
    recognised,
)

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

AGENTS: Final[tuple[str, ...]] = tuple(AGENT_CLIS)
"""The CLIs, as ``--agent`` names them."""


class _Table(Mapping[str, tuple[str, ...]]):
    """One column of the registry, by ``--agent`` name (each CLI read on first use)."""

    def __init__(self, column: Callable[[AgentCli], tuple[str, ...]]) -> None:
        self._column = column

    def __getitem__(self, name: str) -> tuple[str, ...]:
        if name not in AGENT_CLIS:
            raise KeyError(name)
        return self._column(agent_cli(name))

    def __iter__(self) -> Iterator[str]:
        return iter(AGENTS)

    def __len__(self) -> int:
        return len(AGENTS)


BEFORE_EVENTS: Final[Mapping[str, tuple[str, ...]]] = _Table(lambda cli: cli.before_events)
"""Each CLI's hook events that come before a tool call."""
AFTER_EVENTS: Final[Mapping[str, tuple[str, ...]]] = _Table(lambda cli: cli.after_events)
"""Each CLI's hook events that come after a tool call (with its answer)."""
BATCH_EVENTS: Final[Mapping[str, tuple[str, ...]]] = _Table(lambda cli: cli.batch_events)
"""Each CLI's hook event for the end of a batch of parallel calls, listing them."""
TURN_EVENTS: Final[Mapping[str, tuple[str, ...]]] = _Table(lambda cli: cli.turn_events)
"""Each CLI's hook event for a prompt the user sent: a new run starts (the detector's
``break_run``), so that "try again" is not refused for the loop before it."""


def parse_event(payload: object, agent: str | None = None) -> HookEvent:
    """The tool event in ``payload`` (a CLI's hook input); ``agent`` forces the CLI.

    Raises :class:`HookPayloadError` for anything that is not a before- or after-tool
    event of the CLI, or its event for a user's prompt.
    """
    if not isinstance(payload, dict):
        raise HookPayloadError("the hook input is not a JSON object")
    if agent is None:
        # Told apart by the payload: the CLIs whose input names its event (a CLI whose
        # input does not, Copilot CLI's, is named by the command, --agent).
        if not isinstance(payload.get("hook_event_name"), str):
            raise HookPayloadError("the hook input has no hook_event_name")
        cli = recognised(payload)
    elif agent in AGENT_CLIS:
        cli = agent_cli(agent)
    else:
        raise HookPayloadError(f"unknown agent {agent!r}")
    return cli.parse(payload)


def can_end_session(agent: str) -> bool:
    """Whether a hook can end this CLI's session (``True`` for a name not registered)."""
    try:
        return agent_cli(agent).can_end_session
    except ConfigError:
        return True


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
    return agent_cli(event.agent).render(event, action, reason)


def render_user_message(event: HookEvent, text: str) -> tuple[str, int]:
    """The hook's stdout and exit status that allow ``event``'s call (if any) and show
    ``text`` to the *user*, not the model (by default ``systemMessage``, a field every
    event's answer may carry in Claude Code, Codex, Gemini CLI and Qwen Code).

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
    return agent_cli(event.agent).render_user_message(event, text)
