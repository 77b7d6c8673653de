"""End to end with the real Kimi Code (``@moonshot-ai/kimi-code`` 2.1.0), headless against
the fake model on loopback, offline, in an isolated home (tests/kimi_cli.py).

First what the hook relies on, with a hook that only logs what it is given; then
``loopfuse hook``, installed as users install it (``loopfuse init --agent kimi``).

What Kimi Code lets a hook do (docs/agents.md, "Kimi Code"): refuse a call before it runs,
the reason being what the model reads as the call's answer; nothing else. It runs its
after-call hooks in the background and throws away what they print (no note can reach the
model), and no hook can end its session. So in ``warn`` mode the first loop found is
refused at once: that refusal's reason is the note. Its after-call hook of one call often
runs while the next call's before-hook does (and the last ones before it exits are often
never run): a failing loop is refused at its 3rd call when the 2nd call's answer was kept
in time, else at its 4th.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_clis import Home, HookedRun
from agent_model import (
    Reply,
    Script,
    commands_then_answer,
    parallel,
    poll_moving_log,
    same_command,
    strings,
)
from kimi_cli import (
    KIMI,
    KimiModel,
    config_file,
    environment,
    kimi_home,
    needs_kimi,
    run_kimi,
    write_config,
)
from loopfuse.cli.hook_state import SessionState

pytestmark = needs_kimi()

# A failing command that leaves a trace of each time it really ran (it changes state: it
# has no read-only allowance).
FAILING = "echo attempt >> attempts.log; cat missing.txt"
# How the model reads a refused call (before the hook's reason).
REFUSED = "<system>ERROR: Tool execution failed.</system>\n[loopfuse]"


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home(tmp_path).make()


def loopfuse(home: Home, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``loopfuse`` console script of the environment the tests run in, in the
    isolated home."""
    return subprocess.run(
        [str(Path(sys.executable).with_name("loopfuse")), *args],
        cwd=home.workspace,
        env=environment(home),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@dataclass
class GuardedRun(HookedRun):
    """A Kimi Code run with ``loopfuse hook`` installed, and what it left."""

    hook_agent = "kimi"
    installed: str

    def answers(self, turn: int) -> list[str]:
        """The answers of the calls the model read in the request of ``turn``, in order."""
        messages = self.model.turns[turn].body["messages"]
        return [m["content"] for m in messages if m.get("role") == "tool"]

    def first_refusal(self) -> int | None:
        """The first call refused (calls counted from 1; turn ``n``'s request carries the
        answer of call ``n``)."""
        for request in self.model.turns:
            answers = [m for m in request.body["messages"] if m.get("role") == "tool"]
            if answers and REFUSED in answers[-1]["content"]:
                return request.turn
        return None


def guarded(home: Home, script: Script, *flags: str, check: bool = True) -> GuardedRun:
    """Run Kimi Code on ``script`` with ``loopfuse hook`` installed by ``loopfuse init
    --agent kimi`` (with ``flags``) into the settings of the fake model, as a user does."""
    with KimiModel(script) as model:
        write_config(home, model.url)
        done = loopfuse(home, "init", "--agent", "kimi", *flags)
        assert done.returncode == 0, done.stderr
        run = run_kimi(home)
    if check:
        assert run.returncode == 0, run.stderr[-3000:]
    return GuardedRun(home, run, model, done.stdout + done.stderr)


def calls_and_answers(state: SessionState) -> tuple[list[Any], list[Any]]:
    calls = [e for e in state.events if e[0] == "call"]
    answers = [e for e in state.events if e[0] == "answer"]
    return calls, answers


# --- the hook contract, with a hook that only logs ----------------------------------------


def logging_hook(home: Home) -> Path:
    """A hook that appends each payload it reads to a log, one JSON line each, and allows."""
    log = home.root / "hook.log"
    script = home.root / "log-hook.sh"
    script.write_text(f"#!/bin/sh\n{{ tr -d '\\n'; echo; }} >> '{log}'\n", encoding="utf-8")
    script.chmod(0o755)
    return script


@pytest.mark.slow
def test_a_hook_sees_each_call_before_it_runs_and_most_after_it(home: Home) -> None:
    """What ``loopfuse hook`` is written against: ``UserPromptSubmit`` (the prompt as a
    list of parts), then ``PreToolUse`` before each call, awaited; after a call, in the
    background, ``PostToolUseFailure`` for a failing command (the last one's may never
    run: Kimi Code exits without waiting for it). Every payload names the model's call
    id (``tool_call_id``) and the session; the model reads each failure."""
    hook = logging_hook(home)
    events = ("UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure")
    tables = "".join(f'\n[[hooks]]\nevent = "{e}"\ncommand = "{hook}"\n' for e in events)
    with KimiModel(same_command("cat missing.txt", turns=3)) as model:
        write_config(home, model.url, tables)
        run = run_kimi(home)
    assert run.returncode == 0, run.stderr
    seen = [json.loads(line) for line in (home.root / "hook.log").read_text().splitlines()]
    assert seen[0]["hook_event_name"] == "UserPromptSubmit"
    assert seen[0]["prompt"] == [{"type": "text", "text": "Fix the build."}]
    before = [p for p in seen if p["hook_event_name"] == "PreToolUse"]
    after = [p for p in seen if p["hook_event_name"] == "PostToolUseFailure"]
    assert len(before) == 3
    assert 1 <= len(after) <= 3
    assert {p["tool_call_id"] for p in after} <= {p["tool_call_id"] for p in before}
    assert all(p["tool_input"]["command"] == "cat missing.txt" for p in before)
    assert all(p["error"]["message"].endswith("Command failed with exit code: 1.") for p in after)
    assert len({p["session_id"] for p in seen}) == 1
    assert not any(p["hook_event_name"] == "PostToolUse" for p in seen)
    assert [r.turn for r in model.turns] == [0, 1, 2, 3]
    assert any("No such file or directory" in t for t in strings(model.turns[1].body))


# --- loopfuse hook, end to end ------------------------------------------------------------


def test_a_looping_model_is_refused_with_the_reason_and_every_call_after(home: Home) -> None:
    """The same failing call every turn: refused by its 4th call (its 3rd when the 2nd
    call's answer was kept in time: Kimi Code runs after-call hooks in the background),
    the reason, alone after Kimi Code's error status, in the model's next request;
    every call after it refused too; the refused calls did not run."""
    turns = 6
    done = guarded(home, same_command(FAILING, turns))
    refused = done.first_refusal()
    assert refused in (3, 4)
    assert done.attempts() == refused - 1  # nothing refused ran
    answers = done.answers(turns)
    assert all(REFUSED in answer for answer in answers[refused - 1 :])
    assert not any("[loopfuse]" in answer for answer in answers[: refused - 1])
    first = answers[refused - 1]
    assert "Loop detected" in first
    assert "This call was refused: it did not run." in first
    assert "went on after loopfuse's note" not in first  # this refusal is the note
    assert "went on after loopfuse's note" in answers[refused]  # the next says so
    assert len(done.model.turns) == turns + 1  # the agent went on to its answer
    logged = done.log_lines()
    assert not any("loop noted" in line for line in logged)
    assert sum("call refused" in line for line in logged) == turns - refused + 1
    assert "hook command:" in done.installed


@pytest.mark.slow
def test_with_end_session_the_loop_is_refused_call_after_call(home: Home) -> None:
    """No hook can end a Kimi Code session: ``init`` says so and does not write the
    flag; every later call of the loop is refused, and the agent goes on to its answer."""
    turns = 6
    done = guarded(home, same_command(FAILING, turns), "--end-session")
    assert "--end-session has no effect for Kimi Code" in done.installed
    assert "--end-session" not in config_file(home).read_text(encoding="utf-8")
    refused = done.first_refusal()
    assert refused in (3, 4)
    assert all(REFUSED in answer for answer in done.answers(turns)[refused - 1 :])
    assert len(done.model.turns) == turns + 1
    assert not any("session ended" in line for line in done.log_lines())


def assert_untouched(done: GuardedRun, calls: int) -> None:
    """No refusal, nothing logged; and the hook saw each call (and the answers Kimi Code
    ran its after-call hook for before it exited: the last ones may be missing)."""
    assert not any("loopfuse" in text for r in done.model.requests for text in strings(r.body))
    assert len(done.model.turns) == calls + 1
    assert done.log_lines() == []
    recorded, answers = calls_and_answers(done.session())
    assert len(recorded) == calls
    assert calls - 2 <= len(answers) <= calls


@pytest.mark.slow
def test_a_healthy_run_is_untouched(home: Home) -> None:
    (home.workspace / "notes.txt").write_text("one\ntwo\n", encoding="utf-8")
    script = commands_then_answer("ls", "cat notes.txt", "wc -l notes.txt")
    assert_untouched(guarded(home, script), calls=3)


@pytest.mark.slow
def test_a_healthy_poll_whose_output_moves_is_untouched(home: Home) -> None:
    """``tail -5 build.log`` ten times while the build writes a line before each: the
    same call, again and again, but its answer moves (progress), so it is never a loop
    (Kimi Code nudges the model from the 3rd identical call; loopfuse says nothing)."""
    polls = 10
    done = guarded(home, poll_moving_log(home.workspace / "build.log", polls))
    assert_untouched(done, calls=polls)
    assert any(f"step {polls - 1}:" in text for text in done.texts(polls))


@pytest.mark.slow
def test_two_parallel_calls_per_turn_keep_one_consistent_state(home: Home) -> None:
    """Two calls in every turn: Kimi Code runs their before-hooks one after the other,
    each after the last answered, so each call is a batch of its own; every call is
    recorded once, every answer kept is against its own call, refused calls have none, and
    no hook gave up on the lock or failed."""
    turns = 4
    pair = ("echo a >> attempts.log; cat missing-a.txt", "echo b >> attempts.log; cat b.txt")
    done = guarded(home, parallel(pair, turns))
    recorded, answers = calls_and_answers(done.session())
    assert len(recorded) == 2 * turns
    answered = [answer[1] for answer in answers]
    assert len(set(answered)) == len(answered)  # no call answered twice
    ran = {call[1] for call in recorded if call[4] is not False}
    assert set(answered) <= ran  # answers of calls that ran only
    assert len(ran) == done.attempts()
    assert not any("allowed" in line or "internal error" in line for line in done.log_lines())


@pytest.mark.slow
def test_a_broken_state_directory_fails_open(home: Home) -> None:
    """A file where the state folder should be: every hook allows its call and says
    nothing, so the agent runs as if loopfuse were not there."""
    (home.state / "loopfuse").write_text("not a folder", encoding="utf-8")
    turns = 5
    done = guarded(home, same_command(FAILING, turns))
    assert done.attempts() == turns
    assert len(done.model.turns) == turns + 1
    assert not any("loopfuse" in text for r in done.model.requests for text in strings(r.body))


@pytest.mark.slow
def test_init_writes_settings_kimi_code_accepts_and_remove_restores_them(home: Home) -> None:
    """Kimi Code's own check of its settings (``kimi doctor config``, its schema is
    strict) passes on what ``init`` wrote, ``loopfuse doctor`` finds the hook and it
    works, and ``--remove`` puts the file back byte for byte."""
    write_config(home, "http://127.0.0.1:9")
    original = config_file(home).read_text(encoding="utf-8")
    assert loopfuse(home, "init", "--agent", "kimi").returncode == 0
    checked = subprocess.run(
        [str(KIMI), "doctor", "config", str(config_file(home))],
        cwd=home.workspace,
        env=environment(home),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    report = loopfuse(home, "doctor", "--format", "json")
    [place] = [p for p in json.loads(report.stdout)["places"] if p["agent"] == "kimi"]
    assert all(check["ok"] for check in place["checks"]), place["checks"]
    assert loopfuse(home, "init", "--agent", "kimi", "--remove").returncode == 0
    assert config_file(home).read_text(encoding="utf-8") == original


@pytest.mark.slow
def test_scan_reads_the_session_kimi_code_kept(home: Home) -> None:
    """``loopfuse scan --agent kimi`` finds the session a run left in the (isolated) home,
    unguarded, and the loop in it: the same failing call, found at the 3rd, as the hook
    finds it. (A session the hook guarded holds its refusals as the calls' answers:
    answers that changed, so its replay finds nothing more.)"""
    with KimiModel(same_command(FAILING, 5)) as model:
        write_config(home, model.url)
        run = run_kimi(home)
    assert run.returncode == 0, run.stderr[-3000:]
    scanned = loopfuse(home, "scan", "--agent", "kimi", "--format", "json", "--no-progress")
    assert scanned.returncode == 1, scanned.stderr
    [found] = json.loads(scanned.stdout)["files"]
    index = kimi_home(home) / "session_index.jsonl"
    assert found["meta"]["session"] == json.loads(index.read_text(encoding="utf-8"))["sessionId"]
    assert found["meta"]["project"] == str(home.workspace)
    assert found["tool_calls"] == 5
    first = found["findings"][0]
    assert (first["kind"], first["count"]) == ("repeat", 3)


@pytest.mark.slow
def test_a_read_only_failing_command_is_refused_at_its_fifth_call(home: Home) -> None:
    """``cat missing.txt``, read-only, gets the read-only allowance: refused at its 5th
    call (4 ran; the 4th when the last answer came late), where the other CLIs note it."""
    turns = 7
    done = guarded(home, same_command("cat missing.txt", turns))
    refused = done.first_refusal()
    assert refused in (5, 6)
    answers = done.answers(turns)
    ran = [a for a in answers if "No such file or directory" in a and REFUSED not in a]
    assert len(ran) == refused - 1
    assert all(REFUSED in answer for answer in answers[refused - 1 :])


@pytest.mark.slow
def test_a_loop_of_two_parallel_calls_is_refused_as_a_cycle(home: Home) -> None:
    """Kimi Code runs a turn's before-hooks one after the other and marks no batch: each
    call is a batch of its own, and the same two failing calls every turn are a cycle,
    refused at its 3rd turn; when the model swaps their order every turn, by its 5th."""
    pair = ("echo a >> attempts.log; cat missing-a.txt", "echo b >> attempts.log; cat b.txt")
    turns = 6
    done = guarded(home, parallel(pair, turns))
    assert done.attempts() == 4  # both ran twice
    assert any("(cycle, " in line for line in done.log_lines())
    swapped = Home(home.root / "swapped").make()
    script: Script = lambda turn: (  # noqa: E731
        Reply(pair if turn % 2 == 0 else pair[::-1]) if turn < turns else Reply()
    )
    done = guarded(swapped, script)
    assert 4 <= done.attempts() <= 8
    assert done.log_lines()
