"""``loopfuse init``: install ``loopfuse hook`` in Claude Code, Codex, Gemini CLI or Qwen Code.

``loopfuse init --agent claude-code|codex|gemini|qwen [--project] [--remove] [--dry-run]``
adds one hook entry per tool event (see :data:`~loopfuse.cli.agents.BEFORE_EVENTS` and
:data:`~loopfuse.cli.agents.AFTER_EVENTS`) and for the user's prompt
(:data:`~loopfuse.cli.agents.TURN_EVENTS`) to the CLI's settings file, running the
absolute path of the installed ``loopfuse`` (so the hook works outside the venv):

- Claude Code: ``~/.claude/settings.json`` (``$CLAUDE_CONFIG_DIR``), or
  ``.claude/settings.json`` in the current folder with ``--project``;
- Codex: ``$CODEX_HOME/hooks.json`` (default ``~/.codex``); Codex runs a new hook only
  once the user trusts it, which ``init`` says how to do;
- Gemini CLI: ``~/.gemini/settings.json``, or ``.gemini/settings.json`` with
  ``--project``;
- Qwen Code: ``~/.qwen/settings.json``, or ``.qwen/settings.json`` with ``--project``
  (its hooks are Claude Code's events, in its own file).

What is there is kept, byte for byte: the file is edited as text
(:mod:`loopfuse.cli.settings_text`; Gemini CLI's and Qwen Code's comments too), and
replaced atomically.
The user's original is kept beside it (``<file>.loopfuse-backup``), made once and never
overwritten; a second run changes nothing; ``--remove`` takes out the entries ``init``
added, and nothing else, and puts the original back as it was when nothing else
changed (no file, if there was none); a file that is not a JSON object is refused with a
clear error. Exit status: 0 done (or nothing to do), 2 usage error or a settings file
that cannot be edited.

Links (see :mod:`loopfuse.cli.safe_files`): ``init`` never writes through a link it did
not make. The user's own settings (their home, ``$CLAUDE_CONFIG_DIR``, ``$CODEX_HOME``,
or ``--settings``) may be a link into their dotfiles: the file it points to is edited
and the link kept. In a project's folder (``--project``: a checkout of someone else's
repository, whose links a ``git clone`` made) a link as the settings file or its folder
is refused. The backup is created new (``O_EXCL | O_NOFOLLOW``), and a link already at
its name is refused, in either scope.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import shutil
import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

from loopfuse.cli import settings_text
from loopfuse.cli.agents import (
    AFTER_EVENTS,
    AGENTS,
    BATCH_EVENTS,
    BEFORE_EVENTS,
    TURN_EVENTS,
    can_end_session,
)
from loopfuse.cli.hook_check import check_hook_command
from loopfuse.cli.safe_files import UnsafeFileError, create_new, read_regular, replace_file
from loopfuse.errors import ConfigError

__all__ = ["InitError", "hook_command", "install", "main", "settings_path", "uninstall"]

BACKUP_SUFFIX: Final = ".loopfuse-backup"
MAX_SETTINGS_BYTES: Final = 4 * 1024 * 1024
"""A settings file larger than this is refused (not read)."""
NEW_FILE_MODE: Final = 0o644
"""The mode of a settings file ``init`` creates (an existing file keeps its own)."""
CODEX_TRUST: Final = (
    "Codex runs a new hook only once you trust it: start `codex`, review its hooks and "
    "trust the loopfuse entries; for `codex exec` in automation that vets its hooks, "
    "add `--dangerously-bypass-hook-trust`."
)
CODEX_END: Final = (
    "--end-session has no effect for Codex, so it is not written: a hook cannot end a "
    "Codex session, and loopfuse refuses the looping call instead."
)
QWEN_END: Final = (
    "--end-session has no effect for Qwen Code, so it is not written: a hook cannot end a "
    "Qwen Code session, and loopfuse refuses the looping call instead."
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
    if agent == "qwen":
        return (cwd if project else home) / ".qwen" / "settings.json"
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
    """Whether a hook handler is one ``init`` writes: a command whose words are exactly
    a ``loopfuse`` console script (any path; or ``PYTHON -m loopfuse``), then ``hook
    --agent AGENT`` and flags ``loopfuse hook`` reads. A command that merely contains the
    words ``loopfuse hook`` (another tool's wrapper, a shell line) is not ours.

    >>> _is_ours({"type": "command", "command": "/v/bin/loopfuse hook --agent codex"})
    True
    >>> _is_ours({"type": "command", "command": "notify loopfuse hook --agent codex"})
    False
    """
    if not isinstance(handler, dict) or handler.get("type") != "command":
        return False
    command = handler.get("command")
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if words and os.path.basename(words[0]) == "loopfuse":
        rest = words[1:]
    elif words[1:3] == ["-m", "loopfuse"]:
        rest = words[3:]
    else:
        return False
    if rest[:2] != ["hook", "--agent"] or len(rest) < 3 or rest[2] not in AGENTS:
        return False
    from loopfuse.cli.hook import read_flags
    from loopfuse.errors import ConfigError

    try:
        read_flags(rest[1:])
    except ConfigError:
        return False
    return True


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


def _install_text(text: str, agent: str, command: str, comments: bool) -> str:
    """``text`` with loopfuse's entries for ``agent`` (and none other of loopfuse's),
    spliced in: see :mod:`loopfuse.cli.settings_text`. Entries of an earlier run are
    replaced where they are: the lists and the ``hooks`` object they were in stay, so
    that a re-run with other options differs from the first run only in the command."""
    text = _uninstall_text(text, comments, keep=frozenset(_EVENTS[agent]))
    entries = {}
    for event in _EVENTS[agent]:
        entry: dict[str, Any] = {"hooks": [{"type": "command", "command": command}]}
        if event not in _PROMPT_EVENTS:  # a prompt has no tool to match
            entry = {"matcher": "*", **entry}
        entries[event] = entry
    root = _root(text, comments)
    at = root.find("hooks")
    if at is None:
        return settings_text.append(text, root, {e: [v] for e, v in entries.items()}, "hooks")
    for event, entry in entries.items():
        hooks = settings_text.outline(text, root.values[at][0], comments)
        where = hooks.find(event)
        if where is None:
            text = settings_text.append(text, hooks, [entry], event)
        else:
            groups = settings_text.outline(text, hooks.values[where][0], comments)
            text = settings_text.append(text, groups, entry)
        root = _root(text, comments)
    return text


def _uninstall_text(text: str, comments: bool, keep: frozenset[str] = frozenset()) -> str:
    """``text`` without loopfuse's entries, one at a time: a group that held only
    loopfuse's handler goes, so does an event's list and the ``hooks`` object that held
    only loopfuse's groups (as :func:`uninstall` does), but the lists of the events in
    ``keep`` (about to be filled again) and then the ``hooks`` object, which stay."""
    while True:
        edited = _remove_one(text, comments, keep)
        if edited is None:
            return text
        text = edited


def _remove_one(text: str, comments: bool, keep: frozenset[str]) -> str | None:
    """``text`` without the first of loopfuse's entries, else ``None``."""
    plain = settings_text.strip_comments(text, comments)
    root = _root(text, comments)
    at = root.find("hooks")
    if at is None or text[root.values[at][0]] != "{":
        return None
    hooks = settings_text.outline(text, root.values[at][0], comments)
    for event, (start, _) in enumerate(hooks.values):
        if text[start] != "[":
            continue
        groups = settings_text.outline(text, start, comments)
        for index, (group_start, group_end) in enumerate(groups.values):
            group = json.loads(plain[group_start:group_end])
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list) or not any(_is_ours(h) for h in handlers):
                continue
            if all(_is_ours(h) for h in handlers):  # the group was loopfuse's
                if len(groups.elements) > 1 or hooks.keys[event] in keep:
                    return settings_text.delete(text, groups, index)
                if len(hooks.elements) > 1 or keep:  # the event's list held only loopfuse's
                    return settings_text.delete(text, hooks, event)
                return settings_text.delete(text, root, at)  # so did the hooks object
            table = settings_text.outline(text, group_start, comments)
            inner = settings_text.outline(
                text, table.values[table.keys.index("hooks")][0], comments
            )
            mine = next(i for i, h in enumerate(handlers) if _is_ours(h))
            return settings_text.delete(text, inner, mine)
    return None


