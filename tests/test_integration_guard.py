"""The guard every integration shares: its decisions, its public API, its notes.
No third party."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bash_requests import bash_request as _steps
from conftest import FakeClock
from loopfuse import (
    ConfigError,
    DedupCache,
    Guard,
    GuardEvent,
    InvalidInputError,
    Loop,
    LoopBreaker,
    PreparedRequest,
    RequestContext,
    RequestKey,
    intent,
)
from loopfuse.detector import LoopDetector
from loopfuse.guard import DEFAULT
from loopfuse.guard.guard import build_guard
from loopfuse.integrations import MissingExtraError
from loopfuse.integrations._extras import install_command, require
from loopfuse.intent.anthropic import ANTHROPIC
from loopfuse.intent.openai_chat import OPENAI_CHAT

CHAT = "/v1/chat/completions"


def chat(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": list(messages), **extra}


def stuck_turns(n: int) -> list[dict[str, Any]]:
    """``n`` identical failing tool calls, as an OpenAI Chat history."""
    turns: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]
    for i in range(n):
        call = {"id": f"c{i}", "type": "function"}
        call["function"] = {"name": "bash", "arguments": '{"command": "make"}'}
        turns.append({"role": "assistant", "content": None, "tool_calls": [call]})
        turns.append({"role": "tool", "tool_call_id": f"c{i}", "content": "make: *** Error 2"})
    return turns


def test_default_guard_has_a_breaker_and_the_loop_detector_and_no_cache() -> None:
    from loopfuse.detector import LoopDetector

    guard = Guard()
    assert isinstance(guard.breaker, LoopBreaker)
    assert isinstance(guard.detector, LoopDetector)
    assert guard.cache is None
    assert repr(DEFAULT) == "DEFAULT"


def test_the_detector_refuses_a_conversation_that_ends_in_a_loop() -> None:
    guard = Guard(breaker=None)
    for n in range(1, 10):
        decision = guard.check(
            json.dumps(chat(*stuck_turns(n))).encode(), RequestContext(path=CHAT)
        )
        if decision.refused:
            break
    else:
        pytest.fail("never refused")
    assert n > 1
    assert decision.kind == "repeat"
    assert decision.count == n
    assert decision.signature is not None
    assert decision.signature.startswith("bash:")
    assert decision.api is OPENAI_CHAT
    assert decision.message is not None
    assert "`make`" not in decision.message
    assert "`bash`" in decision.message
    # A user turn after the loop ends it: the same history plus a new question passes.
    later = chat(*stuck_turns(n), {"role": "user", "content": "Try cmake instead."})
    assert guard.check(later, RequestContext(path=CHAT)).action == "forward"


def test_the_breaker_counts_per_session_and_can_be_skipped(clock: FakeClock) -> None:
    guard = Guard(
        breaker=LoopBreaker(window=10, max_repeats=2, clock=clock), detector=None, mode="refuse"
    )
    body = chat({"role": "user", "content": "hi"})
    decisions = [guard.check(body, RequestContext(session_id="a")) for _ in range(3)]
    assert [d.action for d in decisions] == ["forward", "forward", "refuse"]
    assert decisions[2].count == 3
    assert decisions[2].signature == f"{intent.fingerprint(body):016x}"
    assert guard.check(body, RequestContext(session_id="b")).action == "forward"
    assert (
        guard.check(body, RequestContext(session_id=None)).action == "forward"
    )  # no session: no breaker
    clock.advance(10)
    assert guard.check(body, RequestContext(session_id="a")).action == "forward"


def test_note_mode_returns_the_noted_body_and_leaves_the_original_alone() -> None:
    guard = Guard(breaker=LoopBreaker(max_repeats=1, clock=lambda: 0.0), mode="note")
    body = chat({"role": "user", "content": "hi"})
    snapshot = json.dumps(body)
    guard.check(body, RequestContext(session_id="s"))
    decision = guard.check(body, RequestContext(session_id="s"))
    assert decision.action == "note"
    assert decision.kind == "repeated_request"
    assert isinstance(decision.value, dict)
    assert decision.value["messages"][-1]["content"].startswith("hi\n\n[loopfuse] Loop detected")
    assert json.dumps(body) == snapshot


def test_the_cache_key_keeps_streams_endpoints_and_parameters_apart() -> None:
    guard = Guard(
        breaker=None, detector=None, cache=DedupCache(), cache_streams=True, cache_sampled=True
    )
    body = chat({"role": "user", "content": "hi"})

    def key(value: dict[str, Any], scope: str = "https://a:") -> RequestKey | None:
        return guard.check(value, RequestContext(path=CHAT, scope=scope)).cache_key

    assert key(body) is not None
    assert key(body) == key({**body, "user": "u-1"})  # not a parameter of the answer
    assert key(body) != key({**body, "stream": True})  # SSE is another answer
    assert key(body) != key(body, scope="https://b:")
    assert key(body) != key({**body, "temperature": 0.5})
    no_streams = Guard(breaker=None, detector=None, cache=DedupCache())
    assert no_streams.check({**body, "stream": True}).cache_key is None
    assert Guard(breaker=None, detector=None).check(body).cache_key is None


@pytest.mark.parametrize(
    "body",
    [
        None,
        42,
        "text",
        b"\x00\xff",
        [],
        {"messages": None},
        {"a": float("nan")},
        {"nested": [[[[[[]]]]]] * 3},
        {1: "non-str key"},
        {"messages": [{"role": "user", "content": object()}]},
    ],
)
def test_junk_is_forwarded_or_fails_open(body: Any, caplog: pytest.LogCaptureFixture) -> None:
    guard = Guard(breaker=LoopBreaker(max_repeats=0), cache=DedupCache())
    with caplog.at_level(logging.WARNING, logger="loopfuse"):
        decision = guard.check(body, RequestContext(path=CHAT))
    assert decision.action == "forward"
    assert guard.internal_errors == len(caplog.records)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(JSON_VALUES)
def test_any_json_value_gives_a_decision(value: Any) -> None:
    guard = Guard(cache=DedupCache(), fail_closed=True)
    for body in (value, {"messages": value}, {"model": "m", "messages": [value]}, {"input": value}):
        decision = guard.check(body, RequestContext(path=CHAT))
        assert decision.action in ("forward", "refuse")
        assert decision.kind != "guard_failed", decision.error


def test_a_failing_guard_fails_closed_when_asked(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def scan(self, body: object) -> Any:
            raise RuntimeError("boom")

        scan_intent = scan  # the guard reads the parsed intent

    body = chat({"role": "user", "content": "hi"})
    with caplog.at_level(logging.WARNING, logger="loopfuse"):
        opened = Guard(detector=Broken()).check(body, RequestContext(path="/v1/messages"))
        closed = Guard(detector=Broken(), fail_closed=True).check(
            body, RequestContext(path="/v1/messages")
        )
    assert opened.action == "forward"
    assert opened.error == "RuntimeError('boom')"
    assert closed.refused
    assert closed.kind == "guard_failed"
    assert closed.api is ANTHROPIC
    assert len(caplog.records) == 2


def test_configuration_errors() -> None:
    with pytest.raises(ConfigError):
        Guard(mode="silent")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        Guard(cache={})  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        build_guard("guard", {})  # type: ignore[arg-type]
    assert build_guard(None, {"breaker": None}).breaker is None
    with pytest.raises(MissingExtraError, match=re.escape(install_command("langchain"))):
        require("no_such_module_anywhere", "nor.this.one", extra="langchain", what="X")


# --- the public API: one request context, the two-step decision, an event for each ------

DECISIONS = ("request_forwarded", "loop_noted", "loop_refused", "fail_closed")


def ask(text: str, **extra: Any) -> dict[str, Any]:
    return chat({"role": "user", "content": text}, **extra)


class BrokenScanner:
    def scan(self, body: object) -> Any:
        raise RuntimeError("boom")

    scan_intent = scan


def test_check_is_prepare_then_decide() -> None:
    context = RequestContext(path=CHAT, session_id="s")
    one = Guard(breaker=LoopBreaker(max_repeats=2, clock=lambda: 0.0))
    two = Guard(breaker=LoopBreaker(max_repeats=2, clock=lambda: 0.0))
    for n in range(1, 6):
        body = chat(*stuck_turns(n))
        checked = one.check(body, context)
        prepared = two.prepare(body, context)
        assert isinstance(prepared, PreparedRequest)
        assert prepared.context is context
        decided = two.decide(prepared)
        assert (checked.action, checked.loop, checked.session) == (
            decided.action,
            decided.loop,
            decided.session,
        )
    assert Guard().prepare(b'{"not": "an LLM request"}') is None


def test_adecide_is_decide_for_asyncio() -> None:
    guard = Guard(
        breaker=LoopBreaker(max_repeats=1, clock=lambda: 0.0), detector=None, mode="refuse"
    )
    prepared = guard.prepare(ask("again?"), RequestContext(session_id="s"))
    assert prepared is not None

    async def twice() -> list[str]:
        return [(await guard.adecide(prepared)).action for _ in range(2)]

    assert asyncio.run(twice()) == ["forward", "refuse"]


def test_a_context_that_is_not_one_is_a_misuse_not_a_failure() -> None:
    guard = Guard()
    for wrong in ("/v1/chat/completions", {"path": CHAT}):
        with pytest.raises(InvalidInputError, match="context must be a RequestContext"):
            guard.check(ask("hi"), wrong)  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match="context must be a RequestContext"):
            guard.prepare(ask("hi"), wrong)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        guard.check(ask("hi"), path=CHAT)  # type: ignore[call-arg]
    assert guard.internal_errors == 0


def test_a_request_named_by_its_identity_is_counted_and_cached_under_it() -> None:
    guard = Guard(
        breaker=LoopBreaker(max_repeats=1, clock=lambda: 0.0),
        detector=None,
        cache=DedupCache(),
        mode="refuse",
    )
    context = RequestContext(path=CHAT, session_id="s")
    first = guard.prepare(ask("one"), context)
    other = guard.prepare(ask("another question"), context)
    assert first is not None
    assert other is not None
    assert first.fingerprint != other.fingerprint
    assert guard.decide(first.named(7)).action == "forward"
    decision = guard.decide(other.named(7))  # another body, the same name: a repeat
    assert (decision.action, decision.kind, decision.signature) == (
        "refuse",
        "repeated_request",
        f"{7:016x}",
    )
    keyed = guard.decide(first.named(8)).cache_key
    assert keyed is not None
    assert guard.decide(other.named(9)).cache_key != keyed
    unscoped = RequestContext(path=CHAT)  # no session: the breaker does not count it
    renamed = guard.prepare(ask("another question"), unscoped)
    assert renamed is not None
    assert guard.decide(renamed.named(8)).cache_key == keyed  # the cache knows it by name
    assert first.named(8).fingerprint == 8
    assert first.fingerprint != 8  # named is a copy
    with pytest.raises(InvalidInputError):
        first.named(-1)


def test_the_decision_holds_the_loop_found() -> None:
    breaker = LoopBreaker(max_repeats=1, clock=lambda: 0.0)
    guard = Guard(breaker=breaker, detector=None, mode="refuse")
    body = ask("again?", user="u-1")
    guard.check(body)
    refused = guard.check(body)
    assert refused.loop == Loop(
        "repeated_request",
        "breaker",
        f"{intent.fingerprint(body):016x}",
        2,
        (),
        refused.loop.message if refused.loop else "",
    )
    assert (refused.kind, refused.count, refused.tool_names) == ("repeated_request", 2, ())
    assert refused.message is not None
    assert refused.message.startswith("Loop detected")
    found = None
    detecting = Guard(breaker=None, mode="refuse")
    for n in range(1, 10):
        found = detecting.check(chat(*stuck_turns(n)), RequestContext(path=CHAT))
        if found.refused:
            break
    assert found is not None
    assert found.loop is not None
    assert (found.loop.guard, found.loop.kind, found.loop.tool_names) == (
        "detector",
        "repeat",
        ("bash",),
    )
    assert (
        found.loop
        == detecting.detector.scan_intent(  # type: ignore[union-attr]
            intent.extract_intent(chat(*stuck_turns(n)))
        ).loop
    )
    forwarded = Guard().check(ask("hi"))
    assert (forwarded.loop, forwarded.kind, forwarded.message, forwarded.signature) == (
        None,
        None,
        None,
        None,
    )
    closed = Guard(detector=BrokenScanner(), fail_closed=True).check(ask("hi"))
    assert closed.loop is not None
    assert (closed.loop.kind, closed.loop.guard) == ("guard_failed", "guard")
    assert closed.loop.message.startswith("loopfuse: request refused because the loop guard")


def test_a_scanner_of_the_callers_without_a_message_gets_one() -> None:
    class Terse:
        def scan(self, body: object) -> Any:
            return self.scan_intent(body)

        def scan_intent(self, intent: object) -> Any:
            class Found:
                loop = Loop("my_signal", "detector", "x", 2)

            return Found()

    decision = Guard(detector=Terse(), breaker=None, mode="refuse").check(ask("hi"))
    assert decision.refused
    assert decision.message == "loopfuse: loop detected (my_signal)"


def test_the_repr_of_a_decision_leaves_the_conversation_out() -> None:
    secret = "my password is hunter2"
    decision = Guard(breaker=None).check(ask(secret))
    assert decision.value is not None
    assert secret not in repr(decision)
    assert "action='forward'" in repr(decision)
    noted = Guard(breaker=LoopBreaker(max_repeats=1, clock=lambda: 0.0), mode="note")
    noted.check(ask(secret), RequestContext(session_id="s"))
    assert secret not in repr(noted.check(ask(secret), RequestContext(session_id="s")))


def test_every_decision_is_one_event_so_a_refusal_rate_has_a_denominator(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events: list[GuardEvent] = []
    guard = Guard(
        breaker=LoopBreaker(max_repeats=2, clock=lambda: 0.0), mode="warn", on_event=events.append
    )
    context = RequestContext(path=CHAT, session_id="s", integration="test")
    bodies: list[object] = [ask("hi"), ask("hi"), ask("hi"), ask("hi"), b"not json", 42]
    bodies += [chat(*stuck_turns(n)) for n in range(1, 8)]
    decisions = [guard.check(body, context) for body in bodies]
    closed = Guard(detector=BrokenScanner(), fail_closed=True, on_event=events.append)
    opened = Guard(detector=BrokenScanner(), on_event=events.append)
    with caplog.at_level(logging.WARNING, logger="loopfuse"):
        decisions += [closed.check(ask("x"), context), opened.check(ask("x"), context)]
    decided = [e for e in events if e.action in DECISIONS]
    assert len(decided) == len(decisions)
    assert [e.action for e in decided] == [
        {"forward": "request_forwarded", "note": "loop_noted", "refuse": "loop_refused"}[d.action]
        if d.kind != "guard_failed"
        else "fail_closed"
        for d in decisions
    ]
    assert {e.integration for e in events} == {"test"}
    assert [e.action for e in events].count("fail_open") == 1
    forwarded = [e for e in decided if e.action == "request_forwarded"]
    assert all(e.guard == "guard" and e.loop is None for e in forwarded)
    assert [e.reason for e in forwarded].count("not checked") == 2  # not LLM requests
    assert all(e.loop is not None for e in decided if e.action != "request_forwarded")


def test_events_are_only_built_with_a_callback_and_the_rest_is_counted() -> None:
    guard = Guard()
    assert not guard.events.enabled
    guard.check(ask("hi"))
    guard.internal_error(RuntimeError("a cache store failed after the answer was served"))
    assert guard.internal_errors == 1
    events: list[GuardEvent] = []
    watched = Guard(on_event=events.append)
    watched.internal_error(RuntimeError("late"), "httpx")
    [event] = events  # no request was decided: no request_forwarded
    assert (event.action, event.kind, event.reason) == (
        "fail_open",
        "guard_failed",
        "RuntimeError('late')",
    )


def test_a_request_no_breaker_counts_is_never_hashed(monkeypatch: pytest.MonkeyPatch) -> None:
    from loopfuse.guard import request

    hashed: list[bytes] = []
    real = request.fingerprint_canonical
    monkeypatch.setattr(
        request,
        "fingerprint_canonical",
        lambda canon, path: hashed.append(canon) or real(canon, path),
    )
    for guard in (Guard(breaker=None), Guard()):  # no breaker; a breaker but no session
        decision = guard.check(ask("hi"))
        assert (decision.action, decision.attempt) == ("forward", None)
        guard.outcome(decision, 429)  # nothing to retry: nothing remembered
    assert hashed == []
    counted = Guard().check(ask("hi"), RequestContext(session_id="s"))
    assert counted.attempt is not None
    assert counted.attempt.fingerprint == intent.fingerprint(ask("hi"))
    assert len(hashed) == 1  # once, however often it is read


def test_a_step_that_fails_late_leaves_one_decision_event(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from loopfuse.guard import request

    def broken(canon: bytes, path: str) -> int:
        raise RuntimeError("no hash today")

    monkeypatch.setattr(request, "fingerprint_canonical", broken)
    events: list[GuardEvent] = []
    guard = Guard(breaker=None, mode="note", on_event=events.append)
    with caplog.at_level(logging.WARNING, logger="loopfuse"):
        decisions = [guard.check(chat(*stuck_turns(n))) for n in range(1, 6)]
    assert decisions[-1].error == "RuntimeError('no hash today')"  # the note's Attempt failed
    assert [e.action for e in events if e.action in DECISIONS] == ["request_forwarded"] * 5
    assert [e.action for e in events].count("fail_open") == guard.internal_errors > 0


def _laps(commands: list[str], answer: str, run: str = "a") -> dict[str, Any]:
    """An OpenAI Chat request after one failing call per command, each with its own id
    (``run`` tells the conversations apart, as providers' ids do)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]
    for i, command in enumerate(commands):
        call = {"name": "bash", "arguments": json.dumps({"command": command})}
        tool_call = {"id": f"call_{run}{i}", "type": "function", "function": call}
        messages.append({"role": "assistant", "content": None, "tool_calls": [tool_call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{run}{i}", "content": answer})
    return {"model": "gpt-4o", "messages": messages}


def test_warn_refuses_a_run_that_goes_on_looping_in_another_shape_after_its_note() -> None:
    """Noted for one loop (the same failing command again), the agent goes on looping in
    another shape (variants of it, all failing alike: a new signature): its note was
    ignored, so it is refused (issue 27), within the warn window."""
    error = "ModuleNotFoundError: No module named 'yaml'"
    guard = Guard(mode="warn")
    first = guard.check(_laps(["python build.py"] * 3, error))
    assert (first.action, first.loop and first.loop.kind) == ("note", "repeat")
    variants = [f"python build.py --step {k}" for k in range(4)]
    went_on = guard.check(_laps(["python build.py"] * 3 + variants, error))
    assert went_on.loop is not None
    assert went_on.loop.kind == "error_streak"
    assert went_on.action == "refuse"
    # Another conversation with the same loop gets its own note first.
    other = guard.check(_laps(["python build.py --other"] * 3, error, run="b"))
    assert other.action == "note"


_MISSING = (
    "Traceback (most recent call last):\n"
    '  File "/srv/report/run.py", line 3, in <module>\n'
    "    import tablib\n"
    "ModuleNotFoundError: No module named 'tablib'\n"
    "[exit code 1]"
)
_NOTED = [("python run.py", _MISSING)] * 3  # the same failing call: noted at the third


def test_warn_refuses_a_call_that_fails_again_the_way_its_note_said_in_a_new_shape() -> None:
    """Noted for a call failing again and again, the agent does something else, then a
    variant of the call fails the very same way (the same error lines, other output
    around them). No signal counts to its threshold again (a success came between), but
    the failure the note quoted came back: the note was ignored (issue 27)."""
    guard = Guard(mode="warn")
    noted = guard.check(_steps(_NOTED))
    assert (noted.action, noted.kind, noted.count) == ("note", "repeat", 3)
    varied = _MISSING.replace("Traceback", "report: verbose on, 12 rows\nTraceback")
    read = ("sed -n 1,5p run.py", "import csv\nimport tablib\n")
    steps = [*_NOTED, read, ("python run.py -v", varied)]
    again = guard.check(_steps(steps))
    assert again.action == "refuse"
    assert again.kind == "repeat"  # the noted loop goes on
    assert (again.signature, again.count) == (noted.signature, 4)
    assert "failed again the same way (`ModuleNotFoundError: No module named 'tablib'`)" in (
        again.message or ""
    )
    assert "went on after loopfuse's note" in (again.message or "")
    # In `note` mode it stays a note; in `refuse` mode the loop was refused at once.
    assert Guard(mode="note").check(_steps(steps)).action == "forward"
    assert Guard(mode="refuse").check(_steps(_NOTED)).action == "refuse"


def test_warn_lets_a_run_on_after_its_note_when_its_calls_fail_another_way() -> None:
    """What a note that was heeded looks like: the agent dealt with the cause, and its
    next failure is another one (a test that now runs and fails on an assertion), or
    shares with the noted one only the exit status every failing command prints. Nor is
    a failure of another conversation held against this one."""
    guard = Guard(mode="warn")
    assert guard.check(_steps(_NOTED)).action == "note"
    fixed = [*_NOTED, ("pip install tablib", "Successfully installed tablib-3.5.0")]
    assertion = "AssertionError: expected 12 rows, got 11\n[exit code 1]"
    assert guard.check(_steps([*fixed, ("python run.py", assertion)])).action == "forward"
    status_only = "wrote 0 rows to out.csv\n[exit code 1]"
    assert guard.check(_steps([*fixed, ("python run.py --out x", status_only)])).action == (
        "forward"
    )
    other_run = [("ls", "run.py"), ("python run.py", _MISSING)]
    assert guard.check(_steps(other_run, run="b")).action == "forward"


class CountingScanner:
    """The default detector, counting how often a verdict's failure is read."""

    def __init__(self) -> None:
        self.reads = 0
        self.detector = LoopDetector()

    def scan(self, body: object) -> Any:
        return self.scan_intent(intent.extract_intent(body))

    def scan_intent(self, parsed: object) -> Any:
        scanner = self

        class Counted:
            def __init__(self, verdict: Any) -> None:
                self.verdict = verdict

            @property
            def loop(self) -> Any:
                return self.verdict.loop

            @property
            def failure(self) -> Any:
                scanner.reads += 1
                return self.verdict.failure

        return Counted(self.detector.scan_intent(parsed))


def test_warn_reads_the_failure_of_a_request_only_once_some_loop_was_noted() -> None:
    """The failure of a request's calls is only named when a note is remembered (what
    keeps a guard that noted nothing as fast as before); in `refuse` mode, never."""
    scanner = CountingScanner()
    guard = Guard(detector=scanner, mode="warn")
    for n in range(1, 3):
        assert guard.check(_steps(_NOTED[:n])).action == "forward"
    assert scanner.reads == 0
    assert guard.check(_steps(_NOTED)).action == "note"
    again = [*_NOTED, ("ls", "run.py"), ("python run.py", _MISSING)]
    assert guard.check(_steps(again)).action == "refuse"
    assert scanner.reads == 2  # the note's failure, then the request's
    refusing = CountingScanner()
    for n in range(1, 4):
        Guard(detector=refusing, mode="refuse").check(_steps(_NOTED[:n]))
    assert refusing.reads == 0


def test_warn_names_a_failure_known_only_by_its_flag_by_the_whole_answer() -> None:
    """A result flagged failed (Anthropic ``is_error``) whose text has no error word: the
    same answer again after the note is the noted failure; another answer is not."""

    def steps(answers: list[str]) -> dict[str, Any]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "List the files."}]
        for i, answer in enumerate(answers):
            use = {"type": "tool_use", "id": f"toolu_{i}", "name": "shell", "input": {"n": i}}
            result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "is_error": True}
            messages.append({"role": "assistant", "content": [use]})
            messages.append({"role": "user", "content": [{**result, "content": answer}]})
        return {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": messages}

    rejected = "Command rejected because it could not be parsed safely"
    guard = Guard(mode="warn")
    noted = guard.check(steps([rejected] * 4), RequestContext(path="/v1/messages"))
    assert (noted.action, noted.kind) == ("note", "error_streak")
    context = RequestContext(path="/v1/messages")
    moved = guard.check(steps([rejected] * 4 + ["no such session"]), context)
    assert moved.action == "forward"
    again = guard.check(steps([rejected] * 4 + ["no such session", rejected]), context)
    assert (again.action, again.kind) == ("refuse", "error_streak")
