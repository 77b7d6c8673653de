"""What a guard that never sees an answer would stop: every population replayed with its
tool calls only, as ``loopfuse hook --agent crush`` judges Crush's calls.

Usage::

    python benchmarks/answerless_eval.py [--only corpus,calibration,openhands,cli]
        [--turns break|keep] [--list] [--corpus PATH] [--calibration PATH]
        [--openhands PATH] [--cli PATH] [--labels FILE]

Crush (0.96.1 and every release before it) runs a hook only *before* a tool call: no
answer ever reaches the guard (docs/agents.md, "Crush"). So each session here is
walked as the hook walks Crush's: every assistant turn's calls are one batch, checked
with the shipped detector defaults and ``answered=False`` (what the hook passes for a
session that never got an answer: :meth:`loopfuse.detector.LoopDetector.check`), and
nothing is ever recorded after it. ``--as-if-answered`` replays the reading it replaced:
the detector not told, each unknown answer counting as a repeated one. ``--turns
break`` ends a run at each user message, as the hooks of the CLIs that report a prompt
do; ``--turns keep`` (Crush: it reports none) does not, so a "try again" continues
the run before it.

A session is *stopped* in ``refuse`` at the first refusal; in ``warn`` at the first
refusal after a note (the note is the first loop found, by the detector or by its early
twin, every count one notch lower: ``note_early``; the hook refuses the detector's next
loop of the same session within its window, which the populations' lack of timestamps
lets this replay read as: any later one). Reported per population and per source: healthy
sessions (a healthy CLI session, a resolved run that ended on its own) stopped, looping
ones (a judged loop, a failed run) stopped, and the populations' files not read.

The populations are read with :mod:`scan_populations`'s readers and labels (the same
files ``corpus_eval.py --all`` reads); evaluation only: nothing of them is kept.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopfuse.cli.agent_sessions import AgentSession, read_runs
from loopfuse.cli.readers import InputError, Log, read_bytes
from loopfuse.detector.core import RunCore
from loopfuse.detector.records import LoopDetected
from loopfuse.detector.settings import DetectorSettings
from loopfuse.detector.transcript import Batch
from loopfuse.intent import extract_intent
from scan_populations import (
    BUDGET_EXITS,
    POPULATIONS,
    _members,
    _outcome_of,
    _pool,
    _table,
)

SHARED = Path(__file__).resolve().parent.parent.parent / "shared"
PLACES = {
    "corpus": SHARED / "corpus",
    "calibration": SHARED / "calibration.tar.xz",
    "openhands": SHARED / "openhands-calibration.tar.xz",
    "cli": SHARED / "cli-calibration.tar.xz",
}
LABELS = SHARED / "cli-calibration-labels.tsv"


@dataclass(slots=True)
class Judged:
    """One file, replayed without answers."""

    population: str
    source: str
    name: str
    label: str
    read: bool = True
    calls: int = 0
    note: tuple[int, str] | None = None  # (call number, kind) of the first loop found
    stop_refuse: tuple[int, str] | None = None
    stop_warn: tuple[int, str] | None = None

    @property
    def healthy(self) -> bool:
        return self.label in ("healthy", "resolved")

    @property
    def looping(self) -> bool:
        return self.label in ("loop", "failed")


def messages_of(body: object) -> list[Any]:
    """The canonical messages of a request body (``[]`` when it has none)."""
    intent = extract_intent(body)
    messages = intent.get("messages") if isinstance(intent, dict) else None
    return messages if isinstance(messages, list) else []


def replay(
    judged: Judged,
    runs: list[tuple[list[Any], int]],
    break_turns: bool,
    answered: bool = False,
) -> None:
    """Walk ``runs`` (messages, and how many leading ones are copied history) through one
    :class:`RunCore` each, checking every assistant turn's calls and recording nothing;
    beside it, one of the early detector's settings, whose loops ``warn`` notes
    (``note_early``): the note is the first loop either finds, the ``warn`` stop the
    detector's next one."""
    settings = DetectorSettings()
    reader = settings.reader
    for messages, history in runs:
        core = RunCore(settings)
        early_core = RunCore(settings.earlier())
        for index, message in enumerate(messages):
            if not isinstance(message, dict):
                continue
            role = message.get("role")
            if role in ("user", "system") and break_turns:
                core.break_run()
                early_core.break_run()
                continue
            calls = message.get("tool_calls") if role == "assistant" else None
            if not isinstance(calls, list) or not calls:
                continue
            full = Batch(calls)
            keep = reader.kept(full.names)
            batch = full
            if keep is not None:
                if not keep:
                    continue
                batch = Batch([{"name": full.names[k], "arguments": full.args[k]} for k in keep])
            observation, costly, wait = reader.kinds(batch.names, tuple(batch.args))
            judge = index >= history
            found = [
                one.admit(
                    batch.signature,
                    batch.names,
                    tuple(batch.args),
                    observation,
                    costly,
                    judge=judge,
                    wait=wait,
                    answered=answered,
                )[1]
                for one in (core, early_core)
            ]
            if not judge:
                continue
            judged.calls += len(calls)
            error, early = (e if isinstance(e, LoopDetected) else None for e in found)
            loop = error or early
            if loop is None:
                continue
            act = (judged.calls, loop.kind)
            if judged.note is None:
                judged.note = act
            elif error is not None and judged.stop_warn is None:
                judged.stop_warn = act
            if error is not None and judged.stop_refuse is None:
                judged.stop_refuse = act


