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
  ``0700`` and files ``0600``. The state folder and ``sessions/`` must be the user's own
  and writable by no one else, and no file in them is opened through a link or blocks
  on a FIFO (:mod:`loopfuse.cli.safe_files`): :class:`~loopfuse.cli.safe_files.UnsafeFileError`
  otherwise, and the hook allows the call.
- A file that is corrupt, foreign, of another version or whose content is not what
  this version writes is a fresh start.
- Sessions idle for :data:`MAX_IDLE` seconds are removed, at most once per
  :data:`CLEANUP_EVERY` seconds and at most :data:`CLEANUP_BATCH` files per run, each run
  going on where the last one stopped, so that every idle session is removed in time.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import re
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Final

from blake3 import blake3

from loopfuse.cli.safe_files import open_regular, private_folder, read_regular, replace_file

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
    "state_folders",
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
"""Session files looked at per cleanup, at most: the next cleanup goes on from there."""
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
    ``"marked"`` when the session's CLI says so (Claude Code); or ``None``. ``failure``
    is warn mode's note and the failure its calls got (:mod:`loopfuse.cli.hook_notes`):
    ``{"batch", "loop", "count", "at", "name"}``, or ``None``: one per session.
    """

    __slots__ = ("batch", "events", "failure", "next_id", "noted", "refused")

    def __init__(
        self,
        events: list[list[object]] | None = None,
        noted: dict[str, float] | None = None,
        refused: dict[str, float] | None = None,
        next_id: int = 0,
        batch: dict[str, object] | None = None,
        failure: dict[str, object] | None = None,
    ) -> None:
        # A plain class, not a dataclass: an after-hook does not import dataclasses.
        self.events = [] if events is None else events
        self.noted = {} if noted is None else noted
        self.refused = {} if refused is None else refused
        self.next_id = next_id
        self.batch = batch
        self.failure = failure


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


def state_folders(root: str) -> None:
    """Make (``0700``) and check the state folder ``root`` and its ``sessions/`` folder:
    each the user's own, writable by no one else, ``sessions/`` not a link (``root`` may
    be a link the user made: its owner is checked). :class:`~loopfuse.cli.safe_files.
    UnsafeFileError` says why one is refused."""
    private_folder(root, link_ok=True)
    private_folder(os.path.join(root, "sessions"))


@contextlib.contextmanager
def locked(
    path: str,
    timeout: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[None]:
    """Hold the exclusive lock of ``path``'s session; :class:`LockTimeout` after
    ``timeout`` seconds of trying. The state folders are checked first
    (:func:`state_folders`)."""
    state_folders(os.path.dirname(os.path.dirname(path)))
    fd = open_regular(_lock_path(path), os.O_RDWR | os.O_CREAT)
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
    """The state in ``path``; a missing, corrupt, foreign or other-version file, one too
    large to be ours, one that is not a regular file (a link, a FIFO), or one whose
    content is not what :func:`save` writes, is a fresh start."""
    try:
        raw = read_regular(path, MAX_STATE_BYTES)
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
    failure = data.get("failure")  # a file of an earlier release has none
    if not (
        isinstance(events, list)
        and all(_event(e) for e in events)
        and _times(noted)
        and _times(refused)
        and isinstance(next_id, int)
        and not isinstance(next_id, bool)
        and next_id >= 0
        and (batch is None or _open_batch(batch))
        and (failure is None or _noted_failure(failure))
    ):
        return SessionState()
    assert isinstance(noted, dict)
    assert isinstance(refused, dict)
    return SessionState(events, dict(noted), dict(refused), next_id, batch, failure)


def _event(value: object) -> bool:
    """Whether ``value`` is an event as :class:`SessionState` keeps it: a call
    ``["call", id, name, arguments, note, cli_id, batch]`` or an answer ``["answer", id,
    kept]`` (``kept``: the answer and its failure, or a digest, or ``None``)."""
    if not isinstance(value, list) or not value:
        return False
    if value[0] == "call" and len(value) == 7:
        _, call_id, name, _arguments, note, cli_id, batch = value
        return (
            isinstance(call_id, str)
            and isinstance(name, str)
            and (note is None or note is False or isinstance(note, str))
            and (cli_id is None or isinstance(cli_id, str))
            and (isinstance(batch, str) or (isinstance(batch, int) and not isinstance(batch, bool)))
        )
    if value[0] == "answer" and len(value) == 3:
        kept = value[2]
        if isinstance(kept, dict):
            error = kept.get("error")
            if set(kept) != {"answer", "error"} or not (error is None or isinstance(error, bool)):
                return False
        elif not (kept is None or isinstance(kept, str)):
            return False
        return isinstance(value[1], str)
    return False


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _open_batch(value: object) -> bool:
    """Whether ``value`` is an open batch as :class:`SessionState` keeps it."""
    if not isinstance(value, dict):
        return False
    return (
        isinstance(value.get("id"), int)
        and not isinstance(value.get("id"), bool)
        and _number(value.get("done"))
        and (value.get("done_boot") is None or _number(value.get("done_boot")))
        and (value.get("boot") is None or isinstance(value.get("boot"), str))
        and value.get("action") in ("allow", "note", "deny", "end")
        and isinstance(value.get("message"), str)
        and isinstance(value.get("logged"), str)
        and all(isinstance(value.get(flag, False), bool) for flag in ("closed", "marked"))
    )


MAX_LOOP_KEY: Final = 1024
"""Characters at most of the loop key a noted failure keeps (a longer one is damage)."""
_FAILURE_NAME: Final = re.compile(r"[0-9a-f]{32}")


def _noted_failure(value: object) -> bool:
    """Whether ``value`` is a noted failure as :class:`SessionState` keeps it: the noted
    batch (its id), the loop's key and count, when it was noted, and the name of the
    failure its calls got (``None`` until its answers are read)."""
    if not isinstance(value, dict) or set(value) != {"batch", "loop", "count", "at", "name"}:
        return False
    batch, loop, count, name = value["batch"], value["loop"], value["count"], value["name"]
    return (
        (isinstance(batch, str) or (isinstance(batch, int) and not isinstance(batch, bool)))
        and isinstance(loop, str)
        and 0 < len(loop) <= MAX_LOOP_KEY
        and isinstance(count, int)
        and not isinstance(count, bool)
        and count >= 0
        and _number(value["at"])
        and (name is None or (isinstance(name, str) and _FAILURE_NAME.fullmatch(name) is not None))
    )


def _times(value: object) -> bool:
    return isinstance(value, dict) and all(_number(v) for v in value.values())


def save(path: str, state: SessionState, now: float | None = None) -> None:
    """Write ``state`` to ``path`` atomically (a reader sees the old file or the new);
    ``now`` (wall-clock seconds, default the real time) is its last use, which
    :func:`cleanup` reads. The file is created new, ``0600``, and renamed over the old
    one (:func:`~loopfuse.cli.safe_files.replace_file`): a link or a FIFO there is
    replaced, never written through. A state larger than :func:`load` reads loses its
    oldest events until it fits."""
    data = {
        "format": FORMAT,
        "version": VERSION,
        "events": state.events,
        "noted": state.noted,
        "refused": state.refused,
        "next_id": state.next_id,
        "batch": state.batch,
        "failure": state.failure,
    }
    raw = _encoded(data)
    while len(raw) > MAX_STATE_BYTES and state.events:  # never a file load would not read
        del state.events[: max(1, len(state.events) // 4)]  # the oldest go first
        raw = _encoded(data)
    replace_file(path, raw, 0o600, mtime=now)


def _encoded(data: object) -> bytes:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8", "surrogatepass")


def cleanup(root: str, now: float, max_idle: float = MAX_IDLE) -> int:
    """Remove the sessions idle for ``max_idle`` seconds at ``now`` (wall-clock seconds),
    if the last look is :data:`CLEANUP_EVERY` old; returns how many were removed.

    Bounded: at most :data:`CLEANUP_BATCH` entries of ``sessions/`` are looked at, from
    where the last look stopped (``last-cleanup`` keeps the place; past the end, the next
    look starts over), so any number of idle sessions is removed in time. A session whose
    lock is held (a hook running now) is left alone; so is what is not a regular file.
    Temporary files a killed hook left behind are removed when idle as long.
    """
    marker = os.path.join(root, "last-cleanup")
    try:
        if now - os.lstat(marker).st_mtime < CLEANUP_EVERY:
            return 0
    except FileNotFoundError:
        pass
    state_folders(root)
    fd = open_regular(marker, os.O_RDWR | os.O_CREAT)
    try:
        os.fchmod(fd, 0o600)  # an older version's marker was 0644
        place = _place(os.read(fd, 32))
        removed, place = _clean_from(os.path.join(root, "sessions"), place, now, max_idle)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(place).encode(), 0)
        os.utime(fd, (now, now))
    finally:
        os.close(fd)
    return removed


def _place(raw: bytes) -> int:
    """Where the last cleanup stopped, as ``last-cleanup`` keeps it (else the start)."""
    text = raw.decode("ascii", "replace").strip()
    return int(text) if text.isdigit() and len(text) < 12 else 0


def _clean_from(sessions: str, place: int, now: float, max_idle: float) -> tuple[int, int]:
    """Look at up to :data:`CLEANUP_BATCH` entries of ``sessions`` after the first
    ``place`` ones (the names before it are only read): the sessions removed, and where
    the next look starts (the start again once the end is reached)."""
    removed = looked = 0
    try:
        entries = os.scandir(sessions)
    except FileNotFoundError:
        return 0, 0
    with entries:
        for seen, entry in enumerate(entries):
            if seen < place:
                continue
            if looked >= CLEANUP_BATCH:
                return removed, max(0, place + looked - removed)
            looked += 1
            name = entry.name
            if not name.endswith((".json", ".tmp")):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(info.st_mode) or now - info.st_mtime < max_idle:
                continue
            if name.endswith(".tmp"):  # a killed hook's: never renamed into place
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
            elif _remove_session(entry.path):
                removed += 1
    return removed, 0


def _remove_session(path: str) -> bool:
    try:
        with locked(path, 0.0):
            for name in (path, _lock_path(path)):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name)
    except (LockTimeout, OSError):
        return False
    return True
