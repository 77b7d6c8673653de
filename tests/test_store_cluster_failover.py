"""A master of a real Redis Cluster killed mid-load (SIGKILL, as a crashed host).

Each test starts its own six-node cluster on loopback (the module's cluster of
tests/test_store_cluster.py stays whole) with ``cluster-node-timeout`` 1 s, puts a
session on every master, and has workers check those sessions without pause while one
master dies and its replica takes over. Through ``RedisStore.from_url('redis+cluster://
...')`` (fail-fast: 0.25 s, no retry), sync and asyncio:

- no exception leaves the store;
- the sessions on the healthy masters stay guarded, exactly: each check of each of them
  that is counted is counted once, through the whole failover; with
  ``cluster-require-full-coverage no`` none fails open (before scripts were sent as
  ``EVAL`` to the key's node, redis-py's ``SCRIPT LOAD`` to every master on the promoted
  node's ``NOSCRIPT`` filled the healthy masters' pools); with Redis' default (``yes``) every
  node answers ``CLUSTERDOWN`` from the master's failure to the promotion: the checks
  fail open meanwhile, and count again at once after it (no circuit opened for it);
- no check is held longer than :data:`HELD_BOUND`;
- the killed master's sessions fail open (0) until the replica is promoted, then count
  again: within :data:`RESUME_BOUND` of the promotion (the figures are printed);
- the promoted node has no script cached (``SCRIPT FLUSH``): harmless, it is reloaded;
- "reachable again" is logged at most once per failure warning;
- every key the store wrote has a TTL.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from conftest import THREAD_GUARD
from loopfuse.stores.circuit import DEFAULT_COOLDOWN
from loopfuse.stores.redis import AsyncRedisStore, RedisStore
from store_helpers import RedisClusterNodes, cluster_or_skip, running_cluster, unique_prefix

redis = cluster_or_skip()

WINDOW = 600.0
CAP = 1_000_000  # no sample dropped: the counts are exact
TIMEOUT = 1.0  # a loaded test machine must not pass for a slow Redis
HELD_BOUND = 3 * TIMEOUT
"""Seconds a check may take during the failover (measured: under 0.35 s on loopback)."""
RESUME_BOUND = DEFAULT_COOLDOWN + 3.0
"""Seconds after the promotion within which the dead master's sessions count again: the
node's circuit lets one probe through per cool-down, whose failure makes the client
learn the new topology (measured: 0.1-5.5 s)."""
PROMOTION_BOUND = 20.0  # cluster-node-timeout 1 s: the replica takes over in ~2-3 s


class Load:
    """What the workers saw: per session, the counts in order of return; every call's
    duration; any exception that escaped."""

    def __init__(self, sessions: dict[str, str], victim: str) -> None:
        self.sessions = sessions
        self.victim = victim
        self.counts: dict[str, list[tuple[float, int]]] = {s: [] for s in sessions.values()}
        self.longest = 0.0
        self.escaped: list[BaseException] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def note(self, session: str, started: float, count: int) -> None:
        ended = time.monotonic()
        with self.lock:
            self.counts[session].append((ended, count))
            self.longest = max(self.longest, ended - started)

    def resumed_at(self, after: float) -> float | None:
        """When the victim's session was first counted again after ``after``."""
        with self.lock:
            seen = list(self.counts[self.sessions[self.victim]])
        return next((t for t, count in seen if t > after and count > 0), None)


def sessions_on_every_master(store: Any) -> dict[str, str]:
    found: dict[str, str] = {}
    for n in range(1000):
        node = store.client.get_node_from_key(store.layout.session_keys(f"s{n}")[0]).name
        found.setdefault(node, f"s{n}")
        if len(found) == 3:
            return found
    raise AssertionError(f"sessions on only {sorted(found)}")


def promoted(cluster: RedisClusterNodes, victim_port: int) -> bool:
    """Three live masters again (the victim's replica took over) and the cluster is ok."""
    live = [p for p in cluster.ports if p != victim_port]
    masters = cluster.masters()
    return len(masters) == 3 and victim_port not in masters and cluster.state_ok(live[0])


