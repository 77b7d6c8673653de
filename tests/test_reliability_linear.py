"""No request costs more than linear time: every request-path entry point, on the bodies
shaped to cost the most per byte (``adversarial_bodies.py``), stays within a multiple of
``json.loads`` of the same body plus a constant (issue 22; docs/reliability.md states the
bound as measured).

Before, one turn of K parallel calls cost O(K²) (each result looked its call up by
scanning the turn: a 2.1 MB Ollama body took 71 s), and a tool answer of N blanks
O(N²) in the answer patterns. The timed checks are ``slow`` (the default run never
times anything); the default run keeps an untimed twin that runs every entry point on
every shape, and the exact, untimed checks of what made the cost quadratic:
``test_intent_linking.py`` counts the comparisons linking makes,
``test_detector_answers_linear.py`` checks that the patterns read only the windows.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from hypothesis import strategies as st

from adversarial_bodies import SHAPES, Shape
from conftest import run_property
from loopfuse import Guard, LoopBreaker, LoopDetector, RequestContext, RequestKey, intent, scan
from loopfuse.cli.config import Settings
from loopfuse.cli.decisions import scan_source
from loopfuse.cli.readers import read_bytes
from loopfuse.guard import memory as guard_memory
from loopfuse.guard import request as guard_request
from loopfuse.guard.guard import MODES

httpx2 = pytest.importorskip("httpx2", reason="httpx2 is not installed")

from loopfuse.integrations.httpx import GuardTransport  # noqa: E402

PATH = "/v1/chat/completions"

# The bound, as docs/reliability.md states it: seconds <= MULTIPLE * json.loads + FIXED,
# a few times what was measured (worst 15x and 580x on the loaded 2-core machine).
# Walking the intent costs a few json.loads; the detector normalises each answer it must
# compare (its 5 KB head and tail windows at most, ~0.2 us per character) where json.loads
# reads the same characters at ~1 ns each: answer-heavy bodies cost it more per byte.
INTENT_MULTIPLE = 50
DETECTOR_MULTIPLE = 1500
FIXED = 0.5


def send(body: bytes) -> object:
    """One request through a GuardTransport (default options) to a MockTransport."""
    upstream = httpx2.MockTransport(lambda request: httpx2.Response(200, json={}))
    with httpx2.Client(transport=GuardTransport(upstream)) as client:
        return client.post(
            "https://llm.example" + PATH, content=body, headers={"content-type": "application/json"}
        )


ENTRY_POINTS: dict[str, tuple[Callable[[bytes], object], int]] = {
    "intent.fingerprint": (lambda body: intent.fingerprint(body, PATH), INTENT_MULTIPLE),
    "LoopBreaker.check_request": (
        lambda body: LoopBreaker(clock=lambda: 0.0).check_request("s", body, PATH),
        INTENT_MULTIPLE,
    ),
    "RequestKey.from_request": (
        lambda body: RequestKey.from_request(body, PATH),
        INTENT_MULTIPLE,
    ),
    "loopfuse.scan": (scan, DETECTOR_MULTIPLE),
    "LoopDetector.scan": (lambda body: LoopDetector().scan(body), DETECTOR_MULTIPLE),
    "Guard.check": (lambda body: Guard().check(body, RequestContext(path=PATH)), DETECTOR_MULTIPLE),
    "GuardTransport request": (send, DETECTOR_MULTIPLE),
}


def best_of(fn: Callable[[], object], runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def check_cost(shape: Shape, size: int) -> None:
    body = shape(size, "baseline")
    loads = best_of(lambda: json.loads(body), 5)
    for name, (entry, multiple) in ENTRY_POINTS.items():
        # Each run on a body salted apart, so that no cache of a run serves the next.
        salted = [shape(size, f"{name}{run}") for run in range(2)]
        gc.collect()
        seconds = min(best_of(partial(entry, one), 1) for one in salted)
        bound = multiple * loads + FIXED
        assert seconds <= bound, (name, len(body), seconds, loads, seconds / loads)


def run_everywhere(shape: Shape, size: int) -> None:
    """Every entry point on the shape: none raises, and they agree on the fingerprint."""
    body = shape(size, "x")
    fingerprint = intent.fingerprint(body, PATH)
    assert LoopBreaker(clock=lambda: 0.0).check_request("s", body, PATH).fingerprint == (
        fingerprint
    )
    assert RequestKey.from_request(body, PATH) is not None
    for name, (entry, _) in ENTRY_POINTS.items():
        assert entry(body) is not None, name


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_entry_point_takes_every_adversarial_shape(shape: str) -> None:
    run_everywhere(SHAPES[shape], 20_000)


def size_of(shape: str) -> int:
    """The issue's figures for parallel calls (2.1 MB Ollama, 3.1 MB OpenAI); 0.5 MB
    for the rest, where a quadratic answer pattern took minutes."""
    return 2_000_000 if shape.startswith("parallel") else 500_000


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_entry_point_costs_a_multiple_of_json_loads(shape: str) -> None:
    check_cost(SHAPES[shape], size_of(shape))


@pytest.mark.slow
def test_every_entry_point_costs_a_multiple_of_json_loads_at_any_size() -> None:
    run_property(
        12,
        check_cost,
        st.sampled_from([SHAPES[name] for name in sorted(SHAPES)]),
        st.integers(min_value=20_000, max_value=600_000),
    )


# --- tool calls written as text (issue 30, finding 2) ---------------------------------
# smolagents' calls written as the str() of a Python list went through Python's parser,
# which reads f-strings in quadratic time (3.11) and every text in full before refusing
# it: Guard.check took 0.27 s on 56 KB, 3.2 s on 224 KB, 14.7 s on 448 KB. The reader
# of our own is linear for every shape of text; the check is by scaling (four times the
# text may cost at most eight times as long: a quadratic reader costs sixteen).


def _written(opening: str, unit: str, closing: str) -> Shape:
    """One assistant turn writing ``Calling tools:`` then ``opening``, ``unit`` as many
    times as the size holds, and ``closing``."""

    def body(size: int, salt: str) -> bytes:
        units = unit * max(1, size // len(unit))
        text = f"Calling tools:\n{opening}{units}{closing}"  # the salt: in the task
        messages = [
            {"role": "user", "content": f"New task:\n{salt}"},
            {"role": "assistant", "content": text},
            {"role": "user", "content": "Observation:\nsame"},
        ]
        return json.dumps({"model": "m", "messages": messages}).encode()

    return body


def _written_laps(size: int, salt: str) -> bytes:
    call = (
        "Calling tools:\n[{'id': 'call_1', 'type': 'function', 'function': "
        "{'name': 'lookup', 'arguments': {'word': '<salt>', 'n': [1, 2.5, (3,)]}}}]"
    ).replace("<salt>", salt)
    messages = [{"role": "user", "content": "New task:\nLook it up."}]
    for _ in range(max(1, size // (len(call) + 60))):
        messages.append({"role": "assistant", "content": call})
        messages.append({"role": "user", "content": "Observation:\nsame"})
    return json.dumps({"model": "m", "messages": messages}).encode()


WRITTEN_SHAPES: dict[str, Shape] = {
    "f-string": _written("[f'", "{1}", "']"),  # quadratic in Python 3.11's parser
    "dense ints": _written("[", "1,", "0]"),
    "dense floats": _written("[", "1.5,", "0]"),
    "nested lists": _written("[", "[1, ()],", "0]"),
    "dicts": _written("[", "{'id': 'c', 'function': {'name': 'f', 'arguments': {'a': -1}}},", "]"),
    "escapes": _written("['", "\\n\\x41", "']"),
    "unterminated": _written("['", "\\\\", ""),
    "deep then junk": _written("[" * 200, "(-not lambda: a.b if 1 else 2**", ""),
    "laps of calls": _written_laps,
}


@pytest.mark.parametrize("shape", sorted(WRITTEN_SHAPES))
def test_every_entry_point_reads_written_calls(shape: str) -> None:
    run_everywhere(WRITTEN_SHAPES[shape], 20_000)


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(WRITTEN_SHAPES))
def test_every_entry_point_reads_written_calls_in_linear_time(shape: str) -> None:
    make = WRITTEN_SHAPES[shape]
    for name, (entry, _) in ENTRY_POINTS.items():
        small, large = (make(size, f"{name}{size}") for size in (100_000, 400_000))
        gc.collect()
        costs = [best_of(partial(entry, body), 2) for body in (small, large)]
        assert costs[1] <= 8 * costs[0] + 0.05, (name, costs)


# --- scan in every mode (issue 30, finding 14) -----------------------------------------
# In warn mode each refused request of a looping transcript read the call ids of the
# whole body again (to tell its conversation from another's): 4,000 turns (2.9 MB) took
# 24.3 s, 0.8 s with --mode refuse. A body's ids are now read once, for all its cuts.


def looping_transcript(turns: int) -> bytes:
    """An agent that lists the same folder ``turns`` times (fresh call ids each time)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug"}]
    for n in range(turns):
        call = {"id": f"call_{n}", "type": "function", "function": {"name": "bash"}}
        call["function"]["arguments"] = json.dumps({"command": "ls /repo"})
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{n}", "content": "a.py b.py"})
    return json.dumps({"model": "m", "messages": messages}).encode()


def scan_in_mode(data: bytes, mode: str) -> object:
    settings = Settings()
    settings = dataclasses.replace(settings, guard=dataclasses.replace(settings.guard, mode=mode))
    return scan_source(read_bytes("loop.json", data), settings)


@pytest.mark.parametrize("mode", MODES)
def test_scan_reads_a_bodys_call_ids_once_in_every_mode(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Untimed: how often the ids are read, whatever the number of refused cuts."""
    reads = [0]
    for module in (guard_request, guard_memory):
        read = getattr(module, "call_ids", None)
        if read is not None:

            def counted(value: object, read: Callable[[object], object] = read) -> object:
                reads[0] += 1
                return read(value)

            monkeypatch.setattr(module, "call_ids", counted)
    scan_in_mode(looping_transcript(200), mode)
    assert reads[0] <= 2, reads[0]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_scan_is_linear_in_the_turns_in_every_mode(mode: str) -> None:
    small, large = looping_transcript(500), looping_transcript(2_000)
    costs = [best_of(partial(scan_in_mode, data, mode), 2) for data in (small, large)]
    assert costs[1] <= 8 * costs[0] + 0.1, costs  # before, in warn mode: 0.49 s, 6.4 s
