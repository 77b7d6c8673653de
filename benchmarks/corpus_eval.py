"""Replay real agent trajectories through the detector and measure every signal.

Usage::

    python benchmarks/corpus_eval.py [SOURCE ...] [--mode refuse|warn|both] [--list]
        [--pools] [--lopo] [--signals] [--quick]
    python benchmarks/corpus_eval.py --all|--loso [--only corpus,calibration,openhands,cli]
        [--corpus SOURCE] [--calibration SOURCE] [--openhands SOURCE] [--cli SOURCE]
        [--labels TSV] [--clis claude-code,codex,gemini,copilot-cli]
        [--mode refuse|warn|both] [--list]

Each ``SOURCE`` is a folder of trajectories or a ``.tar.xz`` of them (default:
``../shared/corpus`` next to the repository; ``../shared/calibration.tar.xz`` and
``../shared/openhands-calibration.tar.xz`` are the calibration sets; several sources are
read as one corpus, each run in the pool its source's ``index.tsv`` names). Each file is
one trajectory in OpenAI Chat format with ``outcome`` (resolved / failed / unknown) and
``exit_reason``. Every step — the request the agent
sends after the tool results of one assistant turn — is judged as a proxy would judge
it (``scan`` of that request; computed in one pass with :class:`loopfuse.detector.Replay`,
which gives the same verdicts); the first step whose verdict is not ``ok`` is the flag.
Each mode of the integrations' guard is replayed from the same verdicts: ``refuse`` stops
the first loop; ``warn`` notes a loop the first time and stops the run at the next
request that still loops in any way, or whose calls failed again as the noted loop's
did. Reported per mode and configuration: resolved runs stopped (split: ended on their
own, or on a budget: ``exit_cost``, ``max_steps``, ``max_iterations``), failed runs
stopped, and the tool calls of failed runs that come after the stop (what stopping
would have saved).

``--signals`` measures each signal alone over a range of thresholds; ``--lopo`` chooses
every threshold on all pools but one — the *safe edge* (the most aggressive value that
stops no resolved run) and one notch inside it — and scores the choice on the pool left
out; ``--pools`` prints the defaults per pool.

``--all`` measures every population we have, each given as a folder or a ``.tar.xz``
(defaults: ``../shared/corpus``, ``calibration.tar.xz``, ``openhands-calibration.tar.xz``
and ``cli-calibration.tar.xz`` with ``cli-calibration-labels.tsv``; ``--only`` picks some),
through the decisions ``loopfuse scan`` itself makes (:mod:`scan_populations`: loopfuse's
readers, one ``Guard`` per file, ``Guard.decide`` in the mode replayed), so that the
coding-agent CLIs' sessions are read exactly as ``loopfuse scan --agent`` reads them:
per population, then per CLI (sessions read, unreadable or empty ones apart, healthy
sessions stopped and noted, judged loops caught and the turn against the labelled one),
with the seconds each population took on stderr. ``--list`` names every file acted on
or not read. ``--only`` and ``--clis`` (of the CLI sessions, those of some CLIs) make a
quick run: ``--only cli --clis codex,gemini`` takes a few seconds.

``--loso`` adds *leave one source out* over all of them (a source: one repository of
the CLI sessions, one harness pool of the trajectory sets) and the release gate: it
fails (exit status 1) when any held-out source has a healthy run stopped (a healthy CLI
session, or a resolved run that ended on its own) in either mode. It differs from
``--lopo`` in what it holds out and what it judges: ``--lopo`` *chooses* each signal's
threshold on the other pools (this script's own sweep) and scores that choice on the
pool left out; ``--loso`` chooses nothing: the shipped defaults, as ``scan`` and ``hook``
run them, are judged on each source as one that was never looked at when they were
set. A rule (or threshold) passes when, added to the defaults, it leaves every held-out
source at 0 healthy stopped: run ``--loso`` before and after the change, per source.
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
BUDGET_EXITS = ("exit_cost", "max_steps", "max_iterations")


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


def _index_pools(text: str) -> dict[str, str]:
    """``file -> pool`` from a corpus ``index.tsv`` (its header names the columns)."""
    rows = [line.split("\t") for line in text.splitlines() if line.strip()]
    if not rows or "pool" not in rows[0] or "file" not in rows[0]:
        return {}
    at_file, at_pool = rows[0].index("file"), rows[0].index("pool")
    return {Path(r[at_file]).stem: r[at_pool] for r in rows[1:] if len(r) > max(at_file, at_pool)}


def _files(source: Path) -> Iterator[tuple[str, bytes]]:
    """``(name, JSON bytes)`` of every trajectory; ``index.tsv`` comes first, as name ``""``."""
    if source.is_dir():
        index = source / "index.tsv"
        if index.is_file():
            yield "", index.read_bytes()
        for path in sorted(source.glob("*.json")):
            yield path.stem, path.read_bytes()
        return
    with tarfile.open(source, "r:*") as tar:
        members = sorted(tar.getmembers(), key=lambda m: m.name)
        for member in members:
            if member.isfile() and Path(member.name).name == "index.tsv":
                handle = tar.extractfile(member)
                if handle is not None:
                    yield "", handle.read()
        for member in members:
            if member.isfile() and member.name.endswith(".json"):
                handle = tar.extractfile(member)
                if handle is not None:
                    yield Path(member.name).stem, handle.read()


def load(*sources: Path) -> list[Trajectory]:
    """Every trajectory of the folders or tarballs, as canonical messages and request steps.

    A run's pool is the one its source's ``index.tsv`` names, else read from its file name.
    """
    out = []
    for source in sources:
        pools: dict[str, str] = {}
        for name, raw in _files(Path(source)):
            if not name:
                pools = _index_pools(raw.decode("utf-8", "replace"))
                continue
            out.append(_trajectory(name, pools.get(name) or _pool(name), json.loads(raw)))
    return out


def _trajectory(name: str, pool: str, data: dict[str, Any]) -> Trajectory:
    messages = extract_intent({"model": "m", "messages": data["messages"]})["messages"]
    t = Trajectory(name, pool, data["outcome"], data.get("exit_reason") or "", messages)
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
    return t


Flag = tuple[int, str]  # (the step stopped at, the kind of the signal that stopped it)
# Every step whose verdict is not ok: (step, kind, signature, LOOP); the steps only the
# early detector (every count one notch lower: ``warn``'s ``note_early``) finds a loop in,
# (step, kind, signature, EARLY); and, when the first of either is a LOOP, every later
# step whose newest calls failed again the way that loop's calls did, (step, kind, "",
# AGAIN): what ``warn`` reads as its note ignored (an early note's failure is not).
Verdicts = list[tuple[int, str, str, str]]
LOOP, EARLY, AGAIN = "loop", "early", "again"
MODES = ("refuse", "warn")


def verdicts_of(t: Trajectory, detector: LoopDetector) -> Verdicts:
    """Every request of the run whose verdict is not ok, in order (one replay, and one of
    the early detector beside it); the requests only the early detector finds a loop in;
    and after the first of either, when it is a loop at the detector's counts, the
    requests whose calls failed as its calls did."""
    walk = Replay(detector.settings)
    early_settings = detector.settings.earlier()
    early = None if early_settings is detector.settings else Replay(early_settings)
    steps = set(t.steps)
    found: Verdicts = []
    noted: str | None = None  # the failure the first loop's calls got
    for k, message in enumerate(t.messages):
        walk.add(message, k)
        if early is not None:
            early.add(message, k)
        if k not in steps:
            continue
        verdict = walk.verdict()
        what = LOOP
        if verdict.ok and early is not None:
            verdict, what = early.verdict(), EARLY
        if not verdict.ok:
            if not found and what == LOOP:
                failure = verdict.failure
                noted = None if failure is None else failure.name
            found.append((k, verdict.kind or "?", verdict.signature or "", what))
        elif noted is not None:
            failure = verdict.failure
            if failure is not None and failure.name == noted:
                found.append((k, found[0][1], "", AGAIN))
    return found


def stop_of(verdicts: Verdicts, mode: str) -> Flag | None:
    """Where a guard in ``mode`` stops the run, given its verdicts.

    ``refuse`` stops the first loop; ``warn`` notes the first loop, or the first its early
    detector finds (``note_early``: one count sooner), and stops the run at the next
    request that still loops at the detector's counts, whatever its kind and signature,
    or whose calls failed again the way the noted loop's calls did: either ignored the
    note (issue 27; the integrations' ``Guard`` does the same within its ``warn_window``,
    which a replay without times does not have); ``note`` never stops. The replay cannot
    know what the agent would have done with a note, so it assumes it went on as it did.
    """
    if mode == "refuse":
        return next(((k, kind) for k, kind, _, what in verdicts if what == LOOP), None)
    if mode != "warn" or len(verdicts) < 2:
        return None
    # After an early note, AGAIN never follows (verdicts_of): the next LOOP stops it.
    return next(((k, kind) for k, kind, _, what in verdicts[1:] if what != EARLY), None)


def first_flag(t: Trajectory, detector: LoopDetector, mode: str = "refuse") -> Flag | None:
    """The step a guard in ``mode`` would stop the run at, and the signal's kind."""
    return stop_of(verdicts_of(t, detector), mode)


