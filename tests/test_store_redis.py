"""The Redis stores against a real ``redis-server``: clock, keys and TTLs, round trips,
failures (down, slow, erroring), and several processes sharing one store."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
from collections.abc import Iterator
from typing import Any

import pytest

import store_workers
from loopfuse.errors import ConfigError, InvalidInputError
from loopfuse.stores import MISS, StoreUnavailableError
from loopfuse.stores.redis import AsyncRedisStore, RedisStore
from store_helpers import RedisServer, redis_or_skip, running_server, unique_prefix, wait_until

redis = redis_or_skip()

D1 = bytes(range(32))


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with running_server() as server:
        yield server


@pytest.fixture
def client(server: RedisServer) -> Iterator[Any]:
    client = server.client()
    yield client
    client.close()


class LogClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# -- the server's clock ---------------------------------------------------------------------


def test_server_clock_times_the_window_and_ignores_now(client: Any) -> None:
    store = RedisStore(client, unique_prefix())
    assert store.time_source == "redis"
    assert store.record("s", 1, now=0.0, window=30.0, max_samples=256) == 1
    assert store.record("s", 1, now=1e12, window=30.0, max_samples=256) == 2
    samples_key = store.layout.session_keys("s")[0]
    seconds, micros = client.time()
    scores = [score for _, score in client.zrange(samples_key, 0, -1, withscores=True)]
    assert all(abs(score - (seconds + micros / 1e6)) < 5.0 for score in scores)
    assert store.tracked_sessions(now=-5.0, window=30.0) == 1


def test_server_clock_expiry_of_answers_is_redis_ttl(client: Any) -> None:
    store = RedisStore(client, unique_prefix())
    store.set(1, D1, "v", ttl=60.0, now=123.0)
    assert store.get(1, D1, now=1e12) == "v"  # the caller's now does not expire it
    pttl = client.pttl(store.layout.entry_key(1))
    assert 55_000 < pttl <= 60_000
    entry = store.peek(1, D1, now=1000.0)
    assert entry is not None
    assert entry.ttl == 60.0
    assert 999.0 <= entry.created_at <= 1000.0  # on the caller's clock, from what is left


# -- keys, TTLs, round trips ----------------------------------------------------------------


def test_every_key_has_a_ttl(client: Any) -> None:
    prefix = unique_prefix()
    store = RedisStore(client, prefix, max_ttl=3600.0)
    store.record("s", 1, now=0.0, window=30.0, max_samples=256)
    store.set(1, D1, "v", ttl=5.0, now=0.0)
    store.set(2, None, "forever", ttl=float("inf"), now=0.0)
    assert store.acquire(3, D1, ttl=10.0) is not None
    keys = list(client.scan_iter(match=prefix + "*"))
    assert len(keys) == 5
    ttls = {key: client.pttl(key) for key in keys}
    assert all(0 < ttl <= 3_600_000 for ttl in ttls.values()), ttls
    assert client.pttl(store.layout.entry_key(2)) > 3_590_000


def test_prefixes_isolate_stores_even_with_glob_characters(client: Any) -> None:
    a = RedisStore(client, "app*[1]?:")
    b = RedisStore(client, "app-1-:")
    a.record("s", 1, 0.0, 30.0, 256)
    b.record("s", 1, 0.0, 30.0, 256)
    a.set(1, None, "a", 60.0, 0.0)
    b.set(1, None, "b", 60.0, 0.0)
    a.reset()
    a.clear()
    assert b.record("s", 1, 0.0, 30.0, 256) == 2
    assert b.get(1, None, 0.0) == "b"
    assert a.get(1, None, 0.0) is MISS


class CountingRedis(redis.Redis):  # type: ignore[misc]
    """Counts the commands it sends (each one a round trip, outside pipelines)."""

    commands = 0

    def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        type(self).commands += 1
        return super().execute_command(*args, **kwargs)


def test_each_guard_step_is_one_round_trip(server: RedisServer) -> None:
    client = CountingRedis(port=server.port)
    store = RedisStore(client, unique_prefix())
    store.record("warm", 1, 0.0, 30.0, 256)  # each script is loaded once per server
    store.release(0, None, "warm")
    steps = [
        lambda: store.record("s", 1, 0.0, 30.0, 256),
        lambda: store.get(1, D1, 0.0),
        lambda: store.set(1, D1, "v", 60.0, 0.0),
        lambda: store.get(1, D1, 0.0),
        lambda: store.acquire(1, D1, 30.0),
        lambda: store.release(1, D1, "token"),
    ]
    for step in steps:
        before = CountingRedis.commands
        step()
        assert CountingRedis.commands - before == 1
    client.close()


def test_script_reloads_after_a_flush(client: Any) -> None:
    store = RedisStore(client, unique_prefix())
    assert store.record("s", 1, 0.0, 30.0, 256) == 1
    client.script_flush()
    assert store.record("s", 1, 0.0, 30.0, 256) == 2
    assert store.failure_count == 0


# -- bad input and bad data -----------------------------------------------------------------


def test_bad_arguments_raise_typed_errors_before_any_round_trip(client: Any) -> None:
    store = RedisStore(client, unique_prefix())
    with pytest.raises(InvalidInputError):
        store.record(None, 1, 0.0, 30.0, 256)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        store.record("s", "1", 0.0, 30.0, 256)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        store.record("s", 1, 0.0, -1.0, 256)
    with pytest.raises(InvalidInputError):
        store.record("s", 1, 0.0, 30.0, 0)
    with pytest.raises(InvalidInputError):
        store.get(-1, None, 0.0)
    with pytest.raises(InvalidInputError):
        store.get(1, b"short", 0.0)
    with pytest.raises(InvalidInputError):
        store.set(1, None, object(), 60.0, 0.0)
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(InvalidInputError):
        store.set(1, None, deep, 60.0, 0.0)
    with pytest.raises(InvalidInputError):
        store.set(1, None, "v", 0.0, 0.0)
    assert store.failure_count == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"time_source": "local"},
        {"fail_closed": "yes"},
        {"max_ttl": 0},
        {"max_ttl": float("inf")},
        {"log_interval": -1},
        {"codec": "json"},
        {"key_prefix": b"bytes:"},
        {"pool_timeout": -1},
        {"pool_timeout": float("inf")},
        {"pool_timeout": "1"},
    ],
)
def test_bad_settings_raise_config_error(client: Any, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        RedisStore(client, **kwargs)


@pytest.mark.parametrize("size", [0, -1, 2.5, True, None])
def test_a_bad_pool_size_raises_config_error(server: RedisServer, size: object) -> None:
    for store_type in (RedisStore, AsyncRedisStore):
        with pytest.raises(ConfigError, match="max_connections"):
            store_type.from_url(server.url, max_connections=size)  # type: ignore[arg-type]


def test_the_store_takes_turns_on_its_clients_pool(server: RedisServer) -> None:
    # a client made by hand: the pool it has (redis-py's default, or one of 3)
    assert (
        RedisStore(server.client()).max_connections
        == server.client().connection_pool.max_connections
    )
    assert RedisStore(server.client(max_connections=3), pool_timeout=0).max_connections == 3
    store = RedisStore.from_url(server.url)
    assert (store.max_connections, store.pool_timeout) == (10, 5.0)


def test_a_client_that_decodes_responses_is_refused(server: RedisServer) -> None:
    with pytest.raises(ConfigError, match="decode_responses"):
        RedisStore(server.client(decode_responses=True))


@pytest.mark.parametrize(
    "junk", [b"", b"junk", b"LFc1" + b"\x00" * 20, b"LFc1\x01" + b"\x00" * 16 + b"short"]
)
def test_junk_under_an_entry_key_is_a_miss_even_failing_closed(client: Any, junk: bytes) -> None:
    store = RedisStore(client, unique_prefix(), fail_closed=True)
    client.set(store.layout.entry_key(1), junk)
    assert store.get(1, None, 0.0) is MISS
    assert store.peek(1, None, 0.0) is None
    assert store.failure_count >= 1


# -- failures: down, slow, erroring ---------------------------------------------------------


def test_redis_down_fails_open_logs_once_per_interval_and_resumes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log_clock = LogClock()
    with running_server() as server:
        store = RedisStore.from_url(
            server.url, timeout=0.2, key_prefix=unique_prefix(), clock=log_clock
        )
        assert [store.record("s", 1, 0.0, 30.0, 256) for _ in range(2)] == [1, 2]
        server.stop()
        with caplog.at_level(logging.WARNING, logger="loopfuse"):
            assert [store.record("s", 1, 0.0, 30.0, 256) for _ in range(20)] == [0] * 20
            assert store.get(1, D1, 0.0) is MISS
            store.set(1, D1, "v", 60.0, 0.0)
            assert store.acquire(1, D1, 30.0) is not None  # granted: compute, no single flight
            store.release(1, D1, "t")
            assert store.tracked_sessions(0.0, 30.0) == 0
        assert store.failure_count == 25
        assert store.last_error is not None
        assert store.last_error.startswith("tracked_sessions:")
        warnings = [r for r in caplog.records if r.name == "loopfuse"]
        assert len(warnings) == 1
        assert "failing open" in warnings[0].getMessage()
        log_clock.now = 61.0
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="loopfuse"):
            store.record("s", 1, 0.0, 30.0, 256)
        assert "24 more failure(s)" in caplog.records[0].getMessage()
        assert store.circuit.state == "open"  # 26 failures in a row: Redis is not called
        server.start()  # same port, empty: the requests flow and count again
        assert store.record("s", 1, 0.0, 30.0, 256) == 0  # still cooling down
        log_clock.now += store.circuit.cooldown  # the next call probes
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="loopfuse"):
            assert wait_until(lambda: store.record("s", 1, 0.0, 30.0, 256) > 0)
        assert store.record("s", 1, 0.0, 30.0, 256) >= 2
        assert any("reachable again" in r.getMessage() for r in caplog.records)


def test_redis_down_fails_closed_with_a_loopfuse_error_only() -> None:
    with running_server() as server:
        store = RedisStore.from_url(server.url, timeout=0.2, fail_closed=True)
        server.stop()
        for call in (
            lambda: store.record("s", 1, 0.0, 30.0, 256),
            lambda: store.get(1, None, 0.0),
            lambda: store.set(1, None, "v", 60.0, 0.0),
            lambda: store.acquire(1, None, 30.0),
        ):
            with pytest.raises(StoreUnavailableError) as info:
                call()
            assert info.value.__cause__ is None
            assert info.value.__suppress_context__


def test_slow_redis_times_out_and_fails_open(server: RedisServer, client: Any) -> None:
    store = RedisStore.from_url(server.url, timeout=0.1, key_prefix=unique_prefix())
    assert store.record("s", 1, 0.0, 30.0, 256) == 1
    client.execute_command("CLIENT", "PAUSE", "600", "ALL")
    assert store.record("s", 1, 0.0, 30.0, 256) == 0
    assert store.get(1, None, 0.0) is MISS
    assert store.failure_count == 2
    assert "Timeout" in (store.last_error or "")
    # the server may still run the request that timed out once it resumes: >= 2, not == 3
    assert wait_until(lambda: store.record("s", 1, 0.0, 30.0, 256) >= 2)


def test_redis_errors_fail_open(client: Any) -> None:
    # An error reply of the server (out of memory: it takes no writes), not junk in one
    # key, which is no failure (a key of another type: tests/test_store_junk.py).
    store = RedisStore(client, unique_prefix())
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", 1)
    try:
        assert store.record("s", 1, 0.0, 30.0, 256) == 0
        assert "OOM" in (store.last_error or "")
        closed = RedisStore(client, store.key_prefix, fail_closed=True)
        with pytest.raises(StoreUnavailableError, match="OOM"):
            closed.record("s", 1, 0.0, 30.0, 256)
    finally:
        client.config_set("maxmemory", 0)
    assert store.record("s", 1, 0.0, 30.0, 256) == 1


# -- asyncio --------------------------------------------------------------------------------


def test_async_store_counts_and_fails_open_when_redis_is_down() -> None:
    async def scenario(server: RedisServer) -> list[int]:
        store = AsyncRedisStore.from_url(server.url, timeout=0.2, key_prefix=unique_prefix())
        counts = [await store.record("s", 1, 0.0, 30.0, 256) for _ in range(2)]
        await store.set(1, D1, {"a": 1}, 60.0, 0.0)
        assert await store.get(1, D1, 0.0) == {"a": 1}
        server.stop()
        counts += [await store.record("s", 1, 0.0, 30.0, 256)]
        assert await store.get(1, D1, 0.0) is MISS
        assert store.failure_count == 2
        await store.client.aclose()
        return counts

    with running_server() as server:
        assert asyncio.run(scenario(server)) == [1, 2, 0]


def test_sync_and_async_stores_share_keys(server: RedisServer, client: Any) -> None:
    prefix = unique_prefix()
    sync_store = RedisStore(client, prefix)
    sync_store.record("s", 1, 0.0, 30.0, 256)
    sync_store.set(1, D1, b"bytes", 60.0, 0.0)

    async def read() -> tuple[int, object]:
        aclient = redis.asyncio.Redis(port=server.port)
        store = AsyncRedisStore(aclient, prefix)
        result = (await store.record("s", 1, 0.0, 30.0, 256), await store.get(1, D1, 0.0))
        await aclient.aclose()
        return result

    assert asyncio.run(read()) == (2, b"bytes")


# -- several processes ----------------------------------------------------------------------


class Workers:
    def __init__(self, server: RedisServer, prefix: str, count: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.prefix = prefix
        self.start = context.Event()
        self.pipes = []
        self.processes = []
        for _ in range(count):
            parent, child = context.Pipe()
            process = context.Process(
                target=store_workers.serve, args=(server.port, prefix, child, self.start)
            )
            process.start()
            self.pipes.append(parent)
            self.processes.append(process)

    def ask(self, worker: int, *command: Any) -> Any:
        self.pipes[worker].send(command)
        if not self.pipes[worker].poll(30.0):
            raise TimeoutError(f"worker {worker} did not answer {command[0]!r}")
        return self.pipes[worker].recv()

    def close(self) -> None:
        for pipe in self.pipes:
            pipe.send(("stop",))
        for process in self.processes:
            process.join(10)
            if process.is_alive():
                process.kill()


@pytest.fixture
def workers(server: RedisServer) -> Iterator[Workers]:
    pool = Workers(server, unique_prefix(), 4)
    yield pool
    pool.close()


def test_a_loop_spread_over_four_processes_breaks_at_n_plus_one(workers: Workers) -> None:
    max_repeats = 5
    repeats = [workers.ask(i % 4, "record", "session-1", 42) for i in range(max_repeats + 3)]
    assert repeats == list(range(1, max_repeats + 4))
    allowed = [r <= max_repeats for r in repeats]
    assert allowed == [True] * max_repeats + [False] * 3
    assert workers.ask(1, "record", "session-2", 42) == 1  # sessions stay isolated


def test_an_answer_cached_by_one_process_is_served_by_another(workers: Workers) -> None:
    assert workers.ask(2, "get", 7, D1) == ("miss",)
    workers.ask(0, "set", 7, D1, {"answer": [1, 2]})
    assert [workers.ask(i, "get", 7, D1) for i in (1, 2, 3)] == [("hit", {"answer": [1, 2]})] * 3


def test_processes_racing_on_one_key_compute_once(workers: Workers, client: Any) -> None:
    for pipe in workers.pipes:
        pipe.send(("race", 9, D1))
    workers.start.set()
    results = []
    for pipe in workers.pipes:
        assert pipe.poll(30.0)
        results.append(pipe.recv())
    assert sorted(r[0] for r in results) == ["computed", "hit", "hit", "hit"]
    assert {r[1] for r in results} == {"the answer"}
    assert client.get(workers.prefix + "computations") == b"1"


def test_loop_breakers_in_four_processes_refuse_the_n_plus_first(workers: Workers) -> None:
    allowed = [workers.ask(i % 4, "check", "session-1", 42, 5) for i in range(8)]
    assert allowed == [True] * 5 + [False] * 3


def test_dedup_caches_in_four_processes_compute_once(workers: Workers, client: Any) -> None:
    for pipe in workers.pipes:
        pipe.send(("race_cache",))
    workers.start.set()
    results = []
    for pipe in workers.pipes:
        assert pipe.poll(30.0)
        results.append(pipe.recv())
    assert [value for value, _ in results] == ["the cached answer"] * 4
    assert sorted(hits for _, hits in results) == [0, 1, 1, 1]
    assert client.get(workers.prefix + "cache-computations") == b"1"
