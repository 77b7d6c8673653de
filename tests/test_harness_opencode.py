"""OpenCode: its tools, the events of loopfuse's plugin (recorded from OpenCode 1.18.33,
``tests/recorded/agent-clis/opencode/plugin-events.jsonl``), the hook's answers in the
plugin's format, the plugin file ``loopfuse init`` writes, what the plugin does with each
answer (run under node, without OpenCode), and its stored sessions as ``scan`` reads them.
The real OpenCode runs in tests/test_e2e_opencode.py."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from loopfuse.cli.agent_sessions import read_runs
from loopfuse.cli.hook import handle
from loopfuse.harness import ToolKind
from loopfuse.harness.agent_cli import PROBE_TOOL, HookPayloadError, NotAUserPrompt, agent_cli
from loopfuse.harness.installers import InstallError
from loopfuse.harness.opencode import CLI, HARNESS, stored_answer
from loopfuse.harness.transcripts import AgentSession

RECORDED = Path(__file__).parent / "recorded" / "agent-clis" / "opencode"
EVENTS = [
    json.loads(line)
    for line in (RECORDED / "plugin-events.jsonl").read_text(encoding="utf-8").splitlines()
]
SESSION = "ses_1"


def by_call(call: str, event: str) -> dict[str, Any]:
    """The recorded event ``event`` of the call ``call_…0N``."""
    return next(
        e for e in EVENTS if e.get("callID", "").endswith(call) and e["hook_event_name"] == event
    )


def test_the_tools_are_data() -> None:
    assert HARNESS.kind("bash", {"command": "ls"}) is ToolKind.SHELL
    assert HARNESS.kind("grep", {"pattern": "x"}) is ToolKind.READ
    assert HARNESS.kind("edit", {"filePath": "a"}) is ToolKind.EDITOR
    assert HARNESS.kind("webfetch", {"url": "u"}) is ToolKind.COSTLY
    assert HARNESS.kind("task", {}) is ToolKind.OTHER
    assert agent_cli("opencode") is CLI


def test_every_recorded_event_reads_as_its_phase_with_its_failure_and_exit() -> None:
    read = [(e["hook_event_name"], CLI.parse(e)) for e in EVENTS]
    phases = {name: {event.phase for n, event in read if n == name} for name, _ in read}
    assert phases == {
        "chat.message": {"turn"},
        "tool.execute.before": {"before"},
        "tool.execute.after": {"after"},
        "tool.execute.error": {"after"},
    }
    ok = CLI.parse(by_call("01", "tool.execute.after"))
    assert (ok.tool_name, ok.tool_input, ok.answer, ok.error, ok.exit_code) == (
        "bash",
        {"command": "echo hello"},  # the model's description is prose, not the call
        "hello\n",
        False,
        0,
    )
    assert ok.call_id == "call_00000000000000000001"
    failing = CLI.parse(by_call("02", "tool.execute.after"))
    assert (failing.error, failing.exit_code) == (True, 1)  # a command that exited 1
    thrown = CLI.parse(by_call("03", "tool.execute.error"))
    assert (thrown.tool_name, thrown.error, thrown.exit_code) == ("read", True, None)
    assert thrown.answer.startswith("File not found: ")
    assert CLI.parse(by_call("06", "tool.execute.after")).exit_code == 3


def test_a_refused_call_has_no_after_event_and_a_cut_output_no_volatile_path() -> None:
    assert [e["hook_event_name"] for e in EVENTS if e.get("callID", "").endswith("04")] == [
        "tool.execute.before"
    ]
    cut = by_call("05", "tool.execute.after")
    assert "Full output saved to: " in cut["output"]
    answer = CLI.parse(cut).answer
    assert isinstance(answer, str)
    assert answer.startswith("...output truncated...\n")
    assert "Full output saved to" not in answer


def test_a_prompt_is_a_new_run_and_a_message_opencode_wrote_is_not() -> None:
    prompt = {"hook_event_name": "chat.message", "sessionID": SESSION, "parts": [{"type": "text"}]}
    assert CLI.parse(prompt).phase == "turn"
    synthetic = {**prompt, "parts": [{"type": "text", "synthetic": True}]}
    with pytest.raises(NotAUserPrompt):
        CLI.parse(synthetic)


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"hook_event_name": "tool.execute.before"},
        {"hook_event_name": "session.idle", "sessionID": SESSION},
        {"hook_event_name": "tool.execute.before", "sessionID": SESSION},
        {"hook_event_name": "tool.execute.before", "sessionID": "", "tool": "bash"},
        {"hook_event_name": 3, "sessionID": SESSION, "tool": "bash"},
    ],
)
def test_what_is_not_an_event_of_the_plugin_is_a_payload_error(payload: dict[str, Any]) -> None:
    with pytest.raises(HookPayloadError):
        CLI.parse(payload)


def test_answers_in_the_plugin_s_format() -> None:
    before = CLI.parse(by_call("01", "tool.execute.before"))
    after = CLI.parse(by_call("01", "tool.execute.after"))
    turn = CLI.parse(EVENTS[0])
    assert CLI.render(before, "allow", "") == ("", 0)
    assert json.loads(CLI.render(before, "deny", "R")[0]) == {"action": "deny", "reason": "R"}
    assert json.loads(CLI.render(before, "end", "R")[0]) == {"action": "end", "reason": "R"}
    assert CLI.render(before, "note", "N") == ("", 0)  # a note comes after the call
    assert json.loads(CLI.render(after, "note", "N")[0]) == {"action": "note", "reason": "N"}
    assert CLI.render(after, "deny", "R") == ("", 0)  # a call that ran cannot be refused
    assert CLI.render(turn, "deny", "R") == ("", 0)
    shown = json.loads(CLI.render_user_message(before, "settings refused")[0])
    assert shown == {"action": "allow", "user": "settings refused"}
    probe = CLI.parse(CLI.probe_event("s"))
    assert (probe.agent, probe.phase, probe.tool_name) == ("opencode", "before", PROBE_TOOL)


def test_the_plugin_goes_in_the_user_s_or_the_project_s_plugins_folder() -> None:
    cwd = Path("/p")
    assert CLI.settings_path(False, {"HOME": "/h"}, cwd) == Path(
        "/h/.config/opencode/plugins/loopfuse.js"
    )
    env = {"HOME": "/h", "XDG_CONFIG_HOME": "/x"}
    assert CLI.settings_path(False, env, cwd) == Path("/x/opencode/plugins/loopfuse.js")
    assert CLI.settings_path(True, env, cwd) == Path("/p/.opencode/plugins/loopfuse.js")


def ours(command: str) -> bool:
    return " hook " in f" {command} "


def test_the_plugin_file_is_ours_whole() -> None:
    command = "/opt/venv/bin/loopfuse hook --agent opencode --end-session"
    text = CLI.installer.install("", command, ours)
    assert "@LOOPFUSE" not in text
    assert json.dumps(command.split()) in text  # spawned without a shell
    assert CLI.installer.install(text, command, ours) == text
    assert set(CLI.installer.commands(text, ours)) == set(CLI.events)
    assert CLI.installer.uninstall(text, ours) == ""
    changed = text.replace("TIMEOUT_MS = 30000", "TIMEOUT_MS = 1")
    with pytest.raises(InstallError):
        CLI.installer.install(changed, command, ours)
    assert CLI.installer.uninstall(changed, ours) == changed  # not ours any more: kept


# --- the hook, on the plugin's events ---------------------------------------------------


class Hook:
    """``loopfuse hook --agent opencode`` in this process, on a fake wall clock."""

    def __init__(self, root: Path, *flags: str) -> None:
        self.flags = ["--agent", "opencode", "--state-dir", str(root), *flags]
        self.now = 1_800_000_000.0
        self.calls = 0

    def clock(self) -> float:
        self.now += 0.001
        return self.now

    def __call__(self, payload: dict[str, Any]) -> dict[str, Any]:
        output, status = handle(json.dumps(payload).encode(), self.flags, {}, self.clock)
        assert status == 0
        return json.loads(output) if output else {}

    def call(self, tool: str, args: dict[str, Any], **answer: Any) -> tuple[dict[str, Any], ...]:
        """One call: its before-event, then (unless refused) its after-event (``output``
        and ``exit``) or its failure (``error``); the hook's two answers."""
        self.calls += 1
        self.now += 5
        ids = {"sessionID": SESSION, "callID": f"call_{self.calls}", "tool": tool, "args": args}
        before = self({"hook_event_name": "tool.execute.before", **ids})
        if before.get("action") in ("deny", "end"):
            return (before,)
        if "error" in answer:
            return before, self(
                {"hook_event_name": "tool.execute.error", **ids, "error": answer["error"]}
            )
        metadata = {"exit": answer.get("exit")}
        after = self(
            {
                "hook_event_name": "tool.execute.after",
                **ids,
                "output": answer["output"],
                "metadata": metadata,
            }
        )
        return before, after


