"""`loopfuse scan` replays what the guard would have seen live: prefixes, clock, sessions,
and reports each loop as one finding."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loopfuse import DedupCache, LoopBreaker, RequestKey, intent
from loopfuse.cli.config import Settings
from loopfuse.cli.decisions import scan_source
from loopfuse.cli.readers import read_bytes
from loopfuse.detector import LoopDetector


def chat(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": list(messages), **extra}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def turn(i: int, name: str, args: dict[str, Any], answer: str) -> list[dict[str, Any]]:
    call = {"id": f"c{i}", "type": "function"}
    call["function"] = {"name": name, "arguments": json.dumps(args)}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": answer},
    ]


def loop_messages(
    laps: int, answer: str = "error: no such file", command: str = "cat missing.txt"
) -> list[dict[str, Any]]:
    messages = [user("fix it")]
    for i in range(laps):
        messages += turn(i, "bash", {"command": command}, answer)
    return messages


def scan_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: object, *flags: str, name: str = ""
) -> tuple[int, dict[str, Any]]:
    from loopfuse.cli.main import main

    path = tmp_path / (name or "input.json")
    if isinstance(data, list):
        path.write_text("".join(json.dumps(line) + "\n" for line in data), encoding="utf-8")
    else:
        path.write_text(json.dumps(data), encoding="utf-8")
    # The detector's own decisions are compared with a live one's: a stop where it stops.
    code = main(["scan", str(path), "--format", "json", "--mode", "refuse", *flags])
    captured = capsys.readouterr()
    assert captured.err == ""
    return code, json.loads(captured.out)


# --- turns: each request is the conversation up to an assistant turn -----------------------


def test_a_trajectory_is_one_request_per_assistant_turn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = [{"role": "system", "content": "sys"}, *loop_messages(3, "ok")]
    data = {"outcome": "failed", "task": "t", **chat(*messages)}
    code, report = scan_file(tmp_path, capsys, data)
    assert code == 0
    [run] = report["files"]
    assert (run["kind"], run["dialect"], run["requests"]) == ("trajectory", "openai_chat", 3)
    assert run["tool_calls"] == 3
    # Tokens estimated from each request's size: the context before each turn, as sent
    # (the trajectory's metadata is not part of it), and the turn's answer.
    assistant_at = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    sizes = [len(json.dumps(chat(*messages[:i]), separators=(",", ":"))) for i in assistant_at]
    answers = [len(json.dumps(messages[i], separators=(",", ":"))) for i in assistant_at]
    assert run["tokens_in"] == sum(-(-size * 10 // 37) for size in sizes)
    assert run["tokens_out"] == sum(-(-size * 10 // 37) for size in answers)
    assert run["tokens_estimated"] is True


def test_a_request_body_is_also_replayed_whole_at_the_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = chat(*loop_messages(2, "ok"), temperature=0.3)
    code, report = scan_file(tmp_path, capsys, body)
    assert code == 0
    assert (report["files"][0]["kind"], report["files"][0]["requests"]) == ("request", 3)


def test_responses_input_as_a_string_is_one_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = scan_file(tmp_path, capsys, {"model": "m", "input": "hello"})
    assert code == 0
    assert report["files"][0]["requests"] == 1


def test_usage_recorded_with_a_turn_is_used_instead_of_an_estimate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = loop_messages(6, "patched 0 files", command="python fix.py")
    for message in messages:
        if message["role"] == "assistant":
            message["usage"] = {"prompt_tokens": 1000, "completion_tokens": 10}
    code, report = scan_file(
        tmp_path, capsys, {"outcome": "failed", **chat(*messages)}, "--price-per-mtok", "3,15"
    )
    assert code == 1
    [run] = report["files"]
    assert (run["tokens_in"], run["tokens_out"], run["tokens_estimated"]) == (6000, 60, False)
    [finding] = run["findings"]
    refused = finding["requests"]
    assert (finding["tokens_in"], finding["tokens_out"]) == (1000 * refused, 10 * refused)
    assert report["summary"]["cost"] == pytest.approx((3000 * refused + 150 * refused) / 1e6)


# --- the detector sees each turn's request -------------------------------------------------


def live_verdicts(messages: list[dict[str, Any]], detector: LoopDetector) -> list[str | None]:
    """Independently: the live detector's verdict on the request before each turn."""
    return [
        detector.scan(chat(*messages[:i])).kind
        for i, message in enumerate(messages)
        if message["role"] == "assistant"
    ]


