"""``hook.log`` counts the calls the model's message counts: a line per loop noted, call
refused or session ended, with the same number the model was told, in every mode and
for every CLI."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hook_payloads import (
    claude_failure,
    claude_pre,
    codex_post,
    codex_pre,
    gemini_after,
    gemini_before,
)
from loopfuse.cli.hook import handle

COMMAND = "cat missing.txt"
Payloads = tuple[Callable[[int], dict[str, Any]], Callable[[int], dict[str, Any]]]
EVENTS: dict[str, Payloads] = {
    "claude-code": (
        lambda i: claude_pre(COMMAND, f"toolu_{i}"),
        lambda i: claude_failure(COMMAND, f"toolu_{i}", "No such file"),
    ),
    "codex": (
        lambda i: codex_pre(COMMAND, f"call_{i}"),
        lambda i: codex_post(COMMAND, f"call_{i}", "No such file\n"),
    ),
    "gemini": (
        lambda _: gemini_before(COMMAND),
        lambda i: gemini_after(COMMAND, "No such file", 1, 9000 + i),
    ),
}
TOLD = re.compile(r"the same arguments (\d+) times in a row")
LOGGED = re.compile(r"(loop noted|call refused|session ended) \(repeat, (\d+)x\)")


def _laps(root: Path, agent: str, laps: int, *flags: str) -> list[tuple[str, int]]:
    """Run ``laps`` identical failing calls through the hook, one process per event as
    the CLI runs them; what the model was told each time it was told something: the
    kind of answer and the number of identical calls its message counts."""
    now = [1_800_000_000.0]

    def clock() -> float:
        now[0] += 0.001
        return now[0]

    before, after = EVENTS[agent]
    argv = ["--state-dir", str(root), *flags]
    told = []
    for lap in range(laps):
        output, status = handle(json.dumps(before(lap)).encode(), argv, {}, clock)
        assert status == 0
        answer = json.loads(output) if output else {}
        if answer:  # refused, or the session ended: the call does not run
            text = json.dumps(answer)
            kind = "session ended" if answer.get("continue") is False else "call refused"
            if kind == "call refused" and "ended the session" in text:
                kind = "session ended"  # Codex cannot end one: refused, the log says so
            told.append((kind, int(TOLD.findall(text)[0])))
            continue
        output, status = handle(json.dumps(after(lap)).encode(), argv, {}, clock)
        assert status == 0
        if output:  # the call ran, with a note after it
            told.append(("loop noted", int(TOLD.findall(output)[0])))
    return told


def _logged(root: Path) -> list[tuple[str, int]]:
    lines = (root / "hook.log").read_text(encoding="utf-8").splitlines()
    found = [LOGGED.search(line) for line in lines]
    assert all(found), lines  # nothing but the loops in the log
    return [(match[1], int(match[2])) for match in found if match]


@pytest.mark.parametrize("agent", list(EVENTS))
@pytest.mark.parametrize(
    "flags",
    [(), ("--mode", "refuse"), ("--mode", "note"), ("--end-session",)],
    ids=["warn", "refuse", "note", "warn-end-session"],
)
def test_the_log_counts_what_the_model_is_told(
    tmp_path: Path, agent: str, flags: tuple[str, ...]
) -> None:
    told = _laps(tmp_path, agent, 9, *flags)
    logged = _logged(tmp_path)
    assert len(told) >= 4, told
    assert [count for _, count in logged] == [count for _, count in told]
    kinds = [kind for kind, _ in logged]
    if agent == "codex":  # never ended: refused, and the log says that it could not be
        kinds = [kind.replace("session ended", "call refused") for kind in kinds]
        told = [(kind.replace("session ended", "call refused"), n) for kind, n in told]
    assert kinds == [kind for kind, _ in told]


def test_a_refused_call_is_logged_with_the_calls_that_ran(tmp_path: Path) -> None:
    # Refused at once: the calls that ran before it are counted, not the refused ones.
    told = _laps(tmp_path, "claude-code", 7, "--mode", "refuse")
    first = told[0][1]
    assert told == [("call refused", first)] * len(told)
    assert _logged(tmp_path) == told
