"""Every population we have, judged by the decisions ``loopfuse scan`` makes, per source.

Used by ``corpus_eval.py --all`` / ``--loso``. Each file is read by loopfuse's own
reader (:func:`loopfuse.cli.readers.read_bytes`, what ``read_path`` calls once it has
the file's bytes: the same recognition of a trajectory, a Claude Code / Codex / Gemini
CLI transcript, a log) and judged by :func:`loopfuse.cli.decisions.scan_file`: one
:class:`loopfuse.Guard` per file on a fake clock, every request through
``Guard.prepare`` / ``Guard.decide``, in the mode replayed. Nothing here judges a run:
a run is *stopped* when the guard refused one of its requests, *noted* when it let one
go on with a note (``warn``), and the turn is the scan's (counted from 1 per run, as
``loopfuse scan --format json`` counts them).

A file the reader refuses, or that makes the reader or the replay raise, is
*unreadable* (with the error); a file read to no conversation at all is *empty*. Both
are reported apart, never counted clean.

Populations and their sources (a *source* is one repository or one harness pool: what
the leave-one-source-out gate holds out):

- ``corpus``, ``calibration``, ``openhands``: trajectories (``outcome`` resolved /
  failed, ``exit_reason``); a run's source is the pool its set's ``index.tsv`` names.
  Healthy: resolved and ended on its own (a resolved run stopped on a budget exit is
  shown, not gated: it did not end on its own either way). Loops: none labelled; failed
  runs stopped are what is caught.
- ``cli``: real Claude Code, Codex, Gemini CLI and Copilot CLI sessions (the
  ``cli-calibration`` set); a file's source is the repository its ``manifest.tsv``
  names; the labels file says which are healthy and which are judged loops, with the
  turn the loop starts.

Compared with ``corpus_eval``'s own replay (the ``Replay`` verdicts and ``stop_of``),
the scan judges the same requests in ``refuse`` (identical runs stopped on the three
trajectory sets) but not a trajectory's last tool results when no request followed
them (the run ended there): ``stop_of`` counts that never-sent request, the scan does
not, so in ``warn`` it can stop a run or two fewer.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tarfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from loopfuse.cli.config import Settings, apply
from loopfuse.cli.decisions import scan_file
from loopfuse.cli.readers import InputError, Source, read_bytes
from loopfuse.cli.results import FileResult

MODES = ("refuse", "warn")
BUDGET_EXITS = ("exit_cost", "max_steps", "max_iterations")
TRAJECTORY_SETS = ("corpus", "calibration", "openhands")
POPULATIONS = (*TRAJECTORY_SETS, "cli")
CLIS = ("claude-code", "codex", "gemini", "copilot-cli")
REJECTIONS_IN_TIME = 4
"""A rejected-call streak is caught in time when the guard acts on the request sent
after the answer to its 4th rejected call: turn ``first_loop_turn + 4`` at the latest
(one call per turn, as in the labelled Gemini streaks)."""


@dataclass(slots=True)
class Outcome:
    """What the scan did to one file in one mode."""

    read: str = "ok"  # "ok", "unreadable", "empty" (read, no conversation)
    error: str = ""
    problems: list[str] = field(default_factory=list)
    runs: int = 0
    turns: int = 0
    calls: int = 0
    stop: tuple[int, str, str] | None = None  # (turn, kind, run) of the first refusal
    note: tuple[int, str, str] | None = None  # (turn, kind, run) of the first note
    kinds: Counter[str] = field(default_factory=Counter)  # findings by kind
    calls_after: int = 0  # tool calls of the turns from the stop on

    @property
    def acted(self) -> tuple[int, str, str] | None:
        """The first act of the guard, a note or a refusal."""
        found = [act for act in (self.note, self.stop) if act is not None]
        return min(found) if found else None


@dataclass(slots=True)
class Session:
    """One file of a population, its label, and what the scan did to it per mode."""

    population: str
    source: str
    group: str  # the CLI, or the trajectory's pool
    name: str
    label: str  # healthy, loop, resolved, failed, unknown, unlabelled
    on_its_own: bool = True
    first_loop_turn: int | None = None
    evidence: str = ""
    outcomes: dict[str, Outcome] = field(default_factory=dict)

    @property
    def healthy(self) -> bool:
        """Gated: a healthy CLI session, or a resolved run that ended on its own."""
        return self.label == "healthy" or (self.label == "resolved" and self.on_its_own)

    @property
    def looping(self) -> bool:
        """What a guard should stop: a judged loop, or a failed run."""
        return self.label in ("loop", "failed")


def settings_for(mode: str, base: Settings | None = None) -> Settings:
    """The scan's settings in ``mode`` (its other defaults: breaker, detector, cache)."""
    return apply({"mode": mode, "progress": "false"}, base or Settings(), "flags")


