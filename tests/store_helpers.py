"""Helpers of the store tests: a real ``redis-server`` per test session, and adapters.

The tests start their own server on a free loopback port (no persistence) and stop it
at the end; they skip, saying why, when ``redis-server`` or the ``redis`` package is
missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

REDIS_SERVER = shutil.which("redis-server")


def redis_or_skip() -> Any:
    """The ``redis`` module, or a skip that says what is missing (a failure under
    ``LOOPFUSE_REQUIRE_REDIS=1``, as CI sets it: there a missing server is not a skip)."""
    if REDIS_SERVER is None:
        reason = "redis-server is not installed (Debian: apt-get install redis-server)"
        if REDIS_REQUIRED:
            pytest.fail(f"LOOPFUSE_REQUIRE_REDIS=1 but {reason}", pytrace=False)
        pytest.skip(reason, allow_module_level=True)
    if REDIS_REQUIRED:
        import redis

        return redis
    return pytest.importorskip("redis", reason="the redis package is not installed")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def free_ports(count: int) -> list[int]:
    """``count`` different loopback ports, free when picked (held together while they are)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class RedisServer:
    """One ``redis-server`` child process on a loopback port; stop and start it at will."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        assert REDIS_SERVER is not None
        self.process = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        import redis

        deadline = time.monotonic() + 10.0
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2, socket_timeout=0.5)
        try:
            while True:
                try:
                    if client.ping():
                        return
                except redis.RedisError:
                    if self.process.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"redis-server did not start on {self.port}") from None
                    time.sleep(0.02)  # waiting for a real server to listen, not a timing test
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The server stalled (SIGSTOP): connections are accepted by the kernel, nothing
        answers, every command waits its client's timeout. Resumed (SIGCONT) on exit."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            self.process.send_signal(signal.SIGCONT)

    def client(self, **kwargs: Any) -> Any:
        import redis

        options: dict[str, Any] = {"socket_timeout": 2.0, "socket_connect_timeout": 2.0}
        return redis.Redis(port=self.port, **(options | kwargs))


@contextlib.contextmanager
def running_server(port: int | None = None) -> Iterator[RedisServer]:
    server = RedisServer(port)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def unique_prefix() -> str:
    return f"test:{uuid.uuid4().hex[:12]}:"


class SyncOfAsync:
    """An asyncio store driven from sync code on one event loop (for the contract suite)."""

    def __init__(self, store: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._store = store
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if inspect.iscoroutinefunction(attr):

            def call(*args: Any, **kwargs: Any) -> Any:
                return self._loop.run_until_complete(attr(*args, **kwargs))

            return call
        return attr


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``predicate`` (for real processes and servers, which take real time)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


# -- a real Redis Cluster on loopback ---------------------------------------------------------

REDIS_CLI = shutil.which("redis-cli")
# CI sets LOOPFUSE_REQUIRE_REDIS=1: there a missing redis-server or redis-cli is a failure,
# not a skip.
REDIS_REQUIRED = os.environ.get("LOOPFUSE_REQUIRE_REDIS") == "1"
# How long a master may be unreachable before its replica takes over, in ms (Redis'
# default is 15,000; the tests use 1,000 to fail over within a test's time).
CLUSTER_NODE_TIMEOUT_MS = 1000


def cluster_or_skip() -> Any:
    """The ``redis`` module, or a skip that says what is missing to run a cluster (a
    failure under ``LOOPFUSE_REQUIRE_REDIS=1``)."""
    missing = [name for name, path in (("redis-server", REDIS_SERVER), ("redis-cli", REDIS_CLI))
               if path is None]  # fmt: skip
    if missing:
        reason = f"{' and '.join(missing)} not installed (Debian: apt-get install redis-server)"
        if REDIS_REQUIRED:
            pytest.fail(f"LOOPFUSE_REQUIRE_REDIS=1 but {reason}", pytrace=False)
        pytest.skip(reason, allow_module_level=True)
    return pytest.importorskip("redis", reason="the redis package is not installed")


class RedisClusterNodes:
    """Six ``redis-server --cluster-enabled yes`` on free loopback ports (3 masters, 3
    replicas), in a private temporary folder; every node binds 127.0.0.1 only."""

    SIZE = 6

    def __init__(self, folder: str, *, full_coverage: bool = True) -> None:
        self.folder = folder
        # yes (Redis' default): while a master is down and not replaced, every node
        # answers CLUSTERDOWN; no: the other masters serve their slots meanwhile.
        self.full_coverage = full_coverage
        # All held at once while they are picked, so no two of them are the same port.
        picked = free_ports(2 * self.SIZE)
        self.ports = picked[: self.SIZE]
        # The cluster bus would be port + 10,000 (past 65,535 for a high free port).
        self.bus_ports = dict(zip(self.ports, picked[self.SIZE :], strict=True))
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        self.original_masters: list[int] = []
        self.restarts = 0  # nodes started again on fresh ports (a port taken meanwhile)

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.ports[0]}"

    def start_node(self, port: int) -> None:
        assert REDIS_SERVER is not None
        self.processes[port] = subprocess.Popen(
            [
                REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1",
                "--cluster-enabled", "yes",
                "--cluster-config-file", f"nodes-{port}.conf",
                "--cluster-port", str(self.bus_ports[port]),
                "--cluster-node-timeout", str(CLUSTER_NODE_TIMEOUT_MS),
                "--dir", self.folder, "--save", "", "--appendonly", "no",
                "--daemonize", "no", "--protected-mode", "yes",
                "--logfile", f"node-{port}.log",
                # a replica syncs at once (not 5 s later): until then it cannot take over
                "--repl-diskless-sync-delay", "0",
                "--cluster-require-full-coverage", "yes" if self.full_coverage else "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def _all_answer(self) -> bool:
        """Whether every node answers PING. A node whose port was taken meanwhile by
        another process (a port is free when picked, not when the server binds it)
        exited: it is started again on a fresh pair of ports, before any node is joined."""
        for index, port in enumerate(self.ports):
            process = self.processes[port]
            if process.poll() is not None and self.restarts < 3:
                self.restarts += 1
                fresh, bus = free_ports(2)
                del self.processes[port], self.bus_ports[port]
                self.ports[index] = fresh
                self.bus_ports[fresh] = bus
                self.start_node(fresh)
        return all(self.cli(p, "ping").strip() == "PONG" for p in self.ports)

    def cli(self, port: int, *args: str, timeout: float = 30.0) -> str:
        assert REDIS_CLI is not None
        done = subprocess.run(
            [REDIS_CLI, "-h", "127.0.0.1", "-p", str(port), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return done.stdout

    def start(self) -> None:
        for port in self.ports:
            self.start_node(port)
        if not wait_until(self._all_answer):
            raise RuntimeError("the cluster's redis-servers did not start")
        created = self.cli(
            self.ports[0],
            "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports),
            "--cluster-replicas", "1", "--cluster-yes",
            timeout=60.0,
        )  # fmt: skip
        if "[OK] All 16384 slots covered" not in created:
            raise RuntimeError(f"redis-cli --cluster create failed:\n{created}")
        if not self.wait_ok(self.ports, 30.0):
            raise RuntimeError("the cluster did not reach cluster_state:ok")
        if not wait_until(self.replicas_synced, 30.0):
            raise RuntimeError("the cluster's replicas did not sync with their masters")

    def replicas_synced(self) -> bool:
        """Every replica has loaded its master's data (only then can it take over)."""
        infos = [self.cli(port, "info", "replication", timeout=5.0) for port in self.ports]
        replicas = [info for info in infos if "role:slave" in info]
        return len(replicas) == self.SIZE // 2 and all(
            "master_link_status:up" in info for info in replicas
        )

    def state_ok(self, port: int) -> bool:
        return "cluster_state:ok" in self.cli(port, "cluster", "info", timeout=5.0)

    def wait_ok(self, ports: list[int], timeout: float) -> bool:
        return wait_until(lambda: all(self.state_ok(p) for p in ports), timeout)

    def masters(self) -> list[int]:
        """The ports of the masters that are up, as the first live node sees them."""
        live = [p for p in self.ports if self.processes[p].poll() is None]
        lines = self.cli(live[0], "cluster", "nodes", timeout=5.0).splitlines()
        return sorted(
            int(line.split()[1].split("@")[0].rsplit(":", 1)[1])
            for line in lines
            if "master" in line.split()[2] and "fail" not in line.split()[2]
        )

    def kill(self, port: int) -> None:
        """The node dies at once (SIGKILL), as a crashed host."""
        process = self.processes[port]
        process.kill()
        process.wait()

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def running_cluster(*, full_coverage: bool = True) -> Iterator[RedisClusterNodes]:
    """A fresh cluster in a private temporary folder, stopped and removed on exit."""
    with tempfile.TemporaryDirectory(prefix="loopfuse-cluster-") as folder:
        nodes = RedisClusterNodes(folder, full_coverage=full_coverage)
        try:
            nodes.start()
            yield nodes
        finally:
            nodes.stop()


