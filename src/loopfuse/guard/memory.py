"""What the guard remembers between requests: a small, bounded, in-process memory.

The guard remembers two things, both short-lived and both only useful in the process
that saw them: attempts that failed upstream (:class:`RetryLedger`: their retries are
not counted as repeats) and loops it has already noted (:class:`NoteMemory`: a loop that
goes on after its note is refused). Neither needs a shared store: a retry goes through
the client that saw the failure, and a note is only given once per process at worst.

Both are :class:`TimedRecords`, bounded twice: entries expire ``ttl`` seconds after they
were written, and at most ``capacity`` are kept (the oldest go first).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, replace
from typing import Any, Final, Generic, TypeVar

from blake3 import blake3

from loopfuse.errors import ConfigError, InvalidInputError
from loopfuse.guard.request import PreparedRequest
from loopfuse.intent import canonical_json
from loopfuse.loop import Loop

__all__ = ["NoteMemory", "RetryLedger", "TimedRecords", "retryable"]

K = TypeVar("K", bound=Hashable)
_RETRYABLE: Final = frozenset({408, 409, 429})
V = TypeVar("V")


class TimedRecords(Generic[K, V]):
    """A thread-safe map whose entries expire after ``ttl`` seconds and whose size is
    capped at ``capacity`` (oldest written first out). Times are passed in: no clock here.

    >>> records: TimedRecords[str, int] = TimedRecords(capacity=2, ttl=10.0)
    >>> records.put("a", 1, now=0.0)
    >>> records.get("a", now=5.0), records.get("a", now=10.0)
    (1, None)
    >>> for name, now in (("a", 20.0), ("b", 21.0), ("c", 22.0)):
    ...     records.put(name, 0, now)
    >>> len(records), records.get("a", now=22.0)
    (2, None)
    """

    __slots__ = ("_entries", "_lock", "capacity", "ttl")

    def __init__(self, capacity: int, ttl: float) -> None:
        if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
            raise ConfigError(f"capacity must be an int >= 1, got {capacity!r}")
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0:
            raise ConfigError(f"ttl must be a positive number of seconds, got {ttl!r}")
        self.capacity = capacity
        self.ttl = float(ttl)
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, key: K, value: V, now: float) -> None:
        """Remember ``value`` under ``key`` as of ``now`` (replacing what was there)."""
        with self._lock:
            entries = self._entries
            entries.pop(key, None)
            entries[key] = (now, value)
            self._trim(now)

    def get(self, key: K, now: float) -> V | None:
        """The value remembered under ``key``, unless it has expired."""
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            if now - found[0] >= self.ttl:
                del self._entries[key]
                return None
            return found[1]

    def pop(self, key: K) -> V | None:
        """Forget ``key``; its value, or ``None``."""
        with self._lock:
            found = self._entries.pop(key, None)
        return None if found is None else found[1]

    def __len__(self) -> int:
        return len(self._entries)

    def _trim(self, now: float) -> None:
        entries = self._entries
        # Entries are in write order, so the expired ones are at the front.
        while entries:
            written, _ = next(iter(entries.values()))
            if now - written < self.ttl and len(entries) <= self.capacity:
                break
            entries.popitem(last=False)


def retryable(status: int) -> bool:
    """Whether an HTTP status is a failure the SDKs retry: 408, 409, 429 and every 5xx.

    >>> [retryable(code) for code in (200, 400, 429, 503)]
    [False, False, True, True]
    """
    return status in _RETRYABLE or 500 <= status <= 599


@dataclass(frozen=True, slots=True)
class _Failure:
    at: float
    backoff: float | None
    noted: Loop | None


class RetryLedger:
    """Attempts that failed upstream, by (identity, fingerprint): the next identical
    request is a retry, not a repeat, once its backoff is up.

    >>> ledger = RetryLedger()
    >>> ledger.failed(("s", 1), at=0.0, backoff=2.0, noted=None)
    >>> ledger.take(("s", 1), now=1.0)  # before the backoff: a repeat like any other
    (False, None)
    >>> ledger.failed(("s", 1), at=0.0, backoff=2.0, noted=None)
    >>> ledger.take(("s", 1), now=2.0), ledger.take(("s", 1), now=2.0)
    ((True, None), (False, None))
    """

    __slots__ = ("_records",)

    def __init__(self, capacity: int = 10_000, ttl: float = 600.0) -> None:
        self._records: TimedRecords[tuple[str, int], _Failure] = TimedRecords(capacity, ttl)

    def failed(
        self, key: tuple[str, int], *, at: float, backoff: float | None, noted: Loop | None
    ) -> None:
        """Remember that the attempt ``key`` failed ``at``, asking for ``backoff`` seconds."""
        wait = backoff if backoff is not None and backoff > 0 else None
        self._records.put(key, _Failure(at, wait, noted), at)

    def answered(self, key: tuple[str, int]) -> None:
        """The attempt ``key`` got an answer: the next identical request is a repeat."""
        self._records.pop(key)

    def take(self, key: tuple[str, int], now: float) -> tuple[bool, Loop | None]:
        """Whether a request ``key`` is a retry (its last attempt failed and the backoff
        is up), and the loop that attempt was noted for. Either way the record is used up."""
        failed = self._records.pop(key)
        if failed is None or now - failed.at < (failed.backoff or 0.0):
            return False, None
        return True, failed.noted

    def __len__(self) -> int:
        return len(self._records)


_THREADS_KEPT: Final = 8  # conversations remembered per (owner, kind, signature)


@dataclass(frozen=True, slots=True)
class _Thread:
    """The conversation a note was written into, so that only a later request of *that*
    conversation is refused for ignoring it: by the provider ids of its tool calls (each
    run gets fresh ones, and keeps them in its history); in a dialect without ids, by
    its canonical messages (a later request of the run starts with them)."""

    ids: frozenset[str]
    messages: int
    digest: bytes
    loop: Loop | None = None  # the loop noted (its kind, guard, signature and count)
    failure: str | None = None  # the name of the failure the note came with, if any

    @classmethod
    def of(
        cls, prepared: PreparedRequest, loop: Loop | None = None, failure: str | None = None
    ) -> _Thread:
        ids = prepared.call_ids()
        if ids:
            return cls(ids, 0, b"", loop, failure)
        messages = _messages(prepared)
        return cls(ids, len(messages), _digest(messages), loop, failure)

    def continued_by(self, prepared: PreparedRequest) -> bool:
        """Whether ``prepared`` is a later request of this conversation."""
        if self.ids:
            # The same body (a scan's cuts of one conversation): no need to compare.
            ids = prepared.call_ids()
            return self.ids is ids or self.ids <= ids
        messages = _messages(prepared)
        if not self.digest or len(messages) < self.messages:
            return False
        return _digest(messages[: self.messages]) == self.digest


def _messages(prepared: PreparedRequest) -> list[Any]:
    intent = prepared.analysis.parsed_intent
    messages = intent.get("messages") if isinstance(intent, dict) else None
    return messages if isinstance(messages, list) else []


def _digest(messages: list[Any]) -> bytes:
    try:
        return blake3(canonical_json(messages)).digest(16)
    except (InvalidInputError, RecursionError, ValueError):
        return b""  # cannot be written: never the same conversation as another


class NoteMemory:
    """The conversations ``mode="warn"`` has noted a loop in, by owner. A later request of
    one of those conversations ignored its note (issue 27) when it still loops, **in any
    way** (the same loop, or another shape of it: a new kind or signature), or when its
    newest calls failed again the very way the calls the note came with failed
    (:meth:`failed_again`: the same failure, :mod:`loopfuse.detector.failures`), though
    no signal has counted to its threshold again. Before issue 27 only the noted loop's
    own kind and signature escalated.

    >>> from loopfuse import Guard
    >>> prepared = Guard().prepare(b'{"messages": [{"role": "user", "content": "hi"}]}')
    >>> notes = NoteMemory(capacity=100, ttl=600.0)
    >>> loop = Loop("repeat", "detector", "ls:1f", 3)
    >>> notes.ignored(prepared, loop, now=0.0, failure="f1")
    False
    >>> notes.ignored(prepared, loop, now=1.0)
    True
    >>> notes.ignored(prepared, Loop("error_streak", "detector", "answer:9c", 4), now=2.0)
    True
    >>> notes.failed_again(prepared, "f2", now=3.0) is None
    True
    >>> notes.failed_again(prepared, "f1", now=3.0) == loop
    True
    """

    __slots__ = ("_records",)

    def __init__(self, capacity: int, ttl: float) -> None:
        self._records: TimedRecords[tuple[str, ...], tuple[_Thread, ...]] = TimedRecords(
            capacity, ttl
        )

    def ignored(
        self, prepared: PreparedRequest, loop: Loop, now: float, failure: str | None = None
    ) -> bool:
        """Whether ``prepared`` goes on, looping (``loop``, whatever it is), in a
        conversation that was noted about a loop within the window; if not, its
        conversation is remembered as noted about ``loop``, whose calls failed as
        ``failure`` names (the caller notes it)."""
        key = (prepared.owner(),)
        noted = self._records.get(key, now) or ()
        if any(thread.continued_by(prepared) for thread in noted):
            return True
        # Not this conversation's note (another run of the same prompt, say): it is noted.
        # Only what a refusal for the failure again reads: its message is made then.
        thread = _Thread.of(prepared, replace(loop, tool_names=(), message=""), failure)
        self._records.put(key, (*noted[-(_THREADS_KEPT - 1) :], thread), now)
        return False

    def __len__(self) -> int:
        """Owners with a note remembered (expired ones included until they are trimmed)."""
        return len(self._records)

    def failed_again(self, prepared: PreparedRequest, failure: str, now: float) -> Loop | None:
        """The loop noted within the window in the conversation ``prepared`` continues,
        if the calls that note came with failed as ``failure`` names (its newest calls
        failed that way again: the note was ignored); else ``None``."""
        if not self._records:
            return None  # no note anywhere: nothing to look up
        noted = self._records.get((prepared.owner(),), now)
        for thread in noted or ():
            if thread.failure == failure and thread.loop and thread.continued_by(prepared):
                return thread.loop
        return None
