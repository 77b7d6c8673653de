"""The installer kinds (issue 27 §1): pure text transforms, CLI-free, parameterised by
the events and the entry shape; ``loopfuse init`` does the file handling."""

from __future__ import annotations

import json

import pytest

from loopfuse.harness.installers import ARGV, COMMAND, HooksMap, InstallError, WholeFile


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
