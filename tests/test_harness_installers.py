"""The installer kinds (issue 27 §1): pure text transforms, CLI-free, parameterised by
the events and the entry shape; ``loopfuse init`` does the file handling."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from loopfuse.harness.installers import (
    ARGV,
    BEGIN,
    COMMAND,
    END,
    HooksMap,
    InstallError,
    TomlTables,
    WholeFile,
    toml_string,
)


def ours(command: str) -> bool:
    return command.startswith("lf hook")


EVENTS = ("Before", "After", "Prompt")
MAP = HooksMap(EVENTS, untargeted=frozenset({"Prompt"}))


def test_a_hooks_map_installs_one_entry_per_event_and_keeps_the_rest() -> None:
    text = '{\n  "theme": "dark",\n  "hooks": {"Before": [{"matcher": "x", "hooks": []}]}\n}\n'
    done = MAP.install(text, "lf hook --a", ours)
    value = json.loads(done)
    assert value["theme"] == "dark"
    assert value["hooks"]["Before"][0] == {"matcher": "x", "hooks": []}
    mine = {"type": "command", "command": "lf hook --a"}
    assert value["hooks"]["Before"][1] == {"matcher": "*", "hooks": [mine]}
    assert value["hooks"]["Prompt"] == [{"hooks": [mine]}]  # no tool to match
    assert MAP.commands(done, ours) == {e: ["lf hook --a"] for e in EVENTS}
    assert MAP.same(MAP.install(done, "lf hook --a", ours), done)  # idempotent
    again = MAP.install(done, "lf hook --b", ours)  # replaced where it was
    assert MAP.commands(again, ours) == {e: ["lf hook --b"] for e in EVENTS}
    assert MAP.uninstall(again, ours) == text
    assert MAP.uninstall(text, ours) == text  # nothing of ours: as it was


def test_a_hooks_map_makes_a_new_file_and_empties_it_again() -> None:
    made = MAP.install("", "lf hook", ours)
    assert made.endswith("}\n")
    assert MAP.commands(made, ours)
    assert MAP.same_but_spacing(MAP.uninstall(made, ours), "")  # init removes the file
    assert MAP.same("", "{ }")
    assert not MAP.same("", '{"a": 1}')


def test_a_hooks_map_keeps_comments_where_the_cli_reads_them() -> None:
    commented = HooksMap(("Before",), comments=True)
    text = '{\n  // mine\n  "a": 1\n}\n'
    done = commented.install(text, "lf hook", ours)
    assert "// mine" in done
    assert commented.uninstall(done, ours) == text
    with pytest.raises(InstallError, match="not valid JSON"):
        MAP.check(text)


def test_a_hooks_map_without_groups_holds_the_handlers_themselves() -> None:
    flat = HooksMap(("before",), command_key="bash", grouped=False)
    text = '{"hooks": {"before": [{"type": "command", "bash": "mine"}]}}'
    done = flat.install(text, "lf hook", ours)
    assert json.loads(done)["hooks"]["before"] == [
        {"type": "command", "bash": "mine"},
        {"type": "command", "bash": "lf hook"},
    ]
    assert flat.commands(done, ours) == {"before": ["lf hook"]}
    assert flat.uninstall(done, ours) == text
    alone = flat.install("", "lf hook", ours)
    assert json.loads(flat.uninstall(alone, ours)) == {}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[1]", "not a JSON object"),
        ('{"a": 1', "not valid JSON"),
        ('{"a": 1, "a": 2}', "not valid JSON"),
        ('{"hooks": []}', "'hooks' is not a JSON object"),
        ('{"hooks": {"Before": {}}}', "hooks.Before is not a list"),
    ],
)
def test_a_hooks_map_refuses_what_it_cannot_edit(text: str, problem: str) -> None:
    with pytest.raises(InstallError, match=problem):
        MAP.install(text, "lf hook", ours)


PLUGIN = WholeFile(f"export const hook = {COMMAND};\nconst argv = {ARGV};\n", ("before", "after"))


def test_a_whole_file_is_written_whole_and_removed_whole() -> None:
    text = PLUGIN.install("", "lf hook --mode 'a b'", ours)
    assert text == (
        "export const hook = \"lf hook --mode 'a b'\";\n"
        'const argv = ["lf", "hook", "--mode", "a b"];\n'
    )
    assert PLUGIN.commands(text, ours) == {e: ["lf hook --mode 'a b'"] for e in ("before", "after")}
    assert PLUGIN.install(text, "lf hook --mode 'a b'", ours) == text  # idempotent
    assert PLUGIN.install(text, "lf hook", ours) == PLUGIN.render("lf hook")  # replaced
    assert PLUGIN.uninstall(text, ours) == ""  # init removes the file
    assert PLUGIN.same_but_spacing(PLUGIN.uninstall(text, ours), "")


@pytest.mark.parametrize(
    "foreign",
    [
        "// the user's own plugin\n",
        PLUGIN.render("lf hook") + "// added by hand\n",
        PLUGIN.render("other-tool hook"),  # the template, but not loopfuse's command
        'export const hook = "lf hook";\nconst argv = ["lf", "other"];\n',  # two commands
        'export const hook = "lf hook' + "[" * 100_000,
    ],
)
def test_a_whole_file_that_is_not_ours_is_refused_and_left_alone(foreign: str) -> None:
    with pytest.raises(InstallError, match="did not write"):
        PLUGIN.install(foreign, "lf hook", ours)
    assert PLUGIN.uninstall(foreign, ours) == foreign
    assert PLUGIN.commands(foreign, ours) == {}


def test_a_whole_file_of_an_earlier_release_is_still_ours() -> None:
    older = f"run({COMMAND})\n"
    plugin = WholeFile(f"run2({COMMAND})\n", ("before",), previous=(older,))
    assert plugin.uninstall('run("lf hook")\n', ours) == ""
    assert plugin.install('run("lf hook")\n', "lf hook", ours) == 'run2("lf hook")\n'


def test_a_template_without_a_place_for_the_command_is_refused() -> None:
    with pytest.raises(ValueError, match="without"):
        WholeFile("nothing here\n", ("before",))


# --- TomlTables: [[hooks]] tables in a TOML file (Kimi Code's config.toml) -------------

KIMI_CONFIG = (
    Path(__file__).parent / "recorded" / "agent-clis" / "kimi" / "config.toml"
).read_text(encoding="utf-8")
TOML_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "UserPromptSubmit")
LF_COMMAND = "/home/me/.venv/bin/loopfuse hook --agent kimi"
TABLES = TomlTables(TOML_EVENTS)


def toml_ours(command: str) -> bool:
    return command.split(" hook ")[0].endswith("/loopfuse")


KIMI_USER_FILE = (
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


def toml_entries(text: str) -> list[dict[str, str]]:
    hooks: list[dict[str, str]] = tomllib.loads(text).get("hooks", [])
    return hooks


def test_toml_tables_install_appends_one_table_per_event_and_keeps_the_file_byte_for_byte() -> None:
    text = TABLES.install(KIMI_USER_FILE, LF_COMMAND, toml_ours)
    assert text.startswith(KIMI_USER_FILE)
    assert text[len(KIMI_USER_FILE) :].splitlines()[0] == BEGIN
    assert text.rstrip("\n").endswith(END)
    assert toml_entries(text) == [
        {"event": "Stop", "command": "notify-send done"},
        *({"event": event, "command": LF_COMMAND} for event in TOML_EVENTS),
    ]
    assert TABLES.commands(text, toml_ours) == {event: [LF_COMMAND] for event in TOML_EVENTS}


def test_toml_tables_install_is_idempotent_and_a_new_command_replaces_the_old_in_place() -> None:
    once = TABLES.install(KIMI_USER_FILE, LF_COMMAND, toml_ours)
    assert TABLES.install(once, LF_COMMAND, toml_ours) == once
    later = once + '\n[models.more]\nprovider = "fake"\n'  # the user wrote more after it
    other = "/opt/loopfuse hook --agent kimi --mode refuse"
    again = TABLES.install(later, other, toml_ours)
    assert again == later.replace(toml_string(LF_COMMAND), toml_string(other))
    assert TABLES.commands(again, toml_ours) == {event: [other] for event in TOML_EVENTS}


def test_toml_tables_uninstall_restores_the_original() -> None:
    for original in (KIMI_USER_FILE, KIMI_CONFIG, "", 'default_model = "m"'):
        installed = TABLES.install(original, LF_COMMAND, toml_ours)
        assert TABLES.uninstall(installed, toml_ours) == (
            original if original.endswith("\n") or not original else original + "\n"
        )
    # nothing of loopfuse's: unchanged
    assert TABLES.uninstall(KIMI_USER_FILE, toml_ours) == KIMI_USER_FILE


def test_toml_tables_whose_markers_were_lost_are_recognised_by_their_command() -> None:
    """Kimi Code writes its settings out again (a model switch, /login): the comments go,
    the tables stay, and --remove still takes them out, and only them."""
    rewritten = (
        KIMI_USER_FILE
        + "".join(
            f'\n[[hooks]]\nevent = "{event}"\ncommand = "{LF_COMMAND}"\n' for event in TOML_EVENTS
        )
        + '\n# the user\'s note\n[models.fake]\nprovider = "fake"\n'
    )
    removed = TABLES.uninstall(rewritten, toml_ours)
    assert toml_entries(removed) == [{"event": "Stop", "command": "notify-send done"}]
    assert "# the user's note\n[models.fake]" in removed
    assert removed.startswith(KIMI_USER_FILE)
    installed = TABLES.install(rewritten, LF_COMMAND, toml_ours)  # replaced, not doubled
    assert [e["event"] for e in toml_entries(installed)] == ["Stop", *TOML_EVENTS]


def test_toml_tables_a_command_with_quotes_and_backslashes_reads_back_as_written() -> None:
    command = '/home/o\'neil/"my env"/bin/loopfuse hook --agent kimi --config C:\\x\t.toml'
    text = TABLES.install("", command, toml_ours)
    assert [e["command"] for e in toml_entries(text)] == [command] * len(TOML_EVENTS)
    assert TABLES.uninstall(text, toml_ours) == ""


def test_toml_tables_crlf_files_keep_their_line_ends() -> None:
    crlf = KIMI_USER_FILE.replace("\n", "\r\n")
    text = TABLES.install(crlf, LF_COMMAND, toml_ours)
    assert text.startswith(crlf)
    assert TABLES.uninstall(text, toml_ours) == crlf


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('hooks = [{event = "Stop", command = "x"}]\n', "could not be edited"),
        ("hooks = 3\n", "not an array of tables"),
        ("[providers\n", "not valid TOML"),
        (f"{BEGIN}\n[[hooks]]\n", "no end marker"),
    ],
)
def test_toml_tables_a_file_that_cannot_be_edited_safely_is_refused(text: str, why: str) -> None:
    with pytest.raises(InstallError, match=why):
        TABLES.install(text, LF_COMMAND, toml_ours)


def test_toml_tables_a_table_that_only_looks_like_loopfuses_in_a_string_is_not_taken_out() -> None:
    tricky = (
        'notes = """\n[[hooks]]\nevent = "PreToolUse"\n"""\n'
        f'[[hooks]]\nevent = "PreToolUse"\ncommand = "{LF_COMMAND}"\n'
    )
    assert (
        TABLES.uninstall(tricky, toml_ours) == 'notes = """\n[[hooks]]\nevent = "PreToolUse"\n"""\n'
    )


def test_toml_tables_user_settings_written_after_the_block_into_its_table_are_refused() -> None:
    """A key the user added under loopfuse's last table belongs to that table in TOML:
    taking the table out would lose it, so the edit is refused, nothing lost."""
    installed = TABLES.install(KIMI_USER_FILE, LF_COMMAND, toml_ours) + "timeout = 5\n"
    with pytest.raises(InstallError):
        TABLES.uninstall(installed, toml_ours)


class _Scanned(str):
    """A line that counts the characters its ``find`` calls may read."""

    read = 0

    def find(self, sub: str, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
        begin = 0 if start is None else start
        stop = len(self) if end is None else min(end, len(self))
        where = super().find(sub, start, end)
        _Scanned.read += max(0, (where + len(sub) if where >= 0 else stop) - begin)
        return where


@pytest.mark.parametrize("piece", ['"""', "'''", '"""#', "\"\"\"x'''", "x"])
def test_toml_tables_find_their_strings_in_linear_time(piece: str) -> None:
    """A line made of triple quotes (a 4 MiB file can hold a million): each kind of quote
    is looked for from where it was last found, so the characters read stay a small
    multiple of the line's (they were the line's length at each quote: quadratic)."""
    from loopfuse.harness.installers import _quote_after

    line = _Scanned(piece * 20_000)
    _Scanned.read = 0
    _quote_after(line, None)
    assert _Scanned.read <= 4 * len(line) + 16
