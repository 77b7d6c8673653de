"""The asyncio Redis store; import it from :mod:`loopfuse.stores.redis`."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from loopfuse.errors import InvalidInputError
from loopfuse.stores import MISS, StoredEntry
from loopfuse.stores._redis_base import BREAKER_LUA, RELEASE_LUA, check_ttl
from loopfuse.stores._redis_store import (
    DEFAULT_KEY_PREFIX,
    DEFAULT_LOG_INTERVAL,
    DEFAULT_MAX_TTL,
    SCAN_BATCH,
    StoreBase,
    check_client,
    check_digest,
    fail_fast_client,
    server_now,
)
from loopfuse.stores.codecs import DEFAULT_CODEC, Codec

if TYPE_CHECKING:
    import redis.asyncio

__all__ = ["AsyncRedisStore"]


class AsyncRedisStore(StoreBase):
    """:class:`~loopfuse.stores.redis.RedisStore` for asyncio, through a
    ``redis.asyncio.Redis`` client: an :class:`~loopfuse.stores.AsyncBreakerStore` and
    :class:`~loopfuse.stores.AsyncCacheStore`.

    Same arguments, keys, scripts, clock and failure policy as
    :class:`~loopfuse.stores.redis.RedisStore`. A cancelled operation is not a failure:
    the cancellation propagates.

    >>> AsyncRedisStore(object())
    Traceback (most recent call last):
        ...
    loopfuse.errors.ConfigError: client must be a redis.asyncio.Redis, got object
    """

    def __init__(
        self,
        client: redis.asyncio.Redis,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        *,
        time_source: str = "redis",
        fail_closed: bool = False,
        codec: Codec = DEFAULT_CODEC,
        max_ttl: float = DEFAULT_MAX_TTL,
        log_interval: float = DEFAULT_LOG_INTERVAL,
        log_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        check_client(client, asynchronous=True)
        super().__init__(
            key_prefix,
            time_source=time_source,
            fail_closed=fail_closed,
            codec=codec,
            max_ttl=max_ttl,
            log_interval=log_interval,
            log_clock=log_clock,
        )
        self.client = client
        self._record_script = client.register_script(BREAKER_LUA)
        self._release_script = client.register_script(RELEASE_LUA)

    @classmethod
    def from_url(cls, url: str, *, timeout: float = 0.25, **kwargs: Any) -> AsyncRedisStore:
        """See :meth:`loopfuse.stores.redis.RedisStore.from_url`."""
        return cls(fail_fast_client(url, timeout, asynchronous=True), **kwargs)

    async def record(
        self, session_id: str, fingerprint: int, now: float, window: float, max_samples: int
    ) -> int:
        """See :meth:`loopfuse.stores.redis.RedisStore.record`."""
        keys, args = self._record_args(session_id, fingerprint, now, window, max_samples)
        try:
            repeats = await self._record_script(keys=keys, args=args)
        except Exception as exc:
            self.failures.failed("record", exc)
            return 0
        self.failures.succeeded()
        return int(repeats)

    async def reset(self, session_id: str | None = None) -> None:
        """See :meth:`loopfuse.stores.redis.RedisStore.reset`."""
        try:
            if session_id is not None:
                await self.client.delete(*self.layout.session_keys(session_id))
            else:
                await self._unlink_all("b")
        except InvalidInputError:
            raise
        except Exception as exc:
            self.failures.failed("reset", exc)
            return
        self.failures.succeeded()

    async def tracked_sessions(self, now: float, window: float) -> int:
        """See :meth:`loopfuse.stores.redis.RedisStore.tracked_sessions`."""
        try:
            if self.layout.time_source == "redis":
                now = server_now(*await self.client.time())
            tails: list[object] = []
            pattern = self.layout.pattern("b")
            samples = [k async for k in self.client.scan_iter(match=pattern, count=SCAN_BATCH)]
            samples = [key for key in samples if key.endswith(b":s")]
            for start in range(0, len(samples), SCAN_BATCH):
                pipe = self.client.pipeline(transaction=False)
                for key in samples[start : start + SCAN_BATCH]:
                    pipe.zrange(key, -1, -1, withscores=True)
                tails += await pipe.execute()
        except Exception as exc:
            self.failures.failed("tracked_sessions", exc)
            return 0
        self.failures.succeeded()
        return self._live(tails, now, window)

    async def get(self, key_value: int, digest: bytes | None, now: float) -> object:
        """See :meth:`loopfuse.stores.redis.RedisStore.get`."""
        key = self.layout.entry_key(key_value)
        digest = check_digest(digest)
        try:
            blob = await self.client.get(key)
        except Exception as exc:
            self.failures.failed("get", exc)
            return MISS
        self.failures.succeeded()
        return self._served(blob, digest, now)

    async def peek(self, key_value: int, digest: bytes | None, now: float) -> StoredEntry | None:
        """See :meth:`loopfuse.stores.redis.RedisStore.peek`."""
        key = self.layout.entry_key(key_value)
        digest = check_digest(digest)
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.get(key)
            pipe.pttl(key)
            blob, pttl = await pipe.execute()
        except Exception as exc:
            self.failures.failed("peek", exc)
            return None
        self.failures.succeeded()
        return self._snapshot(blob, pttl, digest, now)

    async def set(
        self, key_value: int, digest: bytes | None, value: object, ttl: float, now: float
    ) -> None:
        """See :meth:`loopfuse.stores.redis.RedisStore.set`."""
        key, blob, ttl_ms = self._entry_blob(key_value, check_digest(digest), value, ttl, now)
        try:
            await self.client.set(key, blob, px=ttl_ms)
        except Exception as exc:
            self.failures.failed("set", exc)
            return
        self.failures.succeeded()

    async def acquire(self, key_value: int, digest: bytes | None, ttl: float) -> str | None:
        """See :meth:`loopfuse.stores.redis.RedisStore.acquire`."""
        key = self.layout.lock_key(key_value, check_digest(digest))
        token = secrets.token_hex(16)
        try:
            taken = await self.client.set(
                key, token, nx=True, px=self.layout.ttl_ms(check_ttl(ttl))
            )
        except Exception as exc:
            self.failures.failed("acquire", exc)
            return token
        self.failures.succeeded()
        return token if taken else None

    async def release(self, key_value: int, digest: bytes | None, token: str) -> None:
        """See :meth:`loopfuse.stores.redis.RedisStore.release`."""
        key = self.layout.lock_key(key_value, check_digest(digest))
        try:
            await self._release_script(keys=[key], args=[token])
        except Exception as exc:
            self.failures.failed("release", exc)
            return
        self.failures.succeeded()

    async def clear(self) -> None:
        """See :meth:`loopfuse.stores.redis.RedisStore.clear`."""
        try:
            await self._unlink_all("c")
            await self._unlink_all("l")
        except Exception as exc:
            self.failures.failed("clear", exc)
            return
        self.failures.succeeded()
        with self._counter_lock:
            self._collisions = 0

    async def _unlink_all(self, kind: str) -> None:
        batch: list[bytes] = []
        pattern = self.layout.pattern(kind)
        async for key in self.client.scan_iter(match=pattern, count=SCAN_BATCH):
            batch.append(key)
            if len(batch) >= SCAN_BATCH:
                await self.client.unlink(*batch)
                batch.clear()
        if batch:
            await self.client.unlink(*batch)

    def __repr__(self) -> str:
        return f"AsyncRedisStore(key_prefix={self.key_prefix!r}, time_source={self.time_source!r})"
