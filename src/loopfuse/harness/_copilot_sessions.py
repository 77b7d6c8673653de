"""Copilot CLI's (GitHub's terminal coding agent) transcripts: its reader is its harness
module's (:class:`loopfuse.harness.copilot_cli.CopilotSessions`), named here too for
:data:`~loopfuse.harness.transcripts.SCAN_ONLY`, which the registered CLI's own
``sessions`` now overrides."""

from __future__ import annotations

from loopfuse.harness.copilot_cli import SESSIONS, CopilotSessions

__all__ = ["SESSIONS", "CopilotSessions"]
