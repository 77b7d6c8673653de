"""loopfuse's ``[[hooks]]`` tables in a TOML settings file (Kimi Code's ``config.toml``):
added as text, the rest of the file kept byte for byte, taken out again (with or without
their markers), and every edit checked by the standard TOML reader."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from loopfuse.harness.toml_hooks import BEGIN, END, TomlHooksError, TomlTables, toml_string

RECORDED = (Path(__file__).parent / "recorded" / "agent-clis" / "kimi" / "config.toml").read_text(
    encoding="utf-8"
)
EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "UserPromptSubmit")
COMMAND = "/home/me/.venv/bin/loopfuse hook --agent kimi"
HOOKS = TomlTables(EVENTS)


def ours(command: str) -> bool:
    return command.split(" hook ")[0].endswith("/loopfuse")


USER_FILE = (
    "# my Kimi settings\n"
    'default_model = "fake"  # the one I use\n\n'
    "[providers.fake]\n"
    'type = "openai"\n'
    'base_url = "http://127.0.0.1:9/v1"\n'
    'api_key = "dummy"\n\n'
    "[[hooks]]\n"
    'event = "Stop"\n'
    'command = "notify-send done"\n'
)


def entries(text: str) -> list[dict[str, str]]:
    hooks: list[dict[str, str]] = tomllib.loads(text).get("hooks", [])
    return hooks


def test_install_appends_one_table_per_event_and_keeps_the_file_byte_for_byte() -> None:
    text = HOOKS.install(USER_FILE, COMMAND, ours)
    assert text.startswith(USER_FILE)
    assert text[len(USER_FILE) :].splitlines()[0] == BEGIN
    assert text.rstrip("\n").endswith(END)
    assert entries(text) == [
        {"event": "Stop", "command": "notify-send done"},
        *({"event": event, "command": COMMAND} for event in EVENTS),
    ]
    assert HOOKS.commands(text, ours) == {event: [COMMAND] for event in EVENTS}


def test_install_is_idempotent_and_a_new_command_replaces_the_old_in_place() -> None:
    once = HOOKS.install(USER_FILE, COMMAND, ours)
    assert HOOKS.install(once, COMMAND, ours) == once
    later = once + '\n[models.more]\nprovider = "fake"\n'  # the user wrote more after it
    other = "/opt/loopfuse hook --agent kimi --mode refuse"
    again = HOOKS.install(later, other, ours)
    assert again == later.replace(toml_string(COMMAND), toml_string(other))
    assert HOOKS.commands(again, ours) == {event: [other] for event in EVENTS}


def test_uninstall_restores_the_original() -> None:
    for original in (USER_FILE, RECORDED, "", 'default_model = "m"'):
        installed = HOOKS.install(original, COMMAND, ours)
        assert HOOKS.uninstall(installed, ours) == (
            original if original.endswith("\n") or not original else original + "\n"
        )
    assert HOOKS.uninstall(USER_FILE, ours) == USER_FILE  # nothing of loopfuse's: unchanged


def test_tables_whose_markers_were_lost_are_recognised_by_their_command() -> None:
    """Kimi Code writes its settings out again (a model switch, /login): the comments go,
    the tables stay, and --remove still takes them out, and only them."""
    rewritten = (
        USER_FILE
        + "".join(f'\n[[hooks]]\nevent = "{event}"\ncommand = "{COMMAND}"\n' for event in EVENTS)
        + '\n# the user\'s note\n[models.fake]\nprovider = "fake"\n'
    )
    removed = HOOKS.uninstall(rewritten, ours)
    assert entries(removed) == [{"event": "Stop", "command": "notify-send done"}]
    assert "# the user's note\n[models.fake]" in removed
    assert removed.startswith(USER_FILE)
    installed = HOOKS.install(rewritten, COMMAND, ours)  # replaced, not doubled
    assert [e["event"] for e in entries(installed)] == ["Stop", *EVENTS]


def test_a_command_with_quotes_and_backslashes_reads_back_as_written() -> None:
    command = '/home/o\'neil/"my env"/bin/loopfuse hook --agent kimi --config C:\\x\t.toml'
    text = HOOKS.install("", command, ours)
    assert [e["command"] for e in entries(text)] == [command] * len(EVENTS)
    assert HOOKS.uninstall(text, ours) == ""


def test_crlf_files_keep_their_line_ends() -> None:
    crlf = USER_FILE.replace("\n", "\r\n")
    text = HOOKS.install(crlf, COMMAND, ours)
    assert text.startswith(crlf)
    assert HOOKS.uninstall(text, ours) == crlf


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('hooks = [{event = "Stop", command = "x"}]\n', "could not be edited"),
        ("hooks = 3\n", "not an array of tables"),
        ("[providers\n", "not valid TOML"),
        (f"{BEGIN}\n[[hooks]]\n", "no end marker"),
    ],
)
def test_a_file_that_cannot_be_edited_safely_is_refused(text: str, why: str) -> None:
    with pytest.raises(TomlHooksError, match=why):
        HOOKS.install(text, COMMAND, ours)


def test_a_table_that_only_looks_like_loopfuses_in_a_string_is_not_taken_out() -> None:
    tricky = (
        'notes = """\n[[hooks]]\nevent = "PreToolUse"\n"""\n'
        f'[[hooks]]\nevent = "PreToolUse"\ncommand = "{COMMAND}"\n'
    )
    assert HOOKS.uninstall(tricky, ours) == 'notes = """\n[[hooks]]\nevent = "PreToolUse"\n"""\n'


def test_user_settings_written_after_the_block_into_its_table_are_refused() -> None:
    """A key the user added under loopfuse's last table belongs to that table in TOML:
    taking the table out would lose it, so the edit is refused, nothing lost."""
    installed = HOOKS.install(USER_FILE, COMMAND, ours) + "timeout = 5\n"
    with pytest.raises(TomlHooksError):
        HOOKS.uninstall(installed, ours)
