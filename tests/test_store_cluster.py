"""The Redis stores on a real Redis Cluster: six ``redis-server --cluster-enabled yes`` on
loopback (three masters, three replicas), started once for the module.

With redis-py's ``RedisCluster`` (sync and asyncio) the stores are exact under the load
the single-Redis load tests use (tests/test_store_load.py): each operation takes a turn
on the pool of the node that owns its key, instead of finding that pool full and
failing open (250 concurrent checks of one request allowed 155, want 5). Each master
has its own circuit. ``from_url`` builds a cluster client from ``redis+cluster://``; a
plain client pointed at a cluster node says why most keys fail. The failover tests
(a master killed mid-load) are in tests/test_store_cluster_failover.py.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import THREAD_GUARD, fast_and_full
from loopfuse import DedupCache, LoopBreaker, RequestKey
from loopfuse.errors import ConfigError
from loopfuse.integrations._extras import MissingExtraError, install_command
from loopfuse.stores import MISS
from loopfuse.stores.redis import AsyncRedisStore, RedisStore
from store_helpers import RedisClusterNodes, cluster_or_skip, running_cluster, unique_prefix

redis = cluster_or_skip()
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster  # noqa: E402
from redis.cluster import RedisCluster  # noqa: E402

KEY = RequestKey.from_str("What is Rust?")
MAX_REPEATS = 5
WINDOW = 600.0
TIMEOUT = 2.0  # the subject is the pools, not a loaded machine's pauses
POOL = 10  # connections per node: far fewer than the callers


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisClusterNodes]:
    with running_cluster() as nodes:
        yield nodes


def sync_client(cluster: RedisClusterNodes, **options: Any) -> Any:
    settings: dict[str, Any] = {"socket_timeout": TIMEOUT, "max_connections": POOL}
    return RedisCluster(host="127.0.0.1", port=cluster.ports[0], **(settings | options))


def async_client(cluster: RedisClusterNodes, **options: Any) -> Any:
    settings: dict[str, Any] = {"socket_timeout": TIMEOUT, "max_connections": POOL}
    return AsyncRedisCluster(host="127.0.0.1", port=cluster.ports[0], **(settings | options))


def sessions_on_every_master(store: Any, count: int = 3) -> dict[str, str]:
    """A session id per master (by the node that owns its keys)."""
    found: dict[str, str] = {}
    for n in range(1000):
        node = store.client.get_node_from_key(store.layout.session_keys(f"s{n}")[0]).name
        found.setdefault(node, f"s{n}")
        if len(found) == count:
            return found
    raise AssertionError(f"sessions on only {sorted(found)}")


def expected_repeats(checks: int) -> list[int]:
    from loopfuse.breaker import DEFAULT_MAX_SAMPLES_PER_SESSION as cap

    return list(range(1, min(checks, cap) + 1)) + [cap] * max(0, checks - cap)


def assert_healthy(store: Any) -> None:
    """Every operation was answered: no failure, no circuit of any node opened, no wait
    ran out; and callers did wait their turn (the load exceeded a node's pool)."""
    assert store.failure_count == 0, store.last_error
    assert all(circuit.opened == 0 for circuit in store.circuits.values())
    assert store.pool_timeouts == 0, store.last_error
    assert store.pool_waits > 0


# -- a cluster client: counts, answers, keys --------------------------------------------------


def test_from_url_builds_a_cluster_client_that_counts_on_every_master(
    cluster: RedisClusterNodes,
) -> None:
    store = RedisStore.from_url(cluster.url, key_prefix=unique_prefix())
    assert isinstance(store.client, RedisCluster)
    assert store.cluster
    sessions = sessions_on_every_master(store)
    assert len(set(sessions)) == 3
    for session in sessions.values():
        assert [store.record(session, 7, 0.0, WINDOW, 256) for _ in range(3)] == [1, 2, 3]
    store.set(1, None, {"answer": 42}, 60.0, 0.0)
    assert store.get(1, None, 0.0) == {"answer": 42}
    token = store.acquire(2, None, 30.0)
    assert token is not None
    assert store.acquire(2, None, 30.0) is None  # single flight across the cluster
    store.release(2, None, token)
    assert store.tracked_sessions(0.0, WINDOW) == 3
    # every key, on every master, has a TTL
    keys = list(store.client.scan_iter(match=store.key_prefix + "*"))
    assert len(keys) == 3 * 2 + 1
    assert all(store.client.pttl(key) > 0 for key in keys)
    # one circuit per master met, and the store's own
    assert set(store.circuits) == {"", *sessions}
    store.reset()
    store.clear()
    assert store.tracked_sessions(0.0, WINDOW) == 0
    assert store.get(1, None, 0.0) is MISS
    assert store.failure_count == 0, store.last_error
    store.client.close()


def test_from_url_takes_every_node_of_the_url_and_refuses_what_a_cluster_has_not(
    cluster: RedisClusterNodes,
) -> None:
    nodes = ",".join(f"127.0.0.1:{port}" for port in cluster.ports[:2])
    store = AsyncRedisStore.from_url(f"redis+cluster://{nodes}", key_prefix=unique_prefix())
    assert isinstance(store.client, AsyncRedisCluster)

    async def scenario() -> None:
        assert await store.record("s", 1, 0.0, WINDOW, 256) == 1
        assert await store.record("s", 1, 0.0, WINDOW, 256) == 2
        await store.client.aclose()

    asyncio.run(scenario())
    for url in (
        f"redis+cluster://127.0.0.1:{cluster.ports[0]}/3",
        "redis+cluster://127.0.0.1",
        "redis+cluster://127.0.0.1:99999",
        f"redis+cluster://127.0.0.1:{cluster.ports[0]}?decode_responses=true",
    ):
        with pytest.raises(ConfigError):
            RedisStore.from_url(url)


def test_a_plain_client_on_a_cluster_node_says_why_it_fails(
    cluster: RedisClusterNodes, caplog: pytest.LogCaptureFixture
) -> None:
    port = cluster.masters()[0]
    store = RedisStore.from_url(f"redis://127.0.0.1:{port}", key_prefix=unique_prefix())
    assert not store.cluster
    sessions = [f"s{n}" for n in range(12)]
    with caplog.at_level(logging.WARNING, logger="loopfuse"):
        counted = [store.record(session, 1, 0.0, WINDOW, 256) for session in sessions]
    assert 0 in counted  # most sessions' keys live on the other masters
    assert store.last_error is not None
    assert "Redis Cluster node" in store.last_error
    assert "redis+cluster://" in store.last_error
    # once (per log interval), naming the cause (other tests' stores may log here too)
    [warning] = [r.getMessage() for r in caplog.records if "MisroutedError" in r.getMessage()]
    assert "Redis Cluster node" in warning
    store.client.close()


def test_from_url_without_redis_py_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in sys.modules if name == "redis" or name.startswith("redis.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "redis", None)  # import redis: ModuleNotFoundError
    hint = re.escape(install_command("redis"))  # the install line every missing extra names
    for url in ("redis://127.0.0.1:1/0", "redis+cluster://127.0.0.1:1"):
        with pytest.raises(MissingExtraError, match=hint):
            RedisStore.from_url(url)
        with pytest.raises(MissingExtraError, match=hint):
            AsyncRedisStore.from_url(url)


# -- under load: more callers than a node's pool holds ----------------------------------------


@pytest.mark.parametrize("tasks", fast_and_full(250, 1000))
def test_tasks_beyond_a_nodes_pool_are_each_counted(cluster: RedisClusterNodes, tasks: int) -> None:
    async def scenario() -> None:
        store = AsyncRedisStore(async_client(cluster), unique_prefix())
        breaker = LoopBreaker(window=WINDOW, max_repeats=MAX_REPEATS, store=store)
        decisions = await asyncio.gather(*(breaker.acheck("s", 42) for _ in range(tasks)))
        assert sum(d.allowed for d in decisions) == MAX_REPEATS
        assert sorted(d.repeats for d in decisions) == expected_repeats(tasks)
        assert all(d.error is None for d in decisions)
        # sessions on every master at once
        sessions = sessions_on_every_master(store)
        spread = await asyncio.gather(
            *(breaker.acheck(s, 7) for s in sessions.values() for _ in range(tasks // 3))
        )
        assert sum(d.allowed for d in spread) == 3 * MAX_REPEATS
        assert breaker.internal_errors == 0
        assert_healthy(store)
        await store.client.aclose()

    asyncio.run(scenario())


@pytest.mark.parametrize("tasks", fast_and_full(320, 1000))
def test_tasks_beyond_a_nodes_pool_compute_once(cluster: RedisClusterNodes, tasks: int) -> None:
    async def scenario() -> None:
        store = AsyncRedisStore(async_client(cluster), unique_prefix())
        cache: DedupCache[str] = DedupCache(store=store)
        calls = 0

        async def ask() -> str:
            nonlocal calls
            calls += 1
            await asyncio.sleep(0.05)  # the paid call
            return "answer"

        answers = await asyncio.gather(*(cache.aget_or_compute(KEY, ask) for _ in range(tasks)))
        assert answers == ["answer"] * tasks
        assert calls == 1
        assert (cache.stats.cache_hits, cache.stats.cache_misses) == (tasks - 1, 1)
        assert_healthy(store)
        await store.client.aclose()

    asyncio.run(scenario())


@pytest.mark.parametrize("threads", fast_and_full(120, 200))
def test_threads_beyond_a_nodes_pool_compute_once_and_are_each_counted(
    cluster: RedisClusterNodes, threads: int
) -> None:
    store = RedisStore(sync_client(cluster), unique_prefix())
    cache: DedupCache[str] = DedupCache(store=store)
    breaker = LoopBreaker(window=WINDOW, max_repeats=MAX_REPEATS, store=store)
    calls: list[int] = []
    start = threading.Barrier(threads)
    answers: list[str] = []
    repeats: list[int] = []
    allowed: list[bool] = []

    def ask() -> str:
        calls.append(1)
        time.sleep(0.05)  # the paid call
        return "answer"

    def worker() -> None:
        start.wait(THREAD_GUARD)
        answers.append(cache.get_or_compute(KEY, ask))
        decision = breaker.check("s", 42)
        repeats.append(decision.repeats)
        allowed.append(decision.allowed)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(THREAD_GUARD)
    assert answers == ["answer"] * threads
    assert len(calls) == 1
    assert sum(allowed) == MAX_REPEATS
    assert sorted(repeats) == expected_repeats(threads)
    assert breaker.internal_errors == 0
    assert_healthy(store)
    store.client.close()
