"""The signals: each way an agent loops, one object in its own module.

Each signal holds its ``kind``, the :class:`~loopfuse.detector.DetectorSettings` field its
threshold is read from (``None`` there switches it off), its detection, its message for
the model, its signature and the rule by which ``scan`` tells whether it could trip
(:mod:`.base`). The run (:mod:`loopfuse.detector.core`), the replay and ``scan`` ask them
in this order:

- before a batch runs: :data:`~.repeat.REPEAT`, then :data:`~.cycle.CYCLE`;
- once its answers are known (:data:`ANSWER_SIGNALS`, the first that trips speaks):
  :data:`~.error_streak.ERROR_STREAK`, :data:`~.near_repeat.NEAR_REPEAT`,
  :data:`~.no_progress.NO_PROGRESS`, :data:`~.error_storm.ERROR_STORM`;
- a prose turn: :data:`~.stagnation.STAGNATION`.

>>> [signal.kind for signal in SIGNALS] == list(KINDS)
True
>>> signal_of("cycle").setting, signal_of("repeated_request")
('max_cycle_period', None)
"""

from __future__ import annotations

from typing import Final

from loopfuse.detector.signals.base import AnswerSignal, Signal
from loopfuse.detector.signals.cycle import CYCLE
from loopfuse.detector.signals.error_storm import ERROR_STORM
from loopfuse.detector.signals.error_streak import ERROR_STREAK
from loopfuse.detector.signals.near_repeat import NEAR_REPEAT
from loopfuse.detector.signals.no_progress import NO_PROGRESS
from loopfuse.detector.signals.repeat import REPEAT
from loopfuse.detector.signals.stagnation import STAGNATION

__all__ = [
    "ANSWER_SIGNALS",
    "CYCLE",
    "ERROR_STORM",
    "ERROR_STREAK",
    "KINDS",
    "NEAR_REPEAT",
    "NO_PROGRESS",
    "REPEAT",
    "SIGNALS",
    "STAGNATION",
    "signal_of",
]

ANSWER_SIGNALS: Final[tuple[AnswerSignal, ...]] = (
    ERROR_STREAK,
    NEAR_REPEAT,
    NO_PROGRESS,
    ERROR_STORM,
)
"""The signals decided once a batch's answers are known, in the order they are asked."""

SIGNALS: Final[tuple[Signal, ...]] = (REPEAT, CYCLE, *ANSWER_SIGNALS, STAGNATION)
"""Every signal."""

KINDS: Final = tuple(signal.kind for signal in SIGNALS)
"""Every ``kind`` a :class:`~loopfuse.detector.LoopDetected` or a scan ``Verdict`` can
carry (docs/detector.md)."""

_BY_KIND: Final = {signal.kind: signal for signal in SIGNALS}


def signal_of(kind: str) -> Signal | None:
    """The signal of ``kind``; ``None`` for a kind no signal of the detector has (another
    guard's, such as the breaker's ``repeated_request``)."""
    return _BY_KIND.get(kind)
