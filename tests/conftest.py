"""Shared test helpers."""

from __future__ import annotations

import pytest


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
