"""Files ``loopfuse hook`` and ``loopfuse init`` open in folders that may not be theirs
alone: never through a link loopfuse did not make, never blocked on a FIFO.

The rules, for every file they write or read:

- **Opened without following a link** (``O_NOFOLLOW``) unless the caller says the link
  is the user's, **non-blocking** (``O_NONBLOCK``: a FIFO answers at once instead of
  waiting for a writer or a reader), and checked with ``fstat`` after opening: anything
  but a regular file is refused (:class:`UnsafeFileError`).
- **Created new** (``O_CREAT | O_EXCL | O_NOFOLLOW``): a name that exists already, as a
  file, a link or a FIFO, is never written through.
- **Replaced atomically**: the new content goes to a fresh file of a random name in the
  same folder (created as above), then is renamed over the old name; a rename replaces a
  link, never its target.
- **A private folder** is a real folder (not a link), owned by the user who runs
  loopfuse and writable by no one else (:func:`private_folder`).

Light: the hook imports this module at every call (``os`` and ``stat`` only).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

__all__ = [
    "UnsafeFileError",
    "create_new",
    "open_regular",
    "private_folder",
    "read_regular",
    "replace_file",
]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class UnsafeFileError(OSError):
    """A path loopfuse will not open or use: a link, a FIFO, a folder that is not the
    user's or that others may write to (the message says which, and what to do)."""


def open_regular(path: str, flags: int, mode: int = 0o600, *, follow: bool = False) -> int:
    """A file descriptor of the regular file ``path``, opened with ``flags`` plus
    ``O_NONBLOCK | O_CLOEXEC`` and, unless ``follow``, ``O_NOFOLLOW``.

    :class:`UnsafeFileError` when ``path`` is a link (and ``follow`` is false), a FIFO, a
    device or a folder; ``OSError`` as ``os.open`` raises it otherwise."""
    extra = _NONBLOCK | _CLOEXEC | (0 if follow else _NOFOLLOW)
    try:
        fd = os.open(path, flags | extra, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise UnsafeFileError(errno.ELOOP, "a symbolic link, not followed", path) from None
        if exc.errno == errno.ENXIO:  # a FIFO opened for writing with no reader
            raise UnsafeFileError(errno.ENXIO, "not a regular file", path) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafeFileError(errno.EINVAL, "not a regular file", path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str, limit: int, *, follow: bool = False) -> bytes:
    """Up to ``limit + 1`` bytes of the regular file ``path`` (one more than ``limit``
    tells the caller the file is too large), opened as :func:`open_regular` does."""
    fd = open_regular(path, os.O_RDONLY, follow=follow)
    try:
        parts = []
        left = limit + 1
        while left > 0:
            part = os.read(fd, min(left, 1 << 20))
            if not part:
                break
            parts.append(part)
            left -= len(part)
        return b"".join(parts)
    finally:
        os.close(fd)


def create_new(path: str, data: bytes, mode: int = 0o600) -> None:
    """Create ``path`` holding ``data``; ``FileExistsError`` if anything (a file, a link,
    a FIFO) is there already. A partly written file is removed."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode)
    try:
        _write_all(fd, data)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    os.close(fd)


def replace_file(path: str, data: bytes, mode: int = 0o600, *, mtime: float | None = None) -> None:
    """Replace ``path`` with a file holding ``data`` (``mode``; modified at ``mtime`` if
    given) atomically: a reader sees the old file or the new. The new file is created as
    :func:`create_new` does, under a random name in the same folder, then renamed."""
    folder, name = os.path.split(path)
    while True:
        temporary = os.path.join(folder, f".{name}.{os.urandom(6).hex()}.tmp")
        try:
            fd = os.open(
                temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode
            )
        except FileExistsError:  # someone's file of that name: never ours to write
            continue
        break
    try:
        try:
            _write_all(fd, data)
            os.fchmod(fd, mode)  # the umask narrowed O_CREAT's mode: the caller's wins
            if mtime is not None:
                os.utime(fd, (mtime, mtime))
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def private_folder(path: str, *, create: bool = True, link_ok: bool = False) -> None:
    """Check that ``path`` is a folder loopfuse may keep private files in: a folder (not
    a link, unless ``link_ok`` and the link itself is the user's), owned by the user who
    runs loopfuse, writable by neither its group nor others. Created ``0700`` if missing
    and ``create``. :class:`UnsafeFileError` saying why otherwise."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        if not create:
            raise
        with contextlib.suppress(FileExistsError):  # made meanwhile by a sibling: checked below
            os.makedirs(path, mode=0o700)
        info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        if not link_ok or info.st_uid != os.geteuid():
            raise UnsafeFileError(errno.ELOOP, "a symbolic link, not followed", path)
        info = os.stat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeFileError(errno.ENOTDIR, "not a folder", path)
    if info.st_uid != os.geteuid():
        raise UnsafeFileError(errno.EPERM, "a folder of another user", path)
    if info.st_mode & 0o022:
        raise UnsafeFileError(
            errno.EPERM, "a folder others may write to (chmod go-w it, or choose another)", path
        )
