"""A key of one session or one answer overwritten by another client, against a real server.

Another client (a bug, an operator, a script sharing the prefix) may leave any value under
a key of the store: another type (``WRONGTYPE`` for every command of ours), junk bytes,
or data in another encoding, often with no TTL. That is junk in *one* session's window
or *one* answer's slot, not Redis failing: it fails open for that session or that key
only, is repaired (or given a TTL), and never opens the circuit, so every other session
keeps being counted. Each case runs on the sync and the asyncio store, with a circuit that
would open at the first failure (``failure_threshold=1``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from loopfuse import DedupCache, LoopBreaker, RequestKey
from loopfuse.breaker import LoopDecision
from loopfuse.stores import MISS
from loopfuse.stores._redis_protocol import pack_entry
from loopfuse.stores.redis import AsyncRedisStore, RedisStore
from store_helpers import RedisServer, redis_or_skip, running_server, unique_prefix

redis = redis_or_skip()

KEY = RequestKey.from_str("What is Rust?")
MAX_REPEATS = 3
WINDOW = 600.0  # the server's clock: longer than any test here
KINDS = ["sync", "async"]


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with running_server() as server:
        yield server


@pytest.fixture
def raw(server: RedisServer) -> Iterator[Any]:
    """The other client, that writes what it likes."""
    client = server.client()
    yield client
    client.close()


class Guards:
    """A store of one kind (sync or asyncio) with a breaker and a cache on it, called from
    the test's sync code (the asyncio ones through their ``a`` methods, on one loop)."""

    def __init__(self, kind: str, server: RedisServer, **options: Any) -> None:
        options = {"failure_threshold": 1, "cooldown": 3600.0, **options}
        self.loop: asyncio.AbstractEventLoop | None = None
        if kind == "async":
            self.loop = asyncio.new_event_loop()
            client = redis.asyncio.Redis(port=server.port, socket_timeout=2.0)
            self.store: Any = AsyncRedisStore(client, unique_prefix(), **options)
        else:
            self.store = RedisStore(server.client(), unique_prefix(), **options)
        self.breaker = LoopBreaker(window=WINDOW, max_repeats=MAX_REPEATS, store=self.store)
        self.cache: DedupCache[str] = DedupCache(store=self.store, wait_timeout=2.0)
        self.computed = 0

    def _wait(self, result: Any) -> Any:
        return self.loop.run_until_complete(result) if self.loop is not None else result

    def call(self, method: str, *args: Any) -> Any:
        """``store.method(*args)``."""
        return self._wait(getattr(self.store, method)(*args))

    def check(self, session_id: str, fingerprint: int = 42) -> LoopDecision:
        if self.loop is None:
            return self.breaker.check(session_id, fingerprint)
        decision: LoopDecision = self._wait(self.breaker.acheck(session_id, fingerprint))
        return decision

    def get_or_compute(self, key: RequestKey = KEY) -> str:
        if self.loop is None:
            return self.cache.get_or_compute(key, self._compute)

        async def compute() -> str:
            return self._compute()

        answer: str = self._wait(self.cache.aget_or_compute(key, compute))
        return answer

    def _compute(self) -> str:
        self.computed += 1
        return "answer"

    def assert_circuit_closed(self) -> None:
        assert self.store.circuit.state == "closed"
        assert self.store.circuit.opened == 0

    def close(self) -> None:
        if self.loop is None:
            self.store.client.close()
        else:
            self.loop.run_until_complete(self.store.client.aclose())
            self.loop.close()


@pytest.fixture(params=KINDS)
def guards(request: pytest.FixtureRequest, server: RedisServer) -> Iterator[Guards]:
    guards = Guards(request.param, server)
    yield guards
    guards.close()


# -- the breaker's window keys: P b:{S}:s (sorted set) and P b:{S}:c (hash) -----------------

Plant = Callable[[Any, str, str], object]

