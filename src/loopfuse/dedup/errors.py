"""The exceptions of :mod:`loopfuse.dedup` beyond those in :mod:`loopfuse.errors`.

Bad configuration raises :class:`loopfuse.errors.ConfigError` and arguments of the
wrong type :class:`loopfuse.errors.InvalidInputError`; these two are about waiting for
another caller's computation (single flight).
"""

from __future__ import annotations

from loopfuse.errors import LoopfuseError

__all__ = ["SingleFlightReentryError", "SingleFlightTimeoutError"]


class SingleFlightTimeoutError(LoopfuseError, TimeoutError):
    """A caller waited longer than its timeout for another caller's computation.

    Raised by :meth:`~loopfuse.dedup.DedupCache.get_or_compute` and
    :meth:`~loopfuse.dedup.DedupCache.aget_or_compute` in a *waiting* caller; the
    computing caller is not interrupted and caches its value when it finishes. It is
    also a :class:`TimeoutError`.

    >>> issubclass(SingleFlightTimeoutError, TimeoutError)
    True
    """


class SingleFlightReentryError(LoopfuseError, RuntimeError):
    """A factory asked the cache for the very key it is computing.

    Waiting for itself would deadlock, so the nested call raises at once instead. It is
    also a :class:`RuntimeError`.

    >>> issubclass(SingleFlightReentryError, RuntimeError)
    True
    """
