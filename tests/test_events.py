"""loopfuse.events: the event type, the never-raising sink, and the guards that emit."""

from __future__ import annotations

import asyncio
import dataclasses
import logging

import pytest

from conftest import FakeClock
from loopfuse import ConfigError, DedupCache, GuardEvent, LoopBreaker, RequestKey, log_events
from loopfuse.events import ACTIONS, EventSink
from loopfuse.stores import StoreUnavailableError


def test_an_event_is_frozen_and_its_actions_are_known() -> None:
    event = GuardEvent("loop_refused", "detector", "s", "repeat", 4, ("bash",), "stop", "httpx")
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.count = 5  # type: ignore[misc]
    assert "loop_refused" in ACTIONS
    assert "cache_bypass" in ACTIONS
    assert len(ACTIONS) == 11


def test_a_sink_counts_what_its_callback_raises_and_logs_it_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[GuardEvent] = []

    def flaky(event: GuardEvent) -> None:
        calls.append(event)
        if len(calls) % 2:
            raise ValueError("backend down")

    sink = EventSink(flaky)
    with caplog.at_level(logging.WARNING, logger="loopfuse"):
        for _ in range(5):
            sink.emit(GuardEvent("cache_hit", "cache"))
    assert len(calls) == 5
    assert sink.errors == 3
    assert len(caplog.records) == 1
    with pytest.raises(ConfigError):
        EventSink("not callable")  # type: ignore[arg-type]


def test_the_breaker_reports_trips_and_failures(clock: FakeClock) -> None:
    events: list[GuardEvent] = []
    breaker = LoopBreaker(max_repeats=1, clock=clock, on_event=events.append)
    breaker.check("s", 7)
    assert events == []
    breaker.check("s", 7)
    [tripped] = events
    assert (tripped.action, tripped.guard, tripped.session, tripped.count) == (
        "breaker_tripped", "breaker", "s", 2,
    )  # fmt: skip
    assert tripped.signature == f"{7:016x}"
    assert tripped.reason is not None
    assert tripped.reason.startswith("Loop detected: this exact request has been sent 2 times")

    class Down:  # a shared store whose backend is gone (and that fails closed)
        def record(self, *args: object) -> int:
            raise StoreUnavailableError("redis is gone")

        def reset(self, session_id: str | None = None) -> None:
            pass

        def tracked_sessions(self, now: float, window: float) -> int:
            return 0

    shared = LoopBreaker(store=Down(), on_event=events.append, clock=clock)
    assert not shared.check("s", 7).allowed  # a store that fails closes the breaker
    assert events[-1].action == "fail_closed"
    broken = LoopBreaker(clock=lambda: float("nan"), on_event=events.append)
    assert broken.check_request("s", b'{"input": "x"}').allowed
    assert (events[-1].action, events[-1].kind) == ("fail_open", "guard_failed")


def test_the_cache_reports_hits_misses_and_failures() -> None:
    events: list[GuardEvent] = []
    cache: DedupCache[str] = DedupCache(capacity=4, on_event=events.append)
    key = RequestKey.from_str("q")
    cache.get(key)
    cache.get_or_compute(key, lambda: "a")
    cache.get_or_compute(key, lambda: "b")
    cache.get(key)

    async def twice() -> None:
        async def answer() -> str:
            return "c"

        other = RequestKey.from_str("other")
        await cache.aget_or_compute(other, answer)
        await cache.aget_or_compute(other, answer)

    asyncio.run(twice())
    assert [e.action for e in events] == [
        "cache_miss", "cache_miss", "cache_hit", "cache_hit", "cache_miss", "cache_hit",
    ]  # fmt: skip
    junk = {"model": "m", "messages": [{"role": "user", "content": object()}]}
    assert cache.get_or_compute_request(junk, lambda: "uncached") == "uncached"
    assert events[-1].action == "fail_open"
    assert events[-1].guard == "cache"


def test_log_events_writes_one_line_per_event(caplog: pytest.LogCaptureFixture) -> None:
    callback = log_events()
    with caplog.at_level(logging.INFO, logger="loopfuse.events"):
        callback(GuardEvent("loop_noted", "detector", "run-1", "repeat", 4, ("bash", "ls")))
    [record] = caplog.records
    assert record.getMessage() == (
        "loopfuse loop_noted guard=detector session=run-1 kind=repeat count=4 tools=bash,ls "
        "integration=None"
    )
