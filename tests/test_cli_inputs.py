"""`loopfuse scan` on bad input: exit status 2 and one line naming the file, never a traceback."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from loopfuse.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    return code, captured.out, captured.err


def chat(*messages: dict[str, object]) -> dict[str, object]:
    return {"model": "gpt-4o", "messages": list(messages)}


def user(text: str) -> dict[str, object]:
    return {"role": "user", "content": text}


def bash_turn(i: int, command: str, answer: str) -> list[dict[str, object]]:
    call = {"name": "bash", "arguments": json.dumps({"command": command})}
    return [
        {"role": "assistant", "content": "", "tool_calls": [{"id": f"c{i}", "function": call}]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": answer},
    ]


def looping_trajectory(laps: int = 8) -> dict[str, object]:
    messages = [user("fix the build")]
    for i in range(laps):
        messages += bash_turn(i, "make", "error: missing header foo.h")
    return {"outcome": "failed", "exit_reason": "max_steps", **chat(*messages)}


def write(path: Path, data: bytes | str | object) -> Path:
    if isinstance(data, bytes):
        path.write_bytes(data)
    elif isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_text(json.dumps(data), encoding="utf-8")
    return path


def assert_one_error(err: str, name: str, problem: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert name in lines[0]
    assert problem in lines[0]
    assert lines[0].startswith("loopfuse scan: error: ")


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('{"model": "m", "messages": [', "not valid JSON: Expecting value (line 1, column 29)"),
        ('{"model": "m",\n "messages": [}', "not valid JSON: Expecting value (line 2, column 15)"),
        ("", "empty file"),
        ("  \n\t\n", "empty file"),
        ('{"foo": 1, "bar": [2]}', "JSON, but not an LLM request, a trajectory or a log entry"),
        ('{"model": "m", "messages": "hello"}', "not an LLM request of a known dialect"),
        ("[1, 2, 3]", "expected a JSON object (a request body or a trajectory), got an array"),
        ('"just a string"', "got a string"),
        ("null", "got null"),
        ("[" * 100_000, "JSON nested too deeply"),
        ("hello world", "not valid JSON"),
    ],
)
def test_unusable_file_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, problem: str
) -> None:
    path = write(tmp_path / "input.json", content)
    code, out, err = run(capsys, "scan", str(path))
    assert code == 2
    assert_one_error(err, str(path), problem)
    # JSON of a shape no reader knows is read, not understood: never clean (#27 §4).
    unread = "1 not understood" if problem.startswith("JSON, but") else "1 unreadable"
    assert f"0 clean, 0 flagged, {unread}" in out


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (bytes(range(256)) * 4, "binary data, not JSON (NUL byte at offset 0)"),
        (b'{"a": "\xff\xfe"}', "not UTF-8 text (byte 0xff at offset 7)"),
        (b"\x89PNG\r\n\x1a\n" + bytes(64), "binary data"),
    ],
)
def test_binary_junk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes, problem: str
) -> None:
    path = write(tmp_path / "junk.json", data)
    code, _, err = run(capsys, "scan", str(path))
    assert code == 2
    assert_one_error(err, str(path), problem)


def test_utf8_bom_is_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "bom.json", b"\xef\xbb\xbf" + json.dumps(chat(user("hi"))).encode())
    code, out, err = run(capsys, "scan", str(path))
    assert (code, err) == (0, "")
    assert "clean" in out


def test_missing_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.json"
    code, out, err = run(capsys, "scan", str(missing))
    assert code == 2
    assert_one_error(err, str(missing), "no such file or folder")
    assert out == ""  # nothing was scanned: no all-zero report (#29 §7)


def test_not_a_regular_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "scan", "/dev/null")
    assert code == 2
    assert_one_error(err, "/dev/null", "not a regular file")


def test_folder_with_one_broken_file_scans_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "runs"
    (folder / "nested").mkdir(parents=True)
    write(folder / "a_broken.json", '{"messages": [')
    write(folder / "nested" / "b_loop.json", looping_trajectory())
    write(folder / "c_clean.json", chat(user("hello")))
    write(folder / "notes.md", "not scanned: not a .json file")
    write(folder / ".hidden.json", "not scanned: hidden")
    code, out, err = run(capsys, "scan", str(folder))
    assert code == 1  # a loop found is never hidden by an unreadable file
    assert_one_error(err, "a_broken.json", "not valid JSON")
    assert "b_loop.json" in out
    assert "c_clean.json" not in out  # clean runs are counted, not listed
    assert "repeat" in out
    assert "notes.md" not in out + err
    assert ".hidden" not in out + err
    assert "3 scanned: 1 clean, 1 flagged, 1 unreadable" in out
    code, out, err = run(capsys, "scan", str(folder), "--verbose")
    assert code == 1
    assert "c_clean.json" in out
    assert "c_clean.json\n  request, openai_chat, 1 request: clean" in out
    # Without the loop, the unreadable file decides: 2.
    (folder / "nested" / "b_loop.json").unlink()
    code, out, err = run(capsys, "scan", str(folder))
    assert code == 2
    assert_one_error(err, "a_broken.json", "not valid JSON")


def test_folder_with_nothing_to_scan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "README.md", "# hi")
    code, _, err = run(capsys, "scan", str(tmp_path))
    assert code == 2
    assert_one_error(err, str(tmp_path), "folder holds no .json, .jsonl, .ndjson, .traj files")


def test_every_bad_file_gets_its_own_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = [write(tmp_path / f"bad{i}.json", "{") for i in range(3)]
    good = write(tmp_path / "good.json", chat(user("hi")))
    paths = [*map(str, bad), str(good), str(tmp_path / "gone")]
    code, out, err = run(capsys, "scan", *paths, "--verbose")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 4
    names = ["bad0", "bad1", "bad2", "gone"]
    assert all(name in line for name, line in zip(names, lines, strict=True))
    assert "good.json" in out


@pytest.mark.parametrize(
    ("lines", "problem"),
    [
        (['{"model": "m", "messages": []}', "{oops"], "line 2: not valid JSON"),
        (['{"model": "m", "messages": []}', "", "[1]"], "line 3: expected a JSON object"),
        (['{"session": "s", "body": {"foo": 1}}'], "line 1: JSON, but not an LLM request"),
        (['{"session": "s", "body": "not json"}'], "line 1: body is not the JSON text"),
        (['{"session": "s", "body": 5}'], "line 1: body must be an object or JSON text"),
        (['{"session": [1], "body": {"input": "hi"}}'], "line 1: session must be a string"),
        (['{"time": "noon", "body": {"input": "hi"}}'], "line 1: time must be a number"),
        (['{"path": 7, "body": {"input": "hi"}}'], "line 1: path must be a string"),
        (
            ['{"sesion": "s", "body": {"input": "hi"}}'],
            "line 1: unknown keys in a log entry: sesion",
        ),
    ],
)
def test_bad_log_line_names_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: list[str], problem: str
) -> None:
    path = write(tmp_path / "proxy.jsonl", "\n".join(lines) + "\n")
    code, _, err = run(capsys, "scan", str(path))
    assert code == 2
    assert_one_error(err, str(path), problem)


def test_two_json_values_in_a_json_file_are_a_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = json.dumps(chat(user("retry me")))
    path = write(tmp_path / "log.json", "\n".join([body] * 3))
    code, out, _ = run(capsys, "scan", str(path))
    assert code == 1
    assert "log, openai_chat, 3 requests" in out
    assert "answered from the cache lines 2-3" in out


def test_pretty_json_followed_by_junk_is_a_json_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "x.json", json.dumps(chat(user("hi")), indent=2) + "\ngarbage")
    code, _, err = run(capsys, "scan", str(path))
    assert code == 2
    assert_one_error(err, str(path), "not valid JSON: Extra data")


def test_body_nested_past_the_intent_limit_goes_through_unchecked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep: object = "x"
    for _ in range(400):  # deeper than intent.MAX_DEPTH, shallow enough for json
        deep = [deep]
    body = chat(user("hi"), {"role": "assistant", "content": "ok", "extra": deep}, user("again"))
    path = write(tmp_path / "deep.json", body)
    code, out, err = run(capsys, "scan", str(path))
    assert (code, err) == (0, "")
    # Not split into turns: a deployed guard cannot read it either, and lets it through.
    assert "1 replayed (1 not checked" in out
    log = write(tmp_path / "deep.jsonl", json.dumps(body) + "\n" + json.dumps(chat(user("x"))))
    code, out, err = run(capsys, "scan", str(log))
    assert (code, err) == (0, "")
    assert "2 replayed (1 not checked" in out


def test_deep_junk_that_is_not_a_request_is_still_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep: object = "x"
    for _ in range(400):
        deep = [deep]
    path = write(tmp_path / "deep.json", {"payload": deep})
    code, _, err = run(capsys, "scan", str(path))
    assert code == 2
    assert_one_error(err, str(path), "not an LLM request")


def test_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.dumps(looping_trajectory()).encode()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
    code, out, _ = run(capsys, "scan", "-")
    assert code == 1
    assert "<stdin>" in out


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["scan"], "the following arguments are required: PATH"),
        (["scan", "x.json", "--format", "xml"], "argument --format: invalid choice: 'xml'"),
        (["scan", "x.json", "--max-strikes", "-1"], "--max-strikes must be an integer >= 0"),
        (["scan", "x.json", "--max-strikes", "two"], "--max-strikes must be an integer >= 0"),
        (["scan", "x.json", "--window", "0"], "--window must be a positive number of seconds"),
        (["scan", "x.json", "--window", "nan"], "--window must be a positive number"),
        (["scan", "x.json", "--guards", "breaker,fuse"], "--guards must name some of"),
        (["scan", "x.json", "--cache-capacity", "0"], "--cache-capacity must be an integer >= 1"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["scan", "x.json", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    ],
)
def test_usage_errors_are_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], args: list[str], problem: str
) -> None:
    code, out, err = run(capsys, *args)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert problem in lines[0]


def test_help_and_version_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "scan", "--help")
    assert code == 0
    for flag in ("--max-strikes", "--window", "--max-repeats", "--max-cycle-period", "--config"):
        assert flag in out
    code, out, _ = run(capsys, "--version")
    assert code == 0
    assert out.startswith("loopfuse ")


def test_a_bad_line_in_a_log_is_reported_and_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = json.dumps({"session": "s", "body": chat(user("again"))})
    lines = [body] * 4 + ["{truncated"] + [body] * 4 + ['{"no": "request"}']
    path = write(tmp_path / "proxy.jsonl", "\n".join(lines) + "\n")
    code, out, err = run(capsys, "scan", str(path))
    assert code == 1  # the storm around the bad lines is still found
    errors = err.strip().splitlines()
    assert len(errors) == 2
    assert "proxy.jsonl: line 5: not valid JSON" in errors[0]
    assert "proxy.jsonl: line 10: JSON, but not an LLM request" in errors[1]
    assert "log, openai_chat, 8 requests, 2 lines skipped (not requests)" in out


def test_many_bad_lines_are_summed_up(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [json.dumps(chat(user("hi")))] + ["{oops"] * 30
    path = write(tmp_path / "proxy.jsonl", "\n".join(lines) + "\n")
    code, _, err = run(capsys, "scan", str(path))
    assert code == 2
    errors = err.strip().splitlines()
    assert len(errors) == 6
    assert errors[-1].endswith("proxy.jsonl: 25 more lines that are not requests")