WINDOW_JUNK: dict[str, Plant] = {
    # WRONGTYPE: another type under either key, or both
    "samples key is a string": lambda r, s, c: r.set(s, b"junk"),
    "samples key is a list": lambda r, s, c: (r.delete(s), r.rpush(s, b"a", b"b")),
    "counts key is a string": lambda r, s, c: r.set(c, b"\x00\xff"),
    "counts key is a set": lambda r, s, c: (r.delete(c), r.sadd(c, b"x")),
    "both keys are strings": lambda r, s, c: (r.set(s, b"1"), r.set(c, b"2")),
    # junk bytes in the right types
    "a sample that is not <sequence>:<fingerprint>": lambda r, s, c: r.zadd(s, {b"\xff\xfe": 0}),
    "a count that is not a number": lambda r, s, c: r.hset(c, "42", b"\xff\xfejunk"),
    "a sequence counter that is not a number": lambda r, s, c: r.hset(c, "#", b"junk"),
    # another encoding of the same data
    "a count written as a float": lambda r, s, c: r.hset(c, "42", "2.5"),
    "a count our samples do not hold": lambda r, s, c: r.hset(c, "42", 1000),
    "a negative count": lambda r, s, c: r.hset(c, "42", -7),
    "the counts gone, the samples left": lambda r, s, c: r.delete(c),
}


@pytest.mark.parametrize("junk", WINDOW_JUNK)
def test_junk_in_a_window_fails_open_for_its_session_only(
    guards: Guards, raw: Any, junk: str
) -> None:
    samples, counts = guards.store.layout.session_keys("victim")
    assert [guards.check("victim").repeats for _ in range(2)] == [1, 2]
    assert guards.check("healthy").repeats == 1
    WINDOW_JUNK[junk](raw, samples, counts)
    raw.persist(samples)  # the junk never expires by itself
    raw.persist(counts)
    # the victim's window is repaired: counted afresh, allowed; nothing failed
    first = guards.check("victim")
    assert (first.allowed, first.repeats, first.error) == (True, 1, None)
    guards.assert_circuit_closed()
    assert guards.store.failure_count == 1  # the repair, counted (and logged) as junk
    assert guards.store.last_error.startswith("record: ")
    # and counted from then on, as every other session all along
    victim = [guards.check("victim") for _ in range(MAX_REPEATS)]
    healthy = [guards.check("healthy") for _ in range(MAX_REPEATS)]
    assert [d.repeats for d in victim] == [2, 3, 4]
    assert [d.allowed for d in victim] == [True, True, False]
    assert [d.repeats for d in healthy] == [2, 3, 4]
    assert guards.breaker.internal_errors == 0
    assert guards.store.failure_count == 1
    guards.assert_circuit_closed()
    for key in (samples, counts):  # the right types again, expiring
        assert raw.type(key) in (b"zset", b"hash")
        assert 0 < raw.pttl(key) <= WINDOW * 1000


def test_a_repeatedly_overwritten_window_never_opens_the_circuit(guards: Guards, raw: Any) -> None:
    samples, _ = guards.store.layout.session_keys("victim")
    for lap in range(5):
        raw.set(samples, b"junk")
        assert guards.check("victim").repeats == 1
        assert guards.check("healthy").repeats == lap + 1
    guards.assert_circuit_closed()
    assert guards.store.failure_count == 5


def test_tracked_sessions_skips_a_window_of_another_type(guards: Guards, raw: Any) -> None:
    guards.check("a")
    guards.check("b")
    samples, _ = guards.store.layout.session_keys("b")
    raw.set(samples, b"junk")
    assert guards.call("tracked_sessions", 0.0, WINDOW) == 1
    guards.assert_circuit_closed()


# -- the cache's answer keys: P c:<value> (a string) ----------------------------------------

ENTRY_JUNK: dict[str, Callable[[Any, str], object]] = {
    # WRONGTYPE
    "a hash": lambda r, k: r.hset(k, "f", "v"),
    "a list": lambda r, k: r.rpush(k, b"a"),
    "a sorted set": lambda r, k: r.zadd(k, {b"a": 1}),
    # junk bytes
    "junk bytes": lambda r, k: r.set(k, b"\x00\xff\xfejunk"),
    "a truncated entry": lambda r, k: r.set(k, pack_entry(KEY.digest, 0.0, 60.0, b"s x")[:30]),
    # another encoding: our header, another codec's value
    "another codec's value": lambda r, k: r.set(k, pack_entry(KEY.digest, 0.0, 60.0, b"\x80pk")),
    "JSON that is not JSON": lambda r, k: r.set(k, pack_entry(KEY.digest, 0.0, 60.0, b"j {")),
    "text that is not UTF-8": lambda r, k: r.set(k, pack_entry(KEY.digest, 0.0, 60.0, b"s \xff")),
}


