"""Memory and abuse: a flood of fresh session ids or cache keys cannot grow memory past
the documented bound, and crafted key collisions never serve one request's answer to
another.

Bounds asserted here are the documented ones (docs/reliability.md, SECURITY.md); the
measured figures they cover are in the docs. Costs are measured with tracemalloc
(bytes Python allocated and still holds), resident memory with /proc/self/statm, time
with a fake clock: nothing here waits.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import threading
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import fast_and_full
from loopfuse import (
    DedupCache,
    Guard,
    LoopBreaker,
    RequestContext,
    RequestKey,
    intent,
)
from loopfuse.dedup import fnv
from loopfuse.detector import answers, editors, tools
from loopfuse.detector.answers import looks_like_error, normalize_answer
from loopfuse.detector.editors import editor_call, mentions_file
from loopfuse.detector.shell import ShellClassifier
from loopfuse.detector.tools import ToolClassifier, name_words
from loopfuse.harness import reader_for
from loopfuse.harness.generic import DEFAULT_COSTLY_TOOLS, DEFAULT_OBSERVATION_TOOLS

MiB = 1024 * 1024
GUARD = 30.0

# The documented bounds (measured: 1,190 B, 158 B and 376 B on CPython 3.11, 64-bit).
SESSION_BYTES = 1_600  # one session with one sample, its id's own str not included
SAMPLE_BYTES = 200  # each further sample (time, fingerprint) in a session's window
ENTRY_BYTES = 480  # one cache entry, its value not included
RESIDENT_GROWTH = 32 * MiB  # resident memory a million fresh ids may add once warmed up

# A real FNV-1a 64 collision between two printable strings, found with a
# distinguished-point (Pollard rho) search in 42 s on one core of the development
# machine: anyone can make FNV keys collide. Equal FNV state after the two blocks
# means any common suffix keeps the collision.
COLLIDING = ("ZeBy0peECuI", "XD3ym_8xz-J")


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def resident_bytes() -> int | None:
    """Resident set size of this process, where /proc tells it (Linux)."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


