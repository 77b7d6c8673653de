"""pi: its tools, how its answers fail, the extension ``loopfuse init`` writes, and
``loopfuse scan`` of its session files (issue 28)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_transcripts import Turn, healthy, looping, pi_session, write_lines
from hostile import json_values
from loopfuse.cli.agent_sessions import agent_of, sessions_folder
from loopfuse.cli.config import Settings
from loopfuse.cli.decisions import scan_file
from loopfuse.cli.main import main
from loopfuse.cli.readers import InputError, read_bytes
from loopfuse.detector.editors import EDIT, READ, EditorCall, editor_call
from loopfuse.harness import ToolKind, reader_for
from loopfuse.harness.agent_cli import HookPayloadError
from loopfuse.harness.installers import InstallError
from loopfuse.harness.pi import (
    CLI,
    HARNESS,
    answer_text,
    exit_code,
    is_session_record,
    session_body,
)

RECORDED = Path(__file__).parent / "recorded" / "agent-clis" / "pi"
SESSION_ID = "01a24b20-0d56-727e-acf4-7dec7458c8d4"


def pi_file(home: Path, turns: list[Turn], session: str = SESSION_ID) -> Path:
    """A session where pi keeps it: ``~/.pi/agent/sessions/--<cwd>--/<time>_<id>.jsonl``."""
    folder = home / ".pi" / "agent" / "sessions" / "--home-dev-projects-p1--"
    name = f"2026-12-01T22-12-00-000Z_{session}.jsonl"
    return write_lines(folder / name, pi_session(session, turns))


def scan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    code = main(["scan", *args, "--format", "json", "--no-progress"])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    return code, json.loads(captured.out), captured.err


# --- tools and answers --------------------------------------------------------------------


def test_the_tools_are_data() -> None:
    assert HARNESS.kind("bash", {"command": "ls"}) is ToolKind.SHELL
    for name in ("read", "grep", "find", "ls"):
        assert HARNESS.kind(name, {"path": "."}) is ToolKind.READ
    assert HARNESS.kind("edit", {"path": "a", "edits": []}) is ToolKind.EDITOR
    assert HARNESS.kind("write", {"path": "a", "content": ""}) is ToolKind.EDITOR
    assert HARNESS.kind("my_extension_tool", {}) is None  # the generic vocabulary judges it


def test_pis_file_tools_are_read_by_their_arguments() -> None:
    """``read`` only reads; ``edit`` and ``write`` change the file their ``path`` names."""
    assert editor_call("read", {"path": "src/a.py"}) == EditorCall(READ)
    assert editor_call("write", {"path": "a.txt", "content": "x"}) == EditorCall(EDIT, "a.txt")
    edits = {"path": "a.py", "edits": [{"oldText": "x", "newText": "y"}]}
    assert editor_call("edit", edits) == EditorCall(EDIT, "a.py")


def test_pis_tools_in_auto_agree_with_the_harnesses_that_share_their_names() -> None:
    """``bash`` and ``edit`` are SWE-agent's names too, ``grep`` and ``edit`` Gemini CLI's:
    the same kind, so "auto" still decides them (a disagreement would leave them to the
    generic vocabulary)."""
    auto = reader_for("auto")
    assert auto is not None
    assert auto.kind("bash", {"command": "ls"}) is ToolKind.SHELL
    assert auto.kind("edit", {"path": "a"}) is ToolKind.EDITOR
    assert auto.kind("grep", {"pattern": "x"}) is ToolKind.READ
    assert auto.kind("find", {"pattern": "*.py"}) is ToolKind.READ


def test_a_failed_command_is_read_from_its_status_line_only() -> None:
    failed = "ls: cannot access 'x': No such file or directory\n\n\nCommand exited with code 2"
    assert exit_code(failed) == 2
    assert HARNESS.failed("bash", failed) is True
    assert HARNESS.failed("bash", "output\n\nCommand timed out after 5 seconds") is True
    assert HARNESS.failed("bash", "partial\n\nCommand aborted") is True
    # A success says nothing of its status; a status line the command printed itself is
    # not the last line pi writes.
    assert HARNESS.failed("bash", "hello\n") is None
    assert HARNESS.failed("bash", "Command exited with code 2\nbut it went on\n") is None
    assert exit_code("Command exited with code 2\nbut it went on\n") is None


def test_the_name_of_a_cut_outputs_file_is_not_part_of_the_answer() -> None:
    """pi saves a long output to ``/tmp/pi-bash-<16 hex>.log``, a new name on each call:
    two calls that printed the same are the same answer."""
    one = "…\n\n[Showing lines 1-2000 of 5000. Full output: /tmp/pi-bash-0f1e2d3c4b5a6978.log]"
    two = "…\n\n[Showing lines 1-2000 of 5000. Full output: /tmp/pi-bash-a1b2c3d4e5f60718.log]"
    assert HARNESS.without_volatile(one) == HARNESS.without_volatile(two)
    assert (
        HARNESS.without_volatile("/tmp/pi-bash-notahexname.log") == "/tmp/pi-bash-notahexname.log"
    )


def test_a_results_parts_are_the_text_the_model_reads() -> None:
    recorded = json.loads((RECORDED / "post-002.json").read_text())["stdin"]["event"]
    assert answer_text(recorded["content"]).endswith("Command exited with code 2")
    image = {"type": "image", "mimeType": "image/png", "size": 12, "sha256": "ab"}
    assert answer_text([{"type": "text", "text": "a"}, image]).startswith("a\n{")
    assert answer_text("as it came") == "as it came"


# --- the hook: loopfuse's extension -------------------------------------------------------


def recorded_events() -> list[dict[str, Any]]:
    """What loopfuse's extension sent its hook in a run of the real pi."""
    lines = (RECORDED / "loopfuse-events.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_the_extensions_events_read_as_the_hook_reads_them() -> None:
    prompt, before, after, *parallel = [CLI.parse(event) for event in recorded_events()]
    assert (prompt.phase, prompt.agent) == ("turn", "pi")
    assert (before.phase, before.tool_name, before.tool_input) == (
        "before",
        "bash",
        {"command": "echo hello"},
    )
    assert before.call_id == after.call_id == "call_00000000000000000001"
    assert (after.phase, after.answer, after.error, after.exit_code) == (
        "after",
        "hello\n",
        False,
        0,
    )
    [failed] = [e for e in parallel if e.phase == "after" and e.error]
    assert failed.tool_input == {"command": "ls /nonexistent"}
    assert (failed.exit_code, failed.answer.endswith("Command exited with code 2")) == (2, True)
    assert {e.session for e in parallel} == {prompt.session}


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"hook_event_name": "tool_call"},
        {"hook_event_name": "tool_call", "session_id": "s"},
        {"hook_event_name": "tool_call", "session_id": "", "tool_name": "bash"},
        {"hook_event_name": "turn_end", "session_id": "s", "tool_name": "bash"},
        {"hook_event_name": ["tool_call"], "session_id": "s", "tool_name": "bash"},
    ],
)
def test_what_is_not_an_event_of_the_extension_is_refused(payload: dict[str, Any]) -> None:
    with pytest.raises(HookPayloadError):
        CLI.parse(payload)