def test_a_failing_command_is_noted_at_the_third_call_then_refused(tmp_path: Path) -> None:
    hook = Hook(tmp_path)
    answers = [
        hook.call("bash", {"command": "make"}, output="make: *** No rule\n", exit=2)
        for _ in range(4)
    ]
    assert [a[-1].get("action") for a in answers] == [None, None, "note", "deny"]
    assert answers[3][0]["reason"].startswith("[loopfuse] ")


def test_a_tool_that_throws_is_seen_from_its_failure_event(tmp_path: Path) -> None:
    hook = Hook(tmp_path)
    answers = [
        hook.call("read", {"filePath": "missing.txt"}, error="File not found: /w/missing.txt")
        for _ in range(6)
    ]
    actions = [a[-1].get("action") for a in answers]
    assert "note" in actions
    assert actions.index("deny") == actions.index("note") + 1


def test_with_end_session_the_loop_that_goes_on_ends_it(tmp_path: Path) -> None:
    hook = Hook(tmp_path, "--end-session")
    answers = [hook.call("bash", {"command": "make"}, output="no\n", exit=2) for _ in range(5)]
    assert [a[-1].get("action") for a in answers] == [None, None, "note", "deny", "end"]


def test_a_poll_whose_output_moves_is_never_a_loop(tmp_path: Path) -> None:
    hook = Hook(tmp_path)
    for step in range(12):
        answers = hook.call(
            "bash", {"command": "tail -5 build.log"}, output=f"step {step}\n", exit=0
        )
        assert all(a == {} for a in answers)


