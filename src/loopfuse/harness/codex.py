"""Codex CLI (OpenAI's terminal coding agent): its tools, and how its answers fail.

Facts observed with Codex 0.169 (``../shared/agent-clis``) and in real rollouts:

- ``exec_command {cmd}`` runs a command line (``shell``, ``shell_command``,
  ``local_shell`` in older versions). A command still running after its
  ``yield_time_ms`` answers ``Process running with session ID N``; the model then polls it
  with ``write_stdin {session_id, chars}``: with empty ``chars`` that is a **wait** (it
  types nothing and reads what the process printed since), with text it types into the
  process (state-changing). A poll answered ``Process running …`` is progress however
  quiet the process is; ``Process exited with code N`` ends the wait.
- ``apply_patch`` edits files; ``read_file``, ``list_dir``, ``grep_files``,
  ``view_image`` read; ``web_search`` reads the web; ``update_plan`` keeps its plan.
- Results carry no error flag: a command's answer starts with ``Process exited with code
  N`` (``Exit code: N`` in older versions, or JSON ``metadata.exit_code``): a non-zero
  one is a failure whatever the output says; exit 0 is left to the other evidence (a
  reproduction script exits 0 and prints the bug). Its hooks see ``tool_response`` as
  one string.

>>> HARNESS.kind("write_stdin", {"session_id": 7, "chars": ""})
<ToolKind.WAIT: 'wait'>
>>> HARNESS.kind("write_stdin", {"session_id": 7, "chars": "q"})
<ToolKind.OTHER: 'other'>
>>> HARNESS.failed("exec_command", "Process exited with code 0\\nOutput:\\nok\\n") is None
True
>>> HARNESS.failed("exec_command", "Exit code: 2\\nWall time: 1 seconds\\nOutput:\\n")
True

Its hooks (:data:`CLI`): Claude Code's protocol (:mod:`~loopfuse.harness.json_hooks`), in
``$CODEX_HOME/hooks.json`` only.

Its transcripts (:data:`SESSIONS`): ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl``
(and ``archived_sessions``; ``CODEX_HOME`` defaults to ``~/.codex``), replayed as
Responses ``input`` items. A resumed session is appended to the same rollout file: one
run. Its ``response_item`` lines are the conversation; ``compacted`` lines (a copy of
the history) and the other ``event_msg`` lines are not; each response's ``token_count``
(or ``token_usage_record``) is its usage. A command's output is what the model saw,
without the two lines that differ on every call (``Chunk ID``, ``Wall time``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Final

from loopfuse.errors import ConfigError
from loopfuse.harness.agent_cli import reader_names
from loopfuse.harness.base import FileAccess, Harness, Tool, ToolKind
from loopfuse.harness.json_hooks import JsonHooksCli

if TYPE_CHECKING:
    from pathlib import Path

    from loopfuse.harness.agent_cli import HookInstaller

__all__ = ["CLI", "HARNESS", "CodexCli", "exit_code"]

_READ, _WAIT, _SHELL, _EDITOR, _COSTLY, _OTHER = (
    ToolKind.READ, ToolKind.WAIT, ToolKind.SHELL, ToolKind.EDITOR, ToolKind.COSTLY,
    ToolKind.OTHER,
)  # fmt: skip

# The header Codex writes before a command's output: an exit line within its first lines.
_EXIT: Final = re.compile(r"^(?:Process exited with code|Exit code:) (-?\d{1,4})\s*$", re.M)
_OUTPUT: Final = re.compile(r"^Output:", re.M)
_HEADER: Final = 512  # characters of an answer read for its header
_JSON_EXIT: Final = re.compile(r'"exit_code"\s*:\s*(-?\d{1,4})\b')


def exit_code(text: str) -> int | None:
    """The exit status Codex wrote in a command's answer, or ``None``.

    >>> exit_code("Chunk ID: a1\\nWall time: 0.1 seconds\\nProcess exited with code 1\\n")
    1
    >>> exit_code('{"output": "ok", "metadata": {"exit_code": 0, "duration_seconds": 1}}')
    0
    >>> exit_code("Process running with session ID 4\\nOutput:\\n") is None
    True
    """
    head = text[:_HEADER]
    if "xit" not in head and '"exit_code"' not in head:
        return None  # no exit line: most answers, settled by two substring searches
    output = _OUTPUT.search(head)  # the command's own words start there
    found = _EXIT.search(head, 0, output.start() if output is not None else len(head))
    if found is None and head.startswith("{"):
        found = _JSON_EXIT.search(head)
    return int(found.group(1)) if found is not None else None


def _answer_failed(text: str) -> bool | None:
    # A command that exited 0 may still print its failure (a reproduction script): only
    # a non-zero exit is the convention's word; the rest is left to the other evidence.
    code = exit_code(text)
    return True if code is not None and code != 0 else None


HARNESS: Final = Harness(
    "codex",
    "Codex CLI",
    tools=(
        Tool("exec_command", _SHELL, prose=("description",)),
        # Its hooks name the shell call "Bash" (tool_input {command}).
        Tool("Bash", _SHELL, prose=("description",)),
        Tool("shell", _SHELL, prose=("description",)),
        Tool("shell_command", _SHELL),
        Tool("local_shell", _SHELL),
        Tool("write_stdin", _OTHER, argument="chars", when_empty=_WAIT),
        Tool("apply_patch", _EDITOR, files=FileAccess.EDITS),
        Tool("read_file", _READ, files=FileAccess.READS),
        Tool("list_dir", _READ, files=FileAccess.READS),
        Tool("grep_files", _READ, files=FileAccess.READS),
        Tool("view_image", _READ),
        Tool("web_search", _COSTLY),
        Tool("update_plan", _OTHER),
    ),
    running=("Process running with session ID",),
    answer_failed=_answer_failed,
    failure_fields=("metadata.exit_code",),
)
"""Codex CLI's tools and conventions."""


