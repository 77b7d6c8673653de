"""Checked settings of :class:`~loopfuse.LoopBreaker`: durations, counts, environment,
and the reading of an injected clock (the breaker's and the cache's).

>>> window_seconds(30), count_setting("max_repeats", 5, 0)
(30.0, 5)
>>> env_int({"LOOP_MAX_REPEATS": "x"}, "LOOP_MAX_REPEATS", 5, 0, "non-negative integer")
Traceback (most recent call last):
    ...
loopfuse.errors.ConfigError: LOOP_MAX_REPEATS must be a non-negative integer, got 'x'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import timedelta
from numbers import Real

from loopfuse.errors import ConfigError

__all__ = ["count_setting", "env_int", "read_clock", "window_seconds"]


def read_clock(clock: Callable[[], object]) -> float:
    """``clock()`` as float seconds, checked: a NaN would make every session look idle
    and every entry fresh, a string would corrupt the windows and orders. Any finite
    real number is taken (an ``int``, a ``Fraction``, a ``numpy.float64``).

    >>> read_clock(lambda: 3)
    3.0
    >>> read_clock(lambda: float("nan"))
    Traceback (most recent call last):
        ...
    loopfuse.errors.ConfigError: clock must return a finite number of seconds, got nan
    """
    now = clock()
    if type(now) is float and now - now == 0.0:  # the common case, fast: finite float
        return now
    if isinstance(now, bool) or not isinstance(now, Real) or not math.isfinite(now):
        raise ConfigError(f"clock must return a finite number of seconds, got {now!r}")
    return float(now)


def window_seconds(window: float | timedelta) -> float:
    if isinstance(window, timedelta):
        seconds = window.total_seconds()
    elif isinstance(window, int | float) and not isinstance(window, bool):
        seconds = float(window)
    else:
        raise ConfigError(
            f"window must be seconds (int/float) or a timedelta, not {type(window).__name__}"
        )
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(f"window must be a positive, finite duration, got {window!r}")
    return seconds


def count_setting(name: str, value: object, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f"{name} must be an int, not {type(value).__name__}")
    if value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value}")
    return value


def env_int(env: Mapping[str, str], name: str, default: int, minimum: int, what: str) -> int:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip(), 10)
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise ConfigError(f"{name} must be a {what}, got {raw!r}")
    return value
