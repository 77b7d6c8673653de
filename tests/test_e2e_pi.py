"""End to end: the real pi (``@mariozechner/pi-coding-agent``, pinned in ``.ci/agent-clis``),
headless against the fake model on loopback, guarded by ``loopfuse init --agent pi`` as a
user installs it: loopfuse's extension in pi's extension folder, running ``loopfuse hook
--agent pi`` at each event (tests/pi_e2e.py runs pi).

pi answers a refused call with the reason alone (the call's result is the reason); a note
is added to the result after a line break. Without pi these tests skip, saying how to
install it (in CI they fail).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_clis import Home, HookedRun, needs
from agent_model import (
    Reply,
    Script,
    commands_then_answer,
    parallel,
    poll_moving_log,
    same_command,
    strings,
)
from loopfuse.cli.hook_state import SessionState
from loopfuse.cli.main import main
from loopfuse.harness.agent_cli import agent_cli
from pi_e2e import PiModel, agent_dir, pi_environment, run_pi

pytestmark = needs("pi")

# A failing command that leaves a trace each time it really ran (it changes state: no
# read-only allowance).
FAILING = "echo attempt >> attempts.log; cat missing.txt"
# docs/detector.md: the same failing call with the same answer is a loop at the 3rd call.
NOTED_AT = 3
REFUSAL = "[loopfuse] "


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home(tmp_path).make()


def loopfuse_init(home: Home, *flags: str) -> str:
    """``loopfuse init --agent pi`` (the console script of the environment the tests run
    in), in the isolated home; its output."""
    loopfuse = Path(sys.executable).with_name("loopfuse")
    done = subprocess.run(
        [str(loopfuse), "init", "--agent", "pi", *flags],
        cwd=home.workspace,
        env=pi_environment(home),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


@dataclass
class GuardedRun(HookedRun):
    """A pi run with loopfuse's extension installed, and what it left."""

    hook_agent = "pi"

    def results(self, turn: int) -> list[str]:
        """The results of the calls the model read in the request of ``turn``."""
        messages = self.model.turns[turn].body["messages"]
        return [str(m.get("content")) for m in messages if m.get("role") == "tool"]

    def first_turn(self, wanted: str) -> int | None:
        """The first turn whose request carries a refusal (a result that is the reason)
        or a note (a result that ends with it): the number of the call it came with."""
        for request in self.model.turns:
            for text in self.results(request.turn or 0):
                refused = text.startswith(REFUSAL)
                noted = f"\n{REFUSAL}" in text and not refused
                if refused if wanted == "refusal" else noted:
                    return request.turn
        return None


def guarded_run(home: Home, script: Script, *flags: str) -> GuardedRun:
    """pi on ``script`` with loopfuse installed by ``loopfuse init --agent pi`` (with
    ``flags``), whatever the run's exit status."""
    loopfuse_init(home, *flags)
    with PiModel(script) as model:
        run = run_pi(home, model)
    return GuardedRun(home, run, model)


def guarded(home: Home, script: Script, *flags: str) -> GuardedRun:
    """:func:`guarded_run`; the run succeeded."""
    done = guarded_run(home, script, *flags)
    assert done.run.returncode == 0, done.run.stderr[-3000:]
    return done


def calls_and_answers(state: SessionState) -> tuple[list[Any], list[Any]]:
    calls = [e for e in state.events if e[0] == "call"]
    answers = [e for e in state.events if e[0] == "answer"]
    return calls, answers


