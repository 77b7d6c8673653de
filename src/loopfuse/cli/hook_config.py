"""``loopfuse hook``'s settings file: its ``[hook]`` table (:class:`HookOptions`, declared
with the file's other tables in :mod:`loopfuse._sections`, where the loader reads it too),
and the whole file checked by the one loader every entry point uses, once per version of
the file.

A hook is a new process at every tool call. The file is checked as
:func:`loopfuse.load_settings` checks it (every key of every table, the same errors),
which costs the guards' import (about three times a hook's own start), so the hook does
it once per version of the file: the table it read and checked is kept in the state
folder (``settings-checked/``, one small JSON file per settings file), known by the
file's identity (device, inode, size, modification and change times), and later hooks
read that instead of the TOML. A version refused is kept too, with its error: the hook
fails open, and says why in its log, at every call, as before.

The memo is used only in a state folder that is the user's own and private (as the hook
creates it); it is written to a fresh private file and renamed into place, read without
following a link, and anything unexpected in it is a miss: the file is checked again.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from typing import Final

from blake3 import blake3

from loopfuse._sections import HookOptions, hook_options
from loopfuse._settings_file import MAX_FILE_BYTES, load_toml
from loopfuse.errors import ConfigError

__all__ = ["MEMO_FOLDER", "HookOptions", "checked_table", "hook_options"]

MEMO_FOLDER: Final = "settings-checked"
"""The folder of the state folder where checked settings files are remembered."""
_MAX_MEMO_BYTES: Final = 4 * MAX_FILE_BYTES


def checked_table(config: str, state: str | None) -> dict[str, object]:
    """The settings table of the file ``config``, checked by the loader of
    :func:`loopfuse.load_settings` (a :class:`~loopfuse.errors.ConfigError` as it gives
    it), remembered in the state folder ``state`` (``None``: not remembered) for the
    next hooks while the file is unchanged."""
    identity = _identity(config)
    memo = _memo_path(state, config) if identity is not None else None
    if memo is not None:
        known = _read_memo(memo)
        if known is not None and known.get("identity") == identity:
            if isinstance(known.get("error"), str):
                raise ConfigError(str(known["error"]))
            table = known.get("table")
            if isinstance(table, dict):
                return table
    try:
        table = load_toml(config)
        from loopfuse.settings import Settings  # the guards' import: once per version

        Settings.from_table(table, config)
    except ConfigError as exc:
        if memo is not None and _identity(config) == identity:
            _write_memo(memo, {"identity": identity, "error": str(exc)})
        raise
    if memo is not None and _identity(config) == identity:  # unchanged while read
        _write_memo(memo, {"identity": identity, "table": table})
    return table


def _identity(path: str) -> list[object] | None:
    """What tells one version of the file from another, or ``None`` (no such file)."""
    try:
        found = os.stat(path)
    except (OSError, ValueError):
        return None
    return [
        os.path.abspath(path),
        found.st_dev,
        found.st_ino,
        found.st_size,
        found.st_mtime_ns,
        found.st_ctime_ns,
    ]


def _private_folder(path: str) -> bool:
    """Whether ``path`` is a folder (not a link) of this user's that no one else may
    write to or read."""
    try:
        found = os.lstat(path)
    except OSError:
        return False
    mine = not hasattr(os, "getuid") or found.st_uid == os.getuid()
    return stat.S_ISDIR(found.st_mode) and mine and not found.st_mode & 0o077


def _memo_path(state: str | None, config: str) -> str | None:
    """Where the check of ``config`` is remembered, or ``None`` where it is not."""
    if state is None or not _private_folder(state):
        return None
    folder = os.path.join(state, MEMO_FOLDER)
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    if not _private_folder(folder):
        return None
    name = blake3(os.path.abspath(config).encode("utf-8", "surrogatepass")).hexdigest(16)
    return os.path.join(folder, f"{name}.json")


def _read_memo(path: str) -> dict[str, object] | None:
    """The memo at ``path``, or ``None`` (none, not a regular file of ours, damaged)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        found = os.fstat(fd)
        mine = not hasattr(os, "getuid") or found.st_uid == os.getuid()
        if not stat.S_ISREG(found.st_mode) or not mine or found.st_size > _MAX_MEMO_BYTES:
            return None
        data = os.read(fd, _MAX_MEMO_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        memo = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return memo if isinstance(memo, dict) else None


def _write_memo(path: str, memo: dict[str, object]) -> None:
    """Write ``memo`` to a fresh private file beside ``path``, renamed into place; a memo
    that cannot be written is skipped (the next hook checks the file again)."""
    import tempfile

    try:
        text = json.dumps(memo, allow_nan=True)
    except (TypeError, ValueError):  # a value JSON cannot hold: not remembered
        return
    try:
        fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