# -- Redis Sentinel on loopback -----------------------------------------------------------------

SENTINEL_MASTER = "loopfuse-test"


class SentinelSetup:
    """A master, its replica and one sentinel (quorum 1) on free loopback ports, in a
    private temporary folder; the sentinel fails over 1 s after the master stops
    answering."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.master = free_port()
        self.replica = free_port()
        self.sentinel = free_port()
        self.processes: dict[int, subprocess.Popen[bytes]] = {}

    def _spawn(self, port: int, *args: str) -> None:
        assert REDIS_SERVER is not None
        self.processes[port] = subprocess.Popen(
            [REDIS_SERVER, *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def cli(self, port: int, *args: str) -> str:
        assert REDIS_CLI is not None
        return subprocess.run(
            [REDIS_CLI, "-h", "127.0.0.1", "-p", str(port), *args],
            capture_output=True, text=True, timeout=10.0, check=False,
        ).stdout  # fmt: skip

    def start(self) -> None:
        common = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", self.folder,
                  "--repl-diskless-sync-delay", "0"]  # fmt: skip
        self._spawn(self.master, "--port", str(self.master), *common)
        self._spawn(
            self.replica, "--port", str(self.replica), *common,
            "--replicaof", "127.0.0.1", str(self.master),
        )  # fmt: skip
        config = os.path.join(self.folder, "sentinel.conf")
        with open(config, "x", encoding="ascii") as file:  # a fresh private folder
            file.write(
                f"port {self.sentinel}\nbind 127.0.0.1\ndir {self.folder}\n"
                f"sentinel monitor {SENTINEL_MASTER} 127.0.0.1 {self.master} 1\n"
                f"sentinel down-after-milliseconds {SENTINEL_MASTER} 1000\n"
                f"sentinel failover-timeout {SENTINEL_MASTER} 5000\n"
            )
        self._spawn(self.sentinel, config, "--sentinel")
        synced = wait_until(
            lambda: (
                "master_link_status:up" in self.cli(self.replica, "info", "replication")
                and "slaves=1" in self.cli(self.sentinel, "info", "sentinel")
            ),
            30.0,
        )
        if not synced:
            raise RuntimeError("the sentinel setup did not come up")

    def current_master(self) -> int:
        reply = self.cli(self.sentinel, "sentinel", "get-master-addr-by-name", SENTINEL_MASTER)
        return int(reply.split()[1])

    def kill(self, port: int) -> None:
        self.processes[port].kill()
        self.processes[port].wait()

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def running_sentinel() -> Iterator[SentinelSetup]:
    with tempfile.TemporaryDirectory(prefix="loopfuse-sentinel-") as folder:
        setup = SentinelSetup(folder)
        try:
            setup.start()
            yield setup
        finally:
            setup.stop()