@dataclass
class Row:
    label: str
    resolved: int = 0
    resolved_own: int = 0
    failed: int = 0
    after: int = 0
    unknown: int = 0
    flagged: list[str] = field(default_factory=list)


def score(flags: dict[str, Flag | None], corpus: Iterable[Trajectory], label: str) -> Row:
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


def all_verdicts(corpus: list[Trajectory], detector: LoopDetector) -> dict[str, Verdicts]:
    return {t.name: verdicts_of(t, detector) for t in corpus}


def stops(verdicts: dict[str, Verdicts], mode: str) -> dict[str, Flag | None]:
    return {name: stop_of(found, mode) for name, found in verdicts.items()}


def flags_of(
    corpus: list[Trajectory], detector: LoopDetector, mode: str = "refuse"
) -> dict[str, Flag | None]:
    return stops(all_verdicts(corpus, detector), mode)


# Every signal off: a configuration turns on the ones it names.
ALL_OFF: dict[str, Any] = {
    "max_strikes": None,
    "max_cycle_period": None,
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
    "max_unchanged_checks=5": {"max_unchanged_checks": 5},
    "editor_aware=False": {"editor_aware": False},
    "max_unread_edit_checks=None": {"max_unread_edit_checks": None},
    "max_unread_edit_checks=8": {"max_unread_edit_checks": 8},
    "before issue 20 (no editor rules, max_unchanged_checks=5)": {
        "editor_aware": False,
        "max_unread_edit_checks": None,
        "max_unchanged_checks": 5,
    },
    "error_storm=None": {"error_storm": None},
    "v1 signals only (no answer signals, cycles to 4)": {
        "max_cycle_period": 4,
        "error_aware": False,
        "editor_aware": False,
        "max_unread_edit_checks": None,
        "max_error_streak": None,
        "max_near_repeats": None,
        "max_unchanged_checks": None,
        "error_storm": None,
    },
}


