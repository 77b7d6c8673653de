"""The reading of an injected clock (the breaker's and the cache's), checked."""

from __future__ import annotations

import math
from collections.abc import Callable
from numbers import Real

from loopfuse.errors import ConfigError

__all__ = ["read_clock"]


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
