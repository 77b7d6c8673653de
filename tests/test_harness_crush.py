"""Crush's hook protocol and settings file (loopfuse.harness.crush), on payloads built from
Crush's source (tests/recorded/agent-clis/crush/README.md says from which files and commits:
Crush cannot be installed here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopfuse.cli import crush_settings, settings_text
from loopfuse.harness import ToolKind, crush

RECORDED = Path(__file__).parent / "recorded" / "agent-clis" / "crush"
COMMAND = "/venv/bin/loopfuse hook --agent crush"


def payload(name: str) -> dict[str, object]:
    value = json.loads((RECORDED / name).read_text("utf-8"))
    assert isinstance(value, dict)
    return value


def test_a_pre_tool_use_payload_is_read_without_the_shells_prose() -> None:
    event = crush.read_payload(payload("pre-bash.json"))
    assert event.phase == "before"
    assert event.event_name == "PreToolUse"
    assert event.session == "5a1e0c9f-3b7d-4e52-9d1a-2c6f8e4b7a10"
    assert event.tool_name == "bash"
    assert event.tool_input == {"command": "npm test"}  # the description is not the call
    assert event.answer is None


@pytest.mark.parametrize(
    ("name", "kind"), [("pre-view.json", ToolKind.READ), ("pre-edit.json", ToolKind.EDITOR)]
)
def test_its_tools_are_declared(name: str, kind: ToolKind) -> None:
    event = crush.read_payload(payload(name))
    assert crush.HARNESS.kind(event.tool_name, event.tool_input) is kind


@pytest.mark.parametrize("spelling", ["pretooluse", "pre_tool_use", "PRE_TOOL_USE"])
def test_event_names_are_read_as_crush_normalises_them(spelling: str) -> None:
    event = crush.read_payload({**payload("pre-bash.json"), "event": spelling})
    assert event.event_name == "PreToolUse"


def test_pre_compact_is_not_a_tool_event() -> None:
    with pytest.raises(crush.CrushPayloadError, match="not a tool event"):
        crush.read_payload(payload("precompact.json"))


@pytest.mark.parametrize(
    "broken",
    [
        [],
        {"session_id": "s", "tool_name": "bash"},
        {"event": "PreToolUse", "tool_name": "bash"},
        {"event": "PreToolUse", "session_id": "", "tool_name": "bash"},
        {"event": "PreToolUse", "session_id": "s", "tool_name": 3},
    ],
)
def test_a_payload_that_is_not_crushs_is_refused_with_a_typed_error(broken: object) -> None:
    with pytest.raises(crush.CrushPayloadError):
        crush.read_payload(broken)


def test_the_unreleased_post_tool_use_carries_the_answer_and_its_failure_flag() -> None:
    event = crush.read_payload(payload("post-bash-pr3146.json"))
    assert event.phase == "after"
    assert event.error is True
    assert isinstance(event.answer, str)
    assert "Missing script" in event.answer


def test_answers_are_json_with_exit_status_zero_in_crushs_fields() -> None:
    before = crush.read_payload(payload("pre-bash.json"))
    assert crush.answer(before, "allow", "") == ("", 0)
    assert json.loads(crush.answer(before, "note", "N")[0]) == {"context": "N"}
    assert json.loads(crush.answer(before, "deny", "R")[0]) == {"decision": "deny", "reason": "R"}
    end = json.loads(crush.answer(before, "end", "R")[0])
    assert end == {"decision": "deny", "reason": "R", "halt": True}  # still a refusal
    assert {crush.answer(before, a, "x")[1] for a in ("note", "deny", "end")} == {0}


def test_after_a_call_nothing_is_refused_but_a_note_and_a_halt_still_go() -> None:
    after = crush.read_payload(payload("post-bash-pr3146.json"))
    assert crush.answer(after, "deny", "R") == ("", 0)
    assert json.loads(crush.answer(after, "note", "N")[0]) == {"context": "N"}
    assert json.loads(crush.answer(after, "end", "R")[0]) == {"halt": True, "reason": "R"}


def test_a_message_for_the_user_allows_the_call_without_a_decision() -> None:
    text, status = crush.user_message("settings refused")
    assert status == 0
    assert json.loads(text) == {"reason": "settings refused"}  # no decision: no opinion


def test_the_doctor_probe_is_read_as_a_pre_tool_use() -> None:
    event = crush.read_payload(crush.probe_payload("doctor-1"))
    assert (event.phase, event.session, event.tool_name) == ("before", "doctor-1", "bash")


def test_settings_paths(tmp_path: Path) -> None:
    home = {"HOME": "/h"}
    assert crush.settings_path(False, home, tmp_path) == Path("/h/.config/crush/crush.json")
    xdg = {"HOME": "/h", "XDG_CONFIG_HOME": "/x"}
    assert crush.settings_path(False, xdg, tmp_path) == Path("/x/crush/crush.json")
    assert crush.settings_path(True, home, tmp_path) == tmp_path / "crush.json"
    (tmp_path / ".crush.json").write_text("{}")
    assert crush.settings_path(True, home, tmp_path) == tmp_path / ".crush.json"
    (tmp_path / "crush.json").write_text("{}")
    assert crush.settings_path(True, home, tmp_path) == tmp_path / "crush.json"


def test_install_into_no_file_writes_one_flat_pre_tool_use_entry() -> None:
    text = crush_settings.install("", COMMAND)
    assert json.loads(text) == {
        "hooks": {
            "PreToolUse": [{"name": "loopfuse", "command": COMMAND, "timeout": crush.HOOK_TIMEOUT}]
        }
    }
    assert crush_settings.commands(text) == [COMMAND]
    assert crush_settings.uninstall(text) == ""


def test_install_keeps_the_users_hooks_and_bytes_and_is_idempotent() -> None:
    original = (RECORDED / "crush.json").read_text("utf-8")
    once = crush_settings.install(original, COMMAND)
    hooks = json.loads(once)["hooks"]["PreToolUse"]
    assert hooks[0]["name"] == "no-rm-rf"  # the user's hook runs first, as before
    assert hooks[1]["command"] == COMMAND
    assert crush_settings.install(once, COMMAND) == once
    other = crush_settings.install(once, COMMAND + " --mode refuse")
    assert crush_settings.commands(other) == [COMMAND + " --mode refuse"]  # replaced, not added
    assert crush_settings.uninstall(other) == original


def test_uninstall_leaves_other_settings_and_a_commented_file() -> None:
    text = '{\n  // mine\n  "options": {"debug": true}\n}\n'
    installed = crush_settings.install(text, COMMAND)
    assert "// mine" in installed
    assert crush_settings.uninstall(installed) == text


def test_a_command_that_only_mentions_loopfuse_is_not_ours() -> None:
    text = json.dumps({"hooks": {"PreToolUse": [{"command": "echo loopfuse hook --agent crush"}]}})
    assert crush_settings.commands(text) == []
    assert crush_settings.uninstall(text) == text


def test_hooks_of_the_wrong_shape_are_refused_not_overwritten() -> None:
    with pytest.raises(settings_text.SettingsTextError):
        crush_settings.install('{"hooks": []}', COMMAND)
    with pytest.raises(settings_text.SettingsTextError):
        crush_settings.install('{"hooks": {"PreToolUse": {}}}', COMMAND)