def test_pi_a_looping_model_is_told_then_refused_with_the_reason(
    home: Home, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same failing call every turn: at the 3rd the call runs and its result ends
    with the note; the 4th and every one after it are refused, the reason alone their
    result; the refused calls did not run; and ``loopfuse scan --agent pi`` finds the
    loop in the session file pi kept."""
    turns = 6
    done = guarded(home, same_command(FAILING, turns))
    assert (done.first_turn("note"), done.first_turn("refusal")) == (NOTED_AT, NOTED_AT + 1)
    assert done.attempts() == NOTED_AT
    for turn in range(NOTED_AT + 1, turns + 1):  # each refusal reaches the next request
        refused = [t for t in done.results(turn) if t.startswith(REFUSAL)]
        assert len(refused) == turn - NOTED_AT
        assert "This call was refused" in refused[-1]
    assert len(done.model.turns) == turns + 1  # pi went on to the model's answer
    logged = done.log_lines()
    assert sum("loop noted" in line for line in logged) == 1
    assert sum("call refused" in line for line in logged) == turns - NOTED_AT
    # The session pi wrote, scanned where pi keeps it.
    sessions = agent_dir(home) / "sessions"
    assert main(["scan", str(sessions), "--format", "json", "--no-progress"]) == 1
    report = json.loads(capsys.readouterr().out)
    [run] = report["files"]
    assert run["meta"]["agent"] == "pi"
    call = json.dumps({"command": FAILING}, separators=(",", ":"))
    assert run["findings"][0]["calls"] == [f"bash {call}"]


@pytest.mark.slow
def test_pi_with_end_session_a_loop_that_goes_on_after_its_refusal_ends_the_run(
    home: Home,
) -> None:
    """``--end-session``: told at the 3rd call, refused at the 4th, and the 5th ends the
    run (pi's ``ctx.abort()``: no request after it, exit status 1)."""
    done = guarded_run(home, same_command(FAILING, 8), "--end-session")
    assert done.run.returncode == 1
    assert (done.first_turn("note"), done.first_turn("refusal")) == (NOTED_AT, NOTED_AT + 1)
    assert done.attempts() == NOTED_AT
    assert len(done.model.turns) == NOTED_AT + 2  # the model asked for call 5: nothing after
    assert sum("session ended" in line for line in done.log_lines()) == 1


@pytest.mark.slow
def test_pi_a_read_only_failing_command_is_told_refused_and_ended_at_the_documented_calls(
    home: Home,
) -> None:
    """``cat missing.txt`` every turn (docs/agents.md): the read-only allowance, so
    refused at the 5th call (where ``--mode refuse`` refuses it), noted one call before,
    at the 4th, the run ended at the 6th (``--end-session``)."""
    noted = 4
    done = guarded_run(home, same_command("cat missing.txt", 10), "--end-session")
    assert done.run.returncode == 1
    assert (done.first_turn("note"), done.first_turn("refusal")) == (noted, noted + 1)
    history = done.results(len(done.model.turns) - 1)
    ran = [t for t in history if "No such file or directory" in t]
    assert len(ran) == noted
    assert len(done.model.turns) == noted + 2


def assert_untouched(done: GuardedRun, calls: int) -> None:
    """No note, no refusal, nothing logged, nothing told the user; and the hook did see
    each call and its answer."""
    assert not any("loopfuse" in t for r in done.model.requests for t in strings(r.body))
    assert "loopfuse" not in done.run.stderr
    assert len(done.model.turns) == calls + 1
    assert done.log_lines() == []
    recorded, answers = calls_and_answers(done.session())
    assert len(recorded) == len(answers) == calls


@pytest.mark.slow
def test_pi_a_healthy_run_is_untouched_with_the_project_s_extension(home: Home) -> None:
    """Installed in the project (``.pi/extensions/loopfuse.ts``): a healthy run goes its
    way, every call seen."""
    (home.workspace / "notes.txt").write_text("one\ntwo\n", encoding="utf-8")
    said = loopfuse_init(home, "--project")
    assert (home.workspace / ".pi" / "extensions" / "loopfuse.ts").is_file()
    assert not (agent_dir(home) / "extensions").exists(), said
    with PiModel(commands_then_answer("ls", "cat notes.txt", "wc -l notes.txt")) as model:
        run = run_pi(home, model)
    assert run.returncode == 0, run.stderr
    assert_untouched(GuardedRun(home, run, model), calls=3)


@pytest.mark.slow
def test_pi_a_healthy_poll_whose_output_moves_is_untouched(home: Home) -> None:
    """``tail -5 build.log`` ten times while the build writes a line before each: the
    same call, but its answer moves (progress), so it is never a loop."""
    polls = 10
    done = guarded(home, poll_moving_log(home.workspace / "build.log", polls))
    assert_untouched(done, calls=polls)
    assert any(f"step {polls - 1}:" in text for text in done.results(polls))


@pytest.mark.slow
def test_pi_a_broken_state_folder_fails_open(home: Home) -> None:
    """A file where the state folder should be: every call runs, the model reads nothing
    of loopfuse, and the user is told once (pi's stderr) that the calls are unguarded."""
    (home.state / "loopfuse").write_text("not a folder", encoding="utf-8")
    turns = 5
    done = guarded(home, same_command(FAILING, turns))
    assert done.attempts() == turns
    assert len(done.model.turns) == turns + 1
    assert not any("loopfuse" in t for r in done.model.requests for t in strings(r.body))
    assert done.run.stderr.count("the call is allowed, unguarded") == 1


@pytest.mark.slow
def test_pi_shows_the_user_refused_settings_once(home: Home) -> None:
    """A settings file broken after ``init`` (a misspelt key): every call runs, the model
    reads nothing of loopfuse, and the user is told once, on pi's stderr (the hook's
    message for the user, which the extension shows)."""
    config = home.root / "loopfuse.toml"
    config.write_text("max_strikes = 3\n", encoding="utf-8")
    loopfuse_init(home, "--config", str(config))
    config.write_text("max_strike = 3\n", encoding="utf-8")
    turns = 5
    with PiModel(same_command(FAILING, turns)) as model:
        run = run_pi(home, model)
    done = GuardedRun(home, run, model)
    assert run.returncode == 0, run.stderr[-3000:]
    assert done.attempts() == turns
    assert not any("loopfuse" in t for r in model.requests for t in strings(r.body))
    told = "[loopfuse] The loop guard is OFF: its settings are refused"
    assert run.stderr.count(told) == 1
    assert "max_strike" in run.stderr


# A command line longer than a pipe's buffer (64 KiB): the extension's write of the event
# to a hook that does not read it fails with EPIPE.
LONG = "echo attempt >> attempts.log; true " + "#" * 100_000


@pytest.mark.slow
@pytest.mark.parametrize(
    ("hook", "told"),
    [
        pytest.param("sh -c 'exec 0<&-; sleep 0.2'", False, id="closes-its-stdin"),
        pytest.param("sh -c 'kill -9 $$'", True, id="killed"),
        pytest.param("sh -c 'echo not json'", True, id="not-an-answer"),
        pytest.param("/nonexistent/loopfuse hook --agent pi", True, id="missing"),
    ],
)
def test_pi_runs_on_unguarded_whatever_happens_to_the_hook(
    home: Home, hook: str, told: bool
) -> None:
    """loopfuse's extension running a hook that breaks, each way: pi is not ended (an
    unhandled EPIPE on the hook's stdin would end it), every call runs, the model reads
    nothing of it, and the user is told once when the hook did not answer."""
    extensions = agent_dir(home) / "extensions"
    extensions.mkdir(parents=True)
    text = agent_cli("pi").installer.install("", hook, lambda command: True)
    (extensions / "loopfuse.ts").write_text(text, encoding="utf-8")
    turns = 3
    with PiModel(same_command(LONG, turns)) as model:
        run = run_pi(home, model)
    done = GuardedRun(home, run, model)
    assert run.returncode == 0, run.stderr[-3000:]
    assert done.attempts() == turns
    assert len(model.turns) == turns + 1
    assert not any("loopfuse" in t for r in model.requests for t in strings(r.body))
    assert run.stderr.count("the loop guard did not run") == (1 if told else 0)


# Two failing calls in one turn, every turn.
PAIR = ("echo a >> attempts.log; cat missing-a.txt", "echo b >> attempts.log; cat b.txt")


@pytest.mark.slow
def test_pi_two_parallel_calls_per_turn_keep_one_consistent_state(home: Home) -> None:
    """Two calls in every turn (pi asks about them one after the other, and the
    extension starts their hooks together): every call checked once, every answer
    against its own call, no hook gave up on the lock or failed."""
    turns = 6
    done = guarded(home, parallel(PAIR, turns))
    recorded, answers = calls_and_answers(done.session())
    assert len(recorded) == 2 * turns
    ids = [call[1] for call in recorded]
    assert len(set(ids)) == len(ids)
    answered = [answer[1] for answer in answers]
    assert len(set(answered)) == len(answered)
    ran = {call[1] for call in recorded if call[4] is not False}
    assert set(answered) == ran
    assert len(ran) == done.attempts()
    assert not any("allowed" in line or "internal error" in line for line in done.log_lines())


def alternating(pair: tuple[str, str], turns: int) -> Script:
    """The pair every turn, in the order a model happens to give: A, B then B, A."""
    return lambda turn: Reply(pair if turn % 2 == 0 else pair[::-1]) if turn < turns else Reply()


@pytest.mark.slow
def test_pi_a_loop_of_two_parallel_calls_is_told_then_refused_as_one_batch(home: Home) -> None:
    """The same two failing calls every turn, in either order, are one batch (their hooks
    start together): told and refused when one failing call would be, both alike."""
    turns = 6
    done = guarded(home, alternating(PAIR, turns))
    assert (done.first_turn("note"), done.first_turn("refusal")) == (NOTED_AT, NOTED_AT + 1)
    assert done.attempts() == 2 * NOTED_AT
    for turn in range(NOTED_AT + 1, turns + 1):
        refused = [t for t in done.results(turn) if t.startswith(REFUSAL)]
        assert len(refused) == 2 * (turn - NOTED_AT)


@pytest.mark.slow
def test_pi_init_twice_changes_nothing_and_remove_leaves_nothing(home: Home) -> None:
    """``loopfuse init --agent pi`` is idempotent; ``--remove`` deletes the extension, and
    pi then runs unguarded (the loop is not refused)."""
    loopfuse_init(home)
    path = agent_dir(home) / "extensions" / "loopfuse.ts"
    first = path.read_text(encoding="utf-8")
    loopfuse_init(home)
    assert path.read_text(encoding="utf-8") == first
    loopfuse_init(home, "--remove")
    assert not path.exists()
    with PiModel(same_command(FAILING, 5)) as model:
        run = run_pi(home, model)
    assert run.returncode == 0
    assert GuardedRun(home, run, model).attempts() == 5
