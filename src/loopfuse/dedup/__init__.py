"""Never pay twice for the same answer: request keys and a single-flight answer cache.

>>> from loopfuse.dedup import DedupCache, RequestKey
>>> cache: DedupCache[str] = DedupCache.with_capacity(128)
>>> key = RequestKey.from_messages([("user", "What is Rust?")])
>>> cache.get_or_compute(key, lambda: "A systems programming language.")
'A systems programming language.'
>>> cache.get(key)
'A systems programming language.'
>>> cache.stats.summary()
'requests=2 hits=1 misses=1 evictions=0 hit_rate=50.0%'

See ``docs/dedup.md`` for the semantics: keys and their collision protection, what
``RequestKey.from_request`` keys on, eviction order, single flight and its timeouts.
"""

from __future__ import annotations

from loopfuse.dedup.cache import DedupCache
from loopfuse.dedup.entries import CachedResponse, DedupStats
from loopfuse.dedup.errors import SingleFlightReentryError, SingleFlightTimeoutError
from loopfuse.dedup.keys import DIGEST_SIZE, RequestKey
from loopfuse.dedup.settings import DEFAULT_TTL, DEFAULT_WAIT_TIMEOUT, CacheSettings

__all__ = [
    "DEFAULT_TTL",
    "DEFAULT_WAIT_TIMEOUT",
    "DIGEST_SIZE",
    "CacheSettings",
    "CachedResponse",
    "DedupCache",
    "DedupStats",
    "RequestKey",
    "SingleFlightReentryError",
    "SingleFlightTimeoutError",
]


def __dir__() -> list[str]:
    """What ``dir()`` shows: the public API, not the imports and helpers."""
    from loopfuse._api import public_dir

    return public_dir(globals())
