"""What the sync and asyncio Redis stores share between their round trips.

:class:`StoreBase` checks arguments, encodes and decodes entries and decides what a
reply means; :class:`~loopfuse.stores.redis.RedisStore` and
:class:`~loopfuse.stores.redis.AsyncRedisStore` add the round trips.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final

from loopfuse.errors import ConfigError, InvalidInputError
from loopfuse.stores import MISS, StoredEntry
from loopfuse.stores._redis_base import (
    Failures,
    Layout,
    check_fingerprint,
    check_finite,
    check_ttl,
    check_window,
    pack_entry,
    unpack_entry,
)
from loopfuse.stores.codecs import Codec

__all__ = [
    "DEFAULT_KEY_PREFIX",
    "DEFAULT_LOG_INTERVAL",
    "DEFAULT_MAX_TTL",
    "SCAN_BATCH",
    "StoreBase",
    "check_client",
    "check_digest",
    "fail_fast_client",
    "server_now",
]


DEFAULT_KEY_PREFIX: Final = "loopfuse:"
DEFAULT_MAX_TTL: Final = 30 * 24 * 3600.0
"""The longest TTL a key gets (an answer cached "forever" lives this long)."""
DEFAULT_LOG_INTERVAL: Final = 60.0
SCAN_BATCH: Final = 500


def check_digest(digest: object) -> bytes | None:
    if digest is not None and (not isinstance(digest, bytes) or len(digest) != 32):
        raise InvalidInputError("a digest must be 32 bytes or None")
    return digest


def check_client(client: object, asynchronous: bool) -> None:
    kind = "redis.asyncio.Redis" if asynchronous else "redis.Redis"
    if not callable(getattr(client, "register_script", None)):
        raise ConfigError(f"client must be a {kind}, got {type(client).__name__}")
    kwargs = getattr(client, "get_connection_kwargs", None)
    if callable(kwargs) and kwargs().get("decode_responses"):
        raise ConfigError(
            "the Redis client must return bytes: build it with decode_responses=False"
        )


def fail_fast_client(url: str, timeout: float, asynchronous: bool, **kwargs: Any) -> Any:
    """A client that gives up after ``timeout`` seconds and does not retry: the guard
    fails open at once instead of holding the request while Redis is away."""
    import redis
    import redis.asyncio
    import redis.asyncio.retry
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    options: dict[str, Any] = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    if asynchronous:
        options["retry"] = redis.asyncio.retry.Retry(NoBackoff(), 0)
        return redis.asyncio.Redis.from_url(url, **options, **kwargs)
    options["retry"] = Retry(NoBackoff(), 0)
    return redis.Redis.from_url(url, **options, **kwargs)


def server_now(seconds: int, micros: int) -> float:
    """Redis ``TIME`` as the script reads it (same text, so the very same float)."""
    return float(f"{seconds}.{micros:06d}")


class StoreBase:
    """What a Redis store does between its round trips: check, encode, decide."""

    def __init__(
        self,
        key_prefix: object,
        *,
        time_source: object,
        fail_closed: object,
        codec: Codec,
        max_ttl: object,
        log_interval: object,
        log_clock: Callable[[], float],
    ) -> None:
        self.layout = Layout(key_prefix, time_source, max_ttl)
        if not isinstance(codec, Codec):
            raise ConfigError(f"codec must have encode() and decode(), got {codec!r}")
        if not callable(log_clock):
            raise ConfigError("log_clock must be a callable returning seconds")
        self.codec = codec
        self.failures = Failures(fail_closed, log_interval, log_clock)
        self._counter_lock = threading.Lock()
        self._collisions = 0

    @property
    def key_prefix(self) -> str:
        """The prefix of every key this store writes."""
        return self.layout.prefix

    @property
    def time_source(self) -> str:
        """``"redis"`` (the server's clock) or ``"caller"`` (the ``now`` arguments)."""
        return self.layout.time_source

    @property
    def fail_closed(self) -> bool:
        """Whether a backend failure raises :class:`StoreUnavailableError` (else fail open)."""
        return self.failures.fail_closed

    @property
    def failure_count(self) -> int:
        """Operations that failed because Redis was down, slow or erroring (or held junk)."""
        return self.failures.count

    @property
    def last_error(self) -> str | None:
        """The last failure, as ``"operation: error"``; ``None`` before any."""
        return self.failures.last_error

    @property
    def collisions(self) -> int:
        """Reads that found an answer stored for other content under the same value."""
        return self._collisions

    @property
    def evictions(self) -> int:
        """Always 0: Redis expires and evicts entries by itself."""
        return 0

    def _collided(self) -> None:
        with self._counter_lock:
            self._collisions += 1

    def _record_args(
        self, session_id: object, fingerprint: object, now: float, window: object, samples: object
    ) -> tuple[list[str], list[str | int]]:
        keys = self.layout.session_keys(session_id)
        fp = check_fingerprint(fingerprint)
        seconds, max_samples = check_window(window, samples)
        now_arg = self.layout.now_arg(now)
        return list(keys), [now_arg, repr(seconds), max_samples, fp, self.layout.ttl_ms(seconds)]

    def _served(self, blob: object, digest: bytes | None, now: float) -> object:
        """The value of a ``GET`` reply for a probe with ``digest`` at ``now``, or MISS."""
        if blob is None:
            return MISS
        entry = self._unpack(blob)
        if entry is None:
            return MISS
        stored_digest, created_at, ttl, payload = entry
        if self.layout.time_source == "caller" and now >= created_at + ttl:
            return MISS
        if digest is not None and digest != stored_digest:
            self._collided()
            return MISS
        try:
            return self.codec.decode(payload)
        except Exception as exc:  # junk or another codec's bytes: a miss, not an outage
            self.failures.failed("decode", exc, may_close=False)
            return MISS

    def _snapshot(
        self, blob: object, pttl: object, digest: bytes | None, now: float
    ) -> StoredEntry | None:
        entry = self._unpack(blob) if blob is not None else None
        if entry is None:
            return None
        stored_digest, created_at, ttl, payload = entry
        if self.layout.time_source == "redis":
            # The writer's clock means nothing here: say when, on the caller's clock,
            # the entry was written, from what Redis says is left of its life.
            if not isinstance(pttl, int) or pttl < 0:
                return None
            created_at = now - (self.layout.ttl_ms(ttl) - pttl) / 1000.0
        elif now >= created_at + ttl:
            return None
        if digest is not None and digest != stored_digest:
            return None
        try:
            value = self.codec.decode(payload)
        except Exception as exc:
            self.failures.failed("decode", exc, may_close=False)
            return None
        return StoredEntry(value, created_at, ttl, 0)

    def _unpack(self, blob: object) -> tuple[bytes | None, float, float, bytes] | None:
        try:
            return unpack_entry(blob)  # type: ignore[arg-type]  # checked inside
        except ValueError as exc:
            self.failures.failed("decode", exc, may_close=False)
            return None

    def _entry_blob(
        self, key_value: int, digest: bytes | None, value: object, ttl: object, now: float
    ) -> tuple[str, bytes, int]:
        key = self.layout.entry_key(key_value)
        seconds = check_ttl(ttl)
        try:
            payload = self.codec.encode(value)
        except Exception as exc:
            raise InvalidInputError(
                f"{self.codec!r} cannot encode a {type(value).__name__} for Redis: {exc}"
            ) from exc
        blob = pack_entry(digest, check_finite(now, "now"), seconds, payload)
        return key, blob, self.layout.ttl_ms(seconds)

    def _live(self, tails: list[object], now: float, window: float) -> int:
        """How many ``ZRANGE key -1 -1 WITHSCORES`` replies show a live last sample."""
        live = 0
        for tail in tails:
            if isinstance(tail, list) and tail and now - float(tail[0][1]) < window:
                live += 1
        return live
