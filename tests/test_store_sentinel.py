"""The Redis stores through Redis Sentinel: redis-py's ``Sentinel(...).master_for(...)``
client, unchanged, against a real master, replica and sentinel on loopback.

The client is a ``redis.Redis`` (or ``redis.asyncio.Redis``) whose pool asks the
sentinel where the master is: the store takes it as it is, counts exactly under the
load tests' sizes, and when the master is killed mid-load fails open (no exception),
then counts again on the promoted replica, within the sentinel's failover and one
circuit cool-down.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import THREAD_GUARD
from loopfuse import LoopBreaker
from loopfuse.stores.circuit import DEFAULT_COOLDOWN
from loopfuse.stores.redis import AsyncRedisStore, RedisStore
from store_helpers import (
    SENTINEL_MASTER,
    SentinelSetup,
    cluster_or_skip,
    running_sentinel,
    unique_prefix,
)

redis = cluster_or_skip()  # redis-server and redis-cli, as for the cluster
from redis.asyncio.sentinel import Sentinel as AsyncSentinel  # noqa: E402
from redis.sentinel import Sentinel  # noqa: E402

WINDOW = 600.0
MAX_REPEATS = 5
CAP = 1_000_000  # no sample dropped: the counts go on one by one
TIMEOUT = 1.0  # a loaded test machine must not pass for a slow Redis
RESUME_BOUND = 1.0 + 2 * 5.0 + DEFAULT_COOLDOWN + 4.0
"""Seconds from the kill until counting resumes: the sentinel's ``down-after`` (1 s) and
failover (a second attempt after ``failover-timeout``, 5 s, when the first one fails),
then at most one ``cooldown`` of the store's circuit (measured: 5.0 s, and 15 s when the
sentinel's first attempt failed)."""


@pytest.fixture
def sentinel() -> Iterator[SentinelSetup]:
    with running_sentinel() as setup:
        yield setup


def master_client(setup: SentinelSetup) -> Any:
    sentinels = Sentinel([("127.0.0.1", setup.sentinel)], socket_timeout=TIMEOUT)
    return sentinels.master_for(
        SENTINEL_MASTER, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT
    )


def test_a_sentinel_master_client_works_unchanged_under_load(sentinel: SentinelSetup) -> None:
    store = RedisStore(master_client(sentinel), unique_prefix())
    breaker = LoopBreaker(window=WINDOW, max_repeats=MAX_REPEATS, store=store)
    allowed: list[bool] = []
    start = threading.Barrier(120)

    def worker() -> None:
        start.wait(THREAD_GUARD)
        allowed.append(breaker.check("s", 42).allowed)

    threads = [threading.Thread(target=worker) for _ in range(120)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(THREAD_GUARD)
    assert sum(allowed) == MAX_REPEATS
    assert store.failure_count == 0, store.last_error
    store.set(1, None, "answer", 60.0, 0.0)
    assert store.get(1, None, 0.0) == "answer"

    async def scenario() -> None:
        sentinels = AsyncSentinel([("127.0.0.1", sentinel.sentinel)], socket_timeout=TIMEOUT)
        client = sentinels.master_for(SENTINEL_MASTER, socket_timeout=TIMEOUT)
        astore = AsyncRedisStore(client, store.key_prefix)  # the same keys
        abreaker = LoopBreaker(window=WINDOW, max_repeats=MAX_REPEATS, store=astore)
        decisions = await asyncio.gather(*(abreaker.acheck("t", 42) for _ in range(250)))
        assert sum(d.allowed for d in decisions) == MAX_REPEATS
        assert await astore.get(1, None, 0.0) == "answer"
        assert astore.failure_count == 0, astore.last_error
        await client.aclose()

    asyncio.run(scenario())
    store.client.close()


@pytest.mark.slow
def test_the_master_killed_mid_load_fails_open_then_counts_on_the_new_master(
    sentinel: SentinelSetup,
) -> None:
    store = RedisStore(master_client(sentinel), unique_prefix())
    assert [store.record("s", 1, 0.0, WINDOW, CAP) for _ in range(3)] == [1, 2, 3]
    seen: list[tuple[float, int]] = []
    escaped: list[BaseException] = []
    stop = threading.Event()

    def worker() -> None:
        try:
            while not stop.is_set():
                seen.append((time.monotonic(), store.record("s", 1, 0.0, WINDOW, CAP)))
        except BaseException as exc:  # nothing may escape the store
            escaped.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        killed = time.monotonic()
        sentinel.kill(sentinel.master)
        deadline = killed + RESUME_BOUND
        while not any(t > killed and count for t, count in seen[-50:]):
            assert time.monotonic() < deadline, "counting never resumed"
            time.sleep(0.05)  # a real failover takes real time
    finally:
        stop.set()
        thread.join(THREAD_GUARD)
    assert escaped == []
    assert sentinel.current_master() == sentinel.replica
    after = [count for t, count in seen if t > killed]
    assert 0 in after  # failed open while no master answered
    counted = [count for count in after if count]
    # counting goes on, from what the replica had received (replication is asynchronous:
    # a sentinel may promote a replica that missed the last writes)
    # never counted twice (a reply lost to a timeout on a loaded machine skips one)
    assert all(a < b for a, b in itertools.pairwise(counted))
    store.client.close()