def table(rows: list[Row], corpus: list[Trajectory], mode: str) -> str:
    n_res = sum(t.outcome == "resolved" for t in corpus)
    n_own = sum(t.outcome == "resolved" and t.on_its_own for t in corpus)
    n_fail = sum(t.outcome == "failed" for t in corpus)
    n_calls = sum(t.calls for t in corpus if t.outcome == "failed")
    lines = [
        f"| {mode}: configuration | resolved stopped (of {n_res}) | ... ended on their own "
        f"(of {n_own}) | ... on a budget | failed stopped (of {n_fail}) | calls after the stop "
        f"(of {n_calls}) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.label} | {r.resolved} | {r.resolved_own} | {r.resolved - r.resolved_own} | "
            f"{r.failed} | {r.after} ({100 * r.after / max(1, n_calls):.0f}%) |"
        )
    return "\n".join(lines)


SignalVerdicts = dict[str, list[dict[str, Verdicts]]]


def per_signal(corpus: list[Trajectory]) -> SignalVerdicts:
    """Each signal alone, at each of its thresholds: every run's verdicts."""
    return {
        name: [all_verdicts(corpus, LoopDetector(**{**ALL_OFF, **cfg})) for cfg in values]
        for name, values in SIGNALS.items()
    }


def choose(
    signal_verdicts: SignalVerdicts, train: list[Trajectory], mode: str
) -> dict[str, int | None]:
    """Per signal: one notch inside its safe edge on ``train`` in ``mode`` (``None``: no
    safe value). The safe edge is the most aggressive value that stops no resolved run."""
    chosen: dict[str, int | None] = {}
    for name, per_value in signal_verdicts.items():
        edge = None
        for i, verdicts in enumerate(per_value):
            if score(stops(verdicts, mode), train, "").resolved == 0:
                edge = i
                break
        chosen[name] = None if edge is None or edge + 1 >= len(per_value) else edge + 1
    return chosen


def chosen_config(chosen: dict[str, int | None]) -> dict[str, Any]:
    """The detector configuration that turns on each signal at its chosen threshold."""
    config = dict(ALL_OFF)
    for name, i in chosen.items():
        if i is not None:
            config.update(SIGNALS[name][i])
    return config


