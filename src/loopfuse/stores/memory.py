"""In-memory stores: one process, no I/O, the guards' semantics exactly.

Both are thread-safe (one lock each) and O(1) amortised per operation. They keep values
as they are (no copy, no encoding), so any object may be cached.
"""

from __future__ import annotations

import math
import secrets
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Final

from cachetools import Cache, LRUCache

from loopfuse.stores import MISS, StoredEntry
from loopfuse.stores._expiry import ExpiryIndex

__all__ = ["DEFAULT_CAPACITY", "DEFAULT_MAX_SESSIONS", "MemoryBreakerStore", "MemoryCacheStore"]

DEFAULT_MAX_SESSIONS: Final = 10_000
DEFAULT_CAPACITY: Final = 1024


class _Session:
    """One session's window: samples in arrival order plus a live count per fingerprint."""

    __slots__ = ("counts", "samples")

    def __init__(self) -> None:
        self.samples: deque[tuple[float, int]] = deque()
        self.counts: dict[int, int] = {}

    def drop_oldest(self) -> None:
        _, fp = self.samples.popleft()
        left = self.counts[fp] - 1
        if left:
            self.counts[fp] = left
        else:
            del self.counts[fp]

    def expire(self, now: float, window: float) -> None:
        samples = self.samples
        while samples and now - samples[0][0] >= window:
            self.drop_oldest()

    def last_seen(self) -> float:
        return self.samples[-1][0] if self.samples else -math.inf