class CodexCli(JsonHooksCli):
    """Codex's hooks: ``PreToolUse``, ``PostToolUse`` (``tool_response`` one string, no
    exit status: the detector judges), ``UserPromptSubmit``; its payloads carry a
    ``turn_id``.

    **A hook cannot end a Codex session**: ``continue: false`` with a deny makes it run
    the command, so it is never sent. Codex runs a new hook only once the user trusts it.
    """

    name = "codex"
    title = "Codex"
    harness = HARNESS
    before_events = ("PreToolUse",)
    after_events = ("PostToolUse",)
    turn_events = ("UserPromptSubmit",)
    can_end_session = False
    scopes = ("user",)  # Codex reads hooks from $CODEX_HOME/hooks.json only

    @cached_property
    def installer(self) -> HookInstaller:  # type: ignore[override]
        """Its hooks in the settings file's ``hooks`` map, built on first use (``init`` and
        ``doctor`` need it; the hook imports no installer)."""
        from loopfuse.harness.installers import HooksMap

        return HooksMap(
            ("PreToolUse", "PostToolUse", "UserPromptSubmit"),
            untargeted=frozenset({"UserPromptSubmit"}),
        )

    sessions_module = "_codex_sessions"

    after_install = (
        "Codex runs a new hook only once you trust it: start `codex`, review its hooks and "
        "trust the loopfuse entries; for `codex exec` in automation that vets its hooks, "
        "add `--dangerously-bypass-hook-trust`."
    )

    def recognises(self, payload: dict[str, object]) -> bool:
        """Its payloads carry a ``turn_id``."""
        return "turn_id" in payload

    def probe_ids(self, session: str) -> dict[str, object]:
        """Its turn and call ids."""
        return {"turn_id": session, "tool_use_id": f"{session}-call"}

    def settings_path(self, project: bool, env: Mapping[str, str], cwd: Path) -> Path:
        """``$CODEX_HOME/hooks.json`` (default ``~/.codex``); no project scope."""
        from pathlib import Path  # here: the hook never asks, and imports no pathlib

        if project:
            raise ConfigError(
                "Codex reads hooks from $CODEX_HOME/hooks.json only: run without --project"
            )
        base = env.get("CODEX_HOME")
        home = Path(env.get("HOME") or Path.home())
        return (Path(base) if base else home / ".codex") / "hooks.json"


CLI: Final = CodexCli()
"""Codex's hook protocol."""


__getattr__ = reader_names("_codex_sessions", ["CodexSessions", "SESSIONS"], __name__)
"""Its transcript reader's names, read there on first use
(:func:`~loopfuse.harness.agent_cli.reader_names`)."""