def lopo(corpus: list[Trajectory], signal_verdicts: SignalVerdicts, mode: str) -> str:
    """Leave one pool out: thresholds chosen on the other pools, the chosen detector
    (every signal together, as deployed) replayed on the pool left out."""
    lines = [
        f"| {mode}: held-out pool | chosen on the other pools | held out: resolved stopped "
        "(on their own) / failed stopped / calls after the stop |",
        "|---|---|---|",
    ]
    totals = [0, 0, 0, 0]
    for pool in sorted({t.pool for t in corpus}):
        train = [t for t in corpus if t.pool != pool]
        test = [t for t in corpus if t.pool == pool]
        chosen = choose(signal_verdicts, train, mode)
        detector = LoopDetector(**chosen_config(chosen))
        row = score(flags_of(test, detector, mode), test, pool)
        got = (row.resolved, row.resolved_own, row.failed, row.after)
        totals = [a + b for a, b in zip(totals, got, strict=True)]
        text = ", ".join(
            f"{n} {_value(SIGNALS[n][i]) if i is not None else 'off'}" for n, i in chosen.items()
        )
        lines.append(
            f"| {pool} | {text} | {row.resolved} ({row.resolved_own}) / {row.failed} / "
            f"{row.after} |"
        )
    lines.append(f"| **all pools** | | **{totals[0]} ({totals[1]}) / {totals[2]} / {totals[3]}** |")
    return "\n".join(lines)


def _value(cfg: dict[str, Any]) -> str:
    return ",".join(
        str(v) for k, v in cfg.items() if k not in ("max_cycle_period", "max_stagnation_steps")
    )


def signal_table(corpus: list[Trajectory], signal_verdicts: SignalVerdicts, mode: str) -> str:
    lines = [
        f"| {mode}: signal alone | threshold | resolved stopped (on their own) | failed stopped "
        "| calls after |",
        "|---|---|---|---|---|",
    ]
    for name, per_value in signal_verdicts.items():
        for cfg, verdicts in zip(SIGNALS[name], per_value, strict=True):
            r = score(stops(verdicts, mode), corpus, "")
            lines.append(
                f"| {name} | {_value(cfg)} | {r.resolved} ({r.resolved_own}) | {r.failed} | "
                f"{r.after} |"
            )
    return "\n".join(lines)


def per_pool(corpus: list[Trajectory], flags: dict[str, Flag | None], mode: str) -> str:
    lines = [
        f"| {mode}: pool | runs (resolved / failed) | resolved stopped (on their own) | "
        "failed stopped | calls after |",
        "|---|---|---|---|---|",
    ]
    for pool in sorted({t.pool for t in corpus}):
        subset = [t for t in corpus if t.pool == pool]
        r = score(flags, subset, pool)
        res = sum(t.outcome == "resolved" for t in subset)
        fail = sum(t.outcome == "failed" for t in subset)
        calls = sum(t.calls for t in subset if t.outcome == "failed")
        lines.append(
            f"| {pool} | {len(subset)} ({res} / {fail}) | {r.resolved} ({r.resolved_own}) | "
            f"{r.failed} / {fail} | {r.after} / {calls} |"
        )
    return "\n".join(lines)


# The shared data sit beside the repository; a worktree (``../wt/NAME``) is one folder deeper.
SHARED = next(
    (p / "shared" for p in (REPO.parent, REPO.parent.parent) if (p / "shared").is_dir()),
    REPO.parent / "shared",
)
POPULATION_NAMES = ("corpus", "calibration", "openhands", "cli")
DEFAULT_PLACES = {
    "corpus": SHARED / "corpus",
    "calibration": SHARED / "calibration.tar.xz",
    "openhands": SHARED / "openhands-calibration.tar.xz",
    "cli": SHARED / "cli-calibration.tar.xz",
}
DEFAULT_LABELS = SHARED / "cli-calibration-labels.tsv"