def judge(name: str, data: bytes, settings: dict[str, Settings]) -> dict[str, Outcome]:
    """What ``loopfuse scan`` does to the file ``name`` holding ``data``, in each mode.

    Never raises: a reader or replay error makes the file unreadable, with the error.
    """
    log = name.lower().endswith((".jsonl", ".ndjson"))
    try:
        source: Source = read_bytes(name, data, log=log)
    except InputError as exc:
        return {mode: Outcome("unreadable", exc.problem) for mode in settings}
    except Exception as exc:  # a reader bug: reported, never a crash of the evaluation
        return {mode: Outcome("unreadable", f"reader raised {exc!r}") for mode in settings}
    out = {}
    for mode, mode_settings in settings.items():
        try:
            results, problems = scan_file(source, mode_settings)
        except InputError as exc:
            out[mode] = Outcome("unreadable", exc.problem)
            continue
        except Exception as exc:
            out[mode] = Outcome("unreadable", f"scan raised {exc!r}")
            continue
        out[mode] = _outcome(results, problems)
    return out


def _outcome(results: list[FileResult], problems: list[str]) -> Outcome:
    # scan counts a transcript with no conversation as a file scanned (a result with no
    # request): for the evaluation it is empty, never a clean session.
    read = "ok" if any(result.requests for result in results) else "empty"
    outcome = Outcome(read, problems=list(problems), runs=len(results))
    for result in results:
        outcome.turns += result.requests
        outcome.calls += result.tool_calls
        run = result.meta.get("subagent") or "main"
        for finding in result.findings:
            outcome.kinds[finding.kind] += 1
            for span in finding.spans:
                act = (span.first, span.kind, run)
                if span.noted:
                    outcome.note = min(outcome.note or act, act)
                else:
                    outcome.stop = min(outcome.stop or act, act)
    if outcome.stop is not None and len(results) == 1:
        turn = outcome.stop[0]
        outcome.calls_after = sum(len(s.calls) for s in results[0].steps if s.position >= turn)
    if not results and not problems:
        outcome.error = "no conversation found"
    elif not results:
        outcome.error = problems[0]
    return outcome


# --- reading the populations -------------------------------------------------------------


def _members(source: Path) -> Iterator[tuple[str, bytes]]:
    """``(path inside the set, bytes)`` of every file of a folder or a tarball, in name
    order; a tarball is read as one stream (its top folder left off the names)."""
    if source.is_dir():
        for folder, dirs, files in os.walk(source, followlinks=False):
            dirs.sort()
            for file in sorted(files):
                path = Path(folder, file)
                if path.is_file():
                    yield path.relative_to(source).as_posix(), path.read_bytes()
        return
    with tarfile.open(source, "r|*") as tar:
        for member in tar:
            handle = tar.extractfile(member) if member.isfile() else None
            if handle is not None:
                yield member.name.split("/", 1)[-1], handle.read()


def _table(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE))


def _pool(name: str) -> str:
    prefix = name.split("__")[0]
    return "sweagent-java" if prefix.startswith("sweagent-java") else prefix.split("_")[0]


def read_trajectories(
    population: str, source: Path, settings: dict[str, Settings]
) -> list[Session]:
    """Every trajectory of a set, judged; its pool from the set's ``index.tsv``."""
    sessions: list[Session] = []
    pools: dict[str, str] = {}
    meta: dict[str, tuple[str, str]] = {}
    for name, data in _members(source):
        if Path(name).name == "index.tsv":
            for row in _table(data.decode("utf-8", "replace")):
                if row.get("file") and row.get("pool"):
                    pools[Path(row["file"]).stem] = row["pool"]
            continue
        if not name.endswith(".json"):
            continue
        outcomes = judge(Path(name).name, data, settings)
        sessions.append(Session(population, "", "", Path(name).stem, "unknown", outcomes=outcomes))
        meta[Path(name).stem] = _outcome_of(data)
    for session in sessions:
        session.source = session.group = pools.get(session.name) or _pool(session.name)
        session.label, exit_reason = meta[session.name]
        session.on_its_own = not any(limit in exit_reason for limit in BUDGET_EXITS)
    return sessions


def _outcome_of(data: bytes) -> tuple[str, str]:
    """A trajectory's ``outcome`` and ``exit_reason`` (the labels, not what is judged)."""
    try:
        value = json.loads(data)
    except ValueError:
        return "unknown", ""
    if not isinstance(value, dict):
        return "unknown", ""
    outcome, exit_reason = value.get("outcome"), value.get("exit_reason")
    return (
        outcome if outcome in ("resolved", "failed") else "unknown",
        exit_reason if isinstance(exit_reason, str) else "",
    )