def test_a_user_prompt_starts_a_new_run(tmp_path: Path) -> None:
    hook = Hook(tmp_path)
    for _ in range(3):
        hook.call("bash", {"command": "make"}, output="no\n", exit=2)
    hook({"hook_event_name": "chat.message", "sessionID": SESSION, "parts": [{"type": "text"}]})
    assert hook.call("bash", {"command": "make"}, output="no\n", exit=2) == ({}, {})


# --- the plugin itself, under node ---------------------------------------------------------

NODE = shutil.which("node")
HARNESS_JS = textwrap.dedent(
    """
    import { LoopfusePlugin } from "./loopfuse.js"
    const aborted = []
    const client = process.env.BARE ? {} : {
      session: { abort: async ({ path }) => { aborted.push(path.id) } },
      tui: { showToast: async () => {} },
      app: { log: async () => {} },
    }
    const hooks = await LoopfusePlugin({ client })
    const again = await LoopfusePlugin({ client })
    const results = { again: Object.keys(again).length }
    async function before(call, command) {
      try {
        await hooks["tool.execute.before"](
          { tool: "bash", sessionID: "ses_1", callID: call }, { args: { command } })
        return "ran"
      } catch (error) { return `refused: ${error.message}` }
    }
    results.allowed = await before("c1", "ls")
    results.denied = await before("c2", "DENY")
    results.ended = await before("c3", "END")
    results.aborted = aborted
    const output = { title: "", output: "out\\n", metadata: { exit: 0 } }
    await hooks["tool.execute.after"](
      { tool: "bash", sessionID: "ses_1", callID: "c4", args: { command: "NOTE" } }, output)
    results.noted = output.output
    const part = (callID) => ({ type: "tool", callID, sessionID: "ses_1", tool: "read",
      state: { status: "error", input: { filePath: "x" }, error: "File not found: x" } })
    await hooks.event({ event: { type: "message.part.updated", properties: { part: part("c5") } } })
    await hooks.event({ event: { type: "message.part.updated", properties: { part: part("c2") } } })
    const messages = [{ info: {}, parts: [part("c5")] }]
    await hooks["experimental.chat.messages.transform"]({}, { messages })
    await hooks["experimental.chat.messages.transform"]({}, { messages })
    results.failure = messages[0].parts[0].state.error
    console.log(JSON.stringify(results))
    """
)
HOOK_PY = textwrap.dedent(
    """
    import json, sys, os
    event = json.load(sys.stdin)
    with open(os.environ["EVENTS"], "a") as out:
        out.write(json.dumps(event) + "\\n")
    text = json.dumps(event)
    if event["hook_event_name"] == "tool.execute.before" and "DENY" in text:
        print(json.dumps({"action": "deny", "reason": "[loopfuse] no"}))
    elif event["hook_event_name"] == "tool.execute.before" and "END" in text:
        print(json.dumps({"action": "end", "reason": "[loopfuse] over"}))
    elif event["hook_event_name"] == "tool.execute.after" and "NOTE" in text:
        print(json.dumps({"action": "note", "reason": "[loopfuse] careful"}))
    elif event["hook_event_name"] == "tool.execute.error":
        print(json.dumps({"action": "note", "reason": "[loopfuse] failing"}))
    elif os.environ.get("ANSWER"):
        print(os.environ["ANSWER"])
        sys.stderr.write("a problem the user must see")
    """
)


