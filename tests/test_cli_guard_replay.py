"""`loopfuse scan` reports exactly what a deployed guard would have done.

The scan walks a transcript once (one detector replay, each request named to the
breaker and the cache by the part of the intent it holds). Here the same runs are
replayed the slow, obvious way: every request body built in full and handed to
``Guard.check``, the cache then used as an integration uses it. Both must agree on every
request, in every dialect, on random conversations (junk included) and logs.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conversation_bodies import conversations
from loopfuse import (
    BreakerSettings,
    CacheSettings,
    Guard,
    GuardDecision,
    GuardSettings,
    RequestContext,
    intent,
)
from loopfuse.cli.config import Settings, guard_of
from loopfuse.cli.decisions import FakeClock, scan_source
from loopfuse.cli.readers import read_bytes
from loopfuse.detector import DetectorSettings

REFUSE = GuardSettings(mode="refuse")
CONFIGS = {
    "all guards, strict": Settings(
        breaker=BreakerSettings(max_repeats=1),
        detector=DetectorSettings(max_strikes=1),
        cache=CacheSettings(default_ttl=5.0),
        guard=REFUSE,
    ),
    "cache only": Settings(guards=("dedup",), cache=CacheSettings(default_ttl=7.0), guard=REFUSE),
    "breaker only": Settings(
        guards=("breaker",), breaker=BreakerSettings(max_repeats=1, window=5.0), guard=REFUSE
    ),
    "defaults": Settings(guard=REFUSE),
}

Outcome = tuple[str, str | None, int]


def serve(guard: Guard, decision: GuardDecision, position: int, stored: bool = True) -> str:
    """What an integration does after ``check``: the cache, when planned."""
    if decision.action != "forward" or guard.cache is None or decision.cache_key is None:
        return decision.action
    if decision.cache == "use" and guard.cache.get(decision.cache_key) is not None:
        return "hit"
    if stored:
        guard.cache.insert(decision.cache_key, position)
    return "forward"


def reference_transcript(body: dict[str, Any], is_request: bool, config: Settings) -> list[Outcome]:
    """Every request body built in full and checked by ``Guard.check``."""
    found = intent.conversation(body)
    assert found is not None
    items = body[found.key]
    cuts = [turn.start for turn in found.turns] + ([len(items)] if is_request else [])
    clock = FakeClock()
    guard = guard_of(config, clock)
    out: list[Outcome] = []
    for number, cut in enumerate(cuts, start=1):
        clock.now = (number - 1) * config.turn_seconds
        decision = guard.check({**body, found.key: items[:cut]}, RequestContext(path=config.path))
        action = serve(guard, decision, number)
        out.append((action, decision.kind if action == "refuse" else None, decision.count))
    return out


def scanned(data: dict[str, Any], config: Settings, log: bool = False) -> list[Outcome] | None:
    """What ``scan_source`` decided on each request (``None``: nothing acted)."""
    raw = json.dumps(data).encode() if not log else data["lines"]
    source = read_bytes("run.json", raw, log=log)
    result, problems = scan_source(source, replace(config, format="json"))
    assert problems == []
    if result.clean:
        return None
    return [
        (step.action, step.kind if step.action == "refuse" else None, step.count)
        for step in result.steps
    ]


def comparable(outcomes: list[Outcome]) -> list[Outcome] | None:
    """A run nothing acted on keeps no steps: compare it as ``None``."""
    if all(action in ("forward", "unchecked") for action, _, _ in outcomes):
        return None
    return scan_comparable(outcomes)


def scan_comparable(outcomes: list[Outcome] | None) -> list[Outcome] | None:
    if outcomes is None:
        return None
    # A count is the guard's own: the cache's "count" is the scan's (times asked).
    return [(a, kind, count if a == "refuse" else 0) for a, kind, count in outcomes]


@settings(max_examples=150, deadline=None)
@given(conversations, st.booleans(), st.sampled_from(sorted(CONFIGS)))
def test_a_transcript_gets_the_decisions_of_guard_check_on_every_prefix(
    body: dict[str, Any], is_request: bool, config: str
) -> None:
    found = intent.conversation(body)
    if found is None or (not found.turns and not is_request):
        return
    data = body if is_request else {"outcome": "failed", **body, "messages": body.get("messages")}
    if not is_request and "messages" not in body:
        return  # only {"messages": [...]} files are trajectories
    expected = comparable(reference_transcript(body, is_request, CONFIGS[config]))
    assert scan_comparable(scanned(data, CONFIGS[config])) == expected


def loop_body(dialect: str, laps: int) -> dict[str, Any]:
    """A conversation that repeats one failing call ``laps`` times."""
    if dialect == "openai_responses":
        items: list[dict[str, Any]] = [{"role": "user", "content": "fix it"}]
        for i in range(laps):
            items += [
                {"type": "reasoning", "encrypted_content": f"r{i}"},
                {"type": "function_call", "call_id": f"c{i}", "name": "bash", "arguments": "{}"},
                {"type": "function_call_output", "call_id": f"c{i}", "output": "error: no"},
                {"type": "reasoning", "encrypted_content": f"s{i}"},  # a reasoning-only turn
            ]
        return {"model": "m", "input": items}
    if dialect == "gemini":
        contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "fix it"}]}]
        for _ in range(laps):
            contents.append({"role": "model", "parts": [{"functionCall": {"name": "bash"}}]})
            response = {"functionResponse": {"name": "bash", "response": {"out": "error: no"}}}
            contents.append({"role": "user", "parts": [response]})
        return {"contents": contents}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix it"}]
    for i in range(laps):
        call = {"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {}}
        messages.append({"role": "assistant", "content": [call]})
        result = {"type": "tool_result", "tool_use_id": f"t{i}", "content": "error: no"}
        messages.append({"role": "user", "content": [result]})
    return {"model": "claude", "max_tokens": 100, "system": "s", "messages": messages}


@pytest.mark.parametrize("dialect", ["anthropic", "gemini", "openai_responses"])
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_a_looping_run_in_every_dialect(dialect: str, config: str) -> None:
    body = loop_body(dialect, 9)
    expected = comparable(reference_transcript(body, True, CONFIGS[config]))
    assert scan_comparable(scanned(body, CONFIGS[config])) == expected
    if config != "breaker only" and config != "cache only":
        assert expected is not None  # the detector (or the breaker) acted
    if dialect == "openai_responses" and config == "breaker only":
        # A reasoning-only response adds nothing: the next request is the same one.
        assert expected is not None
        assert ("refuse", "repeated_request", 2) in expected


# --- logs -------------------------------------------------------------------------------

POOL = [
    {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    {"model": "m", "temperature": 0, "messages": [{"role": "user", "content": "again"}]},
    {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
    {"model": "m", "user": "u-1", "messages": [{"role": "user", "content": "hi"}]},
    {"model": "m", "temperature": 0.7, "messages": [{"role": "user", "content": "hi"}]},
    loop_body("anthropic", 4),
]

log_line = st.fixed_dictionaries(
    {"body": st.sampled_from(range(len(POOL)))},
    optional={
        "session": st.sampled_from(["a", "b"]),
        "time": st.floats(0, 40, allow_nan=False),
        "status": st.sampled_from([200, 429, 500, 400]),
    },
)


def reference_log(lines: list[dict[str, Any]], config: Settings) -> list[Outcome]:
    clock = FakeClock()
    guard = guard_of(config, clock)
    out: list[Outcome] = []
    now: float | None = None
    for number, line in enumerate(lines, start=1):
        time = line.get("time")
        if now is None:
            now = 0.0 if time is None else time
        else:
            now = now + config.turn_seconds if time is None else max(now, time)
        clock.now = now
        decision = guard.check(POOL[line["body"]], RequestContext(session_id=line.get("session")))
        status = line.get("status")
        action = serve(guard, decision, number, stored=status in (None, 200))
        if action == "forward" and status is not None:
            guard.outcome(decision, status)
        out.append((action, decision.kind if action == "refuse" else None, decision.count))
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(log_line, min_size=1, max_size=25), st.sampled_from(sorted(CONFIGS)))
def test_a_log_gets_the_decisions_of_guard_check_on_every_line(
    lines: list[dict[str, Any]], config: str
) -> None:
    raw = "".join(json.dumps({**line, "body": POOL[line["body"]]}) + "\n" for line in lines)
    expected = comparable(reference_log(lines, CONFIGS[config]))
    got = scanned({"lines": raw.encode()}, CONFIGS[config], log=True)
    assert scan_comparable(got) == expected


# --- the corners of the argument ----------------------------------------------------------


def test_a_system_prompt_after_a_reasoning_only_response_is_another_request() -> None:
    # The two first requests hold no message, but the second holds the developer
    # prompt the first did not: another intent, so the breaker must not refuse it.
    items = [
        {"type": "reasoning", "encrypted_content": "a"},
        {"role": "developer", "content": "be brief"},
        {"type": "reasoning", "encrypted_content": "b"},
        {"role": "user", "content": "hi"},
        {"type": "reasoning", "encrypted_content": "c"},
    ]
    body = {"model": "m", "input": items}
    config = CONFIGS["breaker only"]
    expected = comparable(reference_transcript(body, True, config))
    assert expected is not None  # the last two requests are the same one
    assert [action for action, _, _ in expected] == ["forward", "forward", "forward", "refuse"]
    assert scan_comparable(scanned(body, config)) == expected


def test_a_turn_that_starts_between_two_tool_results() -> None:
    # A reasoning item between the two outputs of one batch starts a turn there: the
    # request cut at it holds only the first result. The scan must judge that request
    # on its own, and keep both results for the requests after it: the second answer
    # moves every lap, which is progress (a result lost would be unknown: no progress).
    items: list[dict[str, Any]] = [{"role": "user", "content": "fix it"}]
    for i in range(5):
        items += [
            {"type": "function_call", "call_id": f"a{i}", "name": "bash", "arguments": "{}"},
            {"type": "function_call", "call_id": f"b{i}", "name": "ls", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"a{i}", "output": "error: no"},
            {"type": "reasoning", "encrypted_content": f"r{i}"},
            {"type": "function_call_output", "call_id": f"b{i}", "output": f"moved {i}"},
        ]
    body = {"model": "m", "input": items}
    for config in (CONFIGS["defaults"], CONFIGS["all guards, strict"]):
        expected = comparable(reference_transcript(body, True, config))
        assert scan_comparable(scanned(body, config)) == expected
    assert comparable(reference_transcript(body, True, CONFIGS["defaults"])) is None
