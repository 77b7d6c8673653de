"""Whole runs, healthy and stuck, through ``scan`` (every request) and a live detector.

The healthy runs are what a new user tries first, and what peers' detectors stop (and
get switched off for): polls of a log, a CI run, a training job, a pod. None may be
stopped at any request with the defaults. The stuck runs vary their calls and still
loop; each must be stopped, by the signal named.
"""

from __future__ import annotations

import json

import pytest

from agent_runs import Step, openai_run
from loopfuse.detector import LoopDetected, LoopDetector, ToolCall, results_digest, scan


def bash(command: object, answer: str) -> Step:
    return ("bash", {"command": command}, answer)


def first_scan_flag(steps: list[Step]) -> tuple[int, str | None] | None:
    for n in range(1, len(steps) + 1):
        verdict = scan(openai_run(steps[:n]))
        if not verdict.ok:
            return n, verdict.kind
    return None


def first_live_refusal(steps: list[Step]) -> tuple[int, str] | None:
    det = LoopDetector()
    for n, (name, arguments, answer) in enumerate(steps, start=1):
        calls = [ToolCall(name, arguments)]
        try:
            record = det.check(calls)
        except LoopDetected as loop:
            return n, loop.kind
        det.record_results(record, results_digest(calls, [answer]))
    return None


AGE = ["5s", "10s", "15s", "20s", "25s"]
POD = (
    "NAME                   READY   STATUS              RESTARTS   AGE\n"
    "web-7d4b9c-x2x9q   0/1     {status}   0          {age}"
)

HEALTHY: dict[str, list[Step]] = {
    "tail a growing build log x8": [
        bash("tail -5 build.log", "\n".join(f"[{k}] compiled module {k}" for k in range(i, i + 5)))
        for i in range(8)
    ],
    "gh run view while the steps advance x10": [
        bash("gh run view 4242", f"build  in_progress  step {i + 1}/12  (Run tests)")
        for i in range(10)
    ],
    "sleep and tail a training log x12": [
        bash(
            "sleep 60 && tail -n 3 train.log",
            f"epoch {i}\nstep {100 * i}\nloss {2.5 - 0.1 * i:.3f}",
        )
        for i in range(12)
    ],
    "kubectl get pods: only the age moves for 5 polls, then Running x8": [
        bash(
            "kubectl get pods -l app=web",
            POD.format(status="ContainerCreating", age=AGE[i])
            if i < 5
            else POD.format(status="Running          ", age=f"{30 + 5 * i}s"),
        )
        for i in range(8)
    ],
    "waiting for CI with only the elapsed time moving x20": [
        bash(
            "sleep 30 && gh run view 4242 --json status,conclusion",
            json.dumps({"status": "in_progress", "elapsed": f"{30 * (i + 1)}s"}),
        )
        for i in range(20)
    ],
    "a Codex argv poll of a log x10": [
        ("shell", {"command": ["bash", "-lc", "tail -n 2 out.log"]}, f"line {i}\nline {i + 1}")
        for i in range(10)
    ],
    "a log that appears after three polls": [
        bash(
            "sleep 5 && tail -n 2 out.log",
            "tail: cannot open 'out.log' for reading: No such file or directory"
            if i < 3
            else f"step {i}\nstep {i + 1}",
        )
        for i in range(10)
    ],
    "edit and re-run the tests while failures go down x10": [
        step
        for i in range(10)
        for step in (
            ("str_replace", {"path": "a.py", "old": f"v{i}", "new": f"v{i + 1}"}, "edited"),
            bash("pytest -q tests/", f"FAILED tests/test_a.py::t{i}\n{10 - i} failed, {i} passed"),
        )
    ],
    "exploring with greps that find nothing x10": [
        bash(f"grep -rn 'def handler_{i}' src/", "<returncode>1</returncode>\n<output>\n</output>")
        for i in range(10)
    ],
    "writing ten files": [
        bash(f"cat > src/mod{i}.py <<'EOF'\nX = {i}\nEOF", "") for i in range(10)
    ],
    "a job_status tool whose progress moves x15": [
        ("job_status", {"id": 7}, f"running {5 * i}%") for i in range(15)
    ],
    "reading a long file page by page x15": [
        bash(f"sed -n '{1 + 40 * i},{40 * (i + 1)}p' big.py", f"code of lines {1 + 40 * i}..")
        for i in range(15)
    ],
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_a_healthy_run_is_never_stopped(name: str) -> None:
    steps = HEALTHY[name]
    assert first_scan_flag(steps) is None
    assert first_live_refusal(steps) is None


MISSING = (
    'Traceback (most recent call last):\n  File "<frozen runpy>"\n'
    "ModuleNotFoundError: No module named 'fastjson'"
)

STUCK: dict[str, tuple[list[Step], str, int]] = {
    # (steps, the signal that stops it, the request it stops at the latest)
    "the same failing command again": (
        [
            bash(
                "cd fastjson/ && mvn test",
                f"bash: line {9 + i}: cd: fastjson/: No such file or directory",
            )
            for i in range(8)
        ],
        "repeat",
        3,
    ),
    "every variant of a python -m line, the same ModuleNotFoundError": (
        [
            bash(f"python -m fastjson.{m}", MISSING)
            for m in ("cli", "main", "run", "app", "tool", "x")
        ],
        "error_streak",
        4,
    ),
    "find in one place after another, the same nothing": (
        [
            bash(f"find /{d} -name javac 2>&1 | head -3", "find: no javac here")
            for d in ("usr", "opt", "srv", "home", "var", "etc")
        ],
        "near_repeat",
        4,
    ),
    "edits that do not change the failing test": (
        [
            step
            for i in range(8)
            for step in (
                ("str_replace", {"path": "a.py", "old": f"v{i}", "new": f"v{i + 1}"}, "edited"),
                bash("python reproduce.py", "AssertionError: expected 3, got 2"),
            )
        ],
        "no_progress",
        12,
    ),
    "a six-step lap round and round": (
        [
            step
            for _ in range(4)
            for step in (
                ("open_file", {"path": "a.py"}, "code"),
                ("edit", {"path": "a.py", "text": "x = 1"}, "edited"),
                bash("python a.py", "x = 2"),
                ("open_file", {"path": "b.py"}, "more code"),
                ("edit", {"path": "b.py", "text": "y = 1"}, "edited"),
                bash("python b.py", "y = 2"),
            )
        ],
        "cycle",
        18,
    ),
    "installing package after package, all failing": (
        [
            bash(f"sudo apt-get install -y lib{i}-dev", f"E: Unable to locate package lib{i}-dev")
            for i in range(16)
        ],
        "error_storm",
        12,
    ),
}


@pytest.mark.parametrize("name", sorted(STUCK))
def test_a_stuck_run_is_stopped_by_its_signal(name: str) -> None:
    steps, kind, latest = STUCK[name]
    flag = first_scan_flag(steps)
    assert flag is not None, "never stopped"
    assert flag[1] == kind
    assert flag[0] <= latest
    refusal = first_live_refusal(steps)
    assert refusal is not None
    assert refusal[0] <= latest + 1  # live, an answer-based signal refuses the next batch