def retained_bytes(build: Callable[[], object]) -> int:
    """Bytes still allocated after ``build()`` runs, held by what it returns."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = build()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del kept
    return after - before


# --- LoopBreaker: a flood of fresh session ids ----------------------------------------

FINGERPRINTS = [
    intent.fingerprint(f'{{"model":"m","messages":[{{"role":"user","content":"{i}"}}]}}'.encode())
    for i in range(16)
]


@pytest.mark.parametrize("requests", fast_and_full(100_000, 1_000_000))
def test_fresh_session_ids_stay_within_max_sessions(requests: int) -> None:
    """A million requests (a tenth by default), each from a session id never seen
    before, inside one window (so nothing idles out and least-recently-used eviction
    does all the work)."""
    clock = FakeClock()
    breaker = LoopBreaker(window=30, clock=clock)
    cap = breaker.max_sessions
    assert cap == 10_000  # the default
    for i in range(cap):  # warm up: every structure at its steady-state size
        breaker.check(f"warm-up-{i}", FINGERPRINTS[i % 16])
    gc.collect()
    resident_before = resident_bytes()
    for i in range(requests):
        clock.now += 1e-5  # 10 s at most: well inside the 30 s window
        breaker.check(f"attacker-{i}", FINGERPRINTS[i & 15])
        if i % 10_000 == 0:
            assert breaker.tracked_sessions <= cap
    assert breaker.tracked_sessions == cap
    gc.collect()
    resident_after = resident_bytes()
    if resident_before is not None and resident_after is not None:
        assert resident_after - resident_before <= RESIDENT_GROWTH
    # The survivors are the most recent ids; every one of them was counted once.
    last = requests - 1
    assert breaker.check(f"attacker-{last}", FINGERPRINTS[last & 15]).repeats == 2
    assert breaker.check("attacker-0", FINGERPRINTS[0]).repeats == 1  # long evicted


def test_fresh_session_ids_through_check_request() -> None:
    """The request path keeps the same bound (fewer requests: each one is parsed)."""
    clock = FakeClock()
    breaker = LoopBreaker(window=30, max_sessions=1_000, clock=clock)
    body = b'{"model":"m","messages":[{"role":"user","content":"same question"}]}'
    for i in range(30_000):
        clock.now += 1e-4
        decision = breaker.check_request(f"tenant-a:{i}", body, "/v1/chat/completions")
        assert decision.allowed  # a fresh id has no history: the price of client-chosen ids
    assert breaker.tracked_sessions == 1_000


def test_idle_sessions_are_forgotten_when_the_window_passes() -> None:
    clock = FakeClock()
    breaker = LoopBreaker(window=1.0, max_sessions=10_000, clock=clock)
    per_window = 1_000 + 1  # 1,000 requests per window, one more for float rounding
    for i in range(200_000):
        clock.now += 0.001
        breaker.check(f"fresh-{i}", FINGERPRINTS[i & 15])
        if i % 20_000 == 0:
            assert breaker.tracked_sessions <= per_window
    assert 900 <= breaker.tracked_sessions <= per_window


def test_a_flood_of_fresh_ids_evicts_other_sessions_history() -> None:
    """Documented in SECURITY.md: whoever can send session ids to a breaker can flush
    other sessions out of it. A looping session stays caught while fewer than
    ``max_sessions`` other ids arrive between its requests; past that it is forgotten."""
    clock = FakeClock()
    breaker = LoopBreaker(window=30, max_repeats=2, max_sessions=100, clock=clock)
    loop = FINGERPRINTS[0]
    for _ in range(3):
        breaker.check("victim", loop)
        for i in range(98):  # fewer than max_sessions others between two of its requests
            breaker.check(f"noise-{clock.now}-{i}", FINGERPRINTS[1])
        clock.now += 0.01
    assert not breaker.check("victim", loop).allowed  # still caught
    for i in range(100):  # max_sessions fresh ids: the victim's window is evicted
        breaker.check(f"flood-{i}", FINGERPRINTS[1])
    assert breaker.check("victim", loop).repeats == 1


def test_per_session_and_per_sample_cost() -> None:
    count = 20_000
    ids = [f"session-{i:08d}" for i in range(count)]  # made outside: the ids are the caller's
    base = 2**63 + 12_345  # fingerprints are u64: most need a 36-byte int

    def sessions() -> LoopBreaker:
        breaker = LoopBreaker(max_sessions=count, clock=FakeClock())
        for i in range(count):
            breaker.check(ids[i], base + i)
        return breaker

    def samples() -> LoopBreaker:
        clock = FakeClock()
        breaker = LoopBreaker(max_samples_per_session=count + 1, clock=clock)
        for i in range(count):
            clock.now += 1e-6
            breaker.check("one session", base + i)  # all different: a count entry each
        return breaker

    per_session = retained_bytes(sessions) / count
    per_sample = retained_bytes(samples) / count
    assert 200 < per_session <= SESSION_BYTES
    assert 50 < per_sample <= SAMPLE_BYTES


@pytest.mark.parametrize("sessions", fast_and_full(50, 200))
def test_worst_case_breaker_memory_is_sessions_times_samples(sessions: int) -> None:
    """Every session full of distinct samples: the documented worst case, which is
    ``max_sessions * (SESSION_BYTES + (max_samples_per_session - 1) * SAMPLE_BYTES)``."""
    samples = 256
    ids = [f"s{i}" for i in range(sessions)]

    def fill() -> LoopBreaker:
        clock = FakeClock()
        breaker = LoopBreaker(max_sessions=sessions, clock=clock)
        for s in range(sessions):
            for i in range(samples + 50):  # 50 more than are kept
                clock.now += 1e-7
                breaker.check(ids[s], 2**63 + s * 1_000 + i)
        return breaker

    total = retained_bytes(fill)
    assert total <= sessions * (SESSION_BYTES + (samples - 1) * SAMPLE_BYTES)
    assert total >= sessions * samples * 50  # it really is full


# --- DedupCache: a flood of fresh keys ------------------------------------------------


def test_per_entry_cost() -> None:
    count = 20_000

    def entries() -> DedupCache[None]:
        cache: DedupCache[None] = DedupCache(capacity=count, clock=FakeClock())
        for i in range(count):
            cache.insert(RequestKey.from_str(f"question {i}"), None)
        return cache

    per_entry = retained_bytes(entries) / count
    assert 100 < per_entry <= ENTRY_BYTES


@pytest.mark.parametrize("flood", fast_and_full(40_000, 200_000))
def test_a_flood_of_fresh_keys_stays_within_capacity(flood: int) -> None:
    clock = FakeClock()
    cache: DedupCache[bytes] = DedupCache(capacity=10_000, clock=clock)
    answer = b"x" * 100
    for i in range(10_000):
        cache.insert(RequestKey.from_str(f"warm-up {i}"), answer)
    gc.collect()
    resident_before = resident_bytes()
    for i in range(flood):
        clock.now += 1e-4  # 20 s at most: inside the 60 s TTL, so LRU eviction does the work
        key = RequestKey.from_bytes(i.to_bytes(8, "little"))
        assert cache.get_or_compute(key, lambda: answer) is answer
    gc.collect()
    resident_after = resident_bytes()
    assert len(cache) == 10_000
    assert cache.stats.evictions == flood
    if resident_before is not None and resident_after is not None:
        assert resident_after - resident_before <= RESIDENT_GROWTH


# --- cache poisoning: crafted collisions ----------------------------------------------


def test_the_crafted_fnv_collision_is_real() -> None:
    a, b = (text.encode() for text in COLLIDING)
    assert a != b
    assert fnv.fnv1a64(a) == fnv.fnv1a64(b) == 0x0A75DCBB9BB503A6
    assert fnv.fnv1a64_py(a) == fnv.fnv1a64_py(b)
    assert fnv.fnv1a64(a + b" any suffix") == fnv.fnv1a64(b + b" any suffix")


def assert_never_cross_served(first: RequestKey, second: RequestKey) -> None:
    """Two different contents under one 64-bit value never get each other's answer."""
    assert first == second  # the same 64-bit value: one slot in the cache
    assert first.digest != second.digest
    cache: DedupCache[str] = DedupCache(capacity=16, clock=FakeClock())
    cache.insert(first, "answer for the first")
    assert cache.get(second) is None
    assert second not in cache
    assert cache.peek(second) is None
    assert cache.stats.collisions == 1
    assert cache.get_or_compute(second, lambda: "answer for the second") == "answer for the second"
    assert cache.get(first) is None  # one slot: replaced, and never the other's answer
    assert cache.get(second) == "answer for the second"
    assert cache.get_or_compute(first, lambda: "answer for the first") == "answer for the first"
    assert cache.get(second) is None


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=40))
def test_fnv_collisions_with_any_suffix_never_serve_each_others_answer(suffix: str) -> None:
    first, second = (RequestKey.from_str(block + suffix) for block in COLLIDING)
    assert_never_cross_served(first, second)
    raw = [(block + suffix).encode("utf-8", "surrogatepass") for block in COLLIDING]
    assert_never_cross_served(RequestKey.from_bytes(raw[0]), RequestKey.from_bytes(raw[1]))


