"""``loopfuse init``: install ``loopfuse hook`` in Claude Code, Codex or Gemini CLI.

``loopfuse init --agent claude-code|codex|gemini [--project] [--remove] [--dry-run]``
adds one hook entry per tool event (see :data:`~loopfuse.cli.agents.BEFORE_EVENTS` and
:data:`~loopfuse.cli.agents.AFTER_EVENTS`) and for the user's prompt
(:data:`~loopfuse.cli.agents.TURN_EVENTS`) to the CLI's settings file, running the
absolute path of the installed ``loopfuse`` (so the hook works outside the venv):

- Claude Code: ``~/.claude/settings.json`` (``$CLAUDE_CONFIG_DIR``), or
  ``.claude/settings.json`` in the current folder with ``--project``;
- Codex: ``$CODEX_HOME/hooks.json`` (default ``~/.codex``); Codex runs a new hook only
  once the user trusts it, which ``init`` says how to do;
- Gemini CLI: ``~/.gemini/settings.json``, or ``.gemini/settings.json`` with
  ``--project``.

What is there is kept: other hooks, other settings. The file is replaced atomically
after a copy of the old one is kept beside it (``<file>.loopfuse-backup``); a second
run changes nothing; ``--remove`` takes out the entries ``init`` added, and nothing
else; a file that is not a JSON object is refused with a clear error. Exit status: 0
done (or nothing to do), 2 usage error or a settings file that cannot be edited.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

from loopfuse.cli.agents import AFTER_EVENTS, AGENTS, BATCH_EVENTS, BEFORE_EVENTS, TURN_EVENTS
from loopfuse.cli.hook_check import check_hook_command
from loopfuse.errors import ConfigError

__all__ = ["InitError", "hook_command", "install", "main", "settings_path", "uninstall"]

BACKUP_SUFFIX: Final = ".loopfuse-backup"
CODEX_TRUST: Final = (
    "Codex runs a new hook only once you trust it: start `codex`, review its hooks and "
    "trust the loopfuse entries; for `codex exec` in automation that vets its hooks, "
    "add `--dangerously-bypass-hook-trust`. Note: a hook cannot end a Codex session, so "
    "loopfuse refuses the looping call instead (--end-session has no effect there)."
)


_EVENTS: Final[dict[str, tuple[str, ...]]] = {
    agent: (*BEFORE_EVENTS[agent], *AFTER_EVENTS[agent], *TURN_EVENTS[agent], *BATCH_EVENTS[agent])
    for agent in AGENTS
}

# Events that are not about one tool, so have no tool to match.
_PROMPT_EVENTS: Final = frozenset(
    event for table in (TURN_EVENTS, BATCH_EVENTS) for events in table.values() for event in events
)


class InitError(Exception):
    """The settings file cannot be edited safely (the message says why)."""


def settings_path(agent: str, project: bool, env: Mapping[str, str], cwd: Path) -> Path:
    """The settings file ``init`` edits for ``agent``.

    >>> settings_path("codex", False, {"CODEX_HOME": "/c"}, Path("/p")).as_posix()
    '/c/hooks.json'
    >>> settings_path("gemini", True, {}, Path("/p")).as_posix()
    '/p/.gemini/settings.json'
    """
    home = Path(env.get("HOME") or Path.home())
    if agent == "claude-code":
        if project:
            return cwd / ".claude" / "settings.json"
        base = env.get("CLAUDE_CONFIG_DIR")
        return (Path(base) if base else home / ".claude") / "settings.json"
    if agent == "codex":
        if project:
            raise InitError(
                "Codex reads hooks from $CODEX_HOME/hooks.json only: run without --project"
            )
        base = env.get("CODEX_HOME")
        return (Path(base) if base else home / ".codex") / "hooks.json"
    if agent == "gemini":
        return (cwd if project else home) / ".gemini" / "settings.json"
    raise InitError(f"unknown agent {agent!r}: choose one of {', '.join(AGENTS)}")


def hook_command(agent: str, flags: Sequence[str] = (), executable: str | None = None) -> str:
    """The command line the CLI runs: the installed ``loopfuse`` by its absolute path
    (else this Python with ``-m loopfuse``), ``hook --agent AGENT`` and ``flags``."""
    script = executable or _installed_script()
    words = [*shlex.split(script), "hook", "--agent", agent, *flags]
    return shlex.join(words)


def _installed_script() -> str:
    beside = Path(sys.executable).parent / "loopfuse"
    if beside.is_file() and os.access(beside, os.X_OK):
        return shlex.quote(str(beside.absolute()))
    found = shutil.which("loopfuse")
    if found:
        return shlex.quote(str(Path(found).absolute()))
    return shlex.join([str(Path(sys.executable).absolute()), "-m", "loopfuse"])


def _is_ours(handler: object) -> bool:
    """Whether a hook handler runs ``loopfuse hook`` (any path, any flags)."""
    if not isinstance(handler, dict) or not isinstance(handler.get("command"), str):
        return False
    try:
        words = shlex.split(handler["command"])
    except ValueError:
        return False
    return any(
        words[at] == "hook" and os.path.basename(words[at - 1]) == "loopfuse"
        for at in range(1, len(words))
    )


def _events(settings: dict[str, Any], path: Path) -> dict[str, Any]:
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, dict):
        raise InitError(f"{path}: 'hooks' is not a JSON object; fix it by hand first")
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            raise InitError(f"{path}: hooks.{event} is not a list; fix it by hand first")
    return hooks


def install(settings: dict[str, Any], agent: str, command: str, path: Path) -> dict[str, Any]:
    """``settings`` with one ``command`` entry for each tool event of ``agent``; an
    entry of ``loopfuse hook`` already there is replaced, the others are kept."""
    result = uninstall(settings, agent, path)
    hooks = dict(_events(result, path))
    for event in _EVENTS[agent]:
        entry: dict[str, Any] = {"hooks": [{"type": "command", "command": command}]}
        if event not in _PROMPT_EVENTS:  # a prompt has no tool to match
            entry = {"matcher": "*", **entry}
        hooks[event] = [*hooks.get(event, []), entry]
    return {**result, "hooks": hooks}


def uninstall(settings: dict[str, Any], agent: str, path: Path) -> dict[str, Any]:
    """``settings`` without the ``loopfuse hook`` entries (and without the groups, event
    lists and ``hooks`` table that only held them)."""
    hooks = _events(settings, path)
    if not hooks:
        return settings
    kept: dict[str, Any] = {}
    for event, groups in hooks.items():
        remaining = []
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list) or not any(_is_ours(h) for h in handlers):
                remaining.append(group)
                continue
            others = [h for h in handlers if not _is_ours(h)]
            if others:
                remaining.append({**group, "hooks": others})
        if remaining or not groups:  # a list that only held loopfuse's entry goes
            kept[event] = remaining
    result = {k: v for k, v in settings.items() if k != "hooks"}
    if kept:
        result["hooks"] = kept
    return result


def _read(path: Path) -> tuple[dict[str, Any], str | None]:
    """The settings object in ``path`` and its text (``None``: no file)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, None
    except (OSError, UnicodeDecodeError) as exc:
        raise InitError(f"{path}: cannot read: {exc}") from None
    if not text.strip():
        return {}, text
    try:
        data = json.loads(text)
    except ValueError as exc:
        problem = f"{path}: not valid JSON ({exc}); fix it by hand, nothing was changed"
        raise InitError(problem) from None
    if not isinstance(data, dict):
        raise InitError(f"{path}: not a JSON object; fix it by hand, nothing was changed")
    return data, text