def read_cli_sessions(
    source: Path,
    labels: Path,
    settings: dict[str, Settings],
    clis: tuple[str, ...] = CLIS,
) -> list[Session]:
    """Every transcript of the CLI-sessions set written by one of ``clis``, judged; its
    source the repository its ``manifest.tsv`` names, its label from ``labels``."""
    judged: dict[str, dict[str, Outcome]] = {}
    manifest: list[dict[str, str]] = []
    for name, data in _members(source):
        if name == "manifest.tsv":
            manifest = _table(data.decode("utf-8"))
        elif name.split("/", 1)[0] in clis:
            judged[name] = judge(name, data, settings)
    label_rows = {row["file"]: row for row in _table(labels.read_text("utf-8"))}
    repos = {row["output_path"]: row for row in manifest}
    sessions = []
    for name, outcomes in sorted(judged.items()):
        row = label_rows.get(name, {})
        where = repos.get(name, {})
        turn = row.get("first_loop_turn", "-")
        sessions.append(
            Session(
                "cli",
                where.get("repo") or name.split("/")[1],
                name.split("/", 1)[0],
                name,
                row.get("verdict") or "unlabelled",
                first_loop_turn=int(turn) if turn.isdigit() else None,
                evidence=row.get("evidence", ""),
                outcomes=outcomes,
            )
        )
    return sessions


def read_all(
    places: dict[str, Path],
    labels: Path,
    settings: dict[str, Settings],
    timings: dict[str, float] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    clis: tuple[str, ...] = CLIS,
) -> list[Session]:
    """Every population named in ``places`` (of the CLI sessions, those of ``clis``),
    judged in each mode of ``settings``; ``timings`` gets the seconds each took."""
    sessions: list[Session] = []
    for population, place in places.items():
        start = clock()
        if population == "cli":
            sessions.extend(read_cli_sessions(place, labels, settings, clis))
        else:
            sessions.extend(read_trajectories(population, place, settings))
        if timings is not None:
            timings[population] = clock() - start
    return sessions


# --- reports -----------------------------------------------------------------------------


def _read(session: Session, mode: str) -> bool:
    """Whether the scan read a conversation from the file (the others are counted apart,
    never as runs it let through)."""
    return session.outcomes[mode].read == "ok"


def _turn(act: tuple[int, str, str] | None) -> str:
    if act is None:
        return "-"
    turn, kind, run = act
    return f"{turn} {kind}" + ("" if run == "main" else f" ({run})")


def cli_table(sessions: list[Session], modes: tuple[str, ...]) -> str:
    """Per CLI and mode: read, unreadable / empty, healthy stopped and noted, judged
    loops caught, findings by kind."""
    lines = [
        "| CLI | mode | sessions | read (calls) | with skipped lines | unreadable | empty "
        "| healthy stopped "
        "| healthy noted, not stopped | judged loops caught (noted / stopped) "
        "| findings by kind |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for cli in CLIS:
        group = [s for s in sessions if s.population == "cli" and s.group == cli]
        if not group:
            continue
        for mode in modes:
            got = [s.outcomes[mode] for s in group]
            read = [o for o in got if o.read == "ok"]
            healthy = [s for s in group if s.label == "healthy" and _read(s, mode)]
            stopped = sum(s.outcomes[mode].stop is not None for s in healthy)
            noted = sum(
                s.outcomes[mode].note is not None and s.outcomes[mode].stop is None for s in healthy
            )
            loops = [s for s in group if s.label == "loop" and _read(s, mode)]
            caught_note = sum(s.outcomes[mode].acted is not None for s in loops)
            caught_stop = sum(s.outcomes[mode].stop is not None for s in loops)
            kinds: Counter[str] = Counter()
            for outcome in got:
                kinds.update(outcome.kinds)
            kind_text = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) or "-"
            lines.append(
                f"| {cli} | {mode} | {len(group)} | {len(read)} ({sum(o.calls for o in read)}) "
                f"| {sum(bool(o.problems) for o in read)} "
                f"| {sum(o.read == 'unreadable' for o in got)} "
                f"| {sum(o.read == 'empty' for o in got)} "
                f"| {stopped} of {len(healthy)} | {noted} "
                f"| {caught_note} / {caught_stop} of {len(loops)} | {kind_text} |"
            )
    return "\n".join(lines)


