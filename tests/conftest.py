"""Shared test helpers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from loopfuse.intent import _json

THREAD_GUARD = 30.0  # seconds; only reached when something is broken (a hang)


class FakeClock:
    """A clock the test moves by hand: windows and TTLs are tested without sleeping."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@contextmanager
def json_backend(name: str) -> Iterator[None]:
    """Run the block with ``loopfuse.intent`` parsing through ``name`` ("json"/"orjson")."""
    original = _json.json_backend()
    _json._set_backend(name)
    try:
        yield
    finally:
        _json._set_backend(original)


def run_threads(n: int, target: Callable[[int], Any]) -> tuple[list[Any], list[BaseException]]:
    """Run ``target(i)`` on ``n`` threads; return every result and every error raised."""
    results: list[Any] = [None] * n
    errors: list[BaseException] = []
    lock = threading.Lock()

    def body(i: int) -> None:
        try:
            results[i] = target(i)
        except BaseException as error:
            with lock:
                errors.append(error)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(THREAD_GUARD)
        assert not thread.is_alive()
    return results, errors