def run_plugin(tmp_path: Path, command: list[str], **env: str) -> dict[str, Any]:
    assert NODE is not None
    plugin = CLI.installer.render(shlex.join(command))
    (tmp_path / "loopfuse.js").write_text(plugin, encoding="utf-8")
    (tmp_path / "run.mjs").write_text(HARNESS_JS, encoding="utf-8")
    done = subprocess.run(
        [NODE, str(tmp_path / "run.mjs")],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "EVENTS": str(tmp_path / "events.jsonl"), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_plugin_acts_on_each_answer(tmp_path: Path) -> None:
    (tmp_path / "hook.py").write_text(HOOK_PY, encoding="utf-8")
    got = run_plugin(tmp_path, [sys.executable, str(tmp_path / "hook.py")])
    assert got["again"] == 0  # loaded twice for one OpenCode: the second does nothing
    assert got["allowed"] == "ran"
    assert got["denied"] == "refused: [loopfuse] no"
    assert (got["ended"], got["aborted"]) == ("refused: [loopfuse] over", ["ses_1"])
    assert got["noted"] == "out\n\n[loopfuse] careful"
    assert got["failure"] == "File not found: x\n\n[loopfuse] failing"  # once, sent twice
    sent = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    # the refused call's failure is not reported: nothing ran
    assert [(e["hook_event_name"], e["callID"]) for e in sent] == [
        ("tool.execute.before", "c1"),
        ("tool.execute.before", "c2"),
        ("tool.execute.before", "c3"),
        ("tool.execute.after", "c4"),
        ("tool.execute.error", "c5"),
    ]
    assert sent[3]["metadata"] == {"exit": 0}
    assert sent[4]["error"] == "File not found: x"


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize(
    "command",
    [["/nonexistent/loopfuse"], ["/bin/true"], ["/bin/sh", "-c", "echo '{'; exit 3"]],
    ids=["missing", "reads-nothing", "garbage"],
)
def test_the_plugin_lets_every_call_run_when_the_hook_cannot_answer(
    tmp_path: Path, command: list[str]
) -> None:
    got = run_plugin(tmp_path, command)
    assert (got["allowed"], got["denied"], got["ended"]) == ("ran", "ran", "ran")
    assert got["aborted"] == []
    assert got["noted"] == "out\n"
    assert got["failure"] == "File not found: x"


# --- its stored sessions ---------------------------------------------------------------------


def test_a_stored_answer_is_what_the_model_read_with_the_hook_s_failure_flag() -> None:
    export = json.loads((RECORDED / "plugin-session-export.json").read_text(encoding="utf-8"))
    parts = [p for m in export["messages"] for p in m["parts"] if p["type"] == "tool"]
    read = {p["callID"][-2:]: stored_answer(p["tool"], p["state"]) for p in parts}
    assert read["01"] == ("hello\n", False)
    assert read["02"] == ("cat: missing.txt: No such file or directory\n", True)
    assert read["03"] is not None
    assert read["03"][1] is True
    assert read["04"] == ("[loopfuse] refused: DENYME", True)  # refused by the hook
    assert read["05"] is not None
    assert "Full output saved to" not in read["05"][0]
    assert read["06"] == ("a\n", True)
    assert read["08"] == ("(no output)", False)
    for part in parts:  # the hook reads the same flags from the plugin's events
        after = [
            e
            for e in EVENTS
            if e.get("callID") == part["callID"] and e["hook_event_name"] != "tool.execute.before"
        ]
        if after:
            assert CLI.parse(after[0]).error is read[part["callID"][-2:]][1]


def test_scan_reads_the_recorded_session_as_the_model_read_it_with_the_hook_s_flags() -> None:
    """A session OpenCode 1.18.33 kept (``opencode export``): each answer the model read,
    a command that exited non-zero flagged as failed (as ``loopfuse hook`` judges it), a
    success flagged as one, the path of a cut output's full text (new at every call)
    left out."""
    path = RECORDED / "plugin-session-export.json"
    size = path.stat().st_size
    session = AgentSession(str(path), "opencode", size, lambda: path.open("rb"), whole=True)
    [run], problems = read_runs(session)
    assert problems == []
    results = {
        block["tool_use_id"][-2:]: block
        for message in run.body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "tool_result"
    }
    flags = {call: block.get("is_error") for call, block in results.items()}
    assert flags == {
        "01": False,
        "02": True,  # cat missing.txt: exit 1
        "03": True,  # read threw
        "04": True,  # refused
        "05": False,
        "06": True,  # exit 3
        "07": True,
        "08": False,
    }
    assert "Full output saved to" not in results["05"]["content"]


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize("answer", ["null", "[1]", '"deny"', '{"action": "allow"}'])
def test_the_plugin_never_fails_a_call_it_was_not_told_to_refuse(
    tmp_path: Path, answer: str
) -> None:
    """An OpenCode whose client lacks what the plugin calls (toast, log, abort), a hook
    answering JSON that is not an answer, and a problem on stderr: the calls run; the
    refusals it was told still refuse (an end without abort: a refusal)."""
    (tmp_path / "hook.py").write_text(HOOK_PY, encoding="utf-8")
    got = run_plugin(tmp_path, [sys.executable, str(tmp_path / "hook.py")], BARE="1", ANSWER=answer)
    assert got["allowed"] == "ran"
    assert (got["denied"], got["ended"]) == ("refused: [loopfuse] no", "refused: [loopfuse] over")
    assert got["aborted"] == []