def test_colliding_conversations_never_serve_each_others_answer() -> None:
    # The collision block as the role: FNV runs over the role first.
    first, second = (RequestKey.from_messages([(block, "What is Rust?")]) for block in COLLIDING)
    assert_never_cross_served(first, second)
    # from_messages also collides by construction on its own separators.
    assert_never_cross_served(
        RequestKey.from_messages([("u", "x\x01y\x00z")]),
        RequestKey.from_messages([("u", "x"), ("y", "z")]),
    )
    # Equal values by design across kinds never vouch for each other either.
    assert_never_cross_served(
        RequestKey.from_messages([("user", "hi")]), RequestKey.from_str("user\x00hi\x01")
    )


def test_request_keys_sharing_a_value_never_serve_each_others_answer() -> None:
    """``from_request`` values come from BLAKE3, so no collision can be crafted; a key
    rebuilt from its parts (``RequestKey(value, digest)``) shows what one would do."""
    rust = RequestKey.from_request(
        {"model": "m", "messages": [{"role": "user", "content": "Rust?"}]}
    )
    rm = RequestKey.from_request(
        {"model": "m", "messages": [{"role": "user", "content": "rm -rf"}]}
    )
    assert rust.digest is not None
    assert rm.digest is not None
    forged = RequestKey(rust.value, rm.digest)  # rm's content under rust's value
    assert_never_cross_served(rust, forged)


def test_bare_keys_are_never_served_to_content_keys() -> None:
    key = RequestKey.from_str("question")
    bare = RequestKey(key.value)
    cache: DedupCache[str] = DedupCache(capacity=4, clock=FakeClock())
    cache.insert(bare, "stored under the bare number")
    assert cache.get(key) is None  # content cannot be proven to match a bare entry
    cache.insert(key, "answer")
    assert cache.get(bare) == "answer"  # documented: a bare probe trusts the number


