"""Worker processes of the multi-process store tests: each owns a Redis-backed store.

A worker reads commands from its pipe and answers each one, so that the test decides
which process handles which request (round robin) and waits for every answer.
"""

from __future__ import annotations

import time
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from typing import Any


def serve(port: int, prefix: str, conn: Connection, start: Event) -> None:
    import redis

    from loopfuse.stores import MISS
    from loopfuse.stores.redis import RedisStore

    client = redis.Redis(port=port, socket_timeout=5.0)
    store = RedisStore(client, prefix)
    breaker: Any = None
    while True:
        command, *args = conn.recv()
        if command == "stop":
            conn.send(None)
            return
        if command == "record":
            conn.send(store.record(*args, now=time.time(), window=30.0, max_samples=256))
        elif command == "check":
            if breaker is None:
                from loopfuse import LoopBreaker

                breaker = LoopBreaker(window=30.0, max_repeats=args[2], store=store)
            conn.send(breaker.check(args[0], args[1]).allowed)
        elif command == "set":
            key_value, digest, value = args
            store.set(key_value, digest, value, ttl=60.0, now=time.time())
            conn.send(None)
        elif command == "get":
            value = store.get(args[0], args[1], now=time.time())
            conn.send(("miss",) if value is MISS else ("hit", value))
        elif command == "race":
            start.wait()
            conn.send(_compute_once(store, client, prefix, *args))
        elif command == "race_cache":
            start.wait()
            conn.send(_cache_compute_once(store, client, prefix))


def _compute_once(store: Any, client: Any, prefix: str, key_value: int, digest: bytes) -> Any:
    """get, or take the lock and compute (a slow, paid call), or wait for who has it."""
    from loopfuse.stores import MISS

    deadline = time.monotonic() + 20.0
    while time.monotonic() < deadline:
        value = store.get(key_value, digest, time.time())
        if value is not MISS:
            return ("hit", value)
        token = store.acquire(key_value, digest, 30.0)
        if token is not None:
            try:
                value = store.get(key_value, digest, time.time())  # filled meanwhile?
                if value is not MISS:
                    return ("hit", value)
                client.incr(prefix + "computations")
                time.sleep(0.3)  # the paid call: long enough for every racer to arrive
                store.set(key_value, digest, "the answer", 60.0, time.time())
                return ("computed", "the answer")
            finally:
                store.release(key_value, digest, token)
        time.sleep(0.01)
    return ("timeout",)


def _cache_compute_once(store: Any, client: Any, prefix: str) -> Any:
    """The same race through ``DedupCache.get_or_compute`` on the shared store."""
    from loopfuse import DedupCache, RequestKey

    cache: DedupCache[str] = DedupCache(store=store)

    def ask() -> str:
        client.incr(prefix + "cache-computations")
        time.sleep(0.3)  # the paid call: long enough for every racer to arrive
        return "the cached answer"

    value = cache.get_or_compute(RequestKey.from_str("race"), ask)
    return value, cache.stats.cache_hits