@dataclass(frozen=True, slots=True)
class Rule:
    """How the replay judges: whether a user message ends a run, and ``answered``: the
    detector told the answers are known (they are not: every unknown answer is then
    read as a repeated one, the reading ``answered=False`` replaces)."""

    break_turns: bool = False
    answered: bool = False


def judge_file(population: str, name: str, data: bytes, rule: Rule) -> Judged:
    judged = Judged(population, "", name, "unknown")
    try:
        source = read_bytes(Path(name).name, data, log=name.endswith((".jsonl", ".ndjson")))
        if isinstance(source, AgentSession):
            found, _ = read_runs(source)
            runs = [(messages_of(run.body), run.history) for run in found]
        elif isinstance(source, Log):
            judged.read = False
            return judged
        else:
            runs = [(messages_of(source.body), 0)]
    except (InputError, OSError, ValueError, RecursionError):
        judged.read = False
        return judged
    replay(judged, runs, rule.break_turns, rule.answered)
    return judged


def read_population(
    population: str, place: Path, rule: Rule, labels_file: Path = LABELS
) -> list[Judged]:
    out: list[Judged] = []
    if population == "cli":
        labels = {row["file"]: row for row in _table(labels_file.read_text("utf-8"))}
        manifest: dict[str, dict[str, str]] = {}
        for name, data in _members(place):
            if name == "manifest.tsv":
                manifest = {r["output_path"]: r for r in _table(data.decode("utf-8"))}
                continue
            if "/" not in name or name.endswith((".tsv", ".md")):
                continue
            judged = judge_file(population, name, data, rule)
            judged.label = labels.get(name, {}).get("verdict") or "unlabelled"
            out.append(judged)
        for judged in out:
            judged.source = manifest.get(judged.name, {}).get("repo") or judged.name.split("/")[1]
        return out
    pools: dict[str, str] = {}
    for name, data in _members(place):
        if Path(name).name == "index.tsv":
            for row in _table(data.decode("utf-8", "replace")):
                if row.get("file") and row.get("pool"):
                    pools[Path(row["file"]).stem] = row["pool"]
            continue
        if not name.endswith(".json"):
            continue
        judged = judge_file(population, name, data, rule)
        outcome, exit_reason = _outcome_of(data)
        on_its_own = not any(limit in exit_reason for limit in BUDGET_EXITS)
        # A resolved run stopped on a budget exit did not end on its own: not gated.
        judged.label = "resolved-on-budget" if outcome == "resolved" and not on_its_own else outcome
        out.append(judged)
    for judged in out:
        stem = Path(judged.name).stem
        judged.source = pools.get(stem) or _pool(stem)
    return out


def report(all_judged: list[Judged], show: bool) -> str:
    lines = [
        "| population | files (unread) | healthy | healthy stopped refuse / warn | "
        "looping | looping stopped refuse / warn |",
        "|---|---|---|---|---|---|",
    ]
    by_population: dict[str, list[Judged]] = defaultdict(list)
    for judged in all_judged:
        by_population[judged.population].append(judged)
    for population, group in by_population.items():
        unread = sum(not j.read for j in group)
        healthy = [j for j in group if j.read and j.healthy]
        looping = [j for j in group if j.read and j.looping]
        lines.append(
            f"| {population} | {len(group)} ({unread}) | {len(healthy)} | "
            f"{sum(j.stop_refuse is not None for j in healthy)} / "
            f"{sum(j.stop_warn is not None for j in healthy)} | {len(looping)} | "
            f"{sum(j.stop_refuse is not None for j in looping)} / "
            f"{sum(j.stop_warn is not None for j in looping)} |"
        )
    stopped = [j for j in all_judged if j.healthy and j.stop_refuse is not None]
    sources = Counter(f"{j.population}/{j.source}" for j in stopped)
    lines.append("")
    lines.append(f"healthy stopped (refuse) by source: {dict(sources.most_common())}")
    kinds = Counter(j.stop_refuse[1] for j in stopped if j.stop_refuse is not None)
    lines.append(f"healthy stopped (refuse) by signal: {dict(kinds)}")
    if show:
        for j in stopped:
            lines.append(f"  {j.population} {j.name}: refuse {j.stop_refuse} warn {j.stop_warn}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(POPULATIONS))
    parser.add_argument("--turns", choices=("break", "keep"), default="keep")
    parser.add_argument("--list", action="store_true", help="name each healthy file stopped")
    parser.add_argument(
        "--as-if-answered",
        action="store_true",
        help="judge as if the answers were known (each unknown one read as repeated)",
    )
    for population, place in PLACES.items():
        parser.add_argument(
            f"--{population}", type=Path, default=place, help=f"the set (default: {place})"
        )
    parser.add_argument("--labels", type=Path, default=LABELS, help="the CLI sessions' labels")
    args = parser.parse_args(argv)
    rule = Rule(args.turns == "break", args.as_if_answered)
    judged: list[Judged] = []
    for population in args.only.split(","):
        place = getattr(args, population)
        if not place.exists():
            print(f"{population}: {place} missing, skipped", file=sys.stderr)
            continue
        judged.extend(read_population(population, place, rule, args.labels))
    print(report(judged, args.list))
    return 0


if __name__ == "__main__":
    sys.exit(main())