def test_an_answer_without_a_flag_or_with_an_image_still_reads() -> None:
    event = CLI.parse(
        {
            "hook_event_name": "tool_result",
            "session_id": "s",
            "tool_name": "read",
            "tool_input": {"path": "a.png"},
            "tool_response": [{"type": "image", "mimeType": "image/png", "size": 4, "sha256": "e"}],
        }
    )
    assert (event.error, event.exit_code, event.call_id) == (None, None, None)
    assert '"sha256": "e"' in str(event.answer)
    cut = "ok\n\n[Showing lines 1-2 of 9. Full output: /tmp/pi-bash-0123456789abcdef.log]"
    event = CLI.parse(
        {
            "hook_event_name": "tool_result",
            "session_id": "s",
            "tool_name": "bash",
            "tool_input": {"command": "make"},
            "tool_response": [{"type": "text", "text": cut}],
            "is_error": False,
        }
    )
    assert event.answer == cut.replace("0123456789abcdef", "")


def test_the_answers_are_the_extensions_words() -> None:
    before = CLI.parse(CLI.probe_event("s"))
    after = CLI.parse(recorded_events()[2])
    assert CLI.render(before, "allow", "") == ("", 0)
    assert CLI.render(before, "deny", "R") == ('{"block": true, "reason": "R"}', 0)
    assert CLI.render(before, "end", "R") == ('{"block": true, "reason": "R", "end": true}', 0)
    assert CLI.render(before, "note", "R") == ("", 0)  # a note comes after the call
    assert CLI.render(after, "note", "T") == ('{"note": "T"}', 0)
    assert CLI.render(after, "deny", "R") == ("", 0)  # a call that ran cannot be refused
    assert CLI.render_user_message(before, "M") == ('{"message": "M"}', 0)
    turn = CLI.parse(recorded_events()[0])
    assert CLI.render(turn, "deny", "R") == ("", 0)


