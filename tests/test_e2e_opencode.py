"""End to end: the real OpenCode (``opencode-ai``, pinned in ``.ci/agent-clis``), headless
(``opencode run --format json``), offline, against the fake model of
:mod:`agent_model`, guarded by loopfuse's plugin as ``loopfuse init --agent opencode``
installs it.

OpenCode has no hook commands: its plugins are JavaScript modules it loads itself.
loopfuse's plugin (``src/loopfuse/harness/opencode_plugin.js``) runs ``loopfuse hook
--agent opencode`` at each call and acts on its answer; these tests check that the
answers reach the model as docs/agents.md says, and that whatever goes wrong in the
plugin's reach (no loopfuse, a hook that reads nothing, a broken state folder) the
agent runs as if loopfuse were not there.

How OpenCode is run (isolated, offline, its plugin SDK in place so that it installs
nothing) is tests/opencode_cli.py.

Without the package these tests skip, saying how to install it (in CI they fail).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_clis import Home, HookedRun
from agent_model import (
    Script,
    commands_then_answer,
    parallel,
    poll_moving_log,
    same_command,
    strings,
)
from loopfuse.cli.hook_state import SessionState
from loopfuse.harness.opencode import CLI
from opencode_cli import (
    OPENCODE,
    READ,
    OpenCodeModel,
    environment,
    needs_opencode,
    prepared,
    run_opencode,
    user_folder,
)

pytestmark = needs_opencode
# A failing command that leaves a trace of each time it really ran.
FAILING = "echo attempt >> attempts.log; cat missing.txt"
# docs/detector.md: the same call with the same failing answer is a loop at the 3rd call.
NOTED_AT = 3


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return prepared(tmp_path)


def loopfuse(home: Home, *argv: str) -> subprocess.CompletedProcess[str]:
    """The ``loopfuse`` console script of the environment the tests run in, in the
    isolated home (what a user types)."""
    script = Path(sys.executable).with_name("loopfuse")
    return subprocess.run(
        [str(script), *argv],
        cwd=home.workspace,
        env=environment(home, "http://127.0.0.1:9"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def loopfuse_init(home: Home, *flags: str) -> str:
    done = loopfuse(home, "init", "--agent", "opencode", *flags)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


@dataclass
class GuardedRun(HookedRun):
    """An OpenCode run with loopfuse's plugin installed, and what it left."""

    hook_agent = "opencode"

    def answers(self, turn: int) -> list[str]:
        """The calls' answers the model read in the request of ``turn``."""
        messages = self.model.turns[turn].body["messages"]
        return [m["content"] for m in messages if m.get("role") == "tool"]

    def first_turn(self, wanted: str) -> int | None:
        """The first turn whose request carries a note (``"note"``: an answer that goes
        on with loopfuse's words) or a refusal (``"refusal"``: an answer that is them)."""
        for request in self.model.turns:
            for message in request.body["messages"]:
                text = message.get("content") if message.get("role") == "tool" else None
                if not isinstance(text, str) or "[loopfuse]" not in text:
                    continue
                if (text.startswith("[loopfuse]")) == (wanted == "refusal"):
                    return request.turn
        return None

    def untouched(self, calls: int) -> None:
        """No note, no refusal, nothing logged; the model made ``calls`` calls."""
        assert not any("loopfuse" in text for r in self.model.requests for text in strings(r.body))
        assert len(self.model.turns) == calls + 1
        assert self.log_lines() == []


def guarded(home: Home, script: Script, *flags: str, ok: bool = True) -> GuardedRun:
    """Run OpenCode on ``script`` with loopfuse's plugin installed by ``loopfuse init``
    (with ``flags``) in the isolated home; the run succeeded unless not ``ok``."""
    said = loopfuse_init(home, *flags)
    assert "@opencode-ai/plugin" in said  # the SDK install a first start may make
    with OpenCodeModel(script) as model:
        run = run_opencode(home, model)
    if ok:
        assert run.returncode == 0, run.stderr[-3000:]
    return GuardedRun(home, run, model)


def calls_and_answers(state: SessionState) -> tuple[list[Any], list[Any]]:
    calls = [e for e in state.events if e[0] == "call"]
    answers = [e for e in state.events if e[0] == "answer"]
    return calls, answers


