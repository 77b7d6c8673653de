"""A one-line progress bar on standard error, redrawn in place (only on a terminal).

It shows the files done and, for a long file, how far into it the scan is. It is drawn
from the start when there are many files (:data:`MANY_FILES`), and for a single file
only once it has taken longer than :data:`PATIENCE` seconds, so that a quick scan
never flickers. ``clock`` is injected (tests use a fake one).

>>> import io
>>> out, now = io.StringIO(), [0.0]
>>> bar = Progress(out, 1, enabled=True, clock=lambda: now[0])
>>> bar.step("run.jsonl")
>>> bar.within(0.5)  # quick so far: nothing drawn
>>> now[0] = 2.0
>>> bar.within(0.5)
>>> "50%" in out.getvalue()
True
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final, TextIO

from loopfuse.cli.escape import printable

__all__ = ["MANY_FILES", "PATIENCE", "Progress"]

MANY_FILES: Final = 4
"""From this many files on, the bar is drawn from the first file."""

PATIENCE: Final = 0.5
"""Seconds a scan of few files runs before the bar appears."""

_REDRAW: Final = 0.1  # seconds between redraws within a file
_BAR: Final = 20


class Progress:
    """The bar; every method does nothing unless ``enabled``."""

    def __init__(
        self,
        stream: TextIO,
        total: int,
        *,
        enabled: bool,
        width: int = 80,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.total = total
        self.enabled = enabled
        self.width = max(40, min(width, 80))
        self.clock = clock
        self.done = 0
        self._name = ""
        self._drawn = False
        self._start = clock() if enabled else 0.0
        self._last = -1.0

    def step(self, name: str) -> None:
        """File ``name`` is next (a run's file name: written as :func:`printable` text)."""
        if not self.enabled:
            return
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
        done = (self.done - 1 + max(0.0, min(fraction, 1.0))) / max(1, self.total)
        filled = int(_BAR * done)
        text = f"[{'#' * filled}{'-' * (_BAR - filled)}] {self.done}/{self.total} "
        if fraction > 0:
            text += f"{int(100 * fraction)}% "
        room = self.width - 1 - len(text)
        label = self._name if len(self._name) <= room else "..." + self._name[-(room - 3) :]
        self.stream.write("\r" + (text + label).ljust(self.width - 1))
        self.stream.flush()
        self._drawn = True

    def clear(self) -> None:
        """Erase the bar (before other output on the same stream, and at the end)."""
        if self._drawn:
            self.stream.write("\r" + " " * (self.width - 1) + "\r")
            self.stream.flush()
            self._drawn = False
