"""pi's transcripts, as ``loopfuse scan`` reads them: :data:`SESSIONS`, the
``sessions`` of :data:`loopfuse.harness.pi.CLI`. Apart from the CLI's module
because only ``scan`` reads transcripts: the hook, which imports the CLI's module
at every tool call, imports no transcript reader."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from loopfuse.harness.pi import is_session_record, session_body, sessions_dir
from loopfuse.harness.transcripts import AgentRun, Lines, SessionFolder, SessionFormat, run_meta

__all__ = ["SESSIONS", "PiSessions"]


class PiSessions(SessionFormat):
    """pi's session files: ``~/.pi/agent/sessions/--<cwd>--/<time>_<id>.jsonl``
    (:func:`sessions_dir`), each one run (:func:`session_body`)."""

    agent = "pi"
    priority = 80  # its records have no sessionId: asked after every other CLI

    def folder(self, env: Mapping[str, str]) -> SessionFolder:
        """:func:`sessions_dir`."""
        return SessionFolder(self.agent, (sessions_dir(env),), "PI_CODING_AGENT_DIR")

    def recognises(self, record: dict[str, Any]) -> bool:
        """A record of a pi session file (:func:`is_session_record`)."""
        return is_session_record(record)

    def read_runs(self, name: str, path: Path | None, lines: Lines) -> list[AgentRun]:
        """The session's one run."""
        del path
        read = session_body(lines)
        if read is None:
            return []
        body, meta, problems = read
        for number, text in problems:
            lines.problem(number, text)
        return [AgentRun(name, body, run_meta(agent=self.agent, **meta))]


SESSIONS: Final = PiSessions()
"""pi's transcripts, as ``loopfuse scan`` reads them."""
