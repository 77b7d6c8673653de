"""Replay every trajectory of a corpus through ``scan`` and measure each configuration.

Usage: ``python benchmarks/corpus_eval.py [folder] [--list] [--groups] [--grid]``

``folder`` defaults to ``../shared/corpus`` relative to the repository root. Each file is
one trajectory in OpenAI Chat format with ``outcome`` (resolved / failed / unknown) and
``exit_reason``. For every step — the request the agent sends after the tool results of
one assistant turn, i.e. ``messages[:k]`` — the request body is scanned as a proxy
would; the first step whose verdict is not ``ok`` is the flag. Reported per
configuration:

- resolved runs flagged, and how many of those ended on their own (their exit reason is
  not a budget or step limit) — a flag there would have stopped a good run;
- failed runs flagged;
- tool calls in failed runs that come after the first flag (what stopping would save).

``--groups`` prints the defaults per group of trajectories (agent framework and model).
``--grid`` adds a leave-one-group-out check over a grid of configurations: for each
group, a configuration is chosen greedily on the other groups (no good run stopped, then
the most failed runs flagged, then the most calls saved) and scored on the held-out
group — what choosing thresholds from data would do on trajectories it has not seen.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopfuse.detector import LoopDetector, scan

REPO = Path(__file__).resolve().parent.parent
DEFAULT_FOLDER = REPO.parent / "shared" / "corpus"
BUDGET_EXITS = ("exit_cost", "max_steps")


@dataclass
class Trajectory:
    name: str
    pool: str
    outcome: str
    exit_reason: str
    messages: list[dict[str, Any]]
    steps: list[int] = field(default_factory=list)  # k: request = messages[:k]

    @property
    def on_its_own(self) -> bool:
        return not any(limit in self.exit_reason for limit in BUDGET_EXITS)

    def calls_from(self, k: int) -> int:
        return sum(len(m.get("tool_calls") or []) for m in self.messages[k:])

    @property
    def calls(self) -> int:
        return self.calls_from(0)


def load(folder: Path) -> list[Trajectory]:
    out = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        messages = data["messages"]
        t = Trajectory(
            name=path.stem,
            pool=path.stem.split("__")[0].split("_")[0],
            outcome=data["outcome"],
            exit_reason=data.get("exit_reason", ""),
            messages=messages,
        )
        for k in range(1, len(messages) + 1):
            last_is_tool = messages[k - 1].get("role") == "tool"
            next_is_tool = k < len(messages) and messages[k].get("role") == "tool"
            if last_is_tool and not next_is_tool:
                t.steps.append(k)
        out.append(t)
    return out


def first_flag(t: Trajectory, detector: LoopDetector) -> int | None:
    """The first step k whose request ``messages[:k]`` is flagged, or ``None``."""
    for k in t.steps:
        if not scan({"model": "m", "messages": t.messages[:k]}, detector=detector).ok:
            return k
    return None


@dataclass
class Row:
    label: str
    resolved: int = 0
    resolved_own: int = 0
    failed: int = 0
    after: int = 0
    unknown: int = 0
    flagged: list[str] = field(default_factory=list)


def evaluate(label: str, detector: LoopDetector, corpus: Iterable[Trajectory]) -> Row:
    row = Row(label)
    for t in corpus:
        k = first_flag(t, detector)
        if k is None:
            continue
        row.flagged.append(f"{t.outcome[:4]}:{t.name}@{k}/{len(t.messages)}")
        if t.outcome == "resolved":
            row.resolved += 1
            row.resolved_own += t.on_its_own
        elif t.outcome == "failed":
            row.failed += 1
            row.after += t.calls_from(k)
        else:
            row.unknown += 1
    return row


CONFIGS: dict[str, dict[str, Any]] = {
    "**defaults** (strikes 3, observation 5, cycles 4/2 laps, normalised)": {},
    "max_strikes=2": {"max_strikes": 2},
    "max_strikes=4": {"max_strikes": 4},
    "max_cycle_laps=1": {"max_cycle_laps": 1},
    "max_cycle_laps=3": {"max_cycle_laps": 3},
    "max_observation_steps=3": {"max_observation_steps": 3},
    "max_observation_steps=8": {"max_observation_steps": 8},
    "max_observation_steps=None (no allowance, no ceiling)": {"max_observation_steps": None},
    "observation_tools=() (no read-only allowance)": {"observation_tools": ()},
    "normalize_answers=False": {"normalize_answers": False},
    "max_cycle_period=0 (no cycles)": {"max_cycle_period": 0},
    "seed design: strikes 2, answers only": {
        "max_strikes": 2,
        "normalize_answers": False,
        "max_cycle_period": 0,
        "max_observation_steps": None,
    },
}


def table(rows: list[Row], corpus: list[Trajectory]) -> str:
    n_res = sum(t.outcome == "resolved" for t in corpus)
    n_own = sum(t.outcome == "resolved" and t.on_its_own for t in corpus)
    n_fail = sum(t.outcome == "failed" for t in corpus)
    n_calls = sum(t.calls for t in corpus if t.outcome == "failed")
    lines = [
        f"| configuration | resolved flagged (of {n_res}) | ... ended on their own (of {n_own}) "
        f"| failed flagged (of {n_fail}) | calls after the flag (of {n_calls}) |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.label} | {r.resolved} | {r.resolved_own} | {r.failed} | "
            f"{r.after} ({100 * r.after / n_calls:.0f}%) |"
        )
    return "\n".join(lines)


def meets_targets(row: Row) -> bool:
    return row.resolved_own <= 1 and row.failed >= 14 and row.after >= 290


GRID = {
    "max_strikes": [2, 3, 4],
    "max_cycle_laps": [1, 2, 3],
    "max_observation_steps": [3, 4, 5, 6, 8, None],
    "normalize_answers": [True, False],
}


def group_of(t: Trajectory) -> str:
    prefix = t.name.split("__")[0]
    return prefix if prefix.startswith("sweagent-java") else prefix.split("_")[0]


def score(flags: dict[str, int | None], subset: list[Trajectory]) -> tuple[int, int, int]:
    """(good runs stopped, failed runs flagged, calls after the flag) on ``subset``."""
    bad = failed = after = 0
    for t in subset:
        k = flags[t.name]
        if k is None:
            continue
        if t.outcome == "resolved" and t.on_its_own:
            bad += 1
        elif t.outcome == "failed":
            failed += 1
            after += t.calls_from(k)
    return bad, failed, after


def per_group(corpus: list[Trajectory], detector: LoopDetector) -> str:
    flags = {t.name: first_flag(t, detector) for t in corpus}
    lines = [
        "| group | runs (resolved / failed) | good runs stopped | failed flagged | calls after |",
        "|---|---|---|---|---|",
    ]
    for group in sorted({group_of(t) for t in corpus}):
        subset = [t for t in corpus if group_of(t) == group]
        bad, failed, after = score(flags, subset)
        res = sum(t.outcome == "resolved" for t in subset)
        fail = sum(t.outcome == "failed" for t in subset)
        calls = sum(t.calls for t in subset if t.outcome == "failed")
        lines.append(
            f"| {group} | {len(subset)} ({res} / {fail}) | {bad} | {failed} / {fail} "
            f"| {after} / {calls} |"
        )
    return "\n".join(lines)


def leave_one_group_out(corpus: list[Trajectory]) -> str:
    """Choose greedily on all groups but one; score the choice on the one left out."""
    combos = [dict(zip(GRID, values, strict=True)) for values in itertools.product(*GRID.values())]
    flags = [{t.name: first_flag(t, LoopDetector(**c)) for t in corpus} for c in combos]

    def leniency(c: dict[str, Any]) -> tuple[int, int, int, bool]:
        obs = c["max_observation_steps"]
        return (c["max_strikes"], c["max_cycle_laps"], 99 if obs is None else obs, True)

    lines = [
        "| held-out group | chosen on the other groups (strikes, laps, observation, "
        "normalised) | held out: good runs stopped / failed flagged / calls after |",
        "|---|---|---|",
    ]
    totals = [0, 0, 0]
    for group in sorted({group_of(t) for t in corpus}):
        train = [t for t in corpus if group_of(t) != group]
        test = [t for t in corpus if group_of(t) == group]

        def key(i: int, train: list[Trajectory] = train) -> tuple[Any, ...]:
            bad, failed, after = score(flags[i], train)
            return (-bad, failed, after, leniency(combos[i]))

        best = max(range(len(combos)), key=key)
        held = score(flags[best], test)
        totals = [a + b for a, b in zip(totals, held, strict=True)]
        chosen = ", ".join(str(v) for v in combos[best].values())
        lines.append(f"| {group} | {chosen} | {held[0]} / {held[1]} / {held[2]} |")
    lines.append(f"| **all groups** | | **{totals[0]} / {totals[1]} / {totals[2]}** |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=str(DEFAULT_FOLDER))
    parser.add_argument("--list", action="store_true", help="list the flagged runs")
    parser.add_argument("--groups", action="store_true", help="the defaults per group")
    parser.add_argument("--grid", action="store_true", help="leave-one-group-out selection")
    args = parser.parse_args(argv)
    corpus = load(Path(args.folder))
    if not corpus:
        print(f"no trajectories in {args.folder}", file=sys.stderr)
        return 2
    rows = [evaluate(label, LoopDetector(**cfg), corpus) for label, cfg in CONFIGS.items()]
    print(table(rows, corpus))
    print(f"\ndefaults meet the targets: {meets_targets(rows[0])}")
    if args.list:
        for r in rows:
            print(f"\n{r.label}:")
            for item in r.flagged:
                print("   ", item)
    if args.groups:
        print()
        print(per_group(corpus, LoopDetector()))
    if args.grid:
        print()
        print(leave_one_group_out(corpus))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
