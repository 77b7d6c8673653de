"""Tool-call loop detection: repeats, cycles, varied loops and stagnation, live or from a
transcript.

- :class:`LoopDetector` — stateful, for an agent loop: ``check`` a batch before it
  runs, ``record_results`` after, ``break_run`` on a user turn; ``scan`` a whole body.
- :func:`scan` — stateless: does the conversation in a request body end in a loop?
- :class:`Replay` — a transcript walked message by message, a verdict after any turn.
- :class:`StagnationDetector` — the same prose answer again and again.

See docs/detector.md for what each signal catches and the measurement behind each
default.
"""

from __future__ import annotations

from loopfuse.detector.answers import is_contentless, looks_like_error, normalize_answer
from loopfuse.detector.detector import LoopDetector
from loopfuse.detector.digests import is_digest, results_digest
from loopfuse.detector.records import (
    KINDS,
    BatchRecord,
    BatchRecordError,
    LoopDetected,
    RepeatOutcome,
)
from loopfuse.detector.replay import OK, Replay, Verdict
from loopfuse.detector.scan import scan, scan_intent
from loopfuse.detector.settings import (
    DEFAULT_ERROR_STORM,
    DEFAULT_MAX_CYCLE_LAPS,
    DEFAULT_MAX_CYCLE_PERIOD,
    DEFAULT_MAX_ERROR_STREAK,
    DEFAULT_MAX_NEAR_REPEATS,
    DEFAULT_MAX_OBSERVATION_STEPS,
    DEFAULT_MAX_STAGNATION_STEPS,
    DEFAULT_MAX_STRIKES,
    DEFAULT_MAX_UNCHANGED_CHECKS,
    DEFAULT_MAX_UNREAD_EDIT_CHECKS,
    DEFAULT_WINDOW,
    DetectorSettings,
)
from loopfuse.detector.signature import ToolCall, batch_signature
from loopfuse.detector.stagnation import StagnationDetected, StagnationDetector
from loopfuse.detector.tools import (
    DEFAULT_COSTLY_TOOLS,
    DEFAULT_OBSERVATION_TOOLS,
    is_costly_batch,
    is_observation_batch,
)

__all__ = [
    "DEFAULT_COSTLY_TOOLS",
    "DEFAULT_ERROR_STORM",
    "DEFAULT_MAX_CYCLE_LAPS",
    "DEFAULT_MAX_CYCLE_PERIOD",
    "DEFAULT_MAX_ERROR_STREAK",
    "DEFAULT_MAX_NEAR_REPEATS",
    "DEFAULT_MAX_OBSERVATION_STEPS",
    "DEFAULT_MAX_STAGNATION_STEPS",
    "DEFAULT_MAX_STRIKES",
    "DEFAULT_MAX_UNCHANGED_CHECKS",
    "DEFAULT_MAX_UNREAD_EDIT_CHECKS",
    "DEFAULT_OBSERVATION_TOOLS",
    "DEFAULT_WINDOW",
    "KINDS",
    "OK",
    "BatchRecord",
    "BatchRecordError",
    "DetectorSettings",
    "LoopDetected",
    "LoopDetector",
    "RepeatOutcome",
    "Replay",
    "StagnationDetected",
    "StagnationDetector",
    "ToolCall",
    "Verdict",
    "batch_signature",
    "is_contentless",
    "is_costly_batch",
    "is_digest",
    "is_observation_batch",
    "looks_like_error",
    "normalize_answer",
    "results_digest",
    "scan",
    "scan_intent",
]


def __dir__() -> list[str]:
    """What ``dir()`` shows: the public API, not the imports and helpers."""
    from loopfuse._api import public_dir

    return public_dir(globals())