def test_colliding_keys_never_share_a_computation() -> None:
    """If they shared one, each factory would wait for the other: a deadlock."""
    first, second = (RequestKey.from_str(block + " same question") for block in COLLIDING)
    cache: DedupCache[str] = DedupCache(capacity=4, clock=FakeClock())
    both_running = threading.Barrier(2)

    def compute(key: RequestKey, answer: str) -> str:
        def factory() -> str:
            both_running.wait(GUARD)  # both factories run at once, or this times out
            return answer

        return cache.get_or_compute(key, factory, timeout=GUARD)

    results: dict[str, str] = {}
    threads = [
        threading.Thread(target=lambda: results.update(a=compute(first, "A")), daemon=True),
        threading.Thread(target=lambda: results.update(b=compute(second, "B")), daemon=True),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(GUARD)
        assert not thread.is_alive()
    assert results == {"a": "A", "b": "B"}

    async def main() -> list[str]:
        cache_: DedupCache[str] = DedupCache(capacity=4, clock=FakeClock())
        started = [asyncio.Event(), asyncio.Event()]

        def factory(me: int, answer: str) -> Callable[[], Any]:
            async def run() -> str:
                started[me].set()
                await started[1 - me].wait()
                return answer

            return run

        answers = await asyncio.wait_for(
            asyncio.gather(
                cache_.aget_or_compute(first, factory(0, "A")),
                cache_.aget_or_compute(second, factory(1, "B")),
            ),
            GUARD,
        )
        return list(answers)

    assert asyncio.run(main()) == ["A", "B"]


@pytest.mark.parametrize("backend", ["c", "python"])
def test_collision_protection_does_not_depend_on_the_fnv_backend(backend: str) -> None:
    if backend == "c" and not fnv.c_extension_available():
        pytest.skip("the C extension is not built")
    previous = fnv.backend()
    fnv.set_backend(backend)  # type: ignore[arg-type]
    try:
        first, second = (RequestKey.from_str(block) for block in COLLIDING)
        assert_never_cross_served(first, second)
    finally:
        fnv.set_backend(previous)


# --- the detector's caches: no client text kept whole (issue 30, finding 3) ------------
# Whole tool answers and tool names used to be cache keys: 600 requests with 1 MB answers
# held 492 MiB, 1,000 with 250 KB tool names 717 MiB. Keys are now the text when short
# and a digest otherwise (loopfuse.detector._textcache); SECURITY.md states the bound.

DETECTOR_CACHES_BYTES = 40 * MiB  # documented: every detector cache full of the worst texts
FLOOD_BYTES = 4 * MiB  # what a flood of huge answers or names may leave behind at most
ASTRAL = "\U0001f600"  # 4 bytes a character: the widest str there is


def _one_call(name: str, answer: str, n: int) -> bytes:
    call = {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": "{}"}}
    messages = [
        {"role": "user", "content": f"go {n}"},
        {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{n}", "content": answer},
    ]
    return json.dumps({"model": "m", "messages": messages}).encode()


def _guard_all(bodies: Callable[[int], bytes], requests: int) -> Callable[[], None]:
    guard = Guard()
    guard.check(bodies(-1), RequestContext(path="/v1/chat/completions"))  # warm up

    def run() -> None:
        for n in range(requests):
            guard.check(bodies(n), RequestContext(path="/v1/chat/completions"))

    return run


@pytest.mark.parametrize(
    ("what", "bodies", "requests"),
    [
        ("1 MB answers", lambda n: _one_call("bash", f"{n} " + "x" * 1_000_000, n), 24),
        ("250 KB tool names", lambda n: _one_call(f"t{n}_" + "a" * 250_000, "ok", n), 24),
        # 10,000 words each: kept whole, 1.2 MB a name (15 MB at 250 KB)
        ("20 KB camelCase names", lambda n: _one_call(f"t{n}" + "aB" * 10_000, "ok", n), 12),
    ],
)
def test_a_flood_of_huge_answers_or_tool_names_is_not_kept(
    what: str, bodies: Callable[[int], bytes], requests: int
) -> None:
    held = retained_bytes(_guard_all(bodies, requests))  # before: 24, 18 and 14 MB
    assert held < FLOOD_BYTES, (what, held)


def test_every_detector_cache_full_of_the_worst_texts_stays_within_the_bound() -> None:
    """Each cache filled past its size with the longest texts it keeps as keys (and the
    longest values), in the widest characters: the documented bound holds."""
    for cache in (answers._ERROR_WINDOWS, answers._FRAMEWORK_ERRORS, answers._NORMAL_FORMS):
        cache.clear()
    editors._TOOL_KINDS.clear()
    editors._MENTIONS.clear()
    tools._cached_name_words.cache_clear()
    every = reader_for("auto")  # the harnesses' knowledge, one per process
    every._cached_read.cache_clear()  # type: ignore[union-attr]
    for table in (every._declared, every._kinds, every._conventions):  # type: ignore[union-attr]
        table.clear()

    def fill() -> object:
        classifier = ToolClassifier(DEFAULT_OBSERVATION_TOOLS, DEFAULT_COSTLY_TOOLS)
        shell = ShellClassifier()
        for n in range(520):  # answer caches: 512 and 256 entries
            for length in (2_000, 16_000):
                answer = f"{n} {length}" + ASTRAL * length
                looks_like_error(answer)
                normalize_answer(answer)
                every.read(f"{n}_" + ASTRAL * 250, answer)  # type: ignore[union-attr]
        for n in range(4_200):  # name caches: 4,096 entries
            name = f"{n}_" + ASTRAL * 250
            every.kind(name, {})  # type: ignore[union-attr]
            name_words(name)
            editor_call(name, {})
            classifier.is_observation(name)
            classifier.is_observation(name + "_" + ASTRAL * 250)  # past 256: its digest
            shell.is_read_only(f"cat {n} " + "é" * 240)
            mentions_file(f"{n}" + ASTRAL * 250, f"/{n}/" + ASTRAL * 250)
        return classifier, shell

    held = retained_bytes(fill)
    assert held < DETECTOR_CACHES_BYTES, held
