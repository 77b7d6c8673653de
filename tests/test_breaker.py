"""LoopBreaker: the semantics users of the original rely on, and what we added."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

import pytest

from conftest import FakeClock
from loopfuse import ConfigError, InvalidInputError, LoopBreaker, LoopBroken, LoopfuseError
from loopfuse.intent import fingerprint


def test_breaks_the_n_plus_first_identical_request(clock: FakeClock) -> None:
    breaker = LoopBreaker(window=30, max_repeats=5, clock=clock)
    decisions = [breaker.check("s", 7) for _ in range(7)]
    assert [d.allowed for d in decisions] == [True] * 5 + [False] * 2
    assert [d.repeats for d in decisions] == [1, 2, 3, 4, 5, 6, 7]
    assert decisions[-1].fingerprint == 7
    assert decisions[-1].session_id == "s"


def test_window_edge_is_exclusive(clock: FakeClock) -> None:
    breaker = LoopBreaker(window=30, max_repeats=1, clock=clock)
    assert breaker.check("s", 1).allowed
    clock.advance(29.999)
    assert not breaker.check("s", 1).allowed  # still live: now - seen < window
    clock.advance(0.001)
    # The first sample is now exactly `window` old and dropped; the second is still live.
    assert breaker.check("s", 1).repeats == 2


def test_refused_requests_are_recorded_so_hammering_stays_refused(clock: FakeClock) -> None:
    breaker = LoopBreaker(window=10, max_repeats=2, clock=clock)
    for _ in range(2):
        assert breaker.check("s", 1).allowed
    for _ in range(20):  # one request every 3 s: never a whole quiet window
        clock.advance(3)
        assert not breaker.check("s", 1).allowed
    clock.advance(10)  # a whole window of silence
    assert breaker.check("s", 1).allowed


def test_different_fingerprints_are_counted_apart(clock: FakeClock) -> None:
    breaker = LoopBreaker(max_repeats=1, clock=clock)
    assert breaker.check("s", 1).allowed
    assert breaker.check("s", 2).allowed
    assert not breaker.check("s", 1).allowed


def test_sessions_are_isolated(clock: FakeClock) -> None:
    breaker = LoopBreaker(max_repeats=1, clock=clock)
    assert breaker.check("a", 1).allowed
    assert breaker.check("b", 1).allowed
    assert not breaker.check("a", 1).allowed


def test_samples_per_session_are_capped_oldest_first(clock: FakeClock) -> None:
    breaker = LoopBreaker(max_repeats=3, max_samples_per_session=4, clock=clock)
    assert breaker.check("s", 1).repeats == 1
    for fp in (2, 3, 4, 5):  # pushes the sample of fingerprint 1 out
        breaker.check("s", fp)
    assert breaker.check("s", 1).repeats == 1
    assert LoopBreaker().max_samples_per_session == 256


def test_disabled_breaker_allows_and_records_nothing(clock: FakeClock) -> None:
    breaker = LoopBreaker(max_repeats=0, clock=clock)
    assert not breaker.enabled
    for _ in range(10):
        decision = breaker.check("s", 1)
        assert decision.allowed
        assert decision.repeats == 0
    assert breaker.check_request("s", b"{}").allowed
    assert breaker.tracked_sessions == 0


def test_idle_sessions_are_forgotten(clock: FakeClock) -> None:
    breaker = LoopBreaker(window=10, clock=clock)
    for i in range(100):
        breaker.check(f"s{i}", 1)
    assert breaker.tracked_sessions == 100
    clock.advance(5)
    breaker.check("fresh", 1)
    clock.advance(5)  # the first 100 are idle now; "fresh" is not
    assert breaker.tracked_sessions == 1


def test_session_cap_evicts_least_recently_used(clock: FakeClock) -> None:
    breaker = LoopBreaker(window=3600, max_repeats=1, max_sessions=3, clock=clock)
    for name in ("a", "b", "c"):
        breaker.check(name, 1)
    breaker.check("a", 2)  # a is now the most recently used
    breaker.check("d", 1)  # evicts b
    assert breaker.tracked_sessions == 3
    assert breaker.check("b", 1).repeats == 1  # b was forgotten (and now evicts c)
    assert breaker.check("a", 1).repeats == 2  # a kept its history


def test_fresh_session_id_per_request_cannot_grow_memory(clock: FakeClock) -> None:
    breaker = LoopBreaker(window=3600, max_sessions=50, clock=clock)
    for i in range(10_000):
        breaker.check(f"attacker-{i}", i)
    assert breaker.tracked_sessions == 50


def test_reset(clock: FakeClock) -> None:
    breaker = LoopBreaker(max_repeats=1, clock=clock)
    breaker.check("a", 1)
    breaker.check("b", 1)
    breaker.reset("a")
    assert breaker.check("a", 1).allowed
    assert not breaker.check("b", 1).allowed
    breaker.reset("never-seen")  # no error
    breaker.reset()
    assert breaker.tracked_sessions == 0


def test_window_as_timedelta(clock: FakeClock) -> None:
    breaker = LoopBreaker(window=timedelta(minutes=1), max_repeats=1, clock=clock)
    assert breaker.window == 60.0
    breaker.check("s", 1)
    clock.advance(59)
    assert not breaker.check("s", 1).allowed


def test_check_request_uses_the_intent(clock: FakeClock) -> None:
    breaker = LoopBreaker(max_repeats=1, clock=clock)
    first = b'{"model": "m", "temperature": 0, "messages": [{"role": "user", "content": "x"}]}'
    again = b'{"messages": [{"content": "x", "role": "user"}], "temperature": 1, "model": "m"}'
    other = b'{"model": "m", "messages": [{"role": "user", "content": "y"}]}'
    d1 = breaker.check_request("s", first, path="/v1/chat/completions")
    assert d1.allowed
    assert d1.fingerprint == fingerprint(first, "/v1/chat/completions")
    assert breaker.check_request("s", other, path="/v1/chat/completions").allowed
    assert not breaker.check_request("s", again, path="/v1/chat/completions").allowed
    assert breaker.check_request("s", again, path="/v1/other").allowed  # the path counts


@pytest.mark.parametrize(
    "body", [b"\xff\xfe", b"{not json", "[" * 10_000, b"", b"\x00" * 1000, "\ud800"]
)
def test_check_request_tolerates_any_bytes(clock: FakeClock, body: bytes | str) -> None:
    breaker = LoopBreaker(max_repeats=1, clock=clock)
    assert breaker.check_request("s", body).allowed
    assert not breaker.check_request("s", body).allowed  # raw-bytes fallback still counts


def test_enforce_raises_loop_broken_with_details(clock: FakeClock) -> None:
    breaker = LoopBreaker(window=30, max_repeats=2, clock=clock)
    breaker.enforce("s", 99)
    breaker.enforce("s", 99)
    with pytest.raises(LoopBroken) as caught:
        breaker.enforce("s", 99)
    error = caught.value
    assert isinstance(error, LoopfuseError)
    assert (error.session_id, error.repeats, error.fingerprint) == ("s", 3, 99)
    assert "3 times within 30s (limit 2)" in str(error)
    assert "change the request" in str(error)
    breaker.enforce_request("t", b"x")
    breaker.enforce_request("t", b"x")
    with pytest.raises(LoopBroken):
        breaker.enforce_request("t", b"x")


def test_fails_open_and_says_so(clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    breaker = LoopBreaker(max_repeats=1, clock=clock)
    poisoned = {"messages": [{"role": "user", "content": {1, 2}}]}  # a set: not JSON
    with caplog.at_level(logging.WARNING, logger="loopfuse"):
        first = breaker.check_request("s", poisoned)
        second = breaker.check_request("s", poisoned)
    assert first.allowed
    assert second.allowed
    assert first.error is not None
    assert "failed" in first.message
    assert breaker.internal_errors == 2
    assert len([r for r in caplog.records if r.name == "loopfuse"]) == 2


def test_fail_closed_refuses(clock: FakeClock) -> None:
    breaker = LoopBreaker(max_repeats=1, clock=clock, fail_closed=True)
    decision = breaker.check_request("s", {"messages": [{"content": object()}]})
    assert not decision.allowed
    assert decision.error is not None
    with pytest.raises(LoopBroken):
        breaker.enforce_request("s", {"messages": [{"content": object()}]})


def test_clock_failure_fails_open() -> None:
    def broken_clock() -> float:
        raise RuntimeError("clock source gone")

    breaker = LoopBreaker(clock=broken_clock)
    decision = breaker.check_request("s", b'{"input": "x"}')
    assert decision.allowed
    assert "clock source gone" in (decision.error or "")


@pytest.mark.parametrize(
    ("session_id", "fp"), [(None, 1), (1, 1), (b"s", 1), ("s", "1"), ("s", 1.0), ("s", True)]
)
def test_wrong_argument_types_raise_typed_errors(session_id: object, fp: object) -> None:
    breaker = LoopBreaker()
    with pytest.raises(InvalidInputError):
        breaker.check(session_id, fp)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"window": 0},
        {"window": -1},
        {"window": float("nan")},
        {"window": float("inf")},
        {"window": "30"},
        {"window": timedelta(0)},
        {"max_repeats": -1},
        {"max_repeats": 2.5},
        {"max_repeats": True},
        {"max_samples_per_session": 0},
        {"max_sessions": 0},
        {"clock": 5},
    ],
)
def test_bad_configuration(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as caught:
        LoopBreaker(**kwargs)  # type: ignore[arg-type]
    assert isinstance(caught.value, ValueError)


class TestFromEnv:
    def test_defaults(self) -> None:
        breaker = LoopBreaker.from_env({})
        assert (breaker.window, breaker.max_repeats) == (30.0, 5)
        assert LoopBreaker.from_env({"LOOP_WINDOW_SECS": " ", "LOOP_MAX_REPEATS": ""}).window == 30

    def test_values(self) -> None:
        breaker = LoopBreaker.from_env({"LOOP_WINDOW_SECS": "60", "LOOP_MAX_REPEATS": "0"})
        assert (breaker.window, breaker.max_repeats, breaker.enabled) == (60.0, 0, False)

    def test_reads_os_environ_and_passes_keywords(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("LOOP_MAX_REPEATS", "9")
        breaker = LoopBreaker.from_env(max_sessions=7)
        assert (breaker.max_repeats, breaker.max_sessions) == (9, 7)

    @pytest.mark.parametrize(
        ("name", "value"),
        [
            ("LOOP_WINDOW_SECS", "thirty"),
            ("LOOP_WINDOW_SECS", "-5"),
            ("LOOP_WINDOW_SECS", "0"),
            ("LOOP_WINDOW_SECS", "1.5"),
            ("LOOP_MAX_REPEATS", "-1"),
            ("LOOP_MAX_REPEATS", "five"),
            ("LOOP_MAX_REPEATS", "5x"),
        ],
    )
    def test_bad_values_name_the_variable(self, name: str, value: str) -> None:
        with pytest.raises(ConfigError, match=name):
            LoopBreaker.from_env({name: value})


def test_thread_safe_counts_match_a_serial_model() -> None:
    breaker = LoopBreaker(window=3600, max_repeats=10**9, clock=lambda: 0.0)
    threads = 8
    per_thread = 2000
    barrier = threading.Barrier(threads)
    allowed = [0] * threads

    def hammer(index: int) -> None:
        barrier.wait()
        for i in range(per_thread):
            if breaker.check(f"s{i % 4}", i % 3).allowed:
                allowed[index] += 1

    workers = [threading.Thread(target=hammer, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert sum(allowed) == threads * per_thread
    # 256 samples kept per session: the live count for each fingerprint is exact.
    total = sum(breaker.check(f"s{s}", 99).repeats for s in range(4))
    assert total == 4


def test_repr() -> None:
    assert repr(LoopBreaker(window=5, max_repeats=2)) == (
        "LoopBreaker(window=5, max_repeats=2, max_sessions=10000)"
    )