@pytest.mark.parametrize("max_strikes", [0, 1, 2, 3])
def test_detector_flags_where_a_live_detector_would(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], max_strikes: int
) -> None:
    # A state-changing command whose answer repeats: max_strikes alone decides.
    messages = loop_messages(8, "patched 0 files", command="python fix.py")
    data = {"outcome": "failed", **chat(*messages)}
    code, report = scan_file(tmp_path, capsys, data, "--max-strikes", str(max_strikes))
    verdicts = live_verdicts(messages, LoopDetector(max_strikes=max_strikes))
    expected = verdicts.index("repeat") + 1
    assert expected == max_strikes + 2  # each extra strike lets one more identical call run
    assert code == 1
    [found] = report["files"][0]["findings"]
    assert (found["guard"], found["kind"], found["unit"]) == ("detector", "repeat", "turn")
    assert found["first"] == expected
    assert found["last"] == 8  # the loop never ends: every later request is refused too
    assert found["requests"] == 8 - expected + 1
    assert found["calls"] == ['bash {"command":"python fix.py"}']
    assert found["answer"] == "patched 0 files"
    assert found["message_index"] == 2 * expected - 1  # where turn `expected` starts
    assert found["loop_from"] == expected - (max_strikes + 1)
    assert "the same arguments" in found["message"]
    summary = report["summary"]
    assert summary["acted"] == {"breaker": 0, "detector": found["requests"], "dedup": 0}
    assert summary["spared_tool_calls"] == found["requests"]  # one call per refused turn


def test_a_loop_that_changes_signal_is_one_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The same failing read: first an error streak, then a plain repeat. One loop.
    messages = loop_messages(8)
    code, report = scan_file(tmp_path, capsys, {"outcome": "failed", **chat(*messages)})
    assert code == 1
    [found] = report["files"][0]["findings"]
    verdicts = live_verdicts(messages, LoopDetector())
    flagged = [(n, kind) for n, kind in enumerate(verdicts, start=1) if kind is not None]
    spans = [(s["kind"], s["first"], s["last"]) for s in found["spans"]]
    assert spans == [("error_streak", 5, 5), ("repeat", 6, 8)]
    assert flagged == [(5, "error_streak"), (6, "repeat"), (7, "repeat"), (8, "repeat")]
    assert (found["first"], found["last"], found["requests"]) == (5, 8, 4)
    assert found["answer"] == "error: no such file"


