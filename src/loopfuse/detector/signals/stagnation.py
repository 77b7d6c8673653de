"""``stagnation``: the same prose answer again and again (:class:`StagnationDetector`).

Some loops call no tool at all: the model answers with the same paragraph turn after
turn ("I will now fix the bug …"). Each prose turn (one that called no tool) is hashed
after collapsing whitespace; when one answer appears more than ``max_steps`` times among
the last ``4 * max_steps`` prose turns, :class:`StagnationDetected` is raised. A user
turn clears the window. ``max_stagnation_steps=None`` switches it off; ``scan`` replays
the prose turns of that window when the conversation ends on one.
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Final

from blake3 import blake3

from loopfuse.detector.signals.base import Signal
from loopfuse.errors import ConfigError, InvalidInputError, LoopfuseError
from loopfuse.loop import Loop

if TYPE_CHECKING:
    from loopfuse.detector.settings import DetectorSettings

__all__ = ["STAGNATION", "Stagnation", "StagnationDetected", "StagnationDetector"]

WINDOW_FACTOR: Final = 4
"""The window is this many times ``max_steps`` prose turns."""


def _window(max_steps: int) -> int:
    """The prose turns a window of ``max_steps`` holds."""
    return max(1, max_steps * WINDOW_FACTOR)


class StagnationDetected(LoopfuseError):
    """The model gave the same prose answer too often; ``message`` is written for it.

    ``loop`` is the :class:`~loopfuse.Loop` found (``kind="stagnation"``, the text's
    hash as its ``signature``).
    """

    def __init__(self, message: str, *, text_hash: str, count: int, max_steps: int) -> None:
        super().__init__(message)
        self.loop = Loop("stagnation", "detector", text_hash, count, (), message)
        """The loop found."""
        self.max_steps = max_steps

    @classmethod
    def of(cls, loop: Loop, *, max_steps: int) -> StagnationDetected:
        """The exception that reports ``loop``, found with ``max_steps``."""
        return cls(loop.message, text_hash=loop.signature, count=loop.count, max_steps=max_steps)

    @property
    def message(self) -> str:
        """The message for the model."""
        return self.loop.message

    @property
    def kind(self) -> str:
        """``"stagnation"``."""
        return self.loop.kind

    @property
    def text_hash(self) -> str:
        """The hash of the repeated answer (whitespace collapsed)."""
        return self.loop.signature

    @property
    def count(self) -> int:
        """How many times the answer was given in the window."""
        return self.loop.count

    def __reduce__(self) -> tuple[Callable[..., StagnationDetected], tuple[str]]:
        # Keyword-only fields need a partial to pickle (e.g. out of a process pool).
        rebuild = partial(
            type(self), text_hash=self.text_hash, count=self.count, max_steps=self.max_steps
        )
        return (rebuild, (self.message,))


def _text_hash(text: str) -> str:
    collapsed = " ".join(text.split())
    return blake3(collapsed.encode("utf-8", "surrogatepass")).hexdigest(length=8)


class StagnationDetector:
    """Counts identical prose answers in a sliding window of prose turns.

    >>> det = StagnationDetector(max_steps=2)
    >>> det.record("Let me check the file.", made_tool_calls=False)
    >>> det.record("Let me check the file.", made_tool_calls=True)  # not a prose turn
    >>> det.record("Let me  check the file.", made_tool_calls=False)
    >>> try:
    ...     det.record("Let me check the file.", made_tool_calls=False)
    ... except StagnationDetected as stuck:
    ...     print(stuck.count, stuck.message[:60])
    3 Loop detected: you gave the same answer 3 times in your last
    >>> det.clear()  # a user turn
    >>> det.record("Let me check the file.", made_tool_calls=False)
    """

    def __init__(self, max_steps: int = 5) -> None:
        if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 0:
            raise ConfigError(f"max_steps must be an int >= 0, got {max_steps!r}")
        self._max_steps = max_steps
        self._window: deque[str] = deque(maxlen=_window(max_steps))
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    @property
    def max_steps(self) -> int:
        """Identical prose answers allowed in the window; one more raises."""
        return self._max_steps

    def record(self, text: str, made_tool_calls: bool = False) -> None:
        """Record one assistant turn; raise :class:`StagnationDetected` when it stagnates.

        Turns that called a tool are not recorded (the tool-call detector watches them);
        empty or blank text is ignored.
        """
        if not isinstance(text, str):
            raise InvalidInputError(f"text must be a str, not {type(text).__name__}")
        if made_tool_calls or not text.strip():
            return
        key = _text_hash(text)
        with self._lock:
            window = self._window
            if len(window) == window.maxlen:
                oldest = window[0]
                self._counts[oldest] -= 1
                if not self._counts[oldest]:
                    del self._counts[oldest]
            window.append(key)
            self._counts[key] += 1
            count = self._counts[key]
            seen = len(window)
        if count > self._max_steps:
            loop = STAGNATION.loop(key, count, (), STAGNATION.message(count, seen))
            raise StagnationDetected.of(loop, max_steps=self._max_steps)

    def clear(self) -> None:
        """Forget every recorded answer: a user turn came in."""
        with self._lock:
            self._window.clear()
            self._counts.clear()


class Stagnation(Signal):
    """The ``stagnation`` signal (threshold: ``max_stagnation_steps``): its detection is a
    :class:`StagnationDetector`, its signature the repeated text's hash."""

    __slots__ = ()

    kind = "stagnation"
    setting = "max_stagnation_steps"

    def detector(self, settings: DetectorSettings) -> StagnationDetector | None:
        """A fresh detector for ``settings`` (``None``: the signal is off)."""
        steps = settings.max_stagnation_steps
        return None if steps is None else StagnationDetector(steps)

    def window(self, settings: DetectorSettings) -> int | None:
        """How many prose turns back ``scan`` replays when the conversation ends on one
        (``None``: the signal is off, nothing is replayed)."""
        steps = settings.max_stagnation_steps
        return None if steps is None else _window(steps)

    def message(self, count: int, seen: int) -> str:
        """The message for the same answer ``count`` times in the last ``seen`` replies.

        >>> STAGNATION.message(3, 4)[:60]
        'Loop detected: you gave the same answer 3 times in your last'
        """
        return (
            f"Loop detected: you gave the same answer {count} times in your last "
            f"{seen} replies without calling a tool. Repeating it will not move things "
            "on: do something different, or say plainly what is blocking you."
        )


STAGNATION: Final = Stagnation()
