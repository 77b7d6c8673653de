"""Tool-call loop detection: repeats, cycles and stagnation, live or from a transcript.

- :class:`LoopDetector` — stateful, for an agent loop: ``check`` a batch before it
  runs, ``record_results`` after, ``break_run`` on a user turn; ``scan`` a whole body.
- :class:`StagnationDetector` — the same prose answer again and again.
- :func:`scan` — stateless: does the conversation in a request body end in a loop?

See docs/detector.md for what each rule catches and the measurement behind each default.
"""

from __future__ import annotations

from loopfuse.detector.detector import (
    DEFAULT_MAX_CYCLE_LAPS,
    DEFAULT_MAX_CYCLE_PERIOD,
    DEFAULT_MAX_OBSERVATION_STEPS,
    DEFAULT_MAX_STAGNATION_STEPS,
    DEFAULT_MAX_STRIKES,
    LoopDetector,
)
from loopfuse.detector.records import (
    BatchRecord,
    BatchRecordError,
    LoopDetected,
    RepeatOutcome,
)
from loopfuse.detector.scan import OK, Verdict, scan, scan_intent
from loopfuse.detector.signature import (
    ToolCall,
    batch_signature,
    normalize_answer,
    results_digest,
)
from loopfuse.detector.stagnation import StagnationDetected, StagnationDetector
from loopfuse.detector.tools import (
    DEFAULT_COSTLY_TOOLS,
    DEFAULT_OBSERVATION_TOOLS,
    is_costly_batch,
    is_observation_batch,
)

__all__ = [
    "DEFAULT_COSTLY_TOOLS",
    "DEFAULT_MAX_CYCLE_LAPS",
    "DEFAULT_MAX_CYCLE_PERIOD",
    "DEFAULT_MAX_OBSERVATION_STEPS",
    "DEFAULT_MAX_STAGNATION_STEPS",
    "DEFAULT_MAX_STRIKES",
    "DEFAULT_OBSERVATION_TOOLS",
    "OK",
    "BatchRecord",
    "BatchRecordError",
    "LoopDetected",
    "LoopDetector",
    "RepeatOutcome",
    "StagnationDetected",
    "StagnationDetector",
    "ToolCall",
    "Verdict",
    "batch_signature",
    "is_costly_batch",
    "is_observation_batch",
    "normalize_answer",
    "results_digest",
    "scan",
    "scan_intent",
]


def __dir__() -> list[str]:
    """What ``dir()`` shows: the public API, not the imports and helpers."""
    from loopfuse._api import public_dir

    return public_dir(globals())
