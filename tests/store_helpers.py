"""Helpers of the store tests: a real ``redis-server`` per test session, and adapters.

The tests start their own server on a free loopback port (no persistence) and stop it
at the end; they skip, saying why, when ``redis-server`` or the ``redis`` package is
missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

REDIS_SERVER = shutil.which("redis-server")


def redis_or_skip() -> Any:
    """The ``redis`` module, or a skip that says what is missing."""
    if REDIS_SERVER is None:
        pytest.skip(
            "redis-server is not installed (Debian: apt-get install redis-server)",
            allow_module_level=True,
        )
    return pytest.importorskip("redis", reason="the redis package is not installed")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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
