"""The hook protocol Claude Code set, which Codex, Gemini CLI and Qwen Code follow: a
command run before and after every tool call with one JSON object on stdin
(``hook_event_name``, ``session_id``, ``tool_name``, ``tool_input``, ``tool_use_id``),
answering JSON on stdout.

Facts these rely on (observed with Claude Code 2.1, Codex 0.169, Gemini CLI 0.61, Qwen
Code 0.24.4; each CLI's own are in its module):

- a refusal is JSON on stdout with exit status 0 (exit status 2 would show the model the
  hook's command line): ``permissionDecision: "deny"`` in ``hookSpecificOutput``, unless
  the CLI says otherwise (:meth:`JsonHooksCli.refusal`);
- a note reaches the model as ``additionalContext`` from an after-tool event;
- ``continue: false`` with a refusal ends the session where the CLI honours it
  (:attr:`~loopfuse.harness.agent_cli.AgentCli.can_end_session`), and after a call only
  from the events of :attr:`JsonHooksCli.end_after_events`.
"""

from __future__ import annotations

import json
import os

from loopfuse.harness.agent_cli import (
    PROBE_TOOL,
    Action,
    AgentCli,
    HookEvent,
    HookPayloadError,
    Phase,
)

__all__ = ["JsonHooksCli"]


class JsonHooksCli(AgentCli):
    """A CLI speaking Claude Code's hook protocol; subclasses say how an answer reads
    (:meth:`answer`), and may change the refusal (:meth:`refusal`), the prompt check
    (:meth:`check_prompt`) and the test event's ids (:meth:`probe_ids`)."""

    end_after_events: tuple[str, ...] = ()
    """The after-call events whose ``continue: false`` ends the session."""

    def parse(self, payload: dict[str, object]) -> HookEvent:
        """The tool, prompt or batch event in ``payload``."""
        event_name = payload.get("hook_event_name")
        if not isinstance(event_name, str):
            raise HookPayloadError("the hook input has no hook_event_name")
        phase: Phase = self.phase_of(event_name)
        session = payload.get("session_id")
        if not isinstance(session, str) or not session:
            raise HookPayloadError("the hook input has no session_id")
        if phase == "turn":
            self.check_prompt(payload)
            return HookEvent(self.name, phase, event_name, session, "", None)
        if phase == "batch":
            calls = payload.get("tool_calls")
            if not isinstance(calls, list):
                raise HookPayloadError("the hook input has no tool_calls")
            ids = [c.get("tool_use_id") for c in calls if isinstance(c, dict)]
            found = [i for i in ids if isinstance(i, str)]
            return HookEvent(self.name, phase, event_name, session, "", found)
        tool_name = payload.get("tool_name")
        if not isinstance(tool_name, str) or not tool_name:
            raise HookPayloadError("the hook input has no tool_name")
        tool_input = self.harness.call(tool_name, payload.get("tool_input"))
        call_id = payload.get("tool_use_id")
        event = HookEvent(
            self.name,
            phase,
            event_name,
            session,
            tool_name,
            tool_input,
            call_id if isinstance(call_id, str) and call_id else None,
        )
        if phase == "before":
            return event
        answer, error, code = self.answer(event_name, payload)
        return event._replace(answer=answer, error=error, exit_code=code)

    def check_prompt(self, payload: dict[str, object]) -> None:
        """Raise :class:`~loopfuse.harness.agent_cli.NotAUserPrompt` when the prompt
        event ``payload`` is not a prompt the user sent (default: it always is)."""
        del payload

    def answer(
        self, event_name: str, payload: dict[str, object]
    ) -> tuple[object, bool | None, int | None]:
        """The answer of the call, whether it failed and its exit status when known
        (default: ``tool_response`` as it came, the rest unknown)."""
        del event_name
        return payload.get("tool_response"), None, None

    def refusal(self, event: HookEvent, reason: str) -> dict[str, object]:
        """The answer that refuses ``event``'s call with ``reason``."""
        return {
            "hookSpecificOutput": {
                "hookEventName": event.event_name,
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }

    def render(self, event: HookEvent, action: Action, reason: str) -> tuple[str, int]:
        """The hook's stdout and exit status for ``action`` on ``event``."""
        if action == "allow" or event.phase in ("turn", "batch"):
            return "", 0
        if action == "note" and event.phase != "after":
            return "", 0
        if action == "note":
            note = {"hookEventName": event.event_name, "additionalContext": reason}
            return json.dumps({"hookSpecificOutput": note}), 0
        if event.phase != "before":
            # A call that already ran cannot be refused; some after-call events can
            # still end the session.
            ends = action == "end" and event.event_name in self.end_after_events
            if ends and self.can_end_session:
                return json.dumps({"continue": False, "stopReason": reason}), 0
            return "", 0
        answer = self.refusal(event, reason)
        if action == "end" and self.can_end_session:
            answer = {**answer, "continue": False, "stopReason": reason}
        return json.dumps(answer), 0

    def probe_ids(self, session: str) -> dict[str, object]:
        """The ids the CLI's before-call payload carries beside the common fields."""
        del session
        return {}

    def probe_event(self, session: str) -> dict[str, object]:
        """A before-call payload of this CLI's shape, for ``loopfuse doctor``."""
        event: dict[str, object] = {
            "session_id": session,
            "transcript_path": "",
            "cwd": os.getcwd(),
            "hook_event_name": self.before_events[0],
            "tool_name": PROBE_TOOL,
            "tool_input": {"command": "loopfuse doctor"},
        }
        return {**event, **self.probe_ids(session)}