def every_population(args: argparse.Namespace) -> int:
    """``--all`` / ``--loso``: every population through ``loopfuse scan``'s decisions
    (:mod:`scan_populations`), in each mode; exit status 1 when the release gate fails."""
    if str(Path(__file__).resolve().parent) not in sys.path:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
    import scan_populations as pop

    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in POPULATION_NAMES]
    if unknown or not chosen:
        print(f"--only: unknown population {', '.join(unknown)}", file=sys.stderr)
        return 2
    places = {name: getattr(args, name) for name in chosen}
    missing = [f"{name}: {place}" for name, place in places.items() if not place.exists()]
    if "cli" in places and not args.labels.is_file():
        missing.append(f"labels: {args.labels}")
    if missing:
        print(f"no such folder or tarball: {'; '.join(missing)}", file=sys.stderr)
        return 2
    clis = tuple(name.strip() for name in args.clis.split(",") if name.strip())
    if not clis or any(name not in pop.CLIS for name in clis):
        print(f"--clis: one or more of {', '.join(pop.CLIS)}", file=sys.stderr)
        return 2
    modes = MODES if args.mode == "both" else (args.mode,)
    settings = {mode: pop.settings_for(mode) for mode in modes}
    timings: dict[str, float] = {}
    sessions = pop.read_all(places, args.labels, settings, timings, clis=clis)
    print(pop.population_table(sessions, modes))
    if "cli" in places:
        print()
        print(pop.cli_table(sessions, modes))
        print()
        print(pop.loop_table(sessions, modes))
    if args.list:
        print()
        for mode in modes:
            for line in pop.flagged_list(sessions, mode):
                print("   ", line)
    holds = True
    if args.loso:
        text, holds = pop.loso_table(sessions, modes)
        print()
        print(text)
    print()
    print(
        "seconds: "
        + ", ".join(f"{name} {seconds:.1f}" for name, seconds in timings.items())
        + f" (each file read once, judged in {len(modes)} mode(s))",
        file=sys.stderr,
    )
    return 0 if holds else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="*", default=[str(DEFAULT_SOURCE)])
    parser.add_argument(
        "--mode", choices=(*MODES, "both"), default="both", help="the guard's mode replayed"
    )
    parser.add_argument("--list", action="store_true", help="list the runs the defaults stop")
    parser.add_argument("--pools", action="store_true", help="the defaults per pool")
    parser.add_argument("--signals", action="store_true", help="each signal alone")
    parser.add_argument("--lopo", action="store_true", help="leave-one-pool-out selection")
    parser.add_argument("--quick", action="store_true", help="the defaults only")
    parser.add_argument(
        "--all",
        action="store_true",
        help="every population (--only chooses), judged by loopfuse scan's own decisions",
    )
    parser.add_argument(
        "--loso", action="store_true", help="--all, per held-out source, with the release gate"
    )
    parser.add_argument(
        "--only",
        metavar="NAMES",
        default=",".join(POPULATION_NAMES),
        help=f"with --all/--loso: the populations, comma-separated ({', '.join(POPULATION_NAMES)})",
    )
    for population, place in DEFAULT_PLACES.items():
        parser.add_argument(
            f"--{population}",
            metavar="SOURCE",
            type=Path,
            default=place,
            help=f"the {population} set: a folder or a .tar.xz (default: {place})",
        )
    parser.add_argument(
        "--labels", type=Path, default=DEFAULT_LABELS, help="the CLI sessions' labels (TSV)"
    )
    parser.add_argument(
        "--clis",
        metavar="NAMES",
        default="claude-code,codex,gemini,copilot-cli",
        help="of the CLI sessions, those of these CLIs (Claude Code's take most of the time)",
    )
    args = parser.parse_args(argv)
    if args.all or args.loso:
        return every_population(args)
    sources = [Path(source) for source in args.sources]
    for source in sources:
        if not source.exists():
            print(f"no such folder or tarball: {source}", file=sys.stderr)
            return 2
    corpus = load(*sources)
    if not corpus:
        print(f"no trajectories in {', '.join(map(str, sources))}", file=sys.stderr)
        return 2
    modes = MODES if args.mode == "both" else (args.mode,)
    configs = {"**defaults**": {}} if args.quick else CONFIGS
    verdicts = {label: all_verdicts(corpus, LoopDetector(**cfg)) for label, cfg in configs.items()}
    signal_verdicts = per_signal(corpus) if args.signals or args.lopo else {}
    for mode in modes:
        rows = [score(stops(found, mode), corpus, label) for label, found in verdicts.items()]
        print(table(rows, corpus, mode))
        if args.list:
            for item in rows[0].flagged:
                print("   ", item)
        if args.pools:
            print()
            print(per_pool(corpus, stops(verdicts["**defaults**"], mode), mode))
        if args.signals:
            print()
            print(signal_table(corpus, signal_verdicts, mode))
        if args.lopo:
            print()
            print(lopo(corpus, signal_verdicts, mode))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
