"""Replay real agent trajectories through the detector and measure every signal.

Usage::

    python benchmarks/corpus_eval.py [SOURCE] [--list] [--pools] [--lopo] [--signals]

``SOURCE`` is a folder of trajectories or a ``.tar.xz`` of them (default:
``../shared/corpus`` next to the repository; ``../shared/calibration.tar.xz`` is the
calibration set). Each file is one trajectory in OpenAI Chat format with ``outcome``
(resolved / failed / unknown) and ``exit_reason``. Every step — the request the agent
sends after the tool results of one assistant turn — is judged as a proxy would judge
it (``scan`` of that request; computed in one pass with :class:`loopfuse.detector.Replay`,
which gives the same verdicts); the first step whose verdict is not ``ok`` is the flag.
Reported per configuration: resolved runs flagged (and how many of them ended on their
own rather than on a budget), failed runs flagged, and the tool calls of failed runs
that come after the flag (what stopping would have saved).

``--signals`` measures each signal alone over a range of thresholds; ``--lopo`` chooses
every threshold on all pools but one — the *safe edge* (the most aggressive value that
stops no resolved run) and one notch inside it — and scores the choice on the pool left
out; ``--pools`` prints the defaults per pool.
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopfuse.detector import LoopDetector, Replay
from loopfuse.intent import extract_intent

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = REPO.parent / "shared" / "corpus"
BUDGET_EXITS = ("exit_cost", "max_steps")


@dataclass
class Trajectory:
    name: str
    pool: str
    outcome: str
    exit_reason: str
    messages: list[Any]  # the canonical intent's messages
    steps: list[int] = field(default_factory=list)  # indices after which a request is sent
    calls_after: dict[int, int] = field(default_factory=dict)  # step -> tool calls after it

    @property
    def on_its_own(self) -> bool:
        return not any(limit in self.exit_reason for limit in BUDGET_EXITS)

    @property
    def calls(self) -> int:
        return self.calls_after.get(-1, 0)


def _pool(name: str) -> str:
    prefix = name.split("__")[0]
    return "sweagent-java" if prefix.startswith("sweagent-java") else prefix.split("_")[0]


def _files(source: Path) -> Iterator[tuple[str, bytes]]:
    if source.is_dir():
        for path in sorted(source.glob("*.json")):
            yield path.stem, path.read_bytes()
        return
    with tarfile.open(source, "r:*") as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            if member.isfile() and member.name.endswith(".json"):
                handle = tar.extractfile(member)
                if handle is not None:
                    yield Path(member.name).stem, handle.read()


def load(source: Path) -> list[Trajectory]:
    """Every trajectory of a folder or tarball, as canonical messages and request steps."""
    out = []
    for name, raw in _files(source):
        data = json.loads(raw)
        messages = extract_intent({"model": "m", "messages": data["messages"]})["messages"]
        t = Trajectory(name, _pool(name), data["outcome"], data.get("exit_reason") or "", messages)
        for k, message in enumerate(messages):
            following = messages[k + 1]["role"] if k + 1 < len(messages) else None
            if message["role"] == "tool" and following != "tool":
                t.steps.append(k)
        remaining = 0
        after = {}
        for k in range(len(messages) - 1, -1, -1):
            after[k] = remaining
            remaining += len(messages[k].get("tool_calls") or [])
        after[-1] = remaining
        t.calls_after = after
        out.append(t)
    return out


def first_flag(t: Trajectory, detector: LoopDetector) -> tuple[int, str] | None:
    """The first step whose request would be refused, and the signal's kind."""
    walk = Replay(detector.settings)
    steps = set(t.steps)
    for k, message in enumerate(t.messages):
        walk.add(message, k)
        if k in steps:
            verdict = walk.verdict()
            if not verdict.ok:
                return k, verdict.kind or "?"
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


