"""The options of a :class:`~loopfuse.integrations.Guard`, and their checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypedDict

from loopfuse.breaker import LoopBreaker
from loopfuse.dedup import DedupCache
from loopfuse.errors import ConfigError
from loopfuse.events import EventCallback
from loopfuse.integrations._decision import DEFAULT, Mode, Scanner, _Default

__all__ = ["GuardOptions", "checked_options", "default_detector"]

_MODES: Final = ("refuse", "note", "warn")


class GuardOptions(TypedDict, total=False):
    """The keyword arguments of :class:`~loopfuse.integrations.Guard`, for integrations
    that build one."""

    breaker: LoopBreaker | _Default | None
    detector: Scanner | _Default | None
    cache: DedupCache[Any] | None
    mode: Mode
    cache_streams: bool
    cache_sampled: bool
    cache_namespace: str | None
    shared_session: str | None
    fail_closed: bool
    on_event: EventCallback | None
    clock: Callable[[], float] | None
    warn_window: float


def default_detector() -> Scanner | None:
    """A ``LoopDetector()`` with its measured defaults, or ``None`` if it is unavailable."""
    try:
        from loopfuse.detector import LoopDetector
    except ImportError:  # pragma: no cover - the detector ships with loopfuse
        return None
    return LoopDetector()


def checked_options(
    mode: object,
    breaker: LoopBreaker | _Default | None,
    detector: Scanner | _Default | None,
    cache: object,
    cache_namespace: object,
    shared_session: object,
    clock: object,
) -> tuple[LoopBreaker | None, Scanner | None]:
    """The breaker and detector a guard runs (defaults made), after checking every
    option; a bad one raises :class:`~loopfuse.errors.ConfigError`.

    >>> checked_options("shout", None, None, None, None, None, None)
    Traceback (most recent call last):
        ...
    loopfuse.errors.ConfigError: mode must be 'refuse', 'note' or 'warn', got 'shout'
    """
    if mode not in _MODES:
        raise ConfigError(f"mode must be 'refuse', 'note' or 'warn', got {mode!r}")
    if breaker is DEFAULT:
        breaker = LoopBreaker()
    elif breaker is not None and not isinstance(breaker, LoopBreaker):
        raise ConfigError(f"breaker must be a LoopBreaker or None, not {breaker!r}")
    if detector is DEFAULT:
        detector = default_detector()
    elif detector is not None and not isinstance(detector, Scanner):
        raise ConfigError(
            f"detector must have scan(body) and scan_intent(intent) methods, not {detector!r}"
        )
    if cache is not None and not isinstance(cache, DedupCache):
        raise ConfigError(f"cache must be a DedupCache or None, not {cache!r}")
    for name, text in (("cache_namespace", cache_namespace), ("shared_session", shared_session)):
        if text is not None and not (isinstance(text, str) and text.strip()):
            raise ConfigError(f"{name} must be a non-empty str or None, got {text!r}")
    if clock is not None and not callable(clock):
        raise ConfigError("clock must be a callable returning seconds as a float")
    return breaker, detector