def test_a_looping_model_is_told_then_refused_with_the_reason(home: Home) -> None:
    """The same failing command every turn: at the 3rd call the command runs and its
    answer ends with loopfuse's note; the 4th and every one after is refused, its
    answer exactly loopfuse's reason, and did not run; OpenCode went on to its answer."""
    turns = 6
    done = guarded(home, same_command(FAILING, turns))
    assert (done.first_turn("note"), done.first_turn("refusal")) == (NOTED_AT, NOTED_AT + 1)
    noted = done.answers(NOTED_AT)[-1]
    assert noted.startswith("cat: missing.txt: No such file or directory\n")
    assert "\n[loopfuse] " in noted
    for turn in range(NOTED_AT + 1, turns + 1):
        refusal = done.answers(turn)[-1]
        assert refusal.startswith("[loopfuse] ")
        assert "This call was refused" in refusal
    assert done.attempts() == NOTED_AT  # nothing refused ran
    assert len(done.model.turns) == turns + 1
    logged = done.log_lines()
    assert sum("loop noted" in line for line in logged) == 1
    assert sum("call refused" in line for line in logged) == turns - NOTED_AT
    recorded, answers = calls_and_answers(done.session())
    assert len(recorded) == turns
    assert len(answers) == NOTED_AT  # a refused call has none
    # The session OpenCode kept (its database), read by scan: the same calls, the loop.
    scanned = loopfuse(home, "scan", "--agent", "opencode", "--format", "json", "--no-progress")
    assert scanned.returncode == 1, scanned.stderr
    [run] = json.loads(scanned.stdout)["files"]
    assert (run["meta"]["agent"], run["tool_calls"]) == ("opencode", turns)
    assert run["findings"]


@pytest.mark.slow
def test_a_healthy_run_is_untouched_and_every_call_and_answer_reached_the_hook(
    home: Home,
) -> None:
    (home.workspace / "notes.txt").write_text("one\ntwo\n", encoding="utf-8")
    script = commands_then_answer("ls", "cat notes.txt", f"{READ}notes.txt", "wc -l notes.txt")
    done = guarded(home, script, "--project")
    assert (home.workspace / ".opencode" / "plugins" / "loopfuse.js").is_file()
    done.untouched(calls=4)
    recorded, answers = calls_and_answers(done.session())
    assert [c[2] for c in recorded] == ["bash", "bash", "read", "bash"]
    assert len(answers) == 4


@pytest.mark.slow
def test_a_healthy_poll_whose_output_moves_is_untouched(home: Home) -> None:
    """``tail -5 build.log`` ten times while the build writes a line before each: the
    same call, but its answer moves (progress), so never a loop."""
    polls = 10
    done = guarded(home, poll_moving_log(home.workspace / "build.log", polls))
    done.untouched(calls=polls)
    assert any(f"step {polls - 1}:" in text for text in done.texts(polls))


@pytest.mark.slow
def test_a_failing_tool_has_no_after_event_but_its_failure_is_seen(home: Home) -> None:
    """``read`` of a missing file throws in OpenCode: no ``tool.execute.after``. The
    plugin reports the failure from the call's part: the same failing read is told and
    refused as a failing command is (a read that fails is no progress)."""
    turns = 8
    done = guarded(home, same_command(f"{READ}missing.txt", turns))
    noted, refused = done.first_turn("note"), done.first_turn("refusal")
    # a read gets the read-only allowance (docs/detector.md): refused at the 5th, where
    # --mode refuse refuses it, and told one call before (warn's early note)
    assert (noted, refused) == (4, 5)
    note = done.answers(noted)[-1]
    assert note.startswith("File not found: ")
    assert "\n\n[loopfuse] " in note
    recorded, answers = calls_and_answers(done.session())
    assert len(recorded) == turns
    assert len(answers) == noted
    assert len(done.model.turns) == turns + 1


@pytest.mark.slow
def test_with_end_session_a_loop_that_goes_on_after_its_refusal_ends_the_session(
    home: Home,
) -> None:
    """``--end-session``: told at the 3rd call, refused at the 4th, and the 5th ends the
    session (the plugin aborts it): no request follows, ``opencode run`` exits 1."""
    done = guarded(home, same_command(FAILING, 8), "--end-session", ok=False)
    assert done.run.returncode == 1
    assert (done.first_turn("note"), done.first_turn("refusal")) == (NOTED_AT, NOTED_AT + 1)
    assert len(done.model.turns) == NOTED_AT + 2
    assert done.attempts() == NOTED_AT
    assert sum("session ended" in line for line in done.log_lines()) == 1


