"""Redis stores: breaker windows and cached answers shared by processes and hosts.

Needs ``redis-py`` (``pip install 'loopfuse[redis]'``), imported only by
:meth:`RedisStore.from_url`; a store is otherwise built around a client you made:

.. code-block:: python

    import redis
    from loopfuse.stores.redis import RedisStore

    client = redis.Redis(host="localhost", socket_timeout=0.25, socket_connect_timeout=0.25)
    store = RedisStore(client, key_prefix="myapp:loopfuse:")

:class:`RedisStore` (``redis.Redis``) and :class:`AsyncRedisStore`
(``redis.asyncio.Redis``) do the same things in the same keys, so sync and asyncio
workers can share one Redis. Each is both a :class:`~loopfuse.stores.BreakerStore` and a
:class:`~loopfuse.stores.CacheStore` (their asyncio counterparts for the second).

- **One round trip per guard step.** ``record``: one ``EVALSHA`` of a Lua script that
  trims, caps, adds and counts atomically. ``get``: one ``GET``. ``set``: one
  ``SET ... PX``. ``acquire``: one ``SET ... NX PX``. ``release``: one ``EVALSHA``
  (compare-and-delete). ``peek``: one pipelined ``GET`` + ``PTTL``. (A script is loaded
  once per server: the first call after a restart costs one extra round trip.)
- **One clock.** ``time_source="redis"`` (the default): windows are timed by the Redis
  server's ``TIME`` inside the script and answers expire by Redis' own TTLs, so every
  process and host reads the same clock and the ``now`` arguments are not used for
  them. ``time_source="caller"``: the ``now`` arguments are the time (tests pass a fake
  clock; in production every process must pass a shared clock such as ``time.time``).
- **Failures.** Redis down, slow (past the client's ``socket_timeout``) or erroring:
  the operation fails open (``record`` returns 0, reads miss, writes are dropped,
  ``acquire`` grants), the failure is counted in :attr:`RedisStore.failure_count` and
  logged on the ``loopfuse`` logger at most once per ``log_interval`` seconds.
  ``fail_closed=True`` raises :class:`~loopfuse.stores.StoreUnavailableError` instead.
  No redis-py exception leaves the store.
- **Values** go through ``codec`` (default: :data:`~loopfuse.stores.codecs.DEFAULT_CODEC`:
  bytes, str, JSON values); never pickle.

Key layout and TTLs: :mod:`loopfuse.stores._redis_base`.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from loopfuse.errors import InvalidInputError
from loopfuse.stores import MISS, StoredEntry
from loopfuse.stores._redis_async import AsyncRedisStore
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
    import redis
    import redis.asyncio

__all__ = ["DEFAULT_KEY_PREFIX", "DEFAULT_MAX_TTL", "AsyncRedisStore", "RedisStore"]


class RedisStore(StoreBase):
    """Shared breaker windows and answers in Redis, through a ``redis.Redis`` client.

    Args:
        client: a ``redis.Redis`` (or cluster) client returning bytes. Give it a
            ``socket_timeout``: it bounds how long a slow Redis can hold a request.
        key_prefix: prepended to every key (namespace apps sharing one Redis).
        time_source: ``"redis"`` (the server's clock) or ``"caller"`` (the ``now``
            arguments); see the module docstring.
        fail_closed: raise :class:`~loopfuse.stores.StoreUnavailableError` when Redis
            fails, instead of failing open.
        codec: turns cached values into bytes and back (never pickle).
        max_ttl: the longest TTL any key gets, in seconds.
        log_interval: seconds between two failure warnings on the ``loopfuse`` logger.
        log_clock: the real-time clock that spaces those warnings.

    Bad settings raise :class:`~loopfuse.errors.ConfigError`; arguments of the wrong
    type :class:`~loopfuse.errors.InvalidInputError` (before any round trip).

    >>> RedisStore(object())
    Traceback (most recent call last):
        ...
    loopfuse.errors.ConfigError: client must be a redis.Redis, got object
    """

    def __init__(
        self,
        client: redis.Redis,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        *,
        time_source: str = "redis",
        fail_closed: bool = False,
        codec: Codec = DEFAULT_CODEC,
        max_ttl: float = DEFAULT_MAX_TTL,
        log_interval: float = DEFAULT_LOG_INTERVAL,
        log_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        check_client(client, asynchronous=False)
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
    def from_url(cls, url: str, *, timeout: float = 0.25, **kwargs: Any) -> RedisStore:
        """A store on a new client for ``url`` (``redis://host:port/db``) that times out
        after ``timeout`` seconds and never retries. Other keywords go to the store."""
        return cls(fail_fast_client(url, timeout, asynchronous=False), **kwargs)

    def record(
        self, session_id: str, fingerprint: int, now: float, window: float, max_samples: int
    ) -> int:
        """See :meth:`loopfuse.stores.BreakerStore.record`: one ``EVALSHA``."""
        keys, args = self._record_args(session_id, fingerprint, now, window, max_samples)
        try:
            repeats = self._record_script(keys=keys, args=args)
        except Exception as exc:
            self.failures.failed("record", exc)
            return 0
        self.failures.succeeded()
        return int(repeats)

    def reset(self, session_id: str | None = None) -> None:
        """See :meth:`loopfuse.stores.BreakerStore.reset`: one ``DEL``, or a ``SCAN``."""
        try:
            if session_id is not None:
                self.client.delete(*self.layout.session_keys(session_id))
            else:
                self._unlink_all("b")
        except InvalidInputError:
            raise
        except Exception as exc:
            self.failures.failed("reset", exc)
            return
        self.failures.succeeded()

    def tracked_sessions(self, now: float, window: float) -> int:
        """See :meth:`loopfuse.stores.BreakerStore.tracked_sessions` (a ``SCAN``)."""
        try:
            if self.layout.time_source == "redis":
                now = server_now(*self.client.time())
            tails: list[object] = []
            keys = list(self.client.scan_iter(match=self.layout.pattern("b"), count=SCAN_BATCH))
            samples = [key for key in keys if key.endswith(b":s")]
            for start in range(0, len(samples), SCAN_BATCH):
                pipe = self.client.pipeline(transaction=False)
                for key in samples[start : start + SCAN_BATCH]:
                    pipe.zrange(key, -1, -1, withscores=True)
                tails += pipe.execute()
        except Exception as exc:
            self.failures.failed("tracked_sessions", exc)
            return 0
        self.failures.succeeded()
        return self._live(tails, now, window)

    def get(self, key_value: int, digest: bytes | None, now: float) -> object:
        """See :meth:`loopfuse.stores.CacheStore.get`: one ``GET``."""
        key = self.layout.entry_key(key_value)
        digest = check_digest(digest)
        try:
            blob = self.client.get(key)
        except Exception as exc:
            self.failures.failed("get", exc)
            return MISS
        self.failures.succeeded()
        return self._served(blob, digest, now)

    def peek(self, key_value: int, digest: bytes | None, now: float) -> StoredEntry | None:
        """See :meth:`loopfuse.stores.CacheStore.peek`: one pipelined ``GET`` + ``PTTL``."""
        key = self.layout.entry_key(key_value)
        digest = check_digest(digest)
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.get(key)
            pipe.pttl(key)
            blob, pttl = pipe.execute()
        except Exception as exc:
            self.failures.failed("peek", exc)
            return None
        self.failures.succeeded()
        return self._snapshot(blob, pttl, digest, now)

    def set(
        self, key_value: int, digest: bytes | None, value: object, ttl: float, now: float
    ) -> None:
        """See :meth:`loopfuse.stores.CacheStore.set`: one ``SET ... PX``. A value the
        codec cannot encode raises :class:`~loopfuse.errors.InvalidInputError`."""
        key, blob, ttl_ms = self._entry_blob(key_value, check_digest(digest), value, ttl, now)
        try:
            self.client.set(key, blob, px=ttl_ms)
        except Exception as exc:
            self.failures.failed("set", exc)
            return
        self.failures.succeeded()

    def acquire(self, key_value: int, digest: bytes | None, ttl: float) -> str | None:
        """See :meth:`loopfuse.stores.CacheStore.acquire`: one ``SET ... NX PX``."""
        key = self.layout.lock_key(key_value, check_digest(digest))
        token = secrets.token_hex(16)
        try:
            taken = self.client.set(key, token, nx=True, px=self.layout.ttl_ms(check_ttl(ttl)))
        except Exception as exc:
            self.failures.failed("acquire", exc)
            return token  # failing open: compute, without single flight
        self.failures.succeeded()
        return token if taken else None

    def release(self, key_value: int, digest: bytes | None, token: str) -> None:
        """See :meth:`loopfuse.stores.CacheStore.release`: one ``EVALSHA``."""
        key = self.layout.lock_key(key_value, check_digest(digest))
        try:
            self._release_script(keys=[key], args=[token])
        except Exception as exc:
            self.failures.failed("release", exc)
            return
        self.failures.succeeded()

    def clear(self) -> None:
        """See :meth:`loopfuse.stores.CacheStore.clear` (a ``SCAN``); resets ``collisions``."""
        try:
            self._unlink_all("c")
            self._unlink_all("l")
        except Exception as exc:
            self.failures.failed("clear", exc)
            return
        self.failures.succeeded()
        with self._counter_lock:
            self._collisions = 0

    def _unlink_all(self, kind: str) -> None:
        batch: list[bytes] = []
        for key in self.client.scan_iter(match=self.layout.pattern(kind), count=SCAN_BATCH):
            batch.append(key)
            if len(batch) >= SCAN_BATCH:
                self.client.unlink(*batch)
                batch.clear()
        if batch:
            self.client.unlink(*batch)

    def __repr__(self) -> str:
        return f"RedisStore(key_prefix={self.key_prefix!r}, time_source={self.time_source!r})"