def fail_over(
    cluster: RedisClusterNodes, load: Load, victim_port: int, flush: Callable[[int], None]
) -> dict[str, float]:
    """Kill the victim mid-load, wait for the promotion and for the victim's session to
    count again; flush the new master's scripts; run on a little. Timings in seconds."""
    time.sleep(0.5)  # load before the kill (real time: a real cluster under load)
    killed = time.monotonic()
    cluster.kill(victim_port)
    deadline = killed + PROMOTION_BOUND
    while not promoted(cluster, victim_port):
        assert time.monotonic() < deadline, "the replica was not promoted"
        time.sleep(0.05)
    promotion = time.monotonic()
    while load.resumed_at(promotion) is None:
        assert time.monotonic() < promotion + RESUME_BOUND + 5.0, "counting never resumed"
        time.sleep(0.05)
    resumed = load.resumed_at(promotion)
    assert resumed is not None
    new_master = next(p for p in cluster.masters() if p not in cluster.original_masters)
    flush(new_master)  # NOSCRIPT on the promoted node
    flushed = time.monotonic()
    time.sleep(0.5)
    assert load.resumed_at(flushed) is not None  # the script was loaded again
    load.stop.set()
    return {
        "killed": killed,
        "promoted": promotion,
        "promotion": promotion - killed,
        "resumed": resumed - promotion,
        "resumed_at": resumed,
    }


def check_outcome(
    load: Load, timings: dict[str, float], logs: list[str], *, full_coverage: bool
) -> None:
    assert load.escaped == []
    for node, session in load.sessions.items():
        counts = [count for _, count in load.counts[session]]
        assert counts, session
        if node == load.victim:
            continue
        # guarded: no check counted twice, none counted that was not made (a reply that
        # came too late on a loaded machine is counted in Redis, failed open here)
        counted = [count for count in counts if count]
        assert len(set(counted)) == len(counted), node
        assert max(counted) <= len(counts), node
        unguarded = [t for t, count in load.counts[session] if not count]
        # Only during the failover: CLUSTERDOWN from every node until the promotion
        # (full coverage yes), and then none.
        killed, resumed = timings["killed"], timings["resumed_at"]
        late = [round(t - killed, 3) for t in unguarded if not killed < t <= resumed + 1.0]
        assert late == [], (timings, late[:5], len(late))
        if not full_coverage:  # the healthy masters serve all along
            assert unguarded == [], node
    victim_counts = [count for _, count in load.counts[load.sessions[load.victim]]]
    assert 0 in victim_counts  # failed open while its master was away
    assert load.longest <= HELD_BOUND
    assert timings["resumed"] <= RESUME_BOUND
    reachable = sum("reachable again" in line for line in logs)
    failures = sum("failed" in line for line in logs)
    assert reachable <= failures
    assert failures <= 2  # once per log interval (60 s): the test is shorter
    print(
        f"\nfailover (full coverage: {full_coverage}): promoted {timings['promotion']:.2f}s "
        "after the kill; counting resumed "
        f"{timings['resumed']:.2f}s after the promotion; longest check {load.longest:.3f}s; "
        f"{sum(map(len, load.counts.values()))} checks; log lines {len(logs)}"
    )


def every_key_has_a_ttl(cluster: RedisClusterNodes, victim_port: int, prefix: str) -> None:
    live = next(p for p in cluster.ports if p != victim_port)
    client = redis.cluster.RedisCluster(host="127.0.0.1", port=live)
    try:
        keys = list(client.scan_iter(match=prefix + "*"))
        assert keys
        assert all(client.pttl(key) > 0 for key in keys)
    finally:
        client.close()


def flush_scripts(port: int) -> None:
    client = redis.Redis(host="127.0.0.1", port=port)
    try:
        client.script_flush()
    finally:
        client.close()


