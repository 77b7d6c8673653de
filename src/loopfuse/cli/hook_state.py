"""Where ``loopfuse hook`` keeps a session's state between its processes, and how.

Every hook is a new process, so the run is kept on disk, one JSON file per session,
under ``$LOOPFUSE_STATE_DIR``, else ``$XDG_STATE_HOME/loopfuse``, else
``~/.local/state/loopfuse`` (``sessions/<agent>-<session>.json``). The file holds the
session's recent tool calls and their answers, which each hook replays into a fresh
:class:`~loopfuse.detector.LoopDetector`, never pickled internals.

- Parallel tool calls run their hooks at the same moment: a session's file is read and
  written under an exclusive lock (``flock`` on a ``.lock`` file beside it), waited for
  a bounded time (:class:`LockTimeout` past it), and replaced atomically.
- Bounded: the events kept are capped; large argument strings are kept as a hash.
- Private: the files hold command lines and their output, so folders are created
  ``0700`` and files ``0600``.
- A file that is corrupt, foreign or of another version is a fresh start.
- Sessions idle for :data:`MAX_IDLE` seconds are removed, at most once per
  :data:`CLEANUP_EVERY` seconds and at most :data:`CLEANUP_BATCH` files per run.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Final

from blake3 import blake3

__all__ = [
    "CLEANUP_BATCH",
    "CLEANUP_EVERY",
    "MAX_IDLE",
    "LockTimeout",
    "SessionState",
    "cleanup",
    "load",
    "locked",
    "save",
    "session_path",
    "state_root",
]

FORMAT: Final = "loopfuse-hook-state"
VERSION: Final = 2
"""2: calls carry their batch, and the open batch is kept (version 1 files are a fresh start)."""
MAX_IDLE: Final = 7 * 24 * 3600.0
"""Seconds after its last hook that a session's state is removed."""
CLEANUP_EVERY: Final = 3600.0
"""Seconds between two looks for idle sessions."""
CLEANUP_BATCH: Final = 2000
"""Session files looked at per cleanup, at most (the rest wait for the next one)."""
MAX_STATE_BYTES: Final = 4 * 1024 * 1024
"""A state file larger than this is not read: a fresh start."""

_SAFE_NAME: Final = re.compile(r"[A-Za-z0-9._-]{1,80}")


class LockTimeout(Exception):
    """The session's lock was not had in time (the hook allows the call)."""


class SessionState:
    """A session's recent hook events, and what warn mode remembers.

    ``events`` are ``["call", id, name, arguments, note, cli_id, batch]`` (a call
    checked before it ran: our id, the CLI's id or ``None``; ``note`` is the loop
    message to give the model after it, ``False`` if it was refused, else ``None``;
    ``batch`` names the batch of parallel calls it was part of) and ``["answer", id,
    answer]`` (the answer as it came, or once its batch is over, the batch's results
    digest), oldest first. ``noted`` and ``refused`` map a loop's key to when it was
    last noted or refused. ``batch`` is the open batch (see :mod:`loopfuse.cli.hook`):
    ``{"id", "done", "action", "message", "logged"}`` (its id, when its latest hook was
    done, and its decision), with ``"closed"`` once the CLI said it is over and
    ``"marked"`` when the session's CLI says so (Claude Code); or ``None``.
    """

    __slots__ = ("batch", "events", "next_id", "noted", "refused")

    def __init__(
        self,
        events: list[list[object]] | None = None,
        noted: dict[str, float] | None = None,
        refused: dict[str, float] | None = None,
        next_id: int = 0,
        batch: dict[str, object] | None = None,
    ) -> None:
        # A plain class, not a dataclass: an after-hook does not import dataclasses.
        self.events = [] if events is None else events
        self.noted = {} if noted is None else noted
        self.refused = {} if refused is None else refused
        self.next_id = next_id
        self.batch = batch


