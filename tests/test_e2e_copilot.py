"""End to end: GitHub Copilot CLI (``@github/copilot``, pinned in ``.ci/agent-clis``),
headless, offline, against a fake model on loopback.

Copilot CLI runs as a user runs it: ``copilot -p … --allow-all-tools`` with a model of
their own (``COPILOT_OFFLINE=true``, ``COPILOT_PROVIDER_BASE_URL``: OpenAI Chat
Completions, streamed), an isolated HOME, ``COPILOT_HOME`` and XDG folders per test; only
its unpacked program (238 MB, which its npm launcher writes under ``XDG_CACHE_HOME`` on
first use) is shared by the tests of one pytest session, in a folder of the session's
own tmp. First what the hook relies on, with a hook that only logs what it is given;
then ``loopfuse hook``, installed by ``loopfuse init --agent copilot``, on the runs issue
28 names.

Without the package these tests skip, saying how to install it; in CI
(``LOOPFUSE_REQUIRE_AGENT_CLIS=1``) they fail.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_clis import Home, HookedRun, Run, executable, needs, run_process
from agent_model import (
    FakeModel,
    Reply,
    Script,
    commands_then_answer,
    poll_moving_log,
    same_command,
    strings,
)
from loopfuse.cli.hook_state import SessionState

pytestmark = needs("copilot")

SHELL = "bash"  # Copilot CLI's shell tool, and the argument that holds the command line
READ = "read_bash"  # its wait on a command still running


class CopilotModel(FakeModel):
    """The fake model, speaking to Copilot CLI: Chat Completions, streamed, whose turns
    are the requests offering its ``bash`` tool. A turn's commands are ``bash`` calls
    (with the reply's ``arguments``: ``mode: "async"`` starts one in the background);
    ``poll`` reads the command the last answer says still runs (``read_bash``)."""

    def chat(self, path: str, body: Any) -> tuple[int, str, bytes]:
        reply = self.play(path, body, SHELL) or Reply(text="OK")
        calls: list[tuple[str, dict[str, Any]]] = [
            (SHELL, {"command": command, "description": "Run a command", **dict(reply.arguments)})
            for command in reply.commands
        ]
        shells = re.findall(r"shellId: (\d+)", " ".join(strings(body)))
        if reply.poll and shells:
            calls.append((READ, {"shellId": shells[-1], "delay": 1}))
        message: dict[str, Any] = {"role": "assistant", "content": None if calls else reply.text}
        if calls:
            message["tool_calls"] = [
                {
                    "index": index,
                    "id": f"call_{self.next_id():020d}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
                for index, (name, arguments) in enumerate(calls)
            ]
        head = {"id": f"chatcmpl-{self.next_id()}", "object": "chat.completion.chunk"}
        head |= {"created": 0, "model": "fake-model"}
        chunks = [
            {**head, "choices": [{"index": 0, "delta": message, "finish_reason": None}]},
            {
                **head,
                "choices": [
                    {"index": 0, "delta": {}, "finish_reason": "tool_calls" if calls else "stop"}
                ],
            },
            {
                **head,
                "choices": [],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
            },
        ]
        stream = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks)
        return 200, "text/event-stream", (stream + "data: [DONE]\n\n").encode()


@pytest.fixture(scope="session")
def program_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """``XDG_CACHE_HOME`` of every Copilot run of this pytest session: its launcher
    unpacks the program there once (238 MB), not once per test; removed at the end."""
    cache = tmp_path_factory.mktemp("copilot-cache")
    yield cache
    shutil.rmtree(cache, ignore_errors=True)


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home(tmp_path).make()


def copilot_home(home: Home) -> Path:
    """``COPILOT_HOME``: Copilot CLI's settings, logs and session files."""
    return home.home / ".copilot"


def hooks_file(home: Home) -> Path:
    """The hooks file ``loopfuse init --agent copilot`` writes for the user."""
    return copilot_home(home) / "hooks" / "loopfuse.json"


def environment(home: Home, model_url: str, cache: Path, trusted: bool = False) -> dict[str, str]:
    """The environment of a run (the shared one of tests/agent_clis.py, less other
    CLIs' keys): Copilot CLI offline with the fake model as its provider, its updates
    and telemetry off; ``trusted``: the workspace is a trusted folder
    (``COPILOT_ALLOW_ALL``), where Copilot runs the project's hooks."""
    env = {
        key: value
        for key, value in home.environment(model_url, "copilot").items()
        if not key.startswith(("GEMINI_", "GOOGLE_"))
    }
    env |= {
        "XDG_CACHE_HOME": str(cache),
        "COPILOT_HOME": str(copilot_home(home)),
        "COPILOT_OFFLINE": "true",
        "COPILOT_PROVIDER_BASE_URL": f"{model_url}/v1",
        "COPILOT_PROVIDER_TYPE": "openai",
        "COPILOT_PROVIDER_API_KEY": "dummy",
        "COPILOT_MODEL": "fake-model",
        "COPILOT_AUTO_UPDATE": "false",
    }
    if trusted:
        env["COPILOT_ALLOW_ALL"] = "true"
    return env


def run_copilot(
    home: Home, model_url: str, cache: Path, *, trusted: bool = False, prompt: str = "Fix it."
) -> Run:
    """Run Copilot CLI headless on ``prompt`` in the workspace, against the fake model."""
    cli = executable("copilot")
    assert cli is not None, "LOOPFUSE_REQUIRE_AGENT_CLIS=1 but the copilot CLI is missing"
    argv = [
        str(cli),
        "-p",
        prompt,
        "--allow-all-tools",
        "--output-format",
        "json",
        "--disable-client-telemetry",
    ]
    env = environment(home, model_url, cache, trusted)
    return run_process("copilot", argv, home.workspace, env)


# --- what the hook relies on ---------------------------------------------------------------

EVENTS = ("preToolUse", "postToolUse", "postToolUseFailure", "userPromptSubmitted")


def logging_hooks(home: Home, exit_status: int = 0) -> Path:
    """Copilot CLI's user hooks (``$COPILOT_HOME/settings.json``): each event's input
    appended to a log, one JSON line each with the event's name first; the hook exits
    ``exit_status``."""
    log = home.root / "hook.log"
    script = home.root / "log-hook.sh"
    line = f"{{ printf '%s ' \"$1\"; tr -d '\\n'; echo; }} >> '{log}'"
    script.write_text(f"#!/bin/sh\n{line}\nexit {exit_status}\n", encoding="utf-8")
    script.chmod(0o755)
    entries = {
        event: [{"type": "command", "bash": f"{script} {event}", "timeoutSec": 30}]
        for event in EVENTS
    }
    settings = copilot_home(home) / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"hooks": entries}), encoding="utf-8")
    return log