def _root(text: str, comments: bool) -> settings_text.Container:
    start = len(text) - len(text.lstrip())
    return settings_text.outline(text, start, comments)


def _read(path: Path, comments: bool) -> tuple[dict[str, Any], str | None, int | None]:
    """The settings object in ``path``, its text (``None``: no file) and its mode.

    Read as a regular file only, never blocked on a FIFO (:mod:`loopfuse.cli.safe_files`);
    ``path`` is the file itself, links already resolved by :func:`_target`."""
    try:
        raw = read_regular(str(path), MAX_SETTINGS_BYTES)
        mode = stat.S_IMODE(os.stat(path, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return {}, None, None
    except UnsafeFileError as exc:
        raise InitError(f"{path}: {exc.strerror}; nothing was changed") from None
    except OSError as exc:
        raise InitError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_SETTINGS_BYTES:
        raise InitError(f"{path}: larger than {MAX_SETTINGS_BYTES} bytes; nothing was changed")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InitError(f"{path}: cannot read: {exc}") from None
    if not text.strip():
        return {}, text, mode
    try:
        data = settings_text.load(text, comments)
        _root(text, comments)  # its shape, as the edits read it (duplicate keys refused)
    except settings_text.SettingsTextError as exc:
        problem = f"{path}: not valid JSON ({exc}); fix it by hand, nothing was changed"
        raise InitError(problem) from None
    if not isinstance(data, dict):
        raise InitError(f"{path}: not a JSON object; fix it by hand, nothing was changed")
    return data, text, mode


def _target(path: Path, follow: bool) -> Path:
    """The file to read and replace for the settings ``path``: ``path`` itself, or where
    its link points when ``follow`` (the user's own settings: a dotfiles link is theirs).

    In a project's folder (``follow`` false), a link, as the settings file or as its
    folder, is the repository's, not the user's: refused. Anything but a regular file
    (a FIFO, a folder) is refused."""
    if not follow:
        for link in (path.parent, path):
            if link.is_symlink():
                raise InitError(
                    f"{link}: a symbolic link in the project's folder; loopfuse init does "
                    "not write through a link it did not make there (edit the settings by "
                    "hand, or install for your user without --project)"
                )
    target = Path(os.path.realpath(path)) if follow and path.is_symlink() else path
    if target != path and not target.exists():
        raise InitError(f"{path}: a link to {target}, which does not exist; nothing was changed")
    if target.exists() and not target.is_file():
        raise InitError(f"{target}: not a regular file; nothing was changed")
    return target


def _same_but_spacing(text: str, other: str, comments: bool) -> bool:
    """Whether two settings texts differ at most in spacing outside their strings (a
    blank text reads as ``{}``, as the CLIs read it)."""
    if (re.sub(r"\s+", "", text) or "{}") != (re.sub(r"\s+", "", other) or "{}"):
        return False
    try:
        read = [settings_text.load(t, comments) if t.strip() else {} for t in (text, other)]
        return bool(read[0] == read[1])
    except settings_text.SettingsTextError:
        return False


def _keep_backup(path: Path, old: bytes, mode: int) -> Path:
    """The backup of the user's original ``path``: created once, new (never through a
    link: :func:`~loopfuse.cli.safe_files.create_new`), at the first write; kept as it
    is by every later one, so that it holds the file as it was before loopfuse."""
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    try:
        create_new(str(backup), old, mode)
    except FileExistsError:
        info = os.lstat(backup)
        if not stat.S_ISREG(info.st_mode):
            raise InitError(
                f"{backup}: exists and is not a regular file (a link?); loopfuse init does "
                "not write through it: remove it, nothing was changed"
            ) from None
    return backup


def _backup_text(path: Path) -> bytes | None:
    """The backup of ``path`` if there is one (a regular file, not followed)."""
    try:
        return read_regular(str(path.with_name(path.name + BACKUP_SUFFIX)), MAX_SETTINGS_BYTES)
    except OSError:
        return None


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
        done = _run(args, environment, cwd or Path.cwd(), executable, out)
    except (InitError, OSError, UnicodeError, ConfigError) as exc:
        err.write(f"loopfuse init: error: {exc}\n")
        return 2
    if done:
        out.write(done)
    return 0


def _run(
    args: argparse.Namespace,
    env: Mapping[str, str],
    cwd: Path,
    executable: str | None,
    out: TextIO,
) -> str:
    """Do what ``args`` ask; the report to print (what was written, and where)."""
    if args.settings:
        path = Path(args.settings)
    else:
        path = settings_path(args.agent, args.project, env, cwd)
    # Gemini CLI (and Qwen Code, its fork) strip comments before JSON.parse.
    comments = args.agent in ("gemini", "qwen")
    target = _target(path, follow=not args.project)
    settings, old, mode = _read(target, comments)
    flags = []
    if args.mode:
        flags += ["--mode", args.mode]
    if args.end_session and can_end_session(args.agent):  # not Codex's, not Qwen Code's
        flags.append("--end-session")
    if args.config:
        if not args.remove:  # checked as every entry point checks it, before any write
            from loopfuse.settings import load_settings

            load_settings(args.config)
        flags += ["--config", str(Path(args.config).absolute())]
    command = hook_command(args.agent, flags, executable)
    if not args.remove:  # what the hook will read, checked as it reads it (#29 §2)
        check_hook_command(flags, env)
    if args.remove:
        changed = uninstall(settings, args.agent, path)
    else:
        changed = install(settings, args.agent, command, path)
    no_end = {"codex": CODEX_END, "qwen": QWEN_END}.get(args.agent, "")
    codex_end = no_end + "\n" if no_end and args.end_session else ""
    if changed == settings and old is not None:
        already = f"{path}: already {'without' if args.remove else 'with'} loopfuse hook\n"
        return already + codex_end
    if changed == settings and old is None:  # no file, nothing to remove
        return f"{path}: no loopfuse hook to remove\n"
    backup_raw = _backup_text(path)
    remove_file = restored = False
    if args.remove:
        assert old is not None
        text = _uninstall_text(old, comments)
        if backup_raw is not None and _made_by_init(old, backup_raw, text, args.agent, comments):
            text = backup_raw.decode("utf-8")  # the user's original, byte for byte
            restored = True
        elif backup_raw is None and path.is_file() and not path.is_symlink():
            remove_file = re.sub(r"\s+", "", text) == "{}"  # there was no file before init
    elif old is None or not old.strip():
        text = json.dumps(changed, indent=2, ensure_ascii=False) + "\n"
    else:
        text = _install_text(old, args.agent, command, comments)
    if not (restored or remove_file):
        _check(text, changed, comments, path)
    if args.dry_run:
        import difflib

        lines = difflib.unified_diff(
            (old or "").splitlines(keepends=True),
            "" if remove_file else text.splitlines(keepends=True),
            str(path) if old is not None else "/dev/null",
            "/dev/null" if remove_file else f"{path} (after loopfuse init)",
        )
        return "".join(lines)
    # Only a file without loopfuse's entries is the user's original (one with them was
    # made by init: its original is the backup already, or there was no file).
    original = old if old is not None and not _our_commands(settings) else None
    note = _write(path, target, text, original, mode, backup_raw, remove_file)
    verb = "removed from" if args.remove else "installed in"
    report = f"loopfuse hook {verb} {path}{note}\n"
    if not args.remove:
        report += f"hook command: {command}\n"
        if args.agent == "codex":
            report += CODEX_TRUST + "\n"
    return report + codex_end


def _made_by_init(old: str, backup: bytes, removed: str, agent: str, comments: bool) -> bool:
    """Whether the settings text ``old`` is what ``init`` made of the original kept in
    ``backup`` (nothing changed since but loopfuse's entries), or is the original again
    once they are ``removed``, but for spacing: then the original is put back as it was."""
    try:
        original = backup.decode("utf-8")
        if _same_but_spacing(removed, original, comments):
            return True
        for command in _our_commands(settings_text.load(old, comments)):
            if original.strip():
                made = _install_text(original, agent, command, comments)
            else:
                made = json.dumps(install({}, agent, command, Path()), indent=2) + "\n"
            if _same_but_spacing(made, old, comments):
                return True
    except (UnicodeDecodeError, settings_text.SettingsTextError, InitError):
        return False
    return False


def _our_commands(settings: object) -> list[str]:
    """The commands of loopfuse's entries in ``settings``, each once."""
    hooks = settings.get("hooks") if isinstance(settings, dict) else None
    found: dict[str, None] = {}
    for groups in hooks.values() if isinstance(hooks, dict) else ():
        for group in groups if isinstance(groups, list) else ():
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for handler in handlers if isinstance(handlers, list) else ():
                if _is_ours(handler):
                    found[handler["command"]] = None
    return list(found)


def _check(text: str, wanted: dict[str, Any], comments: bool, path: Path) -> None:
    """The edited text must read as the settings wanted, or nothing is written."""
    try:
        got = settings_text.load(text, comments) if text.strip() else {}
    except settings_text.SettingsTextError as exc:
        got = exc
    if got != wanted:
        raise InitError(f"{path}: could not be edited in place ({got!r}); nothing was changed")


def _write(
    path: Path,
    target: Path,
    text: str,
    original: str | None,
    mode: int | None,
    backup_raw: bytes | None,
    remove_file: bool,
) -> str:
    """Write ``text`` to ``target`` (the settings ``path``, or where its link points),
    keeping the user's ``original`` (``None``: not the original) as the backup unless
    one is kept already; what to say about it."""
    data = text.encode("utf-8")  # a path that is not UTF-8: UnicodeError, nothing written
    target.parent.mkdir(parents=True, exist_ok=True)
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    if remove_file:
        os.unlink(target)
        return " (there was no file before loopfuse init: it is gone again)"
    if original is not None and backup_raw is None:  # the first write: keep the original
        backup_raw = original.encode("utf-8")
        _keep_backup(path, backup_raw, mode if mode is not None else 0o600)
    replace_file(str(target), data, mode if mode is not None else NEW_FILE_MODE)
    if backup_raw is not None and data == backup_raw:  # the original is back: no backup
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.lstat(backup).st_mode):
                os.unlink(backup)
        return " (the file is as it was before loopfuse init)"
    if backup_raw is not None:
        return f" (the file before loopfuse is {backup})"
    return ""
