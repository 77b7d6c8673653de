"""Shared test helpers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from loopfuse.intent import _json

THREAD_GUARD = 30.0  # seconds; only reached when something is broken (a hang)
TOO_SLOW = [HealthCheck.too_slow]  # big generated bodies are slow to make, not a bug


def fast_and_full(fast: Any, full: Any) -> list[Any]:
    """The two sizes of a heavy test (examples of a property, requests of a soak, bytes
    of a body): ``fast`` runs by default; ``full`` is marked ``slow``, which the default
    run deselects and ``.ci/run`` runs (``pytest -m slow``)."""
    return [
        pytest.param(fast, id=f"fast-{fast}"),
        pytest.param(full, id=f"full-{full}", marks=pytest.mark.slow),
    ]


def run_property(
    examples: int, check: Callable[..., None], *strategies: Any, **options: Any
) -> None:
    """Run ``check`` as a hypothesis property of ``strategies`` with ``examples`` examples
    (the other settings as ``options``; no deadline unless given): a property written
    once runs at both sizes of :func:`fast_and_full`."""
    options.setdefault("deadline", None)
    settings(max_examples=examples, **options)(given(*strategies)(check))()


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


def laps(lap: Callable[[], None], most: int = 20) -> None:
    """Run an agent's laps until loopfuse stops it (its error propagates)."""
    for _ in range(most):
        lap()
    raise AssertionError(f"the agent was never stopped in {most} laps")


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