def score(
    flags: dict[str, tuple[int, str] | None], corpus: Iterable[Trajectory], label: str
) -> Row:
    row = Row(label)
    for t in corpus:
        flag = flags.get(t.name)
        if flag is None:
            continue
        k, kind = flag
        row.flagged.append(f"{t.outcome[:4]}:{t.name}@{k}/{len(t.messages)} {kind}")
        if t.outcome == "resolved":
            row.resolved += 1
            row.resolved_own += t.on_its_own
        elif t.outcome == "failed":
            row.failed += 1
            row.after += t.calls_after[k]
        else:
            row.unknown += 1
    return row


def flags_of(corpus: list[Trajectory], detector: LoopDetector) -> dict[str, tuple[int, str] | None]:
    return {t.name: first_flag(t, detector) for t in corpus}


# Every signal off: a configuration turns on the ones it names.
ALL_OFF: dict[str, Any] = {
    "max_strikes": None,
    "max_cycle_period": 0,
    "max_error_streak": None,
    "max_near_repeats": None,
    "max_unchanged_checks": None,
    "error_storm": None,
    "max_stagnation_steps": None,
}

# Each signal's thresholds, from most aggressive to most lenient.
SIGNALS: dict[str, list[dict[str, Any]]] = {
    "repeat+cycle": [
        {"max_strikes": s, "max_cycle_period": 8, "max_stagnation_steps": 5} for s in (1, 2, 3, 4)
    ],
    "error_streak": [{"max_error_streak": v} for v in (1, 2, 3, 4, 5)],
    "near_repeat": [{"max_near_repeats": v} for v in (1, 2, 3, 4, 5)],
    "no_progress": [{"max_unchanged_checks": v} for v in (2, 3, 4, 5, 6, 7, 8)],
    "error_storm": [{"error_storm": v} for v in ((6, 8), (8, 10), (9, 10), (10, 12), (12, 14))],
}