def state_root(explicit: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The state folder: ``explicit``, ``$LOOPFUSE_STATE_DIR``, ``$XDG_STATE_HOME/loopfuse``
    or ``~/.local/state/loopfuse``.

    >>> state_root(env={"XDG_STATE_HOME": "/tmp/x"})
    '/tmp/x/loopfuse'
    """
    env = os.environ if env is None else env
    if explicit:
        return os.path.expanduser(explicit)
    if env.get("LOOPFUSE_STATE_DIR"):
        return os.path.expanduser(env["LOOPFUSE_STATE_DIR"])
    xdg = env.get("XDG_STATE_HOME")
    base = xdg if xdg and os.path.isabs(xdg) else os.path.expanduser("~/.local/state")
    return os.path.join(base, "loopfuse")


def session_path(root: str, agent: str, session: str) -> str:
    """The state file of ``agent``'s ``session`` (a name that is not safe as a file name
    is hashed).

    >>> session_path("/s", "codex", "01a2-b3")
    '/s/sessions/codex-01a2-b3.json'
    """
    name = session if _SAFE_NAME.fullmatch(session) and not session.startswith(".") else ""
    if not name:
        name = "h" + blake3(session.encode("utf-8", "surrogatepass")).hexdigest(length=16)
    return os.path.join(root, "sessions", f"{agent}-{name}.json")


@contextlib.contextmanager
def locked(
    path: str,
    timeout: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[None]:
    """Hold the exclusive lock of ``path``'s session; :class:`LockTimeout` after
    ``timeout`` seconds of trying."""
    sessions = os.path.dirname(path)
    os.makedirs(os.path.dirname(sessions), mode=0o700, exist_ok=True)  # the state folder
    os.makedirs(sessions, mode=0o700, exist_ok=True)
    fd = os.open(_lock_path(path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        deadline = clock() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
                if clock() >= deadline:
                    name = os.path.basename(path)
                    raise LockTimeout(f"{name}: locked for more than {timeout:g} s") from None
                sleep(0.002)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _lock_path(path: str) -> str:
    return path.removesuffix(".json") + ".lock"


def load(path: str) -> SessionState:
    """The state in ``path``; a missing, corrupt, foreign or other-version file (or one
    too large to be ours) is a fresh start."""
    try:
        with open(path, "rb") as file:
            raw = file.read(MAX_STATE_BYTES + 1)
    except OSError:
        return SessionState()
    if len(raw) > MAX_STATE_BYTES:
        return SessionState()
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return SessionState()
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return SessionState()
    if data.get("version") != VERSION:
        return SessionState()
    events = data.get("events")
    noted = data.get("noted")
    refused = data.get("refused")
    next_id = data.get("next_id")
    batch = data.get("batch")
    if not (
        isinstance(events, list)
        and all(isinstance(e, list) and e and isinstance(e[0], str) for e in events)
        and _times(noted)
        and _times(refused)
        and isinstance(next_id, int)
        and not isinstance(next_id, bool)
        and (batch is None or _open_batch(batch))
    ):
        return SessionState()
    assert isinstance(noted, dict)
    assert isinstance(refused, dict)
    return SessionState(events, dict(noted), dict(refused), next_id, batch)


def _open_batch(value: object) -> bool:
    """Whether ``value`` is an open batch as :class:`SessionState` keeps it."""
    if not isinstance(value, dict):
        return False
    done = value.get("done")
    return (
        isinstance(value.get("id"), int)
        and isinstance(done, int | float)
        and not isinstance(done, bool)
        and value.get("action") in ("allow", "note", "deny", "end")
        and isinstance(value.get("message"), str)
        and isinstance(value.get("logged"), str)
    )


def _times(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in value.values()
    )


def save(path: str, state: SessionState, now: float | None = None) -> None:
    """Write ``state`` to ``path`` atomically (a reader sees the old file or the new);
    ``now`` (wall-clock seconds, default the real time) is its last use, which
    :func:`cleanup` reads."""
    data = {
        "format": FORMAT,
        "version": VERSION,
        "events": state.events,
        "noted": state.noted,
        "refused": state.refused,
        "next_id": state.next_id,
        "batch": state.batch,
    }
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    folder, name = os.path.split(path)
    temporary = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with open(fd, "w", encoding="utf-8", errors="surrogatepass") as file:
            file.write(text)
        if now is not None:
            os.utime(temporary, (now, now))
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def cleanup(root: str, now: float, max_idle: float = MAX_IDLE) -> int:
    """Remove the sessions idle for ``max_idle`` seconds at ``now`` (wall-clock seconds),
    if the last look is :data:`CLEANUP_EVERY` old; returns how many were removed.

    Bounded: at most :data:`CLEANUP_BATCH` files are looked at. A session whose lock is
    held (a hook running now) is left alone.
    """
    marker = os.path.join(root, "last-cleanup")
    try:
        if now - os.stat(marker).st_mtime < CLEANUP_EVERY:
            return 0
    except FileNotFoundError:
        pass
    os.makedirs(root, mode=0o700, exist_ok=True)
    with open(marker, "a"):
        pass
    os.utime(marker, (now, now))
    removed = 0
    sessions = os.path.join(root, "sessions")
    try:
        entries = os.scandir(sessions)
    except FileNotFoundError:
        return 0
    with entries:
        for seen, entry in enumerate(entries):
            if seen >= CLEANUP_BATCH:
                break
            if not entry.name.endswith(".json"):
                continue
            try:
                idle = now - entry.stat().st_mtime
            except FileNotFoundError:
                continue
            if idle >= max_idle and _remove_session(entry.path):
                removed += 1
    return removed


def _remove_session(path: str) -> bool:
    try:
        with locked(path, 0.0):
            for name in (path, _lock_path(path)):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name)
    except (LockTimeout, OSError):
        return False
    return True
