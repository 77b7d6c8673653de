"""Entries ordered by expiry time, so that expired ones are found without a scan.

Entries are grouped by TTL. With a monotonic clock, entries that share a TTL expire in
the order they were added, so each group is a FIFO (an ``OrderedDict``) whose head is
its next entry to expire. A small heap orders the groups by their heads. Adding to an
existing group, removing any entry and expiring one entry are O(1) while the number of
distinct TTLs in use is bounded (the default TTL plus a few fixed ``insert_with_ttl``
values: the usual case); with many distinct TTLs the heap makes them O(log groups),
never a scan of all entries.

The heap is lazy: an entry for a group may be stale (the group's head moved, or the
group emptied and was dropped); it is corrected when it reaches the top, and the heap is
rebuilt when stale entries outnumber the live groups. A stale entry's time is never
later than its group's real head (heads only move to later entries), so when the top's
time is still ahead of the clock nothing has expired and no entry is touched.
"""

from __future__ import annotations

import heapq
import itertools
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["ExpiryIndex"]

K = TypeVar("K", bound=Hashable)


class _Group(Generic[K]):
    __slots__ = ("entries", "ttl")

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self.entries: OrderedDict[K, float] = OrderedDict()  # key -> expires_at


class ExpiryIndex(Generic[K]):
    """Keys with their expiry times; yields the expired ones in amortised O(1).

    Assumes the times passed to :meth:`add` never decrease for one TTL (a monotonic
    clock). If they do, nothing breaks: an entry added out of order is only found late
    by :meth:`pop_expired` (the cache still treats it as expired when it is read).

    >>> index: ExpiryIndex[str] = ExpiryIndex()
    >>> index.add("a", ttl=10.0, expires_at=10.0)
    >>> index.add("b", ttl=1.0, expires_at=2.0)
    >>> index.add("c", ttl=10.0, expires_at=11.0)
    >>> index.pop_expired(now=10.5)
    ['b', 'a']
    >>> len(index)
    1
    """

    __slots__ = ("_groups", "_heap", "_seq", "_size")

    def __init__(self) -> None:
        self._groups: dict[float, _Group[K]] = {}
        self._heap: list[tuple[float, int, _Group[K]]] = []
        self._seq = itertools.count()  # tie-breaker: groups are never compared
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def add(self, key: K, ttl: float, expires_at: float) -> None:
        """Record ``key`` (not already present) as expiring at ``expires_at``."""
        group = self._groups.get(ttl)
        if group is None:
            group = self._groups[ttl] = _Group[K](ttl)
        group.entries[key] = expires_at
        self._size += 1
        if len(group.entries) == 1:  # a new or emptied group: it needs a heap entry
            heapq.heappush(self._heap, (expires_at, next(self._seq), group))
            if len(self._heap) > 2 * len(self._groups) + 8:
                self._rebuild()

    def discard(self, key: K, ttl: float) -> None:
        """Forget ``key``, which was added with ``ttl``."""
        group = self._groups[ttl]
        del group.entries[key]
        self._size -= 1
        if not group.entries:
            del self._groups[ttl]  # its heap entry is now stale and dropped lazily

    def pop_expired(self, now: float) -> list[K]:
        """Remove and return every key whose expiry time is ``<= now``, soonest first."""
        heap = self._heap
        if not heap or now < heap[0][0]:
            # A queued time is never later than its group's real head, so nothing has
            # expired; the common case touches no entry at all.
            return []
        expired: list[K] = []
        groups = self._groups
        while heap:
            queued_at, _, group = heap[0]
            if groups.get(group.ttl) is not group:  # emptied and dropped
                heapq.heappop(heap)
                continue
            key, expires_at = next(iter(group.entries.items()))
            if expires_at != queued_at:  # the head moved since this entry was queued
                heapq.heapreplace(heap, (expires_at, next(self._seq), group))
                continue
            if now < expires_at:
                break
            group.entries.popitem(last=False)
            self._size -= 1
            expired.append(key)
            if group.entries:
                head_at = next(iter(group.entries.values()))
                heapq.heapreplace(heap, (head_at, next(self._seq), group))
            else:
                del groups[group.ttl]
                heapq.heappop(heap)
        return expired

    def clear(self) -> None:
        """Forget every key."""
        self._groups.clear()
        self._heap.clear()
        self._size = 0

    def _rebuild(self) -> None:
        self._heap = [
            (next(iter(group.entries.values())), next(self._seq), group)
            for group in self._groups.values()
        ]
        heapq.heapify(self._heap)
