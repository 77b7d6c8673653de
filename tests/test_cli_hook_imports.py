"""``loopfuse hook`` runs at every tool call: it imports only what a hook uses. The installers
(``init``, ``doctor``), the transcript readers (``scan``) and what they need are imported on
first use, never on the hook's path (issue 28's budget)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loopfuse.harness.agent_cli import AGENT_CLIS, agent_cli

NOT_ON_THE_HOOK_PATH = (
    "loopfuse.harness.installers",
    "loopfuse.harness.settings_text",
    "loopfuse.harness.transcripts",
    "loopfuse._jsonlines",
    "tomllib",
    "importlib.resources",
    "pathlib",  # with urllib.parse and ipaddress: about 3 ms; only init, doctor, scan need it
)

CHILD = """
import json, sys
from loopfuse.cli.hook import handle
from loopfuse.harness import file_tools, not_run_answers, reader_for
from loopfuse.harness.agent_cli import agent_cli

agent, state = sys.argv[1], sys.argv[2]
cli = agent_cli(agent)
payload = cli.probe_event("s1")
handle(json.dumps(payload).encode(), ["--agent", agent, "--state-dir", state], {}, lambda: 1e9)
reader_for("auto"), file_tools(), not_run_answers()  # every harness module, as the detector's
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize("agent", list(AGENT_CLIS))
def test_the_hook_path_imports_no_installer_nor_transcript_reader(
    agent: str, tmp_path: Path
) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, agent, str(tmp_path / "state")],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    imported = set(json.loads(done.stdout.splitlines()[-1]))
    assert f"loopfuse.harness.{AGENT_CLIS[agent]}" in imported  # the hook read its CLI
    assert not imported & set(NOT_ON_THE_HOOK_PATH)
    assert not {m for m in imported if m.endswith("_sessions")}


@pytest.mark.parametrize("agent", list(AGENT_CLIS))
def test_init_and_scan_still_find_the_installer_and_the_transcripts(agent: str) -> None:
    cli = agent_cli(agent)
    assert cli.installer is cli.installer  # built once
    assert cli.installer.commands("", lambda command: True) == {}
    if cli.sessions is not None:
        assert cli.sessions.agent == agent