@pytest.mark.parametrize(
    ("workers", "full_coverage"),
    [
        pytest.param(2, False, id="fast-2"),
        pytest.param(8, False, id="full-8", marks=pytest.mark.slow),
        pytest.param(8, True, id="full-8-full-coverage", marks=pytest.mark.slow),
    ],
)
def test_a_master_killed_mid_load_sync(
    workers: int, full_coverage: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        running_cluster(full_coverage=full_coverage) as cluster,
        caplog.at_level(logging.WARNING, logger="loopfuse"),
    ):
        cluster.original_masters = cluster.masters()
        prefix = unique_prefix()
        store = RedisStore.from_url(cluster.url, key_prefix=prefix, timeout=TIMEOUT)
        sessions = sessions_on_every_master(store)
        victim = next(iter(sessions))
        load = Load(sessions, victim)

        def worker(session: str) -> None:
            try:
                while not load.stop.is_set():
                    started = time.monotonic()
                    load.note(session, started, store.record(session, 42, 0.0, WINDOW, CAP))
            except BaseException as exc:  # nothing may escape the store
                load.escaped.append(exc)

        # one session per master, `workers` threads on each: counted exactly, in any order
        threads = [
            threading.Thread(target=worker, args=(session,))
            for session in sessions.values()
            for _ in range(workers)
        ]
        for thread in threads:
            thread.start()
        try:
            timings = fail_over(cluster, load, int(victim.rsplit(":", 1)[1]), flush_scripts)
        finally:
            load.stop.set()
            for thread in threads:
                thread.join(THREAD_GUARD)
        store.client.close()
        logs = [r.getMessage() for r in caplog.records if r.name == "loopfuse"]
        check_outcome(load, timings, logs, full_coverage=full_coverage)
        every_key_has_a_ttl(cluster, int(victim.rsplit(":", 1)[1]), prefix)


@pytest.mark.parametrize(
    ("tasks", "full_coverage"),
    [
        pytest.param(4, True, id="fast-4-full-coverage"),
        pytest.param(32, True, id="full-32-full-coverage", marks=pytest.mark.slow),
        pytest.param(32, False, id="full-32", marks=pytest.mark.slow),
    ],
)
def test_a_master_killed_mid_load_asyncio(
    tasks: int, full_coverage: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        running_cluster(full_coverage=full_coverage) as cluster,
        caplog.at_level(logging.WARNING, logger="loopfuse"),
    ):
        cluster.original_masters = cluster.masters()
        prefix = unique_prefix()
        victim_box: list[str] = []
        load_box: list[Load] = []
        ready = threading.Event()

        async def scenario() -> None:
            store = AsyncRedisStore.from_url(cluster.url, key_prefix=prefix, timeout=TIMEOUT)
            await store.client.initialize()
            sessions = sessions_on_every_master(store)
            load = Load(sessions, next(iter(sessions)))
            victim_box.append(load.victim)
            load_box.append(load)
            ready.set()

            async def worker(session: str) -> None:
                try:
                    while not load.stop.is_set():
                        started = time.monotonic()
                        count = await store.record(session, 42, 0.0, WINDOW, CAP)
                        load.note(session, started, count)
                        await asyncio.sleep(0)  # a failed-open check does not yield: let others run
                except BaseException as exc:
                    load.escaped.append(exc)

            await asyncio.gather(*(worker(s) for s in sessions.values() for _ in range(tasks)))
            await store.client.aclose()

        runner = threading.Thread(target=lambda: asyncio.run(scenario()))
        runner.start()
        assert ready.wait(THREAD_GUARD)
        load = load_box[0]
        victim_port = int(victim_box[0].rsplit(":", 1)[1])
        try:
            timings = fail_over(cluster, load, victim_port, flush_scripts)
        finally:
            load.stop.set()
            runner.join(THREAD_GUARD)
        logs = [r.getMessage() for r in caplog.records if r.name == "loopfuse"]
        check_outcome(load, timings, logs, full_coverage=full_coverage)
        every_key_has_a_ttl(cluster, victim_port, prefix)
