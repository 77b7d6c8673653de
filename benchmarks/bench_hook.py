"""What does ``loopfuse hook`` cost a coding agent per tool call? Times against a no-op.

Usage::

    python benchmarks/bench_hook.py [--rounds 30] [--calls 48]

For each CLI (Claude Code, Codex, Gemini CLI, Qwen Code, Copilot CLI, Kimi Code, pi,
OpenCode, Crush) a session's state is first filled with ``--calls`` varied shell calls and
their answers (a full detector window by default: a real session's state, the largest the
hook keeps), then the installed console script (``loopfuse`` beside this Python, as
``loopfuse init`` writes it) is run as the CLI runs it: one process for the before-event
of a new call, one for its after-event, each with the JSON payload on stdin. Crush runs no
hook after a call (no after-event, no answers in its state). Interleaved with them, in the
same rounds, a no-op Python process (``python -c pass``) is timed as the baseline.

Every child process runs with its bytecode cached, as an installed package has it
(``pip install`` compiles it; here ``PYTHONPYCACHEPREFIX`` points at a temporary folder,
filled by a warm-up run, whatever ``PYTHONDONTWRITEBYTECODE`` says), so that what is
timed is the hook, not the compiler.

Printed per CLI: the median wall time (process start to exit) of a before- and an
after-hook, the no-op's, and what the hook adds over it. The target is a median of
80 ms or less per hook process. Figures move with the machine's load: compare the
numbers of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from hook_payloads import (  # the payload shapes of the real CLIs
    claude_post,
    claude_pre,
    codex_post,
    codex_pre,
    copilot_post,
    copilot_pre,
    gemini_after,
    gemini_before,
    kimi_post,
    kimi_pre,
    opencode_post,
    opencode_pre,
    pi_post,
    pi_pre,
    qwen_post,
    qwen_pre,
)
from loopfuse.cli.hook import handle

COMMANDS = (
    "ls src/app",
    "cat src/app/models.py",
    "grep -rn 'def save' src",
    "python -m pytest -q tests/test_models.py",
    "git diff --stat",
    "sed -n 1,80p src/app/views.py",
    "npm run build",
    "git status --short",
)


def call(agent: str, i: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The before- and after-payloads of call ``i`` of a varied session (no after-payload:
    the CLI runs no hook after a call)."""
    command = f"{COMMANDS[i % len(COMMANDS)]}  # step {i}"
    if agent == "crush":  # tests/recorded/agent-clis/crush/pre-bash.json's shape
        arguments = {"command": command, "description": f"Step {i}"}
        pre = {"event": "PreToolUse", "session_id": "5a1e0c9f-bench", "cwd": "/home/user/p"}
        return {**pre, "tool_name": "bash", "tool_input": arguments}, None
    output = "\n".join(f"line {k} of output {i}: ok" for k in range(12))
    if agent == "claude-code":
        return claude_pre(command, f"toolu_{i}"), claude_post(command, f"toolu_{i}", output)
    if agent == "codex":
        return codex_pre(command, f"call_{i}"), codex_post(command, f"call_{i}", output)
    if agent == "qwen":
        return qwen_pre(command, i), qwen_post(command, i, output)
    if agent == "copilot":
        return copilot_pre(command), copilot_post(command, i, output)
    if agent == "kimi":
        return kimi_pre(command, i), kimi_post(command, i, output)
    if agent == "pi":
        return pi_pre(command, f"call_{i}"), pi_post(command, f"call_{i}", output)
    if agent == "opencode":  # its plugin's events (the plugin names the CLI: --agent)
        return opencode_pre(command, i), opencode_post(command, i, output)
    return gemini_before(command), gemini_after(command, output, 0, 4000 + i)


def script() -> list[str]:
    installed = Path(sys.executable).parent / "loopfuse"
    return [str(installed)] if installed.exists() else [sys.executable, "-m", "loopfuse"]


def timed(argv: list[str], payload: bytes, env: dict[str, str]) -> tuple[float, float]:
    """The wall time and the CPU time (user + system) of one child process."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, input=payload, stdout=subprocess.DEVNULL, env=env, check=True)
    wall = time.perf_counter() - start
    now = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (now.ru_utime - used.ru_utime) + (now.ru_stime - used.ru_stime)


# The CLIs whose inputs do not name their event, or that loopfuse does not tell by their
# payload (Kimi Code, pi, OpenCode, Crush), are named by the command (as init writes it);
# the others are told by their payload.
NAMED: Final = ("copilot", "kimi", "pi", "opencode", "crush")


def bench(agent: str, rounds: int, calls: int, root: Path) -> dict[str, float]:
    state = root / agent
    now = time.time()
    named = ["--agent", agent] if agent in NAMED else []
    for i in range(calls):  # a real session's state, filled in this process
        for payload in call(agent, i):
            if payload is not None:
                flags = ["--state-dir", str(state), *named]
                handle(json.dumps(payload).encode(), flags, {}, lambda: now)
    env = {**os.environ, "LOOPFUSE_STATE_DIR": str(state)}
    env["PYTHONPYCACHEPREFIX"] = str(root / "bytecode")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    hook = [*script(), "hook", *named]
    noop = [sys.executable, "-c", "pass"]
    warm_up = json.dumps(call(agent, calls)[0]).encode()
    timed(noop, b"", env)
    timed(hook, warm_up, env)
    times: dict[str, list[float]] = {}
    for r in range(rounds):
        before, after = call(agent, calls + 1 + r)
        for name, argv, payload in (("noop", noop, b""), ("before", hook, before)):
            wall, cpu = timed(argv, payload if isinstance(payload, bytes) else _raw(payload), env)
            times.setdefault(name, []).append(wall)
            times.setdefault(f"{name} cpu", []).append(cpu)
        if after is not None:
            wall, cpu = timed(hook, _raw(after), env)
            times.setdefault("after", []).append(wall)
            times.setdefault("after cpu", []).append(cpu)
    events = json.loads(next((state / "sessions").glob("*.json")).read_text())["events"]
    medians = {name: statistics.median(values) for name, values in times.items()}
    medians["events"] = len(events)
    return medians


def _raw(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload).encode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=48)
    args = parser.parse_args(argv)
    ms: Callable[[float], str] = lambda seconds: f"{seconds * 1000:6.1f}"  # noqa: E731
    print(f"loopfuse hook cost, median of {args.rounds} rounds ({' '.join(script())})")
    print("milliseconds: wall time (process start to exit), and [CPU time]")
    print("agent        state  before         after          no-op        before-noop  <=80ms")
    with tempfile.TemporaryDirectory() as folder:
        for agent in (
            "claude-code",
            "codex",
            "gemini",
            "qwen",
            "copilot",
            "kimi",
            "pi",
            "opencode",
            "crush",
        ):
            m = bench(agent, args.rounds, args.calls, Path(folder))
            ok = "yes" if max(m["before"], m.get("after", 0.0)) <= 0.080 else "NO"
            after = f"{ms(m['after'])} [{ms(m['after cpu'])}]" if "after" in m else f"{'-':>15}"
            print(
                f"{agent:12} {int(m['events']):5}  "
                f"{ms(m['before'])} [{ms(m['before cpu'])}] "
                f"{after} "
                f"{ms(m['noop'])} [{ms(m['noop cpu'])}] "
                f"{ms(m['before'] - m['noop'])}       {ok}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