@pytest.mark.parametrize("junk", ENTRY_JUNK)
def test_junk_under_an_answer_is_a_miss_then_repaired(guards: Guards, raw: Any, junk: str) -> None:
    entry = guards.store.layout.entry_key(KEY.value)
    ENTRY_JUNK[junk](raw, entry)
    # reads miss (get, peek), and neither fails nor opens the circuit
    assert guards.call("get", KEY.value, KEY.digest, 0.0) is MISS
    assert guards.call("peek", KEY.value, KEY.digest, 0.0) is None
    guards.assert_circuit_closed()
    # single flight computes once and its answer replaces the junk
    assert guards.get_or_compute() == "answer"
    assert guards.get_or_compute() == "answer"
    assert guards.computed == 1
    assert guards.call("get", KEY.value, KEY.digest, 0.0) == "answer"
    assert raw.type(entry) == b"string"
    assert raw.pttl(entry) > 0
    guards.assert_circuit_closed()
    assert guards.store.pool_timeouts == 0
    # other keys were served all along
    other = RequestKey.from_str("another question")
    assert guards.get_or_compute(other) == "answer"
    assert guards.get_or_compute(other) == "answer"
    assert guards.computed == 2


# -- the single-flight locks: P l:<value>:<digest> (a string with a TTL) --------------------

LOCK_JUNK: dict[str, Callable[[Any, str], object]] = {
    "a hash": lambda r, k: r.hset(k, "f", "v"),
    "a list": lambda r, k: r.rpush(k, b"a"),
    "junk bytes with no TTL": lambda r, k: r.set(k, b"\x00\xff"),
    "a token with no TTL": lambda r, k: r.set(k, "0" * 32),
}


@pytest.mark.parametrize("junk", LOCK_JUNK)
def test_junk_under_a_lock_is_taken_over_not_waited_for(
    guards: Guards, raw: Any, junk: str
) -> None:
    lock = guards.store.layout.lock_key(KEY.value, KEY.digest)
    LOCK_JUNK[junk](raw, lock)
    # Every lock of ours expires; this one never would: nobody holds it. Without the
    # repair every caller of the key would wait its wait_timeout, for good.
    assert guards.get_or_compute() == "answer"
    assert guards.computed == 1
    assert raw.exists(lock) == 0  # released
    assert guards.call("get", KEY.value, KEY.digest, 0.0) == "answer"
    guards.assert_circuit_closed()


def test_a_lock_overwritten_while_held_is_released_without_failing(
    guards: Guards, raw: Any
) -> None:
    lock = guards.store.layout.lock_key(KEY.value, KEY.digest)
    token = guards.call("acquire", KEY.value, KEY.digest, 30.0)
    assert token is not None
    raw.delete(lock)
    raw.hset(lock, "f", "v")  # another type, while we hold it
    guards.call("release", KEY.value, KEY.digest, token)
    guards.assert_circuit_closed()
    assert guards.store.failure_count == 0  # nothing of ours was there to release
    # the junk is taken over by the next caller
    assert guards.call("acquire", KEY.value, KEY.digest, 30.0) is not None
    assert raw.type(lock) == b"string"
    assert 0 < raw.pttl(lock) <= 30_000
    guards.assert_circuit_closed()


def test_a_live_lock_of_ours_is_still_exclusive(guards: Guards) -> None:
    # the take-over is for junk only: a lock with its TTL is someone's
    assert guards.call("acquire", KEY.value, KEY.digest, 30.0) is not None
    assert guards.call("acquire", KEY.value, KEY.digest, 30.0) is None


# -- junk never turns into an outage, even failing closed ------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_junk_does_not_fail_closed(server: RedisServer, raw: Any, kind: str) -> None:
    guards = Guards(kind, server, fail_closed=True)
    try:
        samples, _ = guards.store.layout.session_keys("victim")
        raw.set(samples, b"junk")
        assert guards.check("victim").repeats == 1
        raw.hset(guards.store.layout.entry_key(KEY.value), "f", "v")
        raw.set(guards.store.layout.lock_key(KEY.value, KEY.digest), b"junk")
        assert guards.get_or_compute() == "answer"
        guards.assert_circuit_closed()
    finally:
        guards.close()