def logged(log: Path) -> list[tuple[str, dict[str, Any]]]:
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return [(line.split(" ", 1)[0], json.loads(line.split(" ", 1)[1])) for line in lines]


def tool_answers(body: Any) -> list[str]:
    """The answers of the tool calls in one request, in order."""
    messages = body.get("messages") if isinstance(body, dict) else None
    return [
        m["content"]
        for m in messages or ()
        if isinstance(m, dict) and m.get("role") == "tool" and isinstance(m.get("content"), str)
    ]


@pytest.mark.slow
def test_a_hook_sees_each_call_before_and_after_told_apart_by_its_input(
    home: Home, program_cache: Path
) -> None:
    """The contract ``loopfuse hook`` is written against, on the installed CLI: the
    user's prompt, then per call its input before and its answer after, the events told
    apart by their keys alone (no event name in the input); the answer ends with a shell
    number new on every call; a command that exits non-zero is a success."""
    log = logging_hooks(home)
    with CopilotModel(same_command("cat missing.txt", turns=2)) as model:
        run = run_copilot(home, model.url, program_cache)
    assert run.returncode == 0, run.stderr[-2000:]
    seen = logged(log)
    assert [event for event, _ in seen] == [EVENTS[3], *[EVENTS[0], EVENTS[1]] * 2]
    assert len({payload["sessionId"] for _, payload in seen}) == 1
    assert all("hook_event_name" not in payload for _, payload in seen)
    assert [sorted({"toolResult", "error", "prompt"} & set(p)) for _, p in seen] == [
        ["prompt"], [], ["toolResult"], [], ["toolResult"]
    ]  # fmt: skip
    results = [p["toolResult"] for event, p in seen if event == "postToolUse"]
    assert [r["resultType"] for r in results] == ["success", "success"]
    assert [r["textResultForLlm"].rsplit("\n", 1)[-1] for r in results] == [
        "<shellId: 0 completed with exit code 1>",
        "<shellId: 1 completed with exit code 1>",
    ]
    assert [r.turn for r in model.turns] == [0, 1, 2]  # two calls, then the answer
    assert "No such file or directory" in tool_answers(model.turns[1].body)[0]


