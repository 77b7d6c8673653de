"""loopfuse: stop LLM agents from burning money in loops.

Call a guard before every LLM request:

- :class:`LoopBreaker` refuses the same request intent sent again and again.
- :class:`LoopDetector` refuses a tool-call batch (or a cycle of them) repeated with the
  same answers; :func:`scan` gives the same verdict on a whole request body.
- :class:`DedupCache` answers an identical request from cache instead of paying again.
- :class:`Guard` runs them all as one decision on a request body (what every
  integration and ``loopfuse scan`` run): breaker, detector, mode, cache plan.
- :mod:`loopfuse.intent` turns any OpenAI, Anthropic, Gemini or Ollama request body into
  one canonical intent and fingerprints it.
- :mod:`loopfuse.harness`: one module per agent harness (Claude Code, Codex, Gemini CLI,
  OpenHands, …): what each of its tools is, and how its answers say they failed.
- :mod:`loopfuse.events`: every decision as a :class:`GuardEvent`, for your logs, metrics
  and traces (``on_event=`` on each guard and integration).
- :func:`load_settings` reads the settings file ``loopfuse scan --config`` tunes (every
  guard's :class:`Settings`) and builds the same guard in production.

>>> import loopfuse
>>> breaker = loopfuse.LoopBreaker(window=30, max_repeats=5)
>>> breaker.check_request("session-1", b'{"input": "hello"}').allowed
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from loopfuse._api import lazy_exports

if TYPE_CHECKING:  # the names, for type checkers; at run time they load on first use
    from loopfuse import harness, intent
    from loopfuse.breaker import BreakerSettings, LoopBreaker, LoopBroken, LoopDecision
    from loopfuse.dedup import (
        CachedResponse,
        CacheSettings,
        DedupCache,
        DedupStats,
        RequestKey,
        SingleFlightReentryError,
        SingleFlightTimeoutError,
    )
    from loopfuse.detector import (
        BatchRecord,
        BatchRecordError,
        DetectorSettings,
        LoopDetected,
        LoopDetector,
        RepeatOutcome,
        Replay,
        StagnationDetected,
        StagnationDetector,
        ToolCall,
        Verdict,
        batch_signature,
        results_digest,
        scan,
        scan_intent,
    )
    from loopfuse.errors import ConfigError, InvalidInputError, LoopfuseError
    from loopfuse.events import EventAction, EventCallback, EventSink, GuardEvent, log_events
    from loopfuse.guard import (
        Guard,
        GuardDecision,
        GuardSettings,
        PreparedRequest,
        RequestContext,
        Scanner,
        ScanVerdict,
    )
    from loopfuse.loop import Loop
    from loopfuse.overrides import (
        BreakerOverrides,
        CacheOverrides,
        DetectorOverrides,
        GuardOverrides,
    )
    from loopfuse.settings import Settings, load_settings
    from loopfuse.stores import (
        AsyncBreakerStore,
        AsyncCacheStore,
        BreakerStore,
        CacheStore,
        StoredEntry,
        StoreUnavailableError,
    )

__version__ = "0.1.0.dev0"

__all__ = [
    "AsyncBreakerStore",
    "AsyncCacheStore",
    "BatchRecord",
    "BatchRecordError",
    "BreakerOverrides",
    "BreakerSettings",
    "BreakerStore",
    "CacheOverrides",
    "CacheSettings",
    "CacheStore",
    "CachedResponse",
    "ConfigError",
    "DedupCache",
    "DedupStats",
    "DetectorOverrides",
    "DetectorSettings",
    "EventAction",
    "EventCallback",
    "EventSink",
    "Guard",
    "GuardDecision",
    "GuardEvent",
    "GuardOverrides",
    "GuardSettings",
    "InvalidInputError",
    "Loop",
    "LoopBreaker",
    "LoopBroken",
    "LoopDecision",
    "LoopDetected",
    "LoopDetector",
    "LoopfuseError",
    "PreparedRequest",
    "RepeatOutcome",
    "Replay",
    "RequestContext",
    "RequestKey",
    "ScanVerdict",
    "Scanner",
    "Settings",
    "SingleFlightReentryError",
    "SingleFlightTimeoutError",
    "StagnationDetected",
    "StagnationDetector",
    "StoreUnavailableError",
    "StoredEntry",
    "ToolCall",
    "Verdict",
    "__version__",
    "batch_signature",
    "harness",
    "intent",
    "load_settings",
    "log_events",
    "results_digest",
    "scan",
    "scan_intent",
]


# Each public name and the module that defines it, imported on first use (PEP 562), so
# that a process that needs one part (``loopfuse hook`` needs the detector only) does
# not pay for the others: ``from loopfuse import X`` and ``loopfuse.X`` work as before.
_LAZY: Final[dict[str, str]] = {
    "AsyncBreakerStore": "loopfuse.stores",
    "AsyncCacheStore": "loopfuse.stores",
    "BatchRecord": "loopfuse.detector",
    "BatchRecordError": "loopfuse.detector",
    "BreakerOverrides": "loopfuse.overrides",
    "BreakerSettings": "loopfuse.breaker",
    "BreakerStore": "loopfuse.stores",
    "CacheOverrides": "loopfuse.overrides",
    "CacheSettings": "loopfuse.dedup",
    "CacheStore": "loopfuse.stores",
    "CachedResponse": "loopfuse.dedup",
    "ConfigError": "loopfuse.errors",
    "DedupCache": "loopfuse.dedup",
    "DedupStats": "loopfuse.dedup",
    "DetectorOverrides": "loopfuse.overrides",
    "DetectorSettings": "loopfuse.detector",
    "EventAction": "loopfuse.events",
    "EventCallback": "loopfuse.events",
    "EventSink": "loopfuse.events",
    "Guard": "loopfuse.guard",
    "GuardDecision": "loopfuse.guard",
    "GuardEvent": "loopfuse.events",
    "GuardOverrides": "loopfuse.overrides",
    "GuardSettings": "loopfuse.guard",
    "InvalidInputError": "loopfuse.errors",
    "Loop": "loopfuse.loop",
    "LoopBreaker": "loopfuse.breaker",
    "LoopBroken": "loopfuse.breaker",
    "LoopDecision": "loopfuse.breaker",
    "LoopDetected": "loopfuse.detector",
    "LoopDetector": "loopfuse.detector",
    "LoopfuseError": "loopfuse.errors",
    "PreparedRequest": "loopfuse.guard",
    "RepeatOutcome": "loopfuse.detector",
    "Replay": "loopfuse.detector",
    "RequestContext": "loopfuse.guard",
    "RequestKey": "loopfuse.dedup",
    "ScanVerdict": "loopfuse.guard",
    "Scanner": "loopfuse.guard",
    "Settings": "loopfuse.settings",
    "SingleFlightReentryError": "loopfuse.dedup",
    "SingleFlightTimeoutError": "loopfuse.dedup",
    "StagnationDetected": "loopfuse.detector",
    "StagnationDetector": "loopfuse.detector",
    "StoreUnavailableError": "loopfuse.stores",
    "StoredEntry": "loopfuse.stores",
    "ToolCall": "loopfuse.detector",
    "Verdict": "loopfuse.detector",
    "batch_signature": "loopfuse.detector",
    "harness": "loopfuse.harness",
    "intent": "loopfuse.intent",
    "load_settings": "loopfuse.settings",
    "log_events": "loopfuse.events",
    "results_digest": "loopfuse.detector",
    "scan": "loopfuse.detector",
    "scan_intent": "loopfuse.detector",
}


# The detector's low-level helpers are the detector's (issue 19): ``loopfuse.X`` still
# works, with a DeprecationWarning.
_MOVED: Final[dict[str, str]] = {
    "is_contentless": "loopfuse.detector",
    "is_costly_batch": "loopfuse.detector",
    "is_digest": "loopfuse.detector",
    "is_observation_batch": "loopfuse.detector",
    "looks_like_error": "loopfuse.detector",
    "normalize_answer": "loopfuse.detector",
}

__getattr__ = lazy_exports(__name__, globals(), _LAZY, _MOVED)


def __dir__() -> list[str]:
    """What ``dir()`` shows: the public API, not the imports and helpers."""
    from loopfuse._api import public_dir

    return public_dir(globals())
