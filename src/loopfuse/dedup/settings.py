"""The settings of a :class:`~loopfuse.dedup.DedupCache`: how many answers it holds, how
long they live, how long a caller waits for another's computation, and what a failure
does, each declared once (:mod:`loopfuse.fields`) and checked once.

A TTL given to one call (``insert_with_ttl``, ``get_or_compute(ttl=...)``) is checked by
the same kind as ``default_ttl`` (:data:`TTL`), a call's wait by :data:`TIMEOUT`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from loopfuse.fields import Flag, Integer, Seconds, check_fields, setting
from loopfuse.stores.memory import DEFAULT_CAPACITY

__all__ = ["DEFAULT_TTL", "DEFAULT_WAIT_TIMEOUT", "TIMEOUT", "TTL", "CacheSettings"]

DEFAULT_TTL: Final = 60.0
"""Seconds an entry lives unless told otherwise."""

DEFAULT_WAIT_TIMEOUT: Final = 300.0
"""Seconds a single-flight waiter waits for another caller's computation.

Long enough for a slow LLM answer, short enough that a factory which hangs for good
cannot block its waiters for good. ``math.inf`` waits forever.
"""

TTL: Final = Seconds(forever=True)
"""The kind of a time to live: seconds > 0, ``math.inf`` for never."""

TIMEOUT: Final = Seconds(zero=True, forever=True)
"""The kind of one call's wait: seconds >= 0 (``0``: do not wait), ``math.inf``: forever."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheSettings:
    """Every setting of a :class:`~loopfuse.dedup.DedupCache`, checked once: each field is
    declared here with its default, its kind and a one-line help, and ``loopfuse
    scan``'s flags and a settings file's keys are made from them (their keys say
    ``cache_``: the breaker and the detector have a window, a capacity could be anyone's).

    >>> CacheSettings(capacity=128).default_ttl
    60.0
    >>> CacheSettings(default_ttl=0)
    Traceback (most recent call last):
        ...
    loopfuse.fields.SettingError: default_ttl must be a positive number of seconds \
(inf: forever), got 0
    """

    capacity: int = setting(
        DEFAULT_CAPACITY,
        Integer(minimum=1),
        "answers the cache holds (in memory)",
        key="cache_capacity",
    )
    default_ttl: float = setting(
        DEFAULT_TTL, TTL, "seconds an answer stays cached (inf: for ever)", key="cache_ttl"
    )
    wait_timeout: float = setting(
        DEFAULT_WAIT_TIMEOUT,
        TTL,
        "seconds a caller waits for another caller's computation of the same answer",
        key="cache_wait_timeout",
    )
    fail_closed: bool = setting(
        False,
        Flag(),
        "raise, instead of answering uncached, when the cache fails (get_or_compute_request)",
        key="cache_fail_closed",
    )

    def __post_init__(self) -> None:
        check_fields(self)
