"""The values a :class:`~loopfuse.dedup.DedupCache` hands out: entry and stats snapshots."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["CachedResponse", "DedupStats"]

V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class CachedResponse(Generic[V]):
    """A snapshot of one cache entry (see :meth:`~loopfuse.dedup.DedupCache.peek`).

    ``created_at`` is the cache clock's reading when the value was inserted; the entry
    expires once the clock reaches ``created_at + ttl``. ``hit_count`` counts the reads
    that were served this value since it was inserted.

    >>> entry = CachedResponse("Rust is a language.", created_at=100.0, ttl=60.0, hit_count=2)
    >>> entry.expires_at
    160.0
    >>> entry.is_expired(159.9), entry.is_expired(160.0)
    (False, True)
    """

    value: V
    created_at: float
    ttl: float
    hit_count: int = 0

    @property
    def expires_at(self) -> float:
        """The clock reading at which the entry expires."""
        return self.created_at + self.ttl

    def is_expired(self, now: float) -> bool:
        """Whether the entry has expired at clock reading ``now`` (the boundary counts)."""
        return now >= self.created_at + self.ttl


@dataclass(frozen=True, slots=True)
class DedupStats:
    """Counters of a :class:`~loopfuse.dedup.DedupCache`, read at one instant.

    - ``total_requests``: lookups (``get`` and ``get_or_compute`` calls), each counted
      once, as a hit or a miss: ``total_requests == cache_hits + cache_misses``;
    - ``cache_hits``: lookups served a value without computing it (from the cache, or
      from another caller's computation they waited for);
    - ``cache_misses``: the other lookups (nothing cached, expired, a digest mismatch, a
      computation run, failed, timed out or cancelled);
    - ``evictions``: entries removed because they expired or to make room;
    - ``collisions``: probes that found an entry under the same 64-bit value whose
      digest differs from the probing key's (it was not served).

    >>> stats = DedupStats(total_requests=4, cache_hits=3, cache_misses=1, evictions=0)
    >>> stats.hit_rate
    0.75
    >>> stats.summary()
    'requests=4 hits=3 misses=1 evictions=0 hit_rate=75.0%'
    >>> DedupStats(0, 0, 0, 0).hit_rate
    0.0
    """

    total_requests: int
    cache_hits: int
    cache_misses: int
    evictions: int
    collisions: int = 0

    @property
    def hit_rate(self) -> float:
        """``cache_hits / total_requests``; ``0.0`` when there were no requests."""
        if self.total_requests == 0:
            return 0.0
        return self.cache_hits / self.total_requests

    def summary(self) -> str:
        """One line: ``requests=… hits=… misses=… evictions=… hit_rate=X.X%``."""
        return (
            f"requests={self.total_requests} hits={self.cache_hits} "
            f"misses={self.cache_misses} evictions={self.evictions} "
            f"hit_rate={self.hit_rate * 100:.1f}%"
        )