def test_the_extension_goes_in_pis_extension_folders() -> None:
    cwd = Path("/w")
    assert CLI.settings_path(False, {"HOME": "/h"}, cwd) == Path(
        "/h/.pi/agent/extensions/loopfuse.ts"
    )
    env = {"HOME": "/h", "PI_CODING_AGENT_DIR": "/a"}
    assert CLI.settings_path(False, env, cwd) == Path("/a/extensions/loopfuse.ts")
    assert CLI.settings_path(True, env, cwd) == Path("/w/.pi/extensions/loopfuse.ts")


def mine(command: str) -> bool:
    return command.startswith("loopfuse hook")


def test_the_extension_runs_the_command_it_was_written_with() -> None:
    command = "loopfuse hook --agent pi --config 'my settings.toml'"
    text = CLI.installer.install("", command, mine)
    assert "const COMMAND: string[] = " + json.dumps(shlex.split(command)) + ";" in text
    assert CLI.installer.commands(text, mine) == {
        event: [command] for event in ("before_agent_start", "tool_call", "tool_result")
    }
    assert CLI.installer.install(text, "loopfuse hook --agent pi", mine) != text
    assert CLI.installer.uninstall(text, mine) == ""
    # Another extension in its place is not ours: left as it is, never overwritten.
    other = "export default function (pi) {}\n"
    assert CLI.installer.uninstall(other, mine) == other
    with pytest.raises(InstallError):
        CLI.installer.install(other, command, mine)


def test_the_extension_is_small_readable_and_never_breaks_pi() -> None:
    text = CLI.installer.install("", "loopfuse hook --agent pi", mine)
    assert len(text.splitlines()) <= 200
    # pi refuses the call of an extension that throws, and an unhandled EPIPE on the
    # hook's stdin ends pi: every handler catches, the child's stdin and spawn errors
    # are handled (tests/test_e2e_pi.py runs it in the real pi).
    assert 'child.stdin.on("error"' in text
    assert 'child.on("error"' in text
    assert text.count("} catch {}") >= 4


# --- sessions -----------------------------------------------------------------------------


def test_the_recorded_session_is_recognised_and_read() -> None:
    raw = (RECORDED / "session-sample.jsonl").read_bytes()
    assert agent_of(raw[:4096]) == "pi"
    records = [(n, json.loads(line)) for n, line in enumerate(raw.splitlines(), start=1)]
    assert all(is_session_record(record) for _, record in records)
    read = session_body(records)
    assert read is not None
    body, meta, problems = read
    assert problems == []
    assert meta == {
        "session": SESSION_ID,
        "project": "/tmp/clis-pi-Ywi7/work",
        "started": "2026-12-06T11:32:01.495Z",
        "model": "fake-model",
    }
    calls = [b for m in body["messages"] for b in m["content"] if b["type"] == "tool_use"]
    results = [b for m in body["messages"] for b in m["content"] if b["type"] == "tool_result"]
    assert [c["name"] for c in calls] == ["read", "bash", "bash", "bash"]
    assert calls[1]["input"] == {"command": "ls /nonexistent"}
    assert [r["is_error"] for r in results] == [True, True, True, True]
    assert results[0]["content"].endswith("missing.txt'\nLOOPFUSE-NOTE")