PAIR = ("echo a >> attempts.log; cat missing-a.txt", "echo b >> attempts.log; cat b.txt")


@pytest.mark.slow
def test_two_parallel_calls_per_turn_keep_one_consistent_state(home: Home) -> None:
    """OpenCode runs a turn's calls at once, plugin hooks and all: the state holds
    every call once, every answer against its own call, and no hook gave up."""
    turns = 6
    done = guarded(home, parallel(PAIR, turns))
    recorded, answers = calls_and_answers(done.session())
    assert len(recorded) == 2 * turns
    ran = {call[1] for call in recorded if call[4] is not False}
    assert sorted(a[1] for a in answers) == sorted(ran)
    assert len(ran) == done.attempts()
    assert not any("allowed" in line or "internal error" in line for line in done.log_lines())


@pytest.mark.slow
def test_installed_for_the_user_and_the_project_each_call_is_judged_once(home: Home) -> None:
    """The plugin in both of OpenCode's folders: OpenCode loads both, one guards."""
    loopfuse_init(home, "--project")
    done = guarded(home, same_command(FAILING, 5))
    assert (done.first_turn("note"), done.first_turn("refusal")) == (NOTED_AT, NOTED_AT + 1)
    recorded, answers = calls_and_answers(done.session())
    assert len(recorded) == 5
    assert len(answers) == NOTED_AT


@pytest.mark.slow
def test_a_broken_state_directory_fails_open(home: Home) -> None:
    """A file where the state folder should be: every call runs as if loopfuse were not
    there, the model reads nothing of it, and the user is told on stderr."""
    (home.state / "loopfuse").write_text("not a folder", encoding="utf-8")
    turns = 5
    done = guarded(home, same_command(FAILING, turns))
    assert done.attempts() == turns
    assert len(done.model.turns) == turns + 1
    assert not any("loopfuse" in text for r in done.model.requests for text in strings(r.body))
    told = [line for line in done.run.stderr.splitlines() if line.startswith("loopfuse hook: ")]
    assert len(told) == 1 + 2 * turns  # each hook said why: the prompt, each call twice
    assert all("not a folder; the call is allowed, unguarded" in line for line in told)


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [["/nonexistent/loopfuse", "hook"], ["/bin/true"], ["/bin/sh", "-c", "echo '{'; exit 3"]],
    ids=["missing", "reads-nothing", "garbage"],
)
def test_a_hook_that_cannot_answer_lets_every_call_run(home: Home, command: list[str]) -> None:
    """The plugin fails open: no loopfuse where its command says, a hook that exits
    without reading its event (EPIPE), one that answers garbage: every call runs."""
    plugin = user_folder(home) / "plugins" / "loopfuse.js"
    plugin.parent.mkdir(parents=True)
    plugin.write_text(CLI.installer.render(shlex.join(command)), encoding="utf-8")
    turns = 5
    with OpenCodeModel(same_command(FAILING, turns)) as model:
        run = run_opencode(home, model)
    assert run.returncode == 0, run.stderr[-3000:]
    assert len(model.turns) == turns + 1
    assert (home.workspace / "attempts.log").read_text().count("attempt") == turns


@pytest.mark.slow
def test_the_session_reads_alike_from_its_database_and_from_opencode_export(home: Home) -> None:
    """``loopfuse scan`` reads what OpenCode kept, as the model saw it: its database and
    ``opencode export`` of the session give the same calls, the same loop."""
    turns = 6
    done = guarded(home, same_command(FAILING, turns))
    session = json.loads(done.run.stdout.splitlines()[0])["sessionID"]
    exported = subprocess.run(
        [str(OPENCODE), "export", session],
        cwd=home.workspace,
        env=environment(home, "http://127.0.0.1:9"),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    export = home.root / "export.json"
    export.write_text(exported.stdout, encoding="utf-8")
    keys = ("requests", "tool_calls", "findings")
    read = []
    for where in (["--agent", "opencode"], [str(export)]):
        scanned = loopfuse(home, "scan", *where, "--format", "json", "--no-progress")
        assert scanned.returncode == 1, scanned.stderr
        [run] = json.loads(scanned.stdout)["files"]
        assert run["meta"]["session"] == session
        read.append([run[key] for key in keys])
    assert read[0] == read[1]
    assert read[0][1] == turns