CONFIGS: dict[str, dict[str, Any]] = {
    "**defaults**": {},
    "max_strikes=2": {"max_strikes": 2},
    "max_strikes=4": {"max_strikes": 4},
    "error_aware=False": {"error_aware": False},
    "max_observation_steps=8": {"max_observation_steps": 8},
    "max_cycle_period=4": {"max_cycle_period": 4},
    "max_error_streak=None": {"max_error_streak": None},
    "max_near_repeats=None": {"max_near_repeats": None},
    "max_unchanged_checks=None": {"max_unchanged_checks": None},
    "error_storm=None": {"error_storm": None},
    "v1 signals only (no answer signals, cycles to 4)": {
        "max_cycle_period": 4,
        "error_aware": False,
        "max_error_streak": None,
        "max_near_repeats": None,
        "max_unchanged_checks": None,
        "error_storm": None,
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
            f"{r.after} ({100 * r.after / max(1, n_calls):.0f}%) |"
        )
    return "\n".join(lines)


def per_signal(corpus: list[Trajectory]) -> dict[str, list[dict[str, tuple[int, str] | None]]]:
    """Each signal alone, at each of its thresholds: the first flag of every run."""
    return {
        name: [flags_of(corpus, LoopDetector(**{**ALL_OFF, **cfg})) for cfg in values]
        for name, values in SIGNALS.items()
    }


def combine(flag_sets: Iterable[dict[str, tuple[int, str] | None]]) -> dict[str, Any]:
    """Several signals together: a run's first flag is the earliest of any of them."""
    out: dict[str, tuple[int, str] | None] = {}
    for flags in flag_sets:
        for name, flag in flags.items():
            best = out.get(name)
            if flag is not None and (best is None or flag[0] < best[0]):
                out[name] = flag
            else:
                out.setdefault(name, best)
    return out


def choose(
    signal_flags: dict[str, list[dict[str, tuple[int, str] | None]]], train: list[Trajectory]
) -> dict[str, int | None]:
    """Per signal: one notch inside its safe edge on ``train`` (``None``: no safe value)."""
    chosen: dict[str, int | None] = {}
    for name, per_value in signal_flags.items():
        edge = None
        for i, flags in enumerate(per_value):
            if score(flags, train, "").resolved == 0:
                edge = i
                break
        chosen[name] = None if edge is None or edge + 1 >= len(per_value) else edge + 1
    return chosen


def lopo(corpus: list[Trajectory], signal_flags: dict[str, Any]) -> str:
    lines = [
        "| held-out pool | chosen on the other pools | held out: resolved flagged / failed "
        "flagged / calls after the flag |",
        "|---|---|---|",
    ]
    totals = [0, 0, 0]
    for pool in sorted({t.pool for t in corpus}):
        train = [t for t in corpus if t.pool != pool]
        test = [t for t in corpus if t.pool == pool]
        chosen = choose(signal_flags, train)
        picked = [signal_flags[n][i] for n, i in chosen.items() if i is not None]
        row = score(combine(picked), test, pool)
        totals = [a + b for a, b in zip(totals, (row.resolved, row.failed, row.after), strict=True)]
        text = ", ".join(
            f"{n} {_value(SIGNALS[n][i]) if i is not None else 'off'}" for n, i in chosen.items()
        )
        lines.append(f"| {pool} | {text} | {row.resolved} / {row.failed} / {row.after} |")
    lines.append(f"| **all pools** | | **{totals[0]} / {totals[1]} / {totals[2]}** |")
    return "\n".join(lines)


def _value(cfg: dict[str, Any]) -> str:
    return ",".join(
        str(v) for k, v in cfg.items() if k not in ("max_cycle_period", "max_stagnation_steps")
    )


def signal_table(corpus: list[Trajectory], signal_flags: dict[str, Any]) -> str:
    lines = [
        "| signal alone | threshold | resolved flagged | failed flagged | calls after |",
        "|---|---|---|---|---|",
    ]
    for name, per_value in signal_flags.items():
        for cfg, flags in zip(SIGNALS[name], per_value, strict=True):
            r = score(flags, corpus, "")
            lines.append(f"| {name} | {_value(cfg)} | {r.resolved} | {r.failed} | {r.after} |")
    return "\n".join(lines)


def per_pool(corpus: list[Trajectory], flags: dict[str, Any]) -> str:
    lines = [
        "| pool | runs (resolved / failed) | resolved flagged | failed flagged | calls after |",
        "|---|---|---|---|---|",
    ]
    for pool in sorted({t.pool for t in corpus}):
        subset = [t for t in corpus if t.pool == pool]
        r = score(flags, subset, pool)
        res = sum(t.outcome == "resolved" for t in subset)
        fail = sum(t.outcome == "failed" for t in subset)
        calls = sum(t.calls for t in subset if t.outcome == "failed")
        lines.append(
            f"| {pool} | {len(subset)} ({res} / {fail}) | {r.resolved} | "
            f"{r.failed} / {fail} | {r.after} / {calls} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", nargs="?", default=str(DEFAULT_SOURCE))
    parser.add_argument("--list", action="store_true", help="list the runs the defaults flag")
    parser.add_argument("--pools", action="store_true", help="the defaults per pool")
    parser.add_argument("--signals", action="store_true", help="each signal alone")
    parser.add_argument("--lopo", action="store_true", help="leave-one-pool-out selection")
    args = parser.parse_args(argv)
    source = Path(args.source)
    if not source.exists():
        print(f"no such folder or tarball: {source}", file=sys.stderr)
        return 2
    corpus = load(source)
    if not corpus:
        print(f"no trajectories in {source}", file=sys.stderr)
        return 2
    all_flags = {label: flags_of(corpus, LoopDetector(**cfg)) for label, cfg in CONFIGS.items()}
    rows = [score(flags, corpus, label) for label, flags in all_flags.items()]
    print(table(rows, corpus))
    if args.list:
        for item in rows[0].flagged:
            print("   ", item)
    if args.pools:
        print()
        print(per_pool(corpus, all_flags["**defaults**"]))
    if args.signals or args.lopo:
        signal_flags = per_signal(corpus)
        if args.signals:
            print()
            print(signal_table(corpus, signal_flags))
        if args.lopo:
            print()
            print(lopo(corpus, signal_flags))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
