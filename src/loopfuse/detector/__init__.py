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

from typing import TYPE_CHECKING, Final

from loopfuse._api import lazy_exports

if TYPE_CHECKING:  # the names, for type checkers; at run time they load on first use
    from loopfuse.detector.answers import (
        is_contentless,
        looks_like_error,
        normalize_answer,
    )
    from loopfuse.detector.detector import (
        LoopDetector,
    )
    from loopfuse.detector.digests import (
        is_digest,
        results_digest,
    )
    from loopfuse.detector.records import (
        BatchRecord,
        BatchRecordError,
        LoopDetected,
        RepeatOutcome,
    )
    from loopfuse.detector.replay import (
        OK,
        Replay,
        Verdict,
    )
    from loopfuse.detector.scanning import (
        scan,
        scan_intent,
    )
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
    from loopfuse.detector.signals import (
        KINDS,
    )
    from loopfuse.detector.signals.stagnation import (
        StagnationDetected,
        StagnationDetector,
    )
    from loopfuse.detector.signature import (
        ToolCall,
        batch_signature,
    )
    from loopfuse.detector.tools import (
        is_costly_batch,
        is_observation_batch,
    )
    from loopfuse.harness.generic import (
        DEFAULT_COSTLY_TOOLS,
        DEFAULT_OBSERVATION_TOOLS,
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

# Each public name and the module that defines it, imported on first use (PEP 562), so
# that what reads one part (``loopfuse hook`` reads the settings' fields in a process
# that never checks a call) does not pay for the others: ``from loopfuse.detector import
# X`` works as before.
_LAZY: Final[dict[str, str]] = {
    "DEFAULT_COSTLY_TOOLS": "loopfuse.harness.generic",
    "DEFAULT_ERROR_STORM": "loopfuse.detector.settings",
    "DEFAULT_MAX_CYCLE_LAPS": "loopfuse.detector.settings",
    "DEFAULT_MAX_CYCLE_PERIOD": "loopfuse.detector.settings",
    "DEFAULT_MAX_ERROR_STREAK": "loopfuse.detector.settings",
    "DEFAULT_MAX_NEAR_REPEATS": "loopfuse.detector.settings",
    "DEFAULT_MAX_OBSERVATION_STEPS": "loopfuse.detector.settings",
    "DEFAULT_MAX_STAGNATION_STEPS": "loopfuse.detector.settings",
    "DEFAULT_MAX_STRIKES": "loopfuse.detector.settings",
    "DEFAULT_MAX_UNCHANGED_CHECKS": "loopfuse.detector.settings",
    "DEFAULT_MAX_UNREAD_EDIT_CHECKS": "loopfuse.detector.settings",
    "DEFAULT_OBSERVATION_TOOLS": "loopfuse.harness.generic",
    "DEFAULT_WINDOW": "loopfuse.detector.settings",
    "KINDS": "loopfuse.detector.signals",
    "OK": "loopfuse.detector.replay",
    "BatchRecord": "loopfuse.detector.records",
    "BatchRecordError": "loopfuse.detector.records",
    "DetectorSettings": "loopfuse.detector.settings",
    "LoopDetected": "loopfuse.detector.records",
    "LoopDetector": "loopfuse.detector.detector",
    "RepeatOutcome": "loopfuse.detector.records",
    "Replay": "loopfuse.detector.replay",
    "StagnationDetected": "loopfuse.detector.signals.stagnation",
    "StagnationDetector": "loopfuse.detector.signals.stagnation",
    "ToolCall": "loopfuse.detector.signature",
    "Verdict": "loopfuse.detector.replay",
    "batch_signature": "loopfuse.detector.signature",
    "is_contentless": "loopfuse.detector.answers",
    "is_costly_batch": "loopfuse.detector.tools",
    "is_digest": "loopfuse.detector.digests",
    "is_observation_batch": "loopfuse.detector.tools",
    "looks_like_error": "loopfuse.detector.answers",
    "normalize_answer": "loopfuse.detector.answers",
    "results_digest": "loopfuse.detector.digests",
    "scan": "loopfuse.detector.scanning",
    "scan_intent": "loopfuse.detector.scanning",
}


__getattr__ = lazy_exports(__name__, globals(), _LAZY)


def __dir__() -> list[str]:
    """What ``dir()`` shows: the public API, not the imports and helpers."""
    from loopfuse._api import public_dir

    return public_dir(globals())
