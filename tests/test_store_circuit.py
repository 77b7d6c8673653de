"""The store circuit, on a fake clock and fake clients that fail on demand (no sleeping).

A Redis store counts, logs and applies its policy to every failure in one place (the
trap), and stops calling a Redis that keeps failing for a cool-down, then probes it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

from conftest import FakeClock
from loopfuse import DedupCache, LoopBreaker, RequestKey
from loopfuse.errors import ConfigError
from loopfuse.stores import MISS, StoreUnavailableError
from loopfuse.stores.circuit import StoreCircuit
from loopfuse.stores.redis import AsyncRedisStore, RedisStore

KEY = RequestKey.from_str("What is Rust?")


class FakeClient:
    """Just enough of ``redis.Redis`` for the store: every command is counted, and fails
    with ``ConnectionError`` while :attr:`failing`."""

    def __init__(self) -> None:
        self.calls = 0
        self.failing = True

    def answer(self, reply: Any) -> Any:
        self.calls += 1
        if self.failing:
            raise ConnectionError("stalled")
        return reply

    def register_script(self, lua: str) -> Any:
        # the breaker script answers [repeats, repaired]; the lock scripts 1 (done)
        reply = [1, 0] if "ZADD" in lua else 1
        return lambda keys, args: self.answer(reply)

    def get(self, key: str) -> Any:
        return self.answer(None)

    def set(self, key: str, value: object, **options: Any) -> Any:
        return self.answer(True)


class FakeAsyncClient(FakeClient):
    """The same for ``redis.asyncio.Redis`` (each command answers an awaitable);
    :attr:`hang` makes a command never answer."""

    def __init__(self) -> None:
        super().__init__()
        self.hang = False

    async def answer(self, reply: Any) -> Any:
        if self.hang:
            self.calls += 1
            await asyncio.Event().wait()
        return super().answer(reply)


def record(store: RedisStore) -> int:
    return store.record("s", 1, 0.0, 30.0, 256)


# -- the circuit alone ----------------------------------------------------------------------


def test_circuit_opens_after_threshold_failures_in_a_row(clock: FakeClock) -> None:
    circuit = StoreCircuit(failure_threshold=3, failure_window=10.0, cooldown=5.0, clock=clock)
    assert [circuit.failed(probe=False) for _ in range(3)] == [False, False, True]
    assert circuit.state == "open"
    assert circuit.opened == 1
    assert [circuit.admit() for _ in range(4)] == [None] * 4
    assert circuit.short_circuited == 4
    assert circuit.retry_in() == 5.0


def test_failures_must_fall_in_the_window_with_no_success_between(clock: FakeClock) -> None:
    circuit = StoreCircuit(failure_threshold=3, failure_window=10.0, clock=clock)
    circuit.failed(probe=False)
    circuit.failed(probe=False)
    clock.advance(10.0)  # those two are a window old
    assert not circuit.failed(probe=False)
    assert not circuit.failed(probe=False)
    circuit.succeeded()  # an answer: the count starts again
    assert not circuit.failed(probe=False)
    assert not circuit.failed(probe=False)
    assert circuit.state == "closed"
    assert circuit.failed(probe=False)


def test_after_the_cooldown_one_probe_decides(clock: FakeClock) -> None:
    circuit = StoreCircuit(failure_threshold=1, cooldown=5.0, clock=clock)
    circuit.failed(probe=False)
    clock.advance(4.999)
    assert circuit.admit() is None
    clock.advance(0.001)
    assert (circuit.admit(), circuit.admit(), circuit.state) == ("probe", None, "half-open")
    assert circuit.failed(probe=True)  # the probe failed: open for another cool-down
    assert (circuit.state, circuit.retry_in(), circuit.opened) == ("open", 5.0, 2)
    clock.advance(5.0)
    assert circuit.admit() == "probe"
    assert circuit.succeeded()
    assert (circuit.state, circuit.admit()) == ("closed", "call")


def test_a_cancelled_probe_hands_the_probe_to_the_next_call(clock: FakeClock) -> None:
    circuit = StoreCircuit(failure_threshold=1, cooldown=5.0, clock=clock)
    circuit.failed(probe=False)
    clock.advance(5.0)
    assert circuit.admit() == "probe"
    circuit.abandon(probe=False)  # some other call: the probe is still out
    assert circuit.admit() is None
    circuit.abandon(probe=True)
    assert circuit.admit() == "probe"


def test_a_late_failure_of_a_call_admitted_before_the_opening_is_ignored(
    clock: FakeClock,
) -> None:
    circuit = StoreCircuit(failure_threshold=1, cooldown=5.0, clock=clock)
    circuit.failed(probe=False)
    clock.advance(5.0)
    assert not circuit.failed(probe=False)
    assert circuit.admit() == "probe"  # the cool-down was not restarted


def test_threshold_zero_never_opens(clock: FakeClock) -> None:
    circuit = StoreCircuit(failure_threshold=0, clock=clock)
    assert not any(circuit.failed(probe=False) for _ in range(100))
    assert circuit.admit() == "call"


def test_one_probe_among_many_threads(clock: FakeClock) -> None:
    circuit = StoreCircuit(failure_threshold=1, cooldown=1.0, clock=clock)
    circuit.failed(probe=False)
    clock.advance(1.0)
    start = threading.Barrier(8)
    admissions: list[object] = []

    def call() -> None:
        start.wait()
        admissions.append(circuit.admit())

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(map(str, admissions)) == ["None"] * 7 + ["probe"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"failure_threshold": 1.5},
        {"failure_threshold": True},
        {"failure_window": 0},
        {"failure_window": float("nan")},
        {"cooldown": -1},
        {"cooldown": float("inf")},
        {"clock": 5.0},
    ],
)
def test_bad_circuit_settings_raise_config_error(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        StoreCircuit(**kwargs)
    with pytest.raises(ConfigError):
        RedisStore(FakeClient(), **kwargs)


# -- a store on a failing client -------------------------------------------------------------


def test_a_failing_redis_is_called_threshold_times_then_once_per_cooldown(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    client = FakeClient()
    store = RedisStore(client, clock=clock)  # the defaults: 3 failures, 5 s
    with caplog.at_level(logging.WARNING, logger="loopfuse"):
        assert [record(store) for _ in range(20)] == [0] * 20
    assert client.calls == 3
    assert (store.failure_count, store.circuit.short_circuited) == (20, 17)
    assert store.last_error is not None
    assert store.last_error.startswith("record: circuit open, Redis not called")
    assert "ConnectionError: stalled" in store.last_error
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1  # once per log interval, not per request
    assert store.get(1, None, 0.0) is MISS  # every operation goes through the circuit
    assert store.acquire(1, None, 30.0) is not None  # failing open grants the lock
    assert client.calls == 3
    clock.advance(5.0)
    assert [record(store) for _ in range(5)] == [0] * 5
    assert client.calls == 4  # one probe per cool-down
    clock.advance(5.0)
    client.failing = False
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="loopfuse"):
        assert [record(store) for _ in range(3)] == [1, 1, 1]
    assert client.calls == 7
    assert store.circuit.state == "closed"
    assert any("reachable again" in r.getMessage() for r in caplog.records)


def test_the_next_report_counts_the_short_circuited_calls(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    store = RedisStore(FakeClient(), clock=clock, log_interval=60.0, cooldown=100.0)
    for _ in range(10):
        record(store)
    clock.advance(60.0)
    with caplog.at_level(logging.WARNING, logger="loopfuse"):
        record(store)
    message = caplog.records[-1].getMessage()
    assert "9 more failure(s) since the last report, 11 in all" in message
    assert "circuit open: Redis not called for 40.0s" in message


def test_an_open_circuit_fails_closed_when_told_and_the_breaker_refuses(
    clock: FakeClock,
) -> None:
    client = FakeClient()
    store = RedisStore(client, clock=clock, fail_closed=True, failure_threshold=1)
    with pytest.raises(StoreUnavailableError, match="ConnectionError"):
        record(store)
    with pytest.raises(StoreUnavailableError, match="circuit open") as info:
        record(store)
    assert info.value.__cause__ is None
    assert client.calls == 1
    decision = LoopBreaker(store=store, clock=clock).check("s", 1)
    assert not decision.allowed
    assert "circuit open" in (decision.error or "")
    assert client.calls == 1


def test_junk_never_opens_the_circuit(clock: FakeClock) -> None:
    client = FakeClient()
    client.failing = False
    client.get = lambda key: client.answer(b"junk")  # type: ignore[method-assign]
    store = RedisStore(client, clock=clock, failure_threshold=1)
    assert [store.get(1, None, 0.0) for _ in range(5)] == [MISS] * 5
    assert (store.failure_count, store.circuit.state, client.calls) == (5, "closed", 5)


def test_a_cache_on_a_failing_redis_computes_without_waiting_for_it(clock: FakeClock) -> None:
    client = FakeClient()
    store = RedisStore(client, clock=clock)
    cache: DedupCache[str] = DedupCache(store=store, clock=clock)
    answers = [cache.get_or_compute(RequestKey(n), lambda: "computed") for n in range(10)]
    assert answers == ["computed"] * 10
    assert client.calls == 3  # get, acquire, get: then the circuit is open


# -- the asyncio store --------------------------------------------------------------------


def test_the_async_store_has_the_same_circuit(clock: FakeClock) -> None:
    client = FakeAsyncClient()
    store = AsyncRedisStore(client, clock=clock)

    async def scenario() -> list[int]:
        repeats = [await store.record("s", 1, 0.0, 30.0, 256) for _ in range(10)]
        clock.advance(5.0)
        client.failing = False
        return [*repeats, await store.record("s", 1, 0.0, 30.0, 256)]

    assert asyncio.run(scenario()) == [0] * 10 + [1]
    assert client.calls == 4
    assert store.circuit.state == "closed"


def test_a_cancelled_async_probe_is_no_failure_and_the_next_call_probes(
    clock: FakeClock,
) -> None:
    client = FakeAsyncClient()
    store = AsyncRedisStore(client, clock=clock, failure_threshold=1)

    async def scenario() -> int:
        await store.record("s", 1, 0.0, 30.0, 256)  # fails: the circuit opens
        clock.advance(5.0)
        client.hang = True
        probe = asyncio.create_task(store.record("s", 1, 0.0, 30.0, 256))
        while client.calls < 2:  # the probe is waiting on the client
            await asyncio.sleep(0)
        assert await store.record("s", 1, 0.0, 30.0, 256) == 0  # one probe at a time
        probe.cancel()
        with pytest.raises(asyncio.CancelledError):
            await probe
        client.hang = client.failing = False
        return await store.record("s", 1, 0.0, 30.0, 256)

    assert asyncio.run(scenario()) == 1
    assert client.calls == 3
    assert store.failure_count == 2  # the first failure and the short-circuited call


def test_an_async_store_failing_closed_makes_acheck_refuse(clock: FakeClock) -> None:
    store = AsyncRedisStore(FakeAsyncClient(), clock=clock, fail_closed=True)
    breaker = LoopBreaker(store=store, clock=clock)
    decisions = [asyncio.run(breaker.acheck("s", 1)) for _ in range(5)]
    assert not any(d.allowed for d in decisions)
    assert "circuit open" in (decisions[-1].error or "")
    assert breaker.internal_errors == 5


# -- a flapping Redis, and a cluster with one node down -------------------------------------


def test_a_flapping_redis_logs_back_once_per_failure_warning(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    # Failures and successes alternate (a flapping link): the failure warning is rate
    # limited, and so is "reachable again": one per failure warning, not one per flap.
    client = FakeClient()
    store = RedisStore(client, clock=clock, log_interval=60.0)
    with caplog.at_level(logging.WARNING, logger="loopfuse"):
        for flap in range(200):
            client.failing = flap % 2 == 0
            record(store)
            clock.advance(0.1)
        messages = [r.getMessage() for r in caplog.records]
        assert len(messages) == 2
        assert "failed" in messages[0]
        assert "reachable again" in messages[1]
        clock.advance(60.0)  # the next interval: one more pair
        for flap in range(200):
            client.failing = flap % 2 == 0
            record(store)
    messages = [r.getMessage() for r in caplog.records]
    assert [("reachable again" in m) for m in messages] == [False, True, False, True]
    assert store.failure_count == 200


class FakeNode:
    def __init__(self, name: str) -> None:
        self.name = name
        self.max_connections = 4


class FakeClusterClient(FakeClient):
    """Just enough of a ``RedisCluster`` for the store: two masters, ``a`` and ``b``
    (by the first hex digit of the key's hash tag); the keys of :attr:`down` fail."""

    nodes_manager = object()

    def __init__(self) -> None:
        super().__init__()
        self.failing = False
        self.down = "a"
        self.nodes = {"a": FakeNode("a"), "b": FakeNode("b")}

    def get_node_from_key(self, key: str) -> FakeNode:
        tag = key.partition("{")[2]
        return self.nodes["a" if tag[:1] in "01234567" else "b"]

    def register_script(self, lua: str) -> Any:
        reply = [1, 0] if "ZADD" in lua else 1

        def run(keys: list[str], args: list[Any]) -> Any:
            self.calls += 1
            if self.get_node_from_key(keys[0]).name == self.down:
                raise ConnectionError("node a is down")
            return reply

        return run

    def evalsha(self, sha: str, count: int, *keys_and_args: Any) -> Any:
        scripts = {"record": [1, 0]}  # the store's scripts run as EVALSHA on a cluster
        self.calls += 1
        if self.get_node_from_key(keys_and_args[0]).name == self.down:
            raise ConnectionError("node a is down")
        return scripts["record"]


def test_one_node_down_opens_its_own_circuit_only(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    client = FakeClusterClient()
    store = RedisStore(client, clock=clock)
    assert store.cluster
    by_node: dict[str, list[str]] = {"a": [], "b": []}
    for n in range(40):
        session = f"s{n}"
        by_node[client.get_node_from_key(store.layout.session_keys(session)[0]).name].append(
            session
        )
    with caplog.at_level(logging.WARNING, logger="loopfuse"):
        for _ in range(5):  # failures on a and successes on b, interleaved
            for down, up in zip(by_node["a"], by_node["b"], strict=False):
                assert store.record(down, 1, 0.0, 30.0, 256) == 0  # failed open
                assert store.record(up, 1, 0.0, 30.0, 256) == 1  # still counted
    assert store.circuits["a"].state == "open"
    assert store.circuits["b"].state == "closed"
    assert store.circuits["b"].opened == 0
    assert store.circuit.state == "closed"  # the store's own: every node, not one
    assert client.calls == 3 + 5 * min(len(by_node["a"]), len(by_node["b"]))  # a: threshold
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1  # the failure, once; no "reachable again" from node b
    assert "record on a" in messages[0]
    client.down = ""  # node a answers again: after the cool-down, its probe closes it
    clock.advance(store.circuits["a"].cooldown)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="loopfuse"):
        assert store.record(by_node["a"][0], 1, 0.0, 30.0, 256) == 1
    assert store.circuits["a"].state == "closed"
    assert [r.getMessage() for r in caplog.records] == [
        f"loopfuse: Redis store reachable again (node a) ({store.failure_count} failures)"
    ]


def test_a_cluster_stores_routes_stay_bounded_as_its_topology_changes(clock: FakeClock) -> None:
    # Every failover or resharding may name new nodes: the routes of nodes met long ago
    # (their circuits closed) are forgotten past MAX_ROUTES.
    from loopfuse.stores._routes import MAX_ROUTES

    client = FakeClusterClient()
    client.down = ""
    names = iter(range(10**6))
    client.get_node_from_key = lambda key: FakeNode(f"n{next(names)}")  # type: ignore[method-assign]
    store = RedisStore(client, clock=clock)
    for _ in range(3 * MAX_ROUTES):
        assert store.record("s", 1, 0.0, 30.0, 256) == 1
    assert len(store.circuits) <= MAX_ROUTES + 1