def test_a_looping_session_is_flagged_and_a_healthy_one_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report, _ = scan(capsys, str(pi_file(tmp_path, looping())))
    assert code == 1
    [run] = report["files"]
    assert run["meta"]["agent"] == "pi"
    assert run["meta"]["session"] == SESSION_ID
    [finding] = run["findings"]
    assert finding["calls"] == ['bash {"command":"make"}']
    code, report, err = scan(capsys, str(pi_file(tmp_path, healthy(), "other")))
    assert (code, err) == (0, "")
    assert report["files"][0]["clean"] is True


def test_agent_pi_finds_the_sessions_where_pi_keeps_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("PI_CODING_AGENT_DIR", raising=False)
    monkeypatch.delenv("PI_CODING_AGENT_SESSION_DIR", raising=False)
    pi_file(tmp_path, looping())
    code, report, _ = scan(capsys, "--agent", "pi")
    assert code == 1
    assert [run["meta"]["agent"] for run in report["files"]] == ["pi"]
    # pi's own variables move the folder.
    env = {"HOME": "/h", "PI_CODING_AGENT_DIR": "/a"}
    assert sessions_folder("pi", env).roots == (Path("/a/sessions"),)
    env["PI_CODING_AGENT_SESSION_DIR"] = "/s"
    assert sessions_folder("pi", env).roots == (Path("/s"),)
    assert sessions_folder("pi", {"HOME": "/h"}).roots == (Path("/h/.pi/agent/sessions"),)
    env = {"HOME": "/h", "PI_CODING_AGENT_DIR": "~/pi"}
    assert sessions_folder("pi", env).roots == (Path("/h/pi/sessions"),)


def test_a_session_whose_calls_are_in_a_shape_not_known_is_never_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A later pi that moves its messages' calls elsewhere: the file is recognised, read
    without a call, and reported as not understood (with the calls it seems to hold)."""
    lines = pi_session(SESSION_ID, looping())
    for line in lines:
        message = line.get("message")
        if isinstance(message, dict) and message.get("role") == "assistant":
            message["parts"] = message.pop("content")
    code, report, err = scan(capsys, str(write_lines(tmp_path / "s.jsonl", lines)))
    assert code != 0
    assert not report["files"] or report["files"][0].get("clean") is not True
    assert "not understood" in err
    assert "10 tool calls" in err


def test_the_same_long_output_twice_is_the_same_answer_in_a_scan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A command whose output pi cut names a new file each call; without that name the
    answers are alike and the repeat is found where any other is (noted at turn 4 and
    refused at turn 5, as a success repeated in the other CLIs' sessions)."""
    turns = [
        Turn(
            "npm test",
            f"ok 1\n\n[Showing lines 1-2000 of 9000. Full output: /tmp/pi-bash-{i:016x}.log]",
            failed=False,
        )
        for i in range(10)
    ]
    code, report, _ = scan(capsys, str(pi_file(tmp_path, turns)))
    assert code == 1
    [finding] = report["files"][0]["findings"]
    assert (finding["kind"], finding["first"]) == ("repeat", 4)
    assert [(s["noted"], s["first"]) for s in finding["spans"]] == [(True, 4), (False, 5)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_value_anywhere_in_a_session_is_read_or_refused_never_a_crash(
    data: st.DataObject,
) -> None:
    lines: list[Any] = pi_session(SESSION_ID, looping()[:3])
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(0, len(lines) - 1))
        record = json.loads(json.dumps(lines[index]))
        inner = record
        path = [data.draw(st.sampled_from(sorted(inner)))]
        while isinstance(inner[path[-1]], dict) and inner[path[-1]] and data.draw(st.booleans()):
            inner = inner[path[-1]]
            path.append(data.draw(st.sampled_from(sorted(inner))))
        inner[path[-1]] = data.draw(json_values)
        lines[index] = record
    raw = "".join(json.dumps(line) + "\n" for line in lines).encode()
    error: InputError | None = None
    try:
        scan_file(read_bytes("pi.jsonl", raw, log=True), Settings())
    except InputError as exc:
        error = exc
    assert error is None or str(error).startswith("pi.jsonl: ")
