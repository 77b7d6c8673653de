"""A one-line progress bar on standard error, redrawn in place (only on a terminal).

It shows the files begun out of all, and the bytes read out of all the files' bytes
(``12/649 files, 4.1/310 MB``): the bar fills by bytes, so a long file moves it as it
is read and a run of small ones does not race it. It is drawn from the start when
there are many files (:data:`MANY_FILES`), and for a single file only once it has
taken longer than :data:`PATIENCE` seconds, so that a quick scan never flickers.
``clock`` is injected (tests use a fake one).

>>> import io
>>> out, now = io.StringIO(), [0.0]
>>> bar = Progress(out, 1, enabled=True, clock=lambda: now[0], total_bytes=2_000_000)
>>> bar.step("run.jsonl", 2_000_000)
>>> bar.within(0.5)  # quick so far: nothing drawn
>>> now[0] = 2.0
>>> bar.within(0.5)
>>> "1/1 files, 1.0/2.0 MB" in out.getvalue()
True
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final, TextIO

from loopfuse.cli.escape import printable

__all__ = ["MANY_FILES", "PATIENCE", "Progress", "bytes_text"]

MANY_FILES: Final = 4
"""From this many files on, the bar is drawn from the first file."""

PATIENCE: Final = 0.5
"""Seconds a scan of few files runs before the bar appears."""

_REDRAW: Final = 0.1  # seconds between redraws within a file
_BAR: Final = 20


def bytes_text(done: int, total: int) -> str:
    """``done`` of ``total`` bytes in the unit ``total`` is read in: ``4.1/310 MB``.

    >>> bytes_text(0, 800), bytes_text(1_500, 2_000_000), bytes_text(3 * 10**9, 12 * 10**9)
    ('0/800 bytes', '0.0/2.0 MB', '3/12 GB')
    """
    for unit, size in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if total >= size:
            digits = 0 if total >= 10 * size else 1
            return f"{done / size:.{digits}f}/{total / size:.{digits}f} {unit}"
    return f"{done:,}/{total:,} bytes"


class Progress:
    """The bar; every method does nothing unless ``enabled``. ``total`` files of
    ``total_bytes`` bytes in all (``0``: unknown, standard input: files alone)."""

    def __init__(
        self,
        stream: TextIO,
        total: int,
        *,
        enabled: bool,
        width: int = 80,
        clock: Callable[[], float] = time.monotonic,
        total_bytes: int = 0,
    ) -> None:
        self.stream = stream
        self.total = total
        self.total_bytes = total_bytes
        self.enabled = enabled
        self.width = max(40, min(width, 80))
        self.clock = clock
        self.done = 0
        self.done_bytes = 0  # the bytes of the files before the current one
        self._size = 0
        self._name = ""
        self._drawn = False
        self._start = clock() if enabled else 0.0
        self._last = -1.0

    def step(self, name: str, size: int = 0) -> None:
        """File ``name`` of ``size`` bytes is next (a run's file name: written as
        :func:`printable` text)."""
        if not self.enabled:
            return
        self.done_bytes += self._size
        self._size = size
        self._name = printable(name)
        self.done += 1
        self._last = -1.0
        if self.total >= MANY_FILES or self._drawn:
            self._draw(0.0)

    def within(self, fraction: float) -> None:
        """The current file is ``fraction`` done (drawn at most every 0.1 s)."""
        if not self.enabled:
            return
        now = self.clock()
        if self.total < MANY_FILES and not self._drawn and now - self._start < PATIENCE:
            return
        if self._last >= 0 and now - self._last < _REDRAW:
            return
        self._last = now
        self._draw(fraction)

    def _draw(self, fraction: float) -> None:
        fraction = max(0.0, min(fraction, 1.0))
        text = f"{self.done}/{self.total} files"
        if self.total_bytes > 0:
            read = min(self.done_bytes + int(fraction * self._size), self.total_bytes)
            done = read / self.total_bytes
            text += f", {bytes_text(read, self.total_bytes)}"
        else:
            done = (self.done - 1 + fraction) / max(1, self.total)
        filled = int(_BAR * done)
        text = f"[{'#' * filled}{'-' * (_BAR - filled)}] {text} "
        room = self.width - 1 - len(text)
        if len(self._name) <= room:
            label = self._name
        else:  # the end of the name tells the files apart; no room: no name
            label = "..." + self._name[-(room - 3) :] if room > 8 else ""
        self.stream.write("\r" + (text + label).ljust(self.width - 1))
        self.stream.flush()
        self._drawn = True

    def clear(self) -> None:
        """Erase the bar (before other output on the same stream, and at the end)."""
        if self._drawn:
            self.stream.write("\r" + " " * (self.width - 1) + "\r")
            self.stream.flush()
            self._drawn = False