def test_answers_that_move_are_progress(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    messages = [user("wait for the build")]
    for i in range(8):
        messages += turn(i, "job_status", {"job": 1}, f"Compiling {10 * i + 5}/120")
    code, report = scan_file(tmp_path, capsys, {"outcome": "resolved", **chat(*messages)})
    assert code == 0
    assert report["files"][0]["clean"] is True


def test_a_user_turn_ends_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    messages = loop_messages(3)
    messages += [user("try again please"), *loop_messages(3)[1:]]
    code, _ = scan_file(tmp_path, capsys, {"outcome": "resolved", **chat(*messages)})
    assert code == 0


# --- the breaker and the cache on the fake clock ---------------------------------------------


def storm(times: list[float | None], session: str = "s1") -> list[dict[str, Any]]:
    body = chat(user("Summarise invoice 1042."))
    lines = []
    for t in times:
        line: dict[str, Any] = {"session": session, "path": "/v1/chat/completions", "body": body}
        if t is not None:
            line["time"] = t
        lines.append(line)
    return lines


def test_a_retry_storm_is_one_finding_cache_first_then_breaker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = scan_file(tmp_path, capsys, storm([float(i) for i in range(8)]), name="l.jsonl")
    assert code == 1
    [found] = report["files"][0]["findings"]
    # As a deployed guard decides: lines 2-5 are answered from the cache (the breaker
    # counts them), the sixth in the window is refused, and so is every one after it.
    spans = [(s["guard"], s["kind"], s["first"], s["last"]) for s in found["spans"]]
    assert spans == [("dedup", "cache_hit", 2, 5), ("breaker", "repeated_request", 6, 8)]
    breaker = found["spans"][1]
    assert (breaker["count"], breaker["max_count"]) == (6, 8)
    assert (found["unit"], found["same_as"], found["requests"]) == ("line", 1, 7)
    assert found["calls"] == ["user: Summarise invoice 1042."]
    assert "this exact request has been sent 6 times within 30s" in found["message"]
    # The breaker's own answer on the same sequence, for comparison.
    now = [0.0]
    live = LoopBreaker(clock=lambda: now[0])
    refused = []
    for i, line in enumerate(storm([float(i) for i in range(8)])):
        now[0] = float(i)
        refused.append(not live.check_request("s1", line["body"], line["path"]).allowed)
    assert refused == [False] * 5 + [True] * 3


def test_a_storm_interleaved_with_other_requests_is_still_one_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = []
    for i, line in enumerate(storm([float(i) for i in range(20)])):
        lines += [line, {"session": "s1", "time": i + 0.5, "body": chat(user(f"Task {i}."))}]
    code, report = scan_file(tmp_path, capsys, lines, "--guards", "breaker", name="l.jsonl")
    assert code == 1
    [found] = report["files"][0]["findings"]
    assert found["calls"] == ["user: Summarise invoice 1042."]
    # The 6th to the 20th send (lines 11, 13, ... 39), one stretch: nothing but other
    # requests came between them.
    assert (found["first"], found["last"], found["requests"]) == (11, 39, 15)
    assert [(s["first"], s["last"], s["requests"]) for s in found["spans"]] == [(11, 39, 15)]


def test_a_client_hammering_two_requests_in_turn_is_one_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = {"session": "s1", "body": chat(user("Something else."))}
    lines = []
    for line in storm([float(i) for i in range(20)]):
        lines += [line, {**other, "time": line["time"]}]
    code, report = scan_file(tmp_path, capsys, lines, "--guards", "breaker", name="l.jsonl")
    assert code == 1
    [found] = report["files"][0]["findings"]
    assert found["calls"] == ["user: Summarise invoice 1042.", "user: Something else."]
    assert (found["first"], found["last"], found["requests"]) == (11, 40, 30)


def test_breaker_window_follows_the_log_times(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spaced = storm([10.0 * i for i in range(8)])
    code, report = scan_file(tmp_path, capsys, spaced, "--window", "30", "--guards", "breaker")
    assert code == 0  # at most 3 in any 30 s window
    code, report = scan_file(tmp_path, capsys, spaced, "--window", "60", "--guards", "breaker")
    assert code == 1  # 6 fit in 60 s
    assert report["files"][0]["findings"][0]["first"] == 6


def test_turn_seconds_drive_the_clock_when_the_log_has_no_times(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = storm([None] * 8)
    code, _ = scan_file(tmp_path, capsys, lines, "--turn-seconds", "100", "--guards", "breaker")
    assert code == 0
    code, _ = scan_file(tmp_path, capsys, lines, "--turn-seconds", "1", "--guards", "breaker")
    assert code == 1


def test_sessions_are_isolated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [line for i in range(5) for line in storm([float(i)], f"s{i % 2}")]
    lines += [line for i in range(5) for line in storm([5.0 + i], "s2")]
    code, report = scan_file(tmp_path, capsys, lines, "--guards", "breaker")
    assert code == 0
    assert report["files"][0]["sessions"] == 3


def test_a_request_without_a_session_counts_as_its_end_user(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No "session" in the log: a deployed guard counts per end user (the body's
    # "user"), else in one shared session.
    lines = [{"body": {**chat(user("hi")), "user": f"u{i % 2}"}} for i in range(10)]
    code, _ = scan_file(tmp_path, capsys, lines, "--guards", "breaker", name="u.jsonl")
    assert code == 0  # 5 each: within the limit
    lines = [{"body": chat(user("hi"))} for _ in range(10)]
    code, _ = scan_file(tmp_path, capsys, lines, "--guards", "breaker", name="d.jsonl")
    assert code == 1


def test_time_going_back_is_held(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = storm([100.0, 0.0, 50.0, 0.0, 1.0, 2.0])
    code, report = scan_file(tmp_path, capsys, lines, "--guards", "dedup")
    assert code == 1
    assert report["files"][0]["acted"] == {"dedup": 5}  # clamped to t=100: nothing expired


def test_cache_answers_identical_requests_until_the_ttl(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = storm([0.0, 10.0, 20.0, 100.0, 101.0])
    code, report = scan_file(tmp_path, capsys, lines, "--guards", "dedup", "--cache-ttl", "60")
    assert code == 1
    [found] = report["files"][0]["findings"]  # the same request: one finding
    # Lines 2 and 3 hit the answer cached at line 1; line 4 comes after its TTL (a miss,
    # cached again); line 5 hits that.
    assert [(s["first"], s["last"]) for s in found["spans"]] == [(2, 3), (5, 5)]
    assert found["same_as"] == 1
    assert report["files"][0]["acted"] == {"dedup": 3}
    # The cache itself agrees.
    now = [0.0]
    cache: DedupCache[int] = DedupCache(default_ttl=60.0, clock=lambda: now[0])
    outcome = []
    for line in lines:
        now[0] = line["time"]
        key = RequestKey.from_request(line["body"], line["path"])
        outcome.append(cache.get(key) is not None)
        if not outcome[-1]:
            cache.insert(key, 1)
    assert outcome == [False, True, True, False, True]


def test_a_failed_answer_is_not_cached_and_its_retry_is_forgiven(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = storm([float(i) for i in range(8)])
    for line in lines:
        line["status"] = 429  # rate limited: nothing to cache, and the client retries
    code, report = scan_file(tmp_path, capsys, lines, name="r.jsonl")
    assert code == 0  # a deployed guard forgives an SDK's retries of a failed request
    assert report["files"][0]["acted"] == {}


def test_which_requests_share_an_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The end user is not part of the question: they share an answer.
    lines = [{"body": {**chat(user("hi")), "user": f"u{i}"}} for i in range(3)]
    code, report = scan_file(tmp_path, capsys, lines, "--guards", "dedup", name="v.jsonl")
    assert code == 1
    assert report["files"][0]["acted"] == {"dedup": 2}
    # A streamed answer is not cached unless asked for, and never serves a plain one.
    lines = [{"body": {**chat(user("hi")), "stream": i % 2 == 0}} for i in range(4)]
    code, report = scan_file(tmp_path, capsys, lines, "--guards", "dedup", name="s.jsonl")
    assert (code, report["files"][0]["acted"]) == (1, {"dedup": 1})  # line 4 hits line 2
    code, report = scan_file(
        tmp_path, capsys, lines, "--guards", "dedup", "--cache-streams", name="s.jsonl"
    )
    assert (code, report["files"][0]["acted"]) == (1, {"dedup": 2})  # and line 3 hits line 1
    # A parameter that changes the answer changes the key; a sampled request (temperature
    # above 0, no seed) is not served from the cache unless asked for.
    lines = [{"body": {**chat(user("hi")), "temperature": i / 10}} for i in range(3)]
    code, _ = scan_file(tmp_path, capsys, lines, "--guards", "dedup", name="t.jsonl")
    assert code == 0
    lines = [{"body": {**chat(user("hi")), "temperature": 0.5}} for i in range(3)]
    code, _ = scan_file(tmp_path, capsys, lines, "--guards", "dedup", name="t.jsonl")
    assert code == 0
    code, _ = scan_file(
        tmp_path, capsys, lines, "--guards", "dedup", "--cache-sampled", name="t.jsonl"
    )
    assert code == 1


def test_guards_can_be_switched_off(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = storm([float(i) for i in range(8)])
    code, report = scan_file(tmp_path, capsys, lines, "--guards", "detector")
    assert code == 0
    assert report["summary"]["guards"] == ["detector"]


def test_replay_does_not_share_state_between_files() -> None:
    settings = Settings()
    data = json.dumps(storm([0.0, 1.0, 2.0])[0]).encode()
    results = [scan_source(read_bytes(f"f{i}.json", data), settings)[0] for i in range(7)]
    assert all(result.clean for result in results)  # one request per file: nothing repeats
    assert intent.conversation(storm([0.0])[0]["body"]) is not None
