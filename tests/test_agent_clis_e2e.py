"""End to end: the real coding-agent CLIs, headless, against a fake model on loopback.

First what the hook relies on, with a hook that only logs what it is given: each CLI
calls it before and after every shell call with the documented payload, and the model's
next request carries the call's result. Then ``loopfuse hook``, installed as users
install it, on the runs the issue names.

The CLIs are the pinned npm packages of ``.ci/agent-clis`` (see tests/agent_clis.py);
without them these tests skip, saying how to install them (in CI they fail).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_clis import (
    AGENTS,
    HOOK_EVENTS,
    Home,
    HookedRun,
    base_settings,
    needs,
    run_agent,
    settings_file,
    write_hooks,
)
from agent_model import (
    FakeModel,
    Reply,
    Script,
    commands_then_answer,
    parallel,
    poll_moving_log,
    same_command,
    start_then_poll,
    strings,
)
from loopfuse.cli.hook_state import SessionState

# Codex runs a hook only once the user trusted it (`loopfuse init` does that in its config);
# a hook written by hand is trusted for one run with this flag.
TRUST_CODEX_HOOKS = "--dangerously-bypass-hook-trust"


def each_agent(*, qwen: bool = False) -> list[Any]:
    """The CLIs as parameters, each skipped (or failed in CI) when not installed; Qwen Code
    only where asked (``qwen``): its own loop detector, always on, halts a run at the 5th
    identical call, so the runs that go on looping past it have Qwen tests of their own."""
    chosen = [agent for agent in AGENTS if qwen or agent != "qwen"]
    return [pytest.param(agent, marks=needs(agent), id=agent) for agent in chosen]


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home(tmp_path).make()


def logging_hook(home: Home) -> Path:
    """A hook that appends each payload it reads to a log, one JSON line each, and allows."""
    log = home.root / "hook.log"
    script = home.root / "log-hook.sh"
    script.write_text(f"#!/bin/sh\n{{ tr -d '\\n'; echo; }} >> '{log}'\n", encoding="utf-8")
    script.chmod(0o755)
    return script


def payloads(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line]


@pytest.mark.slow
@pytest.mark.parametrize("agent", each_agent(qwen=True))
def test_a_hook_sees_each_shell_call_before_and_after_and_the_model_its_result(
    agent: str, home: Home
) -> None:
    """The contract ``loopfuse hook`` is written against, checked on the installed CLI:
    the before-call event with the command line, then the after-call event (Claude's
    failure event for a failing command), for each call; the model reads the result."""
    hook = logging_hook(home)
    base_settings(home, agent)
    write_hooks(home, agent, str(hook))
    trust = (TRUST_CODEX_HOOKS,) if agent == "codex" else ()
    with FakeModel(same_command("cat missing.txt", turns=2)) as model:
        run = run_agent(agent, home, model.url, "Fix the build.", *trust)
    assert run.returncode == 0, run.stderr
    seen = payloads(home.root / "hook.log")
    before, after = HOOK_EVENTS[agent][0], HOOK_EVENTS[agent][-1]
    assert [p["hook_event_name"] for p in seen] == [before, after] * 2
    assert all(p["tool_input"]["command"] == "cat missing.txt" for p in seen)
    assert len({p["session_id"] for p in seen}) == 1
    assert [r.turn for r in model.turns] == [0, 1, 2]  # two calls, then the answer
    assert any("No such file or directory" in text for text in strings(model.turns[1].body))


@pytest.mark.slow
@needs("codex")
def test_codex_skips_a_hook_the_user_has_not_trusted(home: Home) -> None:
    """Why ``loopfuse init`` must make Codex trust the hook: an untrusted one never runs,
    and nothing says so."""
    write_hooks(home, "codex", str(logging_hook(home)))
    with FakeModel(same_command("cat missing.txt", turns=1)) as model:
        run = run_agent("codex", home, model.url)
    assert run.returncode == 0, run.stderr
    assert len(model.turns) == 2  # the call ran
    assert not (home.root / "hook.log").exists()


# --- loopfuse hook, end to end -------------------------------------------------------------

# The hook's own name for each CLI (its state files are named after it).
HOOK_AGENT = {"claude": "claude-code", "codex": "codex", "gemini": "gemini", "qwen": "qwen"}
# How each CLI words a refusal to its model, before the hook's reason.
REFUSED = {
    "claude": "PreToolUse:Bash hook error: [loopfuse]",
    "codex": "Command blocked by PreToolUse hook: [loopfuse]",
    "gemini": "Tool execution blocked: [loopfuse]",
    "qwen": "",  # Qwen Code hands the model the reason alone: the whole answer
}
# A failing command that leaves a trace of each time it really ran (so it changes state:
# it has no read-only allowance).
FAILING = "echo attempt >> attempts.log; cat missing.txt"
# Qwen Code 0.24.4 now and then loses a quick command's stderr ("Output: (empty)", in the
# model's answer as in its hook's): an answer that changed, so not yet a loop. Its runs
# send the error to stdout.
QWEN_FAILING = "echo attempt >> attempts.log; cat missing.txt 2>&1"
# docs/detector.md: the same call with the same answer is a loop at the 4th, at the 3rd
# when the answer is an error; an error even in Codex, which tells a hook no exit status
# (the detector reads the error in the text).
NOTED_AT = 3


def loopfuse_init(home: Home, agent: str, *flags: str) -> str:
    """Install ``loopfuse hook`` for ``agent`` as a user does: ``loopfuse init`` (the
    console script of the environment the tests run in), in the isolated home; its
    output."""
    loopfuse = Path(sys.executable).with_name("loopfuse")
    done = subprocess.run(
        [str(loopfuse), "init", "--agent", HOOK_AGENT[agent], *flags],
        cwd=home.workspace,
        env=home.environment("http://127.0.0.1:9", agent),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


@dataclass
class GuardedRun(HookedRun):
    """A CLI run with ``loopfuse hook`` installed, and what it left."""

    agent: str

    @property  # type: ignore[override]
    def hook_agent(self) -> str:
        return HOOK_AGENT[self.agent]

    def refused(self, text: str) -> bool:
        if self.agent == "qwen":  # the refusal is the answer; a note follows one
            return text.startswith("[loopfuse]")
        return REFUSED[self.agent] in text

    def first_turn(self, wanted: str) -> int | None:
        """The first turn whose request carries a note (``"note"``) or a refusal
        (``"refusal"``) of loopfuse: the number of the call it came with (calls are
        counted from 1, and turn ``n``'s request carries the answer of call ``n``)."""
        for request in self.model.turns:
            for text in strings(request.body):
                refusal = self.refused(text)
                note = "[loopfuse]" in text and not refusal
                if (refusal if wanted == "refusal" else note) and request.turn is not None:
                    return request.turn
        return None


def guarded(
    agent: str, home: Home, script: Script, *flags: str, own_loop_detection: bool = False
) -> GuardedRun:
    """Run ``agent`` on ``script`` with ``loopfuse hook`` installed for it in the isolated
    home by ``loopfuse init`` (with ``flags``), as a user installs it; the run succeeded."""
    done = guarded_run(agent, home, script, *flags, own_loop_detection=own_loop_detection)
    assert done.run.returncode == 0, done.run.stderr[-3000:]
    return done


def guarded_run(
    agent: str, home: Home, script: Script, *flags: str, own_loop_detection: bool = False
) -> GuardedRun:
    """:func:`guarded`, whatever the run's exit status."""
    base_settings(home, agent, own_loop_detection)
    said = loopfuse_init(home, agent, *flags)
    # Codex runs the hook only once trusted: init says how (for `codex exec`, this flag).
    trust = (TRUST_CODEX_HOOKS,) if agent == "codex" else ()
    assert (TRUST_CODEX_HOOKS in said) == (agent == "codex")
    with FakeModel(script) as model:
        run = run_agent(agent, home, model.url, "Fix the build.", *trust)
    return GuardedRun(home, run, model, agent)


def calls_and_answers(state: SessionState) -> tuple[list[Any], list[Any]]:
    calls = [e for e in state.events if e[0] == "call"]
    answers = [e for e in state.events if e[0] == "answer"]
    return calls, answers


@pytest.mark.parametrize("agent", each_agent())
def test_a_looping_model_is_told_then_refused_with_the_reason(agent: str, home: Home) -> None:
    """The same failing call every turn: at the loop the call runs and the model is told
    why; the next one is refused, and so is every one after it, each time with the
    reason in the model's next request."""
    turns = 8
    done = guarded(agent, home, same_command(FAILING, turns))
    noted, refused = done.first_turn("note"), done.first_turn("refusal")
    assert (noted, refused) == (NOTED_AT, NOTED_AT + 1)
    assert done.attempts() == NOTED_AT  # nothing refused ran
    for turn in range(NOTED_AT + 1, turns + 1):  # each refusal reaches the next request
        assert sum(done.refused(t) for t in done.texts(turn)) == turn - NOTED_AT
    assert len(done.model.turns) == turns + 1  # the agent went on to its answer
    logged = done.log_lines()
    assert sum("loop noted" in line for line in logged) == 1
    assert sum("call refused" in line for line in logged) == turns - NOTED_AT


def qwen_answered_alike(home: Home, calls: int) -> bool:
    """Whether Qwen Code gave its first ``calls`` calls the same answer, as its own session
    file keeps them (loopfuse's note, appended to an answer, left out)."""
    answers = []
    for path in sorted((home.home / ".qwen" / "projects").glob("*/chats/*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            message = record.get("message") if record.get("type") == "tool_result" else None
            for part in message.get("parts", []) if isinstance(message, dict) else []:
                response = part.get("functionResponse", {}).get("response", {})
                text = response.get("output") or response.get("error") or ""
                answers.append(str(text).split("\n\n[loopfuse]")[0])
    return len(answers) >= calls and len(set(answers[:calls])) == 1


@needs("qwen")
def test_qwen_code_a_looping_model_is_told_then_refused_by_the_fourth_call(home: Home) -> None:
    """Qwen Code halts a run at the 5th identical call by itself (always on): loopfuse
    tells the model at the 3rd failing call and refuses the 4th, whose reason, alone, is
    the answer in the model's next request; the refused call did not run."""
    done = guarded("qwen", home, same_command(QWEN_FAILING, turns=4))
    if not qwen_answered_alike(done.home, NOTED_AT):
        # Qwen Code itself, on a loaded machine, sometimes answers a call "Output:
        # (empty)" (its shell's output lost): then the answers differ, loopfuse rightly
        # counts from the next one, and Qwen's own halt at the 5th call comes first. That
        # is not the loop this test is about: run it once more, in a fresh home.
        done = guarded(
            "qwen", Home(home.root / "again").make(), same_command(QWEN_FAILING, turns=4)
        )
        assert qwen_answered_alike(done.home, NOTED_AT), "Qwen Code's answers differed twice"
    assert (done.first_turn("note"), done.first_turn("refusal")) == (NOTED_AT, NOTED_AT + 1)
    assert done.attempts() == NOTED_AT
    refusal = [t for t in done.texts(NOTED_AT + 1) if done.refused(t)]
    assert len(refusal) == 1
    assert "Loop detected" in refusal[0]
    assert len(done.model.turns) == 5  # the agent went on to its answer
    logged = done.log_lines()
    assert sum("loop noted" in line for line in logged) == 1
    assert sum("call refused" in line for line in logged) == 1


@pytest.mark.slow
@needs("qwen")
def test_qwen_code_own_loop_detector_halts_after_loopfuse_refused(home: Home) -> None:
    """A model that goes on after the refusal: Qwen Code's own detector ends the run at
    the 5th identical call (exit status 1); loopfuse had told and refused before, and no
    hook can end a Qwen Code session (init does not write --end-session for it)."""
    done = guarded_run("qwen", home, same_command(QWEN_FAILING, turns=8), "--end-session")
    if not qwen_answered_alike(done.home, NOTED_AT):  # Qwen lost an output: see above
        again = Home(home.root / "again").make()
        done = guarded_run("qwen", again, same_command(QWEN_FAILING, turns=8), "--end-session")
        assert qwen_answered_alike(done.home, NOTED_AT), "Qwen Code's answers differed twice"
    assert done.run.returncode == 1
    assert "Loop detection halted the run" in done.run.stdout
    assert (done.first_turn("note"), done.first_turn("refusal")) == (NOTED_AT, NOTED_AT + 1)
    assert done.attempts() == NOTED_AT
    assert len(done.model.turns) == 5  # the 5th identical call was Qwen Code's last


@pytest.mark.slow
@pytest.mark.parametrize("agent", each_agent())
def test_with_end_session_a_loop_that_goes_on_after_its_refusal_ends_the_session(
    agent: str, home: Home
) -> None:
    """``--end-session``: told at the loop, refused at the next call, and the call after
    that ends the session (no request follows it), where the CLI lets a hook end it.
    Codex cannot be ended by a hook, so ``init`` says so and does not write the flag
    into Codex's command (issue 29 §5): there every later call of the loop is refused,
    and nothing is logged as an end."""
    turns = 8
    done = guarded(agent, home, same_command(FAILING, turns), "--end-session")
    assert (done.first_turn("note"), done.first_turn("refusal")) == (NOTED_AT, NOTED_AT + 1)
    assert done.attempts() == NOTED_AT
    logged = done.log_lines()
    if agent == "codex":
        assert "--end-session" not in settings_file(home, agent).read_text(encoding="utf-8")
        assert len(done.model.turns) == turns + 1
        assert sum("call refused" in line for line in logged) == turns - NOTED_AT
        assert not any("session ended" in line or "cannot be ended" in line for line in logged)
        return
    ended_at = NOTED_AT + 2
    assert len(done.model.turns) == ended_at  # the model asked for call 5: nothing after it
    assert sum("session ended" in line for line in logged) == 1
    # What the user is shown: Gemini CLI prints the reason; Claude Code keeps it in the
    # session's transcript (its headless JSON result has no place for it).
    if agent == "gemini":
        assert "Agent execution stopped by hook: [loopfuse]" in done.run.stderr
    else:
        transcripts = list((home.home / ".claude" / "projects").glob("*/*.jsonl"))
        shown = "".join(path.read_text(encoding="utf-8") for path in transcripts)
        assert "hook stopped continuation: [loopfuse]" in shown


# docs/agents.md: a read-only command that fails the same way every time (`cat
# missing.txt`) gets the read-only allowance: refused at the 5th identical call (where
# --mode refuse refuses it), so noted at the 4th (warn's note comes one count early), the
# session ended at the 6th with --end-session. Codex too: the detector reads the failure
# in its answer's text, which carries no exit status.
READ_ONLY_FAILING = "cat missing.txt"
READ_ONLY_NOTED_AT = 4


@pytest.mark.slow
@pytest.mark.parametrize("agent", each_agent())
def test_a_read_only_failing_command_is_told_refused_and_ended_at_the_documented_calls(
    agent: str, home: Home
) -> None:
    turns = 10
    done = guarded(agent, home, same_command(READ_ONLY_FAILING, turns), "--end-session")
    noted = READ_ONLY_NOTED_AT
    assert (done.first_turn("note"), done.first_turn("refusal")) == (noted, noted + 1)
    # What ran is in the model's history: one answer per call that ran, none refused.
    history = done.texts(len(done.model.turns) - 1)
    ran = [t for t in history if "No such file or directory" in t and not done.refused(t)]
    assert len(ran) == noted
    assert len(done.model.turns) == (turns + 1 if agent == "codex" else noted + 2)


@pytest.mark.slow
@needs("gemini")
def test_gemini_cli_own_loop_detector_on_loopfuse_tells_and_refuses_first(home: Home) -> None:
    """Gemini CLI's own detector (on by default) stops a session at its 5th identical call
    and knows nothing of answers; with it on, loopfuse has told and refused before."""
    turns = 8
    done = guarded("gemini", home, same_command(FAILING, turns), own_loop_detection=True)
    assert (done.first_turn("note"), done.first_turn("refusal")) == (NOTED_AT, NOTED_AT + 1)
    assert done.attempts() == NOTED_AT
    assert len(done.model.turns) < turns + 1  # then Gemini's own detector ended the run


def assert_untouched(done: GuardedRun, calls: int) -> None:
    """No note, no refusal, nothing logged; and the hook did see each call and answer."""
    assert not any("loopfuse" in text for r in done.model.requests for text in strings(r.body))
    assert len(done.model.turns) == calls + 1
    assert done.log_lines() == []
    recorded, answers = calls_and_answers(done.session())
    assert len(recorded) == len(answers) == calls


@pytest.mark.slow
@pytest.mark.parametrize("agent", each_agent(qwen=True))
def test_a_healthy_run_is_untouched(agent: str, home: Home) -> None:
    (home.workspace / "notes.txt").write_text("one\ntwo\n", encoding="utf-8")
    script = commands_then_answer("ls", "cat notes.txt", "wc -l notes.txt")
    assert_untouched(guarded(agent, home, script), calls=3)


@pytest.mark.slow
@pytest.mark.parametrize("agent", each_agent())
def test_a_healthy_poll_whose_output_moves_is_untouched(agent: str, home: Home) -> None:
    """``tail -5 build.log`` ten times while the build writes a line before each: the
    same call, again and again, but its answer moves (progress), so it is never a loop."""
    polls = 10
    done = guarded(agent, home, poll_moving_log(home.workspace / "build.log", polls))
    assert_untouched(done, calls=polls)
    # the model did read a moving log: the last request has the last step
    assert any(f"step {polls - 1}:" in text for text in done.texts(polls))


@pytest.mark.slow
@needs("qwen")
def test_qwen_code_own_detector_stops_a_poll_whose_output_moves_loopfuse_does_not(
    home: Home,
) -> None:
    """Qwen Code's own detector counts identical calls and reads no answers: it halts a
    healthy poll at the 5th call (exit status 1). loopfuse let every poll through and
    said nothing (docs/agents.md: what a Qwen Code user sees)."""
    done = guarded_run("qwen", home, poll_moving_log(home.workspace / "build.log", 10))
    assert done.run.returncode == 1
    assert "Loop detection halted the run" in done.run.stdout
    assert len(done.model.turns) == 5
    assert not any("loopfuse" in text for r in done.model.requests for text in strings(r.body))
    assert done.log_lines() == []


@pytest.mark.slow
@needs("codex")
def test_codex_polling_a_command_it_started_is_untouched(home: Home) -> None:
    """Codex starts a command that outlives its yield and polls it (``write_stdin`` with
    empty ``chars``) until it exits: a wait, never a loop. Codex's hooks see the command
    once (tool ``Bash``, its answer when it exited) and never the polls (docs/agents.md),
    so the live hook has nothing to let through; ``scan`` of the rollout judges the polls
    as waits (tests/test_harness_codex.py)."""
    polls = 2
    done = guarded("codex", home, start_then_poll("sleep 7; echo finished", polls))
    assert not any("loopfuse" in text for r in done.model.requests for text in strings(r.body))
    assert len(done.model.turns) == polls + 2
    assert any("Process running with session ID" in t for t in done.texts(1))
    recorded, answers = calls_and_answers(done.session())
    assert len(recorded) == len(answers) == 1  # the command; no poll reached a hook


# Two failing calls in one turn, every turn.
PAIR = ("echo a >> attempts.log; cat missing-a.txt", "echo b >> attempts.log; cat b.txt")


@pytest.mark.slow
@pytest.mark.parametrize("agent", each_agent())
def test_two_parallel_calls_per_turn_keep_one_consistent_state(agent: str, home: Home) -> None:
    """Two calls in every turn, whose hooks run at the same moment: the session's state
    holds every call once and every answer against its own call (refused calls none),
    and no hook gave up on the lock or failed."""
    turns = 6
    done = guarded(agent, home, parallel(PAIR, turns))
    recorded, answers = calls_and_answers(done.session())
    assert len(recorded) == 2 * turns  # every call checked once, none lost to a race
    ids = [call[1] for call in recorded]
    assert len(set(ids)) == len(ids)
    answered = [answer[1] for answer in answers]
    assert len(set(answered)) == len(answered)  # no call answered twice
    ran = {call[1] for call in recorded if call[4] is not False}
    assert set(answered) == ran  # every call that ran has its answer, refused ones none
    assert len(ran) == done.attempts()
    assert not any("allowed" in line or "internal error" in line for line in done.log_lines())


def alternating(pair: tuple[str, str], turns: int) -> Script:
    """The pair every turn, in the order a model happens to give: A, B then B, A."""
    return lambda turn: Reply(pair if turn % 2 == 0 else pair[::-1]) if turn < turns else Reply()


@pytest.mark.slow
@pytest.mark.parametrize("agent", each_agent())
def test_a_loop_of_two_parallel_calls_is_told_then_refused_whatever_order_its_hooks_run_in(
    agent: str, home: Home
) -> None:
    """A batch is the set of its calls (docs/detector.md): the same two failing calls
    every turn are the same batch with the same answers, so they are told and refused
    when one failing call would be, however the CLI orders their hooks; both calls of a
    turn alike (neither runs once refused)."""
    turns = 8
    done = guarded(agent, home, alternating(PAIR, turns))
    assert (done.first_turn("note"), done.first_turn("refusal")) == (NOTED_AT, NOTED_AT + 1)
    assert done.attempts() == 2 * NOTED_AT  # both ran until the loop, neither after it
    for turn in range(NOTED_AT + 1, turns + 1):  # both refused, every turn
        assert sum(done.refused(t) for t in done.texts(turn)) == 2 * (turn - NOTED_AT)


@pytest.mark.slow
@pytest.mark.parametrize("agent", each_agent())
def test_a_broken_state_directory_fails_open(agent: str, home: Home) -> None:
    """A file where the state folder should be: every hook allows its call and says
    nothing, so the agent runs as if loopfuse were not there."""
    (home.state / "loopfuse").write_text("not a folder", encoding="utf-8")
    turns = 5
    done = guarded(agent, home, same_command(FAILING, turns))
    assert done.attempts() == turns
    assert len(done.model.turns) == turns + 1
    assert not any("loopfuse" in text for r in done.model.requests for text in strings(r.body))
    hook_failed = REFUSED[agent].removesuffix(" [loopfuse]")
    assert not any(hook_failed in text for text in done.texts(turns))


@pytest.mark.slow
@needs("claude")
def test_claude_code_reading_the_output_of_a_command_still_running_is_untouched(
    home: Home,
) -> None:
    """Claude Code 2.1.328 has no ``BashOutput`` / ``TaskOutput`` any more: the model
    starts a command with ``run_in_background`` and reads its output file (``Read`` of
    the path the answer names), which ends with ``[exited with code N]`` once the command
    ended. Its hooks see each read; quiet reads of a command still running are a wait,
    let through however many (before issue 27 the sixth identical one was noted). A hook
    that only logs sees each ``Read`` before and after (``tool_response.file.content``),
    as checked when this was written."""
    from agent_model import ClaudeToolModel, start_then_read_output

    polls = 8
    base_settings(home, "claude")
    loopfuse_init(home, "claude")
    calls = start_then_read_output("echo building; sleep 25; echo built", polls)
    with ClaudeToolModel(lambda turn: Reply(), calls=calls) as model:
        run = run_agent("claude", home, model.url, "Build it.")
    assert run.returncode == 0, run.stderr[-3000:]
    done = GuardedRun(home, run, model, "claude")
    read = [t for turn in range(2, polls + 2) for t in done.texts(turn) if "building" in t]
    assert len(read) >= polls
    assert not any("[exited with code" in t for t in read[:polls])
    assert not any("loopfuse" in text for r in model.requests for text in strings(r.body))
    assert done.log_lines() == []
    # (its session state is not read here: the command's end comes back to the model as a
    # new turn, which starts a new run and forgets the calls)