@pytest.mark.slow
def test_a_hook_that_exits_non_zero_refuses_the_call(home: Home, program_cache: Path) -> None:
    """Why ``loopfuse hook`` must exit 0 whatever goes wrong in it, for Copilot CLI: any
    other exit status refuses the call, and the model reads only that a hook failed."""
    logging_hooks(home, exit_status=1)
    with CopilotModel(same_command("echo ran >> ran.log", turns=1)) as model:
        run = run_copilot(home, model.url, program_cache)
    assert run.returncode == 0, run.stderr[-2000:]
    assert not (home.workspace / "ran.log").exists()
    [answer] = tool_answers(model.turns[1].body)
    assert answer.startswith("Denied by preToolUse hook")


# --- loopfuse hook, end to end ---------------------------------------------------------------

# How Copilot CLI words a refusal to its model, before the hook's reason.
REFUSED = "Denied by preToolUse hook: [loopfuse]"
# How it words a hook that failed (a non-zero exit): never seen while loopfuse guards.
HOOK_FAILED = "Denied by preToolUse hook"
# A failing command that leaves a trace of each time it really ran (so it changes state:
# it has no read-only allowance).
FAILING = "echo attempt >> attempts.log; cat missing.txt"
# docs/detector.md: the same call with the same answer is a loop at the 4th, at the 3rd
# when the answer is an error.
NOTED_AT = 3