def loop_table(sessions: list[Session], modes: tuple[str, ...]) -> str:
    """Each judged loop: its labelled first turn, the turn the guard first acted and
    stopped, and whether that was by the 4th rejected call."""
    loops = [s for s in sessions if s.label == "loop"]
    lines = [
        "| judged loop | first loop turn | "
        + " | ".join(f"{m}: first act | {m}: stopped | {m}: in time" for m in modes)
        + " |",
        "|---|---|" + "---|---|---|" * len(modes),
    ]
    for s in loops:
        cells = []
        for mode in modes:
            outcome = s.outcomes[mode]
            act = outcome.acted
            deadline = (s.first_loop_turn or 0) + REJECTIONS_IN_TIME
            in_time = "yes" if act is not None and act[0] <= deadline else "no"
            cells.append(f"{_turn(act)} | {_turn(outcome.stop)} | {in_time}")
        lines.append(f"| {s.name} | {s.first_loop_turn or '-'} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def flagged_list(sessions: list[Session], mode: str) -> list[str]:
    """Every file the guard acted on in ``mode``, or could not read."""
    out = []
    for s in sessions:
        outcome = s.outcomes[mode]
        if outcome.read != "ok":
            out.append(f"{mode} {outcome.read}: {s.name}: {outcome.error}")
        elif outcome.acted is not None:
            out.append(
                f"{mode} {s.label}: {s.name} noted {_turn(outcome.note)}, "
                f"stopped {_turn(outcome.stop)}"
            )
    return out


def population_table(sessions: list[Session], modes: tuple[str, ...]) -> str:
    """Per population and mode: files, unreadable, healthy stopped, loops caught."""
    lines = [
        "| population | mode | files | unreadable / empty | healthy stopped "
        "| resolved on a budget stopped | loops or failed runs stopped | calls after the stop |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for population in POPULATIONS:
        group = [s for s in sessions if s.population == population]
        if not group:
            continue
        for mode in modes:
            lines.append(f"| {population} | {mode} | " + _counts(group, mode) + " |")
    return "\n".join(lines)


def _counts(group: list[Session], mode: str) -> str:
    got = [s.outcomes[mode] for s in group]
    healthy = [s for s in group if s.healthy and _read(s, mode)]
    budget = [s for s in group if s.label == "resolved" and not s.on_its_own and _read(s, mode)]
    looping = [s for s in group if s.looping and _read(s, mode)]
    stopped_loops = [s for s in looping if s.outcomes[mode].stop is not None]
    calls = sum(s.outcomes[mode].calls for s in looping)
    after = sum(s.outcomes[mode].calls_after for s in stopped_loops)
    return (
        f"{len(group)} | {sum(o.read == 'unreadable' for o in got)} / "
        f"{sum(o.read == 'empty' for o in got)} "
        f"| {sum(s.outcomes[mode].stop is not None for s in healthy)} of {len(healthy)} "
        f"| {sum(s.outcomes[mode].stop is not None for s in budget)} of {len(budget)} "
        f"| {len(stopped_loops)} of {len(looping)} | {after} of {calls}"
    )


def loso_table(sessions: list[Session], modes: tuple[str, ...]) -> tuple[str, bool]:
    """Per held-out source, in each mode: healthy runs stopped, loops caught; and
    whether the release gate holds (no source has a healthy run stopped)."""
    lines = [
        "| held-out source | population | files | "
        + " | ".join(f"{m}: healthy stopped | {m}: loops or failed stopped" for m in modes)
        + " |",
        "|---|---|---|" + "---|---|" * len(modes),
    ]
    failing: list[str] = []
    for source in sorted({s.source for s in sessions}):
        group = [s for s in sessions if s.source == source]
        populations = ", ".join(sorted({s.population for s in group}))
        cells = []
        for mode in modes:
            healthy = [s for s in group if s.healthy and _read(s, mode)]
            looping = [s for s in group if s.looping and _read(s, mode)]
            stopped = [s for s in healthy if s.outcomes[mode].stop is not None]
            caught = sum(s.outcomes[mode].stop is not None for s in looping)
            if stopped:
                failing.append(f"{source} ({mode}: {len(stopped)})")
            mark = f"**{len(stopped)}**" if stopped else "0"
            cells.append(f"{mark} of {len(healthy)} | {caught} of {len(looping)}")
        lines.append(f"| {source} | {populations} | {len(group)} | " + " | ".join(cells) + " |")
    unreadable = sum(any(o.read != "ok" for o in s.outcomes.values()) for s in sessions)
    verdict = "FAILS" if failing else "holds"
    lines.append("")
    lines.append(
        f"release gate (no held-out source with a healthy run stopped, {' and '.join(modes)}): "
        + verdict
        + (f": {', '.join(failing)}" if failing else "")
        + f"; files not read, or read to no conversation (apart, never clean): {unreadable}"
    )
    return "\n".join(lines), not failing
