"""`loopfuse scan` replays what the guards would have seen live: prefixes, clock, sessions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loopfuse import DedupCache, LoopBreaker, RequestKey
from loopfuse.cli.config import Settings
from loopfuse.cli.readers import read_bytes
from loopfuse.cli.replay import replay
from loopfuse.cli.turns import requests_of
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


def loop_messages(laps: int, answer: str = "error: no such file") -> list[dict[str, Any]]:
    messages = [user("fix it")]
    for i in range(laps):
        messages += turn(i, "bash", {"command": "cat missing.txt"}, answer)
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
    code = main(["scan", str(path), "--format", "json", *flags])
    captured = capsys.readouterr()
    assert captured.err == ""
    return code, json.loads(captured.out)


# --- turns: each request is the conversation up to an assistant turn -----------------------


def test_trajectory_requests_are_the_prefixes_before_each_assistant_turn() -> None:
    messages = [{"role": "system", "content": "sys"}, *loop_messages(3)]
    data = {"outcome": "failed", "task": "t", **chat(*messages)}
    source = read_bytes("t.json", json.dumps(data).encode())
    assert source.kind == "trajectory"
    requests = requests_of(source, turn_seconds=2.0)
    assistant_at = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    assert [r.body["messages"] for r in requests] == [messages[:i] for i in assistant_at]  # type: ignore[index]
    assert [r.message_index for r in requests] == assistant_at
    assert [r.time for r in requests] == [0.0, 2.0, 4.0]
    assert [r.tool_calls for r in requests] == [1, 1, 1]
    for request in requests:  # the trajectory's metadata is not part of what was sent
        assert set(request.body) == {"model", "messages"}  # type: ignore[arg-type]
    # Each request's size is its compact JSON, computed incrementally.
    for request in requests:
        compact = json.dumps(request.body, ensure_ascii=False, separators=(",", ":"))
        assert request.chars == len(compact)


def test_a_request_body_is_also_replayed_whole_at_the_end() -> None:
    body = chat(*loop_messages(2), temperature=0.3)
    source = read_bytes("b.json", json.dumps(body).encode())
    assert source.kind == "request"
    requests = requests_of(source, turn_seconds=1.0)
    assert len(requests) == 3
    assert requests[-1].body == body
    assert requests[-1].message_index is None
    assert all(r.body["temperature"] == 0.3 for r in requests)  # type: ignore[index]


def anthropic_body() -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(3):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "checking"},
                    {"type": "tool_use", "id": f"t{i}", "name": "ls", "input": {"p": "."}},
                    {"type": "tool_use", "id": f"u{i}", "name": "pwd", "input": {}},
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"t{i}", "content": "a.py"},
                    {"type": "tool_result", "tool_use_id": f"u{i}", "content": "/w"},
                ],
            }
        )
    return {"model": "claude", "max_tokens": 100, "system": "s", "messages": messages}


def gemini_body() -> dict[str, Any]:
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "go"}]}]
    for _ in range(2):
        contents.append({"role": "model", "parts": [{"functionCall": {"name": "ls", "args": {}}}]})
        contents.append(
            {"role": "user", "parts": [{"functionResponse": {"name": "ls", "response": {}}}]}
        )
    return {"contents": contents}


def responses_body() -> dict[str, Any]:
    items: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(2):
        items += [
            {"type": "reasoning", "summary": []},
            {"type": "function_call", "call_id": f"a{i}", "name": "ls", "arguments": "{}"},
            {"type": "function_call", "call_id": f"b{i}", "name": "pwd", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"a{i}", "output": "a.py"},
            {"type": "function_call_output", "call_id": f"b{i}", "output": "/w"},
        ]
    return {"model": "gpt-5", "input": items}


@pytest.mark.parametrize(
    ("body", "dialect", "key", "starts", "calls"),
    [
        (anthropic_body(), "anthropic", "messages", [1, 3, 5], [2, 2, 2, 0]),
        (gemini_body(), "gemini", "contents", [1, 3], [1, 1, 0]),
        # Responses: one turn is a run of output items (reasoning + both calls).
        (responses_body(), "openai_responses", "input", [1, 6], [2, 2, 0]),
    ],
)
def test_turns_in_every_dialect(
    body: dict[str, Any], dialect: str, key: str, starts: list[int], calls: list[int]
) -> None:
    source = read_bytes("x.json", json.dumps(body).encode())
    assert (source.kind, source.dialect) == ("request", dialect)
    requests = requests_of(source, turn_seconds=1.0)
    assert [len(r.body[key]) for r in requests] == [*starts, len(body[key])]  # type: ignore[index]
    assert [r.tool_calls for r in requests] == calls


def test_responses_input_as_a_string_is_one_request() -> None:
    source = read_bytes("x.json", b'{"model": "m", "input": "hello"}')
    assert len(requests_of(source, turn_seconds=1.0)) == 1


# --- the detector sees each turn's request -------------------------------------------------


def first_flag(messages: list[dict[str, Any]], detector: LoopDetector) -> int | None:
    """Independently: the first request (1-based, one per assistant turn) scan refuses."""
    turn_number = 0
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            turn_number += 1
            if not detector.scan(chat(*messages[:i])).ok:
                return turn_number
    return None


@pytest.mark.parametrize("max_strikes", [0, 1, 2, 3])
def test_detector_flags_where_a_live_detector_would(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], max_strikes: int
) -> None:
    messages = loop_messages(8)
    data = {"outcome": "failed", **chat(*messages)}
    code, report = scan_file(tmp_path, capsys, data, "--max-strikes", str(max_strikes))
    expected = first_flag(messages, LoopDetector(max_strikes=max_strikes))
    assert expected is not None
    assert code == 1
    [found] = report["files"][0]["interventions"]
    assert (found["guard"], found["kind"], found["unit"]) == ("detector", "repeat", "turn")
    assert found["first"] == expected
    assert found["last"] == 8  # the loop never ends: every later request is refused too
    assert found["requests"] == 8 - expected + 1
    assert found["subjects"] == ['bash {"command":"cat missing.txt"}']
    assert "the same arguments" in found["message"]
    summary = report["summary"]
    assert summary["acted"] == {"breaker": 0, "detector": found["requests"], "dedup": 0}
    assert summary["spared_tool_calls"] == found["requests"]  # one call per refused turn


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


def test_breaker_refuses_the_sixth_identical_request_in_its_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = scan_file(tmp_path, capsys, storm([float(i) for i in range(8)]), name="l.jsonl")
    assert code == 1
    items = report["files"][0]["interventions"]
    [breaker] = [item for item in items if item["guard"] == "breaker"]
    assert (breaker["first"], breaker["last"], breaker["count"], breaker["max_count"]) == (
        6,
        8,
        6,
        8,
    )
    assert breaker["unit"] == "line"
    assert "this exact request has been sent 6 times within 30s" in breaker["message"]
    # The breaker's own answer on the same sequence, for comparison.
    now = [0.0]
    live = LoopBreaker(clock=lambda: now[0])
    refused = []
    for i, line in enumerate(storm([float(i) for i in range(8)])):
        now[0] = float(i)
        refused.append(not live.check_request("s1", line["body"], line["path"]).allowed)
    assert refused == [False] * 5 + [True] * 3


def test_breaker_window_follows_the_log_times(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spaced = storm([10.0 * i for i in range(8)])
    code, report = scan_file(tmp_path, capsys, spaced, "--window", "30", "--guards", "breaker")
    assert code == 0  # at most 3 in any 30 s window
    code, report = scan_file(tmp_path, capsys, spaced, "--window", "60", "--guards", "breaker")
    assert code == 1  # 6 fit in 60 s
    assert report["files"][0]["interventions"][0]["first"] == 6


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


def test_time_going_back_is_held(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = scan_file(tmp_path, capsys, storm([100.0, 0.0, 50.0, 0.0, 1.0, 2.0]))
    assert code == 1
    hits = [item for item in report["files"][0]["interventions"] if item["guard"] == "dedup"]
    assert hits[0]["requests"] == 5  # clamped to t=100: nothing expired


def test_cache_answers_identical_requests_until_the_ttl(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = storm([0.0, 10.0, 20.0, 100.0, 101.0])
    code, report = scan_file(tmp_path, capsys, lines, "--guards", "dedup", "--cache-ttl", "60")
    assert code == 1
    hits = [item for item in report["files"][0]["interventions"] if item["guard"] == "dedup"]
    # Lines 2 and 3 hit the answer cached at line 1; line 4 comes after its TTL (a miss,
    # cached again); line 5 hits that.
    assert [(h["first"], h["last"], h["same_as"]) for h in hits] == [(2, 3, 1), (5, 5, 1)]
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


def test_volatile_fields_do_not_defeat_the_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        {"body": {**chat(user("hi")), "stream": i % 2 == 0, "user": f"u{i}"}} for i in range(3)
    ]
    code, report = scan_file(tmp_path, capsys, lines, "--guards", "dedup", name="v.jsonl")
    assert code == 1
    assert report["files"][0]["acted"] == {"dedup": 2}
    lines = [{"body": {**chat(user("hi")), "temperature": i / 10}} for i in range(3)]
    code, _ = scan_file(tmp_path, capsys, lines, "--guards", "dedup", name="t.jsonl")
    assert code == 0  # a parameter that changes the answer changes the key


def test_guards_can_be_switched_off(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = storm([float(i) for i in range(8)])
    code, report = scan_file(tmp_path, capsys, lines, "--guards", "detector")
    assert code == 0
    assert report["summary"]["guards"] == ["detector"]


def test_replay_does_not_share_state_between_files(tmp_path: Path) -> None:
    settings = Settings()
    detector = LoopDetector()
    data = json.dumps(storm([0.0, 1.0, 2.0])[0]).encode()
    results = [replay(read_bytes(f"f{i}.json", data), settings, detector) for i in range(7)]
    assert all(result.clean for result in results)  # one request per file: nothing repeats
