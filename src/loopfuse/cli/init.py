"""``loopfuse init``: install ``loopfuse hook`` in a coding-agent CLI.

``loopfuse init --agent NAME [--project] [--remove] [--dry-run]`` (``NAME`` one of
:data:`~loopfuse.cli.agents.AGENTS`, e.g. ``claude-code``) adds ``loopfuse hook`` for each
of the CLI's hook events (:attr:`~loopfuse.harness.agent_cli.AgentCli.events`) to the file
the CLI reads its hooks from, running the absolute path of the installed ``loopfuse`` (so
the hook works outside the venv). Which file, in the user's or (``--project``) the current
folder's scope, and how the hook goes in, is the CLI's own knowledge, in its module of
:mod:`loopfuse.harness` (:meth:`~loopfuse.harness.agent_cli.AgentCli.settings_path`,
:attr:`~loopfuse.harness.agent_cli.AgentCli.installer`, a pure text transform); this module
does the file handling, the same for every CLI.

What is there is kept, byte for byte: the file is edited as text
(:mod:`loopfuse.harness.settings_text`; comments too, where the CLI reads them), and
replaced atomically.
The user's original is kept beside it (``<file>.loopfuse-backup``), made once and never
overwritten; a second run changes nothing; ``--remove`` takes out the entries ``init``
added, and nothing else, and puts the original back as it was when nothing else
changed (no file, if there was none); a file that is not a JSON object is refused with a
clear error (a file wholly loopfuse's, as a plugin, is written whole, removed whole,
and one there that loopfuse did not write refused). Exit status: 0 done (or nothing to
do), 2 usage error or a settings file that cannot be edited.

Links (see :mod:`loopfuse.cli.safe_files`): ``init`` never writes through a link it did
not make. The user's own settings (their home, a folder the CLI's variable names, or
``--settings``) may be a link into their dotfiles: the file it points to is edited
and the link kept. In a project's folder (``--project``: a checkout of someone else's
repository, whose links a ``git clone`` made) a link as the settings file or its folder
is refused. The backup is created new (``O_EXCL | O_NOFOLLOW``), and a link already at
its name is refused, in either scope.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, TextIO

from loopfuse.cli.agents import AGENTS
from loopfuse.cli.hook_check import check_hook_command
from loopfuse.cli.safe_files import UnsafeFileError, create_new, read_regular, replace_file
from loopfuse.errors import ConfigError
from loopfuse.harness.agent_cli import AgentCli, HookInstaller, agent_cli
from loopfuse.harness.installers import InstallError

__all__ = ["InitError", "hook_command", "is_our_command", "main", "settings_path"]

BACKUP_SUFFIX: Final = ".loopfuse-backup"
MAX_SETTINGS_BYTES: Final = 4 * 1024 * 1024
"""A settings file larger than this is refused (not read)."""
NEW_FILE_MODE: Final = 0o644
"""The mode of a settings file ``init`` creates (an existing file keeps its own)."""


class InitError(Exception):
    """The settings file cannot be edited safely (the message says why)."""


def settings_path(agent: str, project: bool, env: Mapping[str, str], cwd: Path) -> Path:
    """The settings file ``init`` edits for ``agent`` (its CLI's
    :meth:`~loopfuse.harness.agent_cli.AgentCli.settings_path`).

    >>> settings_path("codex", False, {"CODEX_HOME": "/c"}, Path("/p")).as_posix()
    '/c/hooks.json'
    >>> settings_path("gemini", True, {}, Path("/p")).as_posix()
    '/p/.gemini/settings.json'
    """
    if agent not in AGENTS:
        raise InitError(f"unknown agent {agent!r}: choose one of {', '.join(AGENTS)}")
    try:
        return agent_cli(agent).settings_path(project, env, cwd)
    except ConfigError as exc:
        raise InitError(str(exc)) from None


def end_session_note(cli: AgentCli) -> str:
    """What ``init`` says when asked for ``--end-session`` for a CLI whose session a
    hook cannot end (``""`` for the others)."""
    if cli.can_end_session:
        return ""
    return (
        f"--end-session has no effect for {cli.title}, so it is not written: a hook cannot "
        f"end a {cli.title} session, and loopfuse refuses the looping call instead."
    )


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


def is_our_command(command: str) -> bool:
    """Whether ``command`` is one ``init`` writes: its words are exactly a ``loopfuse``
    console script (any path; or ``PYTHON -m loopfuse``), then ``hook --agent AGENT``
    and flags ``loopfuse hook`` reads. A command that merely contains the words
    ``loopfuse hook`` (another tool's wrapper, a shell line) is not ours. (The
    installers of :mod:`loopfuse.harness.installers` ask this.)

    >>> is_our_command("/v/bin/loopfuse hook --agent codex")
    True
    >>> is_our_command("notify loopfuse hook --agent codex")
    False
    """
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

    try:
        read_flags(rest[1:])
    except ConfigError:
        return False
    return True


def _read(path: Path, installer: HookInstaller) -> tuple[str | None, int | None]:
    """The text of ``path`` (``None``: no file) and its mode, checked as its CLI's
    installer reads it.

    Read as a regular file only, never blocked on a FIFO (:mod:`loopfuse.cli.safe_files`);
    ``path`` is the file itself, links already resolved by :func:`_target`."""
    try:
        raw = read_regular(str(path), MAX_SETTINGS_BYTES)
        mode = stat.S_IMODE(os.stat(path, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return None, None
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
    try:
        installer.check(text)
    except InstallError as exc:
        raise InitError(f"{path}: {exc}; fix it by hand, nothing was changed") from None
    return text, mode


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
        "--end-session",
        action="store_true",
        help="written to the hook (where a hook can end the CLI's session)",
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
    cli = agent_cli(args.agent)
    installer = cli.installer
    if args.settings:
        path = Path(args.settings)
    else:
        path = settings_path(args.agent, args.project, env, cwd)
    target = _target(path, follow=not args.project)
    old, mode = _read(target, installer)
    flags = []
    if args.mode:
        flags += ["--mode", args.mode]
    if args.end_session and cli.can_end_session:  # not written where it cannot work
        flags.append("--end-session")
    if args.config:
        if not args.remove:  # checked as every entry point checks it, before any write
            from loopfuse.settings import load_settings

            load_settings(args.config)
        flags += ["--config", str(Path(args.config).absolute())]
    command = hook_command(args.agent, flags, executable)
    if not args.remove:  # what the hook will read, checked as it reads it (#29 §2)
        check_hook_command(flags, env)
    current = old or ""
    try:
        if args.remove:
            text = installer.uninstall(current, is_our_command)
        else:
            text = installer.install(current, command, is_our_command)
    except InstallError as exc:
        raise InitError(f"{path}: {exc}") from None
    no_end = end_session_note(cli)
    end_note = no_end + "\n" if no_end and args.end_session else ""
    if installer.same(text, current) and old is not None:
        already = f"{path}: already {'without' if args.remove else 'with'} loopfuse hook\n"
        return already + end_note
    if installer.same(text, current) and old is None:  # no file, nothing to remove
        return f"{path}: no loopfuse hook to remove\n"
    backup_raw = _backup_text(path)
    remove_file = False
    if args.remove:
        assert old is not None
        if backup_raw is not None and _made_by_init(old, backup_raw, text, installer):
            text = backup_raw.decode("utf-8")  # the user's original, byte for byte
        elif backup_raw is None and path.is_file() and not path.is_symlink():
            remove_file = installer.same_but_spacing(text, "")  # no file before init
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
    original = old if old is not None and not _our_commands(installer, old) else None
    note = _write(path, target, text, original, mode, backup_raw, remove_file)
    verb = "removed from" if args.remove else "installed in"
    report = f"loopfuse hook {verb} {path}{note}\n"
    if not args.remove:
        report += f"hook command: {command}\n"
        if cli.after_install:
            report += cli.after_install + "\n"
    return report + end_note


def _made_by_init(old: str, backup: bytes, removed: str, installer: HookInstaller) -> bool:
    """Whether the settings text ``old`` is what ``init`` made of the original kept in
    ``backup`` (nothing changed since but loopfuse's entries), or is the original again
    once they are ``removed``, but for spacing: then the original is put back as it was."""
    try:
        original = backup.decode("utf-8")
        if installer.same_but_spacing(removed, original):
            return True
        for command in _our_commands(installer, old):
            made = installer.install(original, command, is_our_command)
            if installer.same_but_spacing(made, old):
                return True
    except (UnicodeDecodeError, InstallError):
        return False
    return False


def _our_commands(installer: HookInstaller, text: str) -> list[str]:
    """The commands of loopfuse's entries in ``text``, each once."""
    found = installer.commands(text, is_our_command)
    return list(dict.fromkeys(command for commands in found.values() for command in commands))


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