def loopfuse_init(home: Home, *flags: str) -> str:
    """Install ``loopfuse hook`` for Copilot CLI as a user does: ``loopfuse init --agent
    copilot`` (the console script of the environment the tests run in), in the isolated
    home; its output."""
    loopfuse = Path(sys.executable).with_name("loopfuse")
    done = subprocess.run(
        [str(loopfuse), "init", "--agent", "copilot", *flags],
        cwd=home.workspace,
        env=environment(home, "http://127.0.0.1:9", Path(home.root / "no-cache")),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


@dataclass
class GuardedRun(HookedRun):
    """A Copilot CLI run with ``loopfuse hook`` installed, and what it left."""

    hook_agent = "copilot"
    said: str  # what loopfuse init said

    def first_turn(self, wanted: str) -> int | None:
        """The first turn whose request carries a note (``"note"``) or a refusal
        (``"refusal"``) of loopfuse: the number of the call it came with (turn ``n``'s
        request carries the answer of call ``n``)."""
        for request in self.model.turns:
            for text in strings(request.body):
                refusal = REFUSED in text
                note = "[loopfuse]" in text and not refusal
                if (refusal if wanted == "refusal" else note) and request.turn is not None:
                    return request.turn
        return None

    def refusals(self, turn: int) -> int:
        return sum(REFUSED in text for text in self.texts(turn))


def guarded(
    home: Home, cache: Path, script: Script, *flags: str, trusted: bool = False
) -> GuardedRun:
    """Run Copilot CLI on ``script`` with ``loopfuse hook`` installed by ``loopfuse init
    --agent copilot`` (with ``flags``); the run succeeded."""
    said = loopfuse_init(home, *flags)
    with CopilotModel(script) as model:
        run = run_copilot(home, model.url, cache, trusted=trusted)
    assert run.returncode == 0, run.stderr[-3000:]
    return GuardedRun(home, run, model, said)


def calls_and_answers(state: SessionState) -> tuple[list[Any], list[Any]]:
    calls = [e for e in state.events if e[0] == "call"]
    answers = [e for e in state.events if e[0] == "answer"]
    return calls, answers


def assert_told_then_refused(done: GuardedRun, turns: int) -> None:
    """The loop noted with the 3rd call's answer, refused from the 4th on, each refusal
    in the model's next request; nothing refused ran; the agent went on to its answer."""
    assert (done.first_turn("note"), done.first_turn("refusal")) == (NOTED_AT, NOTED_AT + 1)
    assert done.attempts() == NOTED_AT
    for turn in range(NOTED_AT + 1, turns + 1):
        assert done.refusals(turn) == turn - NOTED_AT
    assert len(done.model.turns) == turns + 1
    logged = done.log_lines()
    assert sum("loop noted" in line for line in logged) == 1
    assert sum("call refused" in line for line in logged) == turns - NOTED_AT


def test_copilot_a_looping_model_is_told_then_refused_with_the_reason(
    home: Home, program_cache: Path
) -> None:
    """The same failing call every turn: at the 3rd the call runs and the model is told
    why (after its answer); the 4th is refused, and so is every one after it, each time
    with the reason in the model's next request."""
    turns = 8
    done = guarded(home, program_cache, same_command(FAILING, turns))
    assert_told_then_refused(done, turns)
    # The note follows the 3rd call's own answer, in the same tool message.
    [noted] = [t for t in tool_answers(done.model.turns[NOTED_AT].body) if "[loopfuse]" in t]
    assert "No such file or directory" in noted
    assert "Loop detected" in noted
    # The session Copilot CLI kept, read by `loopfuse scan --agent copilot`: the same loop.
    loopfuse = Path(sys.executable).with_name("loopfuse")
    scanned = subprocess.run(
        [str(loopfuse), "scan", "--agent", "copilot", "--format", "json", "--no-progress"],
        env=environment(home, "http://127.0.0.1:9", program_cache),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert scanned.returncode == 1, scanned.stderr
    [session] = json.loads(scanned.stdout)["files"]
    assert session["name"].endswith("events.jsonl")
    assert session["tool_calls"] == turns
    assert session["findings"][0]["first"] == NOTED_AT + 1  # the request after the 3rd call


def assert_untouched(done: GuardedRun, calls: int) -> None:
    """No note, no refusal, nothing logged; and the hook did see each call and answer."""
    assert not any("loopfuse" in text for r in done.model.requests for text in strings(r.body))
    assert len(done.model.turns) == calls + 1
    assert done.log_lines() == []
    recorded, answers = calls_and_answers(done.session())
    assert len(recorded) == len(answers) == calls


@pytest.mark.slow
def test_copilot_a_healthy_run_is_untouched(home: Home, program_cache: Path) -> None:
    (home.workspace / "notes.txt").write_text("one\ntwo\n", encoding="utf-8")
    script = commands_then_answer("ls", "cat notes.txt", "wc -l notes.txt")
    assert_untouched(guarded(home, program_cache, script), calls=3)


@pytest.mark.slow
def test_copilot_a_healthy_poll_whose_output_moves_is_untouched(
    home: Home, program_cache: Path
) -> None:
    """``tail -5 build.log`` ten times while the build writes a line before each: the
    same call, again and again, but its answer moves (progress), so it is never a loop."""
    polls = 10
    done = guarded(home, program_cache, poll_moving_log(home.workspace / "build.log", polls))
    assert_untouched(done, calls=polls)
    assert any(f"step {polls - 1}:" in text for text in done.texts(polls))


@pytest.mark.slow
def test_copilot_waiting_on_a_command_it_started_is_untouched(
    home: Home, program_cache: Path
) -> None:
    """A command started in the background, then read with ``read_bash`` while it runs:
    the same wait, the same quiet answer ("still running") again and again, is progress,
    never a loop. The command runs until the model's last poll (it waits for a file the
    model's script makes then), which reads its end."""
    polls = 8  # 7 the same: past the read-only allowance (5), were they reads
    flag = home.workspace / "done.flag"

    def play(turn: int) -> Reply:
        if turn == 0:
            command = "while [ ! -e done.flag ]; do sleep 0.1; done; echo finished"
            return Reply((command,), arguments=(("mode", "async"),))
        if turn == polls:
            flag.touch()  # the command ends: the last poll reads it
        return Reply(poll=True) if turn <= polls else Reply()

    done = guarded(home, program_cache, play)
    assert_untouched(done, calls=polls + 1)
    answers = tool_answers(done.model.turns[-1].body)
    assert all("is still running" in answer for answer in answers[1:polls])
    assert answers[polls].endswith("completed with exit code 0>")


@pytest.mark.slow
def test_copilot_a_read_only_failing_command_is_told_and_refused_at_the_documented_calls(
    home: Home, program_cache: Path
) -> None:
    """``cat missing.txt`` failing the same way every time: the read-only allowance
    (noted at the 4th call, one before the 5th that refuse mode refuses, which is refused).
    Its answers differ only in their shell
    number (``<shellId: N …>``, new on every call), which the hook does not read: were
    it read, no two answers would be the same, and the loop would never be found."""
    turns, noted = 8, 4
    done = guarded(home, program_cache, same_command("cat missing.txt", turns))
    assert (done.first_turn("note"), done.first_turn("refusal")) == (noted, noted + 1)
    answers = tool_answers(done.model.turns[noted].body)
    assert len({a.rsplit("<shellId: ", 1)[-1] for a in answers}) == noted  # all different


@pytest.mark.slow
def test_copilot_end_session_has_no_effect_and_the_loop_is_refused(
    home: Home, program_cache: Path
) -> None:
    """No hook can end a Copilot CLI session: ``init`` says so and does not write
    ``--end-session``; every later call of the loop is refused, and the agent goes on to
    its answer."""
    turns = 8
    done = guarded(home, program_cache, same_command(FAILING, turns), "--end-session")
    assert "--end-session has no effect for Copilot CLI" in done.said
    assert "--end-session" not in hooks_file(home).read_text(encoding="utf-8")
    assert_told_then_refused(done, turns)
    assert not any("session ended" in line for line in done.log_lines())


@pytest.mark.slow
def test_copilot_the_project_hooks_guard_a_trusted_folder(home: Home, program_cache: Path) -> None:
    """``loopfuse init --agent copilot --project`` writes ``.github/hooks/loopfuse.json``,
    a file wholly loopfuse's; Copilot CLI runs it in a folder the user trusts."""
    turns = 6
    done = guarded(home, program_cache, same_command(FAILING, turns), "--project", trusted=True)
    assert (home.workspace / ".github" / "hooks" / "loopfuse.json").is_file()
    assert not hooks_file(home).exists()
    assert_told_then_refused(done, turns)


@pytest.mark.slow
def test_copilot_a_broken_state_directory_fails_open(home: Home, program_cache: Path) -> None:
    """A file where the state folder should be: every hook allows its call and says
    nothing (exit 0: any other status would refuse the call), so the agent runs as if
    loopfuse were not there."""
    (home.state / "loopfuse").write_text("not a folder", encoding="utf-8")
    turns = 5
    done = guarded(home, program_cache, same_command(FAILING, turns))
    assert done.attempts() == turns
    assert len(done.model.turns) == turns + 1
    assert not any("loopfuse" in text for r in done.model.requests for text in strings(r.body))
    assert not any(HOOK_FAILED in text for text in done.texts(turns))


@pytest.mark.slow
def test_copilot_a_hook_whose_program_is_gone_fails_open(home: Home, program_cache: Path) -> None:
    """loopfuse uninstalled, its hook left in Copilot's settings: the command cannot
    run (status 127), which would refuse every call; the installed line allows it
    whatever the program's status."""
    loopfuse_init(home)
    settings = hooks_file(home)
    gone = str(home.root / "gone" / "loopfuse")
    text = settings.read_text(encoding="utf-8")
    program = json.loads(text)["hooks"]["preToolUse"][0]["bash"].split(" ", 1)[0]
    settings.write_text(text.replace(json.dumps(program)[1:-1], gone), encoding="utf-8")
    assert gone in settings.read_text(encoding="utf-8")
    turns = 4
    with CopilotModel(same_command(FAILING, turns)) as model:
        run = run_copilot(home, model.url, program_cache)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (home.workspace / "attempts.log").read_text().count("attempt") == turns
    assert not any(HOOK_FAILED in text for r in model.turns for text in strings(r.body))


@pytest.mark.slow
def test_copilot_runs_claude_codes_project_hooks_and_they_leave_it_alone(
    home: Home, program_cache: Path
) -> None:
    """Copilot CLI also runs a project's ``.claude/settings.json`` hooks (its PascalCase
    events): with loopfuse installed there for Claude Code, its hook reads Copilot's
    inputs as none of Claude Code's, allows them and logs why, and a poll whose output
    moves runs its ten calls (read as Claude Code's, its answers were lost and the 7th
    call was refused)."""
    loopfuse = Path(sys.executable).with_name("loopfuse")
    subprocess.run(
        [str(loopfuse), "init", "--agent", "claude-code", "--project"],
        cwd=home.workspace,
        env=environment(home, "http://127.0.0.1:9", home.root / "no-cache"),
        capture_output=True,
        timeout=60,
        check=True,
    )
    polls = 10
    with CopilotModel(poll_moving_log(home.workspace / "build.log", polls)) as model:
        run = run_copilot(home, model.url, program_cache, trusted=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert len(model.turns) == polls + 1
    assert not any("loopfuse" in text for r in model.requests for text in strings(r.body))
    log = (home.state / "loopfuse" / "hook.log").read_text(encoding="utf-8")
    assert "Copilot CLI's input" in log  # the hook did run, and said why it let go