class MemoryBreakerStore:
    """Sessions' windows in this process: a :class:`~loopfuse.stores.BreakerStore`.

    At most ``max_sessions`` sessions are kept: before each record, sessions with no
    live sample are forgotten (idlest first), and past the cap the least recently used
    session is evicted, so a client that invents a session id per request cannot grow
    memory. Each session keeps at most ``max_samples`` samples (the oldest go first).

    >>> store = MemoryBreakerStore(max_sessions=2)
    >>> store.record("a", 7, now=0.0, window=10.0, max_samples=256)
    1
    >>> store.record("a", 7, now=1.0, window=10.0, max_samples=256)
    2
    >>> store.tracked_sessions(now=5.0, window=10.0), store.tracked_sessions(11.0, 10.0)
    (1, 0)
    """

    __slots__ = ("_sessions", "lock", "max_sessions")

    def __init__(self, max_sessions: int = DEFAULT_MAX_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self.lock = threading.Lock()
        """Held by every operation; :meth:`record_locked` expects its caller to hold it."""

    def record(
        self, session_id: str, fingerprint: int, now: float, window: float, max_samples: int
    ) -> int:
        """See :meth:`loopfuse.stores.BreakerStore.record` (atomic under :attr:`lock`)."""
        with self.lock:
            return self.record_locked(session_id, fingerprint, now, window, max_samples)

    def record_locked(
        self, session_id: str, fingerprint: int, now: float, window: float, max_samples: int
    ) -> int:
        """:meth:`record`, for a caller that holds :attr:`lock` (to read its clock under
        the same lock, so that samples arrive in time order)."""
        sessions = self._sessions
        self._forget_idle(now, window)
        session = sessions.get(session_id)
        if session is None:
            if len(sessions) >= self.max_sessions:
                sessions.popitem(last=False)  # least recently used
            session = sessions[session_id] = _Session()
        else:
            sessions.move_to_end(session_id)
            session.expire(now, window)
        while len(session.samples) >= max_samples:
            session.drop_oldest()
        session.samples.append((now, fingerprint))
        repeats = session.counts.get(fingerprint, 0) + 1
        session.counts[fingerprint] = repeats
        return repeats

    def reset(self, session_id: str | None = None) -> None:
        """See :meth:`loopfuse.stores.BreakerStore.reset` (atomic here, both forms)."""
        with self.lock:
            if session_id is None:
                self._sessions.clear()
            else:
                self._sessions.pop(session_id, None)

    def tracked_sessions(self, now: float, window: float) -> int:
        """Sessions with a live sample at ``now`` (idle ones are forgotten on the way)."""
        with self.lock:
            self._forget_idle(now, window)
            return len(self._sessions)

    def _forget_idle(self, now: float, window: float) -> None:
        # Sessions are kept in order of last use, and every use records a sample, so the
        # first one is the one idle longest: pop while it has no live sample. Each
        # session is popped at most once, which keeps this O(1) amortised.
        sessions = self._sessions
        while sessions:
            oldest = next(iter(sessions.values()))
            if now - oldest.last_seen() < window:
                break
            sessions.popitem(last=False)

    def __repr__(self) -> str:
        return f"MemoryBreakerStore(max_sessions={self.max_sessions})"


class _Entry:
    """One stored value, with the digest of the key it was stored under."""

    __slots__ = ("created_at", "digest", "hit_count", "ttl", "value")

    def __init__(self, value: object, digest: bytes | None, created_at: float, ttl: float) -> None:
        self.value = value
        self.digest = digest
        self.created_at = created_at
        self.ttl = ttl
        self.hit_count = 0


class MemoryCacheStore:
    """Answers in this process, LRU-bounded: a :class:`~loopfuse.stores.CacheStore`.

    - An entry lives while ``now < created_at + ttl``; an expired entry is never served
      and is removed when read (an eviction), by :meth:`evict_expired`, or when room is
      needed.
    - Inserting a new key into a full store first removes every expired entry, then,
      only if still full, the least recently used live one. Replacing a key evicts
      nothing. A served read makes the entry the most recently used and counts a hit on it.
    - Locks expire on ``lock_clock`` (real time: ``time.monotonic`` by default).

    >>> store = MemoryCacheStore(capacity=2)
    >>> store.set(1, None, "answer", ttl=60.0, now=0.0)
    >>> store.get(1, None, now=59.0)
    'answer'
    >>> store.get(1, None, now=60.0)
    MISS
    >>> token = store.acquire(1, None, ttl=5.0)
    >>> store.acquire(1, None, ttl=5.0) is None
    True
    >>> store.release(1, None, token or "")
    """

    __slots__ = (
        "_entries",
        "_expiry",
        "_locks",
        "capacity",
        "collisions",
        "evictions",
        "lock",
        "lock_clock",
    )

    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        *,
        lock_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capacity = capacity
        self.lock_clock = lock_clock
        # Never full when written to: set() makes room first, so that expired entries
        # go before the LRU one and every eviction is counted.
        self._entries: LRUCache[int, _Entry] = LRUCache(maxsize=capacity)
        self._expiry: ExpiryIndex[int] = ExpiryIndex()
        self._locks: dict[tuple[int, bytes | None], tuple[str, float]] = {}
        self.lock = threading.Lock()
        """Held by every operation; the ``*_locked`` methods expect their caller to hold it
        (a cache that makes a lookup and its own bookkeeping one step)."""
        self.collisions = 0
        self.evictions = 0

    def _entry(self, key_value: int) -> _Entry | None:
        entries = self._entries
        return Cache.__getitem__(entries, key_value) if key_value in entries else None

    def get(self, key_value: int, digest: bytes | None, now: float) -> object:
        """See :meth:`loopfuse.stores.CacheStore.get`: removes an expired entry (an
        eviction), counts a digest mismatch (a collision), refreshes a served entry."""
        with self.lock:
            return self.get_locked(key_value, digest, now)

    def get_locked(self, key_value: int, digest: bytes | None, now: float) -> object:
        """:meth:`get`, for a caller that holds :attr:`lock`."""
        entry = self._entry(key_value)
        if entry is None:
            return MISS
        if now >= entry.created_at + entry.ttl:
            del self._entries[key_value]
            self._expiry.discard(key_value, entry.ttl)
            self.evictions += 1
            return MISS
        if digest is not None and digest != entry.digest:
            self.collisions += 1
            return MISS
        self._entries[key_value]  # refreshes the LRU order
        entry.hit_count += 1
        return entry.value

    def peek(self, key_value: int, digest: bytes | None, now: float) -> StoredEntry | None:
        """See :meth:`loopfuse.stores.CacheStore.peek`."""
        with self.lock:
            return self.peek_locked(key_value, digest, now)

    def peek_locked(self, key_value: int, digest: bytes | None, now: float) -> StoredEntry | None:
        """:meth:`peek`, for a caller that holds :attr:`lock`."""
        entry = self._entry(key_value)
        if (
            entry is None
            or now >= entry.created_at + entry.ttl
            or (digest is not None and digest != entry.digest)
        ):
            return None
        return StoredEntry(entry.value, entry.created_at, entry.ttl, entry.hit_count)

    def set(
        self, key_value: int, digest: bytes | None, value: object, ttl: float, now: float
    ) -> None:
        """See :meth:`loopfuse.stores.CacheStore.set`."""
        with self.lock:
            self.set_locked(key_value, digest, value, ttl, now)

    def set_locked(
        self, key_value: int, digest: bytes | None, value: object, ttl: float, now: float
    ) -> None:
        """:meth:`set`, for a caller that holds :attr:`lock`."""
        entries = self._entries
        old = self._entry(key_value)
        if old is not None:
            self._expiry.discard(key_value, old.ttl)
        elif len(entries) >= self.capacity:
            self.evict_expired_locked(now)
            if len(entries) >= self.capacity:
                victim, entry = entries.popitem()  # the least recently used
                self._expiry.discard(victim, entry.ttl)
                self.evictions += 1
        entries[key_value] = _Entry(value, digest, now, ttl)
        self._expiry.add(key_value, ttl, now + ttl)

    def evict_expired(self, now: float) -> int:
        """Remove every entry expired at ``now``; returns how many (each an eviction)."""
        with self.lock:
            return self.evict_expired_locked(now)

    def evict_expired_locked(self, now: float) -> int:
        """:meth:`evict_expired`, for a caller that holds :attr:`lock`."""
        expired = self._expiry.pop_expired(now)
        entries = self._entries
        for key_value in expired:
            del entries[key_value]
        self.evictions += len(expired)
        return len(expired)

    def acquire(self, key_value: int, digest: bytes | None, ttl: float) -> str | None:
        """See :meth:`loopfuse.stores.CacheStore.acquire`."""
        lock_key = (key_value, digest)
        with self.lock:
            now = self.lock_clock()
            held = self._locks.get(lock_key)
            if held is not None and now < held[1]:
                return None
            if held is None and len(self._locks) >= 2 * self.capacity + 64:
                # Holders normally release; this only bounds what dead ones leave behind.
                for stale in [k for k, (_, until) in self._locks.items() if now >= until]:
                    del self._locks[stale]
            token = secrets.token_hex(16)
            self._locks[lock_key] = (token, now + ttl)
            return token

    def release(self, key_value: int, digest: bytes | None, token: str) -> None:
        """See :meth:`loopfuse.stores.CacheStore.release`."""
        lock_key = (key_value, digest)
        with self.lock:
            held = self._locks.get(lock_key)
            if held is not None and held[0] == token:
                del self._locks[lock_key]

    def clear(self) -> None:
        """Remove every entry and lock, and reset :attr:`collisions` and :attr:`evictions`."""
        with self.lock:
            self.clear_locked()

    def clear_locked(self) -> None:
        """:meth:`clear`, for a caller that holds :attr:`lock`."""
        self._entries.clear()
        self._expiry.clear()
        self._locks.clear()
        self.collisions = 0
        self.evictions = 0

    def __len__(self) -> int:
        """Entries stored, including expired ones not removed yet."""
        return len(self._entries)

    def __repr__(self) -> str:
        return f"MemoryCacheStore(capacity={self.capacity}, entries={len(self._entries)})"