def _write(path: Path, text: str, old: str | None) -> Path | None:
    """Replace ``path`` with ``text`` atomically, keeping the old file as a backup."""
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    if old is not None:
        backup = path.with_name(path.name + BACKUP_SUFFIX)
        shutil.copy2(path, backup)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        if old is not None:
            shutil.copymode(path, temporary)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return backup


def build_parser() -> argparse.ArgumentParser:
    """The ``loopfuse init`` parser."""
    parser = argparse.ArgumentParser(
        prog="loopfuse init",
        description="Install `loopfuse hook` in a coding-agent CLI's settings "
        "(other settings and hooks kept; a backup beside the file).",
    )
    parser.add_argument("--agent", choices=AGENTS, required=True, help="the CLI to guard")
    parser.add_argument(
        "--project", action="store_true", help="this folder's settings, not the user's"
    )
    parser.add_argument("--remove", action="store_true", help="take loopfuse's hooks out")
    parser.add_argument("--dry-run", action="store_true", help="print the change, write nothing")
    parser.add_argument("--settings", metavar="FILE", help="edit this file instead")
    parser.add_argument("--mode", choices=("warn", "refuse", "note"), help="written to the hook")
    parser.add_argument(
        "--end-session", action="store_true", help="written to the hook (not for Codex)"
    )
    parser.add_argument("--config", metavar="FILE", help="TOML settings the hook reads")
    return parser


def main(
    argv: Sequence[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    executable: str | None = None,
) -> int:
    """Run ``loopfuse init``; returns the exit status."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    environment = os.environ if env is None else env
    try:
        if args.settings:
            path = Path(args.settings)
        else:
            path = settings_path(args.agent, args.project, environment, cwd or Path.cwd())
        settings, old = _read(path)
        flags = []
        if args.mode:
            flags += ["--mode", args.mode]
        if args.end_session:
            flags.append("--end-session")
        if args.config:
            if not args.remove:  # checked as every entry point checks it, before any write
                from loopfuse.settings import load_settings

                load_settings(args.config)
            flags += ["--config", str(Path(args.config).absolute())]
        command = hook_command(args.agent, flags, executable)
        if not args.remove:  # what the hook will read, checked as it reads it (#29 §2)
            check_hook_command(flags, environment)
        if args.remove:
            changed = uninstall(settings, args.agent, path)
        else:
            changed = install(settings, args.agent, command, path)
        if changed == settings and old is not None:
            out.write(f"{path}: already {'without' if args.remove else 'with'} loopfuse hook\n")
            return 0
        if changed == settings:  # no file, nothing to remove
            out.write(f"{path}: no loopfuse hook to remove\n")
            return 0
        text = json.dumps(changed, indent=2, ensure_ascii=False) + "\n"
        if args.dry_run:
            import difflib

            lines = difflib.unified_diff(
                (old or "").splitlines(keepends=True),
                text.splitlines(keepends=True),
                str(path) if old is not None else "/dev/null",
                f"{path} (after loopfuse init)",
            )
            out.write("".join(lines))
            return 0
        backup = _write(path, text, old)
    except (InitError, OSError, ConfigError) as exc:
        err.write(f"loopfuse init: error: {exc}\n")
        return 2
    verb = "removed from" if args.remove else "installed in"
    out.write(f"loopfuse hook {verb} {path}")
    out.write(f" (the old file is {backup})\n" if backup else "\n")
    if not args.remove:
        out.write(f"hook command: {command}\n")
        if args.agent == "codex":
            out.write(CODEX_TRUST + "\n")
    return 0
