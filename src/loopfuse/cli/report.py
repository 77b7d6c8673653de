"""The scan report: text for a terminal, JSON for programs, Markdown for a CI comment.

Text fits an 80-column terminal (narrower if the terminal is), is ASCII apart from what
the transcripts themselves contain, and uses colour only when asked to (``main``
decides: on a TTY, unless ``NO_COLOR`` is set or ``--color never``).

>>> print(render_text([], [], Summary.of([], [], ("breaker", "detector", "dedup"))))
Summary
  files      0 scanned
  requests   0 replayed
  breaker    0 requests refused
  detector   0 requests refused
  dedup      0 requests answered from the cache
"""

from __future__ import annotations

import dataclasses
import json
import textwrap
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Final, TextIO

import loopfuse
from loopfuse.cli.config import GUARDS, Settings
from loopfuse.cli.readers import InputError
from loopfuse.cli.replay import FileResult, Intervention

__all__ = ["Progress", "Style", "Summary", "render_json", "render_markdown", "render_text"]

WIDTH: Final = 80
_INDENT: Final = 12  # where an intervention's details start
_ACTS: Final = {
    "breaker": "requests refused",
    "detector": "requests refused",
    "dedup": "requests answered from the cache",
}


@dataclass(frozen=True, slots=True)
class Style:
    """ANSI colour, or none. ``paint(text, role)`` wraps ``text`` for its role."""

    color: bool = False

    _CODES: ClassVar[dict[str, str]] = {
        "file": "1",
        "red": "31",
        "yellow": "33",
        "green": "32",
        "dim": "2",
    }

    def paint(self, text: str, role: str) -> str:
        """``text`` in the colour of ``role`` (``file``, ``red``, ``yellow``, ...)."""
        if not self.color or not text:
            return text
        return f"\033[{self._CODES[role]}m{text}\033[0m"


@dataclass(frozen=True, slots=True)
class Summary:
    """Totals over a scan: what :func:`render_text` prints last and JSON's ``summary``."""

    guards: tuple[str, ...]
    files: int
    clean: int
    flagged: int
    errors: int
    requests: int
    acted: dict[str, int]
    interventions: dict[str, int]
    kinds: dict[str, dict[str, int]]
    spared_requests: int
    spared_tool_calls: int
    spared_chars: int
    outcomes: dict[str, list[int]]
    """For files that record an ``outcome`` (trajectories): outcome -> [flagged, files]."""

    @classmethod
    def of(
        cls, results: Sequence[FileResult], errors: Sequence[InputError], guards: Sequence[str]
    ) -> Summary:
        """Add up ``results``; ``errors`` are the files that could not be read."""
        acted: Counter[str] = Counter()
        found: Counter[str] = Counter()
        kinds: dict[str, Counter[str]] = {guard: Counter() for guard in GUARDS}
        outcomes: dict[str, list[int]] = {}
        for result in results:
            outcome = result.meta.get("outcome")
            if outcome:
                tally = outcomes.setdefault(outcome, [0, 0])
                tally[0] += not result.clean
                tally[1] += 1
            acted.update(result.acted)
            for item in result.interventions:
                found[item.guard] += 1
                kinds[item.guard][item.kind] += 1
        return cls(
            guards=tuple(guards),
            files=len(results) + len(errors),
            clean=sum(result.clean for result in results),
            flagged=sum(not result.clean for result in results),
            errors=len(errors),
            requests=sum(result.requests for result in results),
            acted={guard: acted[guard] for guard in GUARDS},
            interventions={guard: found[guard] for guard in GUARDS},
            kinds={guard: dict(sorted(kinds[guard].items())) for guard in GUARDS},
            spared_requests=sum(result.spared_requests for result in results),
            spared_tool_calls=sum(result.spared_tool_calls for result in results),
            spared_chars=sum(result.spared_chars for result in results),
            outcomes=dict(sorted(outcomes.items())),
        )

    @property
    def found(self) -> bool:
        """Whether any guard acted anywhere."""
        return self.flagged > 0


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _clip(text: str, room: int) -> str:
    return text if len(text) <= room else text[: max(0, room - 3)] + "..."


def _header(result: FileResult) -> str:
    parts = [result.kind, result.dialect]
    if result.meta.get("outcome"):
        exit_reason = result.meta.get("exit_reason")
        parts.append(result.meta["outcome"] + (f" ({exit_reason})" if exit_reason else ""))
    parts.append(_plural(result.requests, "request"))
    if result.kind == "log":
        parts.append(_plural(result.sessions, "session"))
    return ", ".join(parts)


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=True,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def _intervention_lines(
    result: FileResult, item: Intervention, style: Style, width: int
) -> list[str]:
    pad = " " * _INDENT
    head = f"  {item.unit} {item.first}".ljust(_INDENT)
    color = "yellow" if item.guard == "dedup" else "red"
    lines = [head + style.paint(f"{item.guard:<9}", color) + f" {item.kind}, count {item.count}"]
    for step, subject in enumerate(item.subjects):
        lines.append(pad + _clip(("-> " if step else "") + subject, width - _INDENT))
    details = []
    if item.requests > 1:
        span = f"{item.unit}s {item.first}-{item.last} ({item.requests} requests)"
        details.append(span)
    if item.max_count > item.count:
        details.append(f"count up to {item.max_count}")
    if result.kind == "log" and result.sessions > 1:
        details.append(f"session {item.session}")
    if item.same_as is not None:
        details.append(f"same request as {item.unit} {item.same_as}")
    if details:
        lines.extend(_wrap(", ".join(details), width, pad, pad))
    if item.message:
        told = _wrap("model told: " + item.message, width, pad, pad + "  ")
        lines.extend(style.paint(line, "dim") for line in told)
    return lines


def render_text(
    results: Sequence[FileResult],
    errors: Sequence[InputError],
    summary: Summary,
    style: Style | None = None,
    width: int = WIDTH,
) -> str:
    """The human report: each file, each intervention, then the summary."""
    style = style or Style()
    width = max(40, min(width, WIDTH))
    lines: list[str] = []
    for result in results:
        name = result.name if len(result.name) <= width else "..." + result.name[3 - width :]
        lines.append(style.paint(name, "file"))
        header = _header(result) + (": clean" if result.clean else "")
        for line in _wrap(header, width, "  ", "    "):
            lines.append(style.paint(line, "green") if result.clean else line)
        for item in result.interventions:
            lines.extend(_intervention_lines(result, item, style, width))
        lines.append("")
    lines.extend(_summary_lines(summary, style, width))
    return "\n".join(lines)


def _summary_lines(summary: Summary, style: Style, width: int) -> list[str]:
    files = f"{summary.files:,} scanned"
    if summary.files:
        files += f": {summary.clean:,} clean, {summary.flagged:,} with interventions"
        if summary.errors:
            files += f", {summary.errors:,} unreadable (reported on stderr)"
    rows = [("files", files)]
    if summary.outcomes:
        flagged = ", ".join(f"{n} of {total} {o}" for o, (n, total) in summary.outcomes.items())
        rows.append(("outcomes", f"flagged {flagged}"))
    rows.append(("requests", f"{summary.requests:,} replayed"))
    for guard in GUARDS:
        if guard not in summary.guards:
            rows.append((guard, "off"))
            continue
        text = f"{summary.acted[guard]:,} {_ACTS[guard]}"
        found = summary.interventions[guard]
        if found:
            kinds = summary.kinds[guard]
            detail = f"{_plural(found, 'intervention')}"
            if guard == "detector":
                detail += ": " + ", ".join(f"{n} {kind}" for kind, n in kinds.items())
            text += f" ({detail})"
        rows.append((guard, text))
    if summary.spared_requests:
        rows.append(
            (
                "not spent",
                f"{_plural(summary.spared_requests, 'request')}, "
                f"{_plural(summary.spared_tool_calls, 'tool call')}, "
                f"{summary.spared_chars:,} characters of context",
            )
        )
    lines = [style.paint("Summary", "file")]
    for label, text in rows:
        lines.extend(_wrap(text, width, f"  {label:<11}", " " * 13))
    return lines


def render_markdown(
    results: Sequence[FileResult], errors: Sequence[InputError], summary: Summary
) -> str:
    """A report for a pull-request comment or a CI job summary."""
    out = ["# loopfuse scan", "", "| file | kind | requests | result |", "|---|---|---|---|"]
    for result in results:
        acted = ", ".join(f"{g}: {result.acted[g]}" for g in GUARDS if g in result.acted)
        outcome = f" ({result.meta['outcome']})" if result.meta.get("outcome") else ""
        out.append(
            f"| `{_md(result.name)}` | {result.kind}{outcome} | {result.requests:,} | "
            f"{'clean' if result.clean else _md(acted) + ' requests'} |"
        )
    for error in errors:
        out.append(f"| `{_md(error.name)}` | unreadable | - | {_md(error.problem)} |")
    for result in results:
        if result.clean:
            continue
        unit = "line" if result.kind == "log" else "turn"
        out += ["", f"## `{_md(result.name)}`", ""]
        out += [
            f"| {unit}s | guard | kind | count | what | model told |",
            "|---|---|---|---|---|---|",
        ]
        for item in result.interventions:
            span = str(item.first)
            if item.requests > 1:
                span += f"-{item.last} ({item.requests})"
            out.append(
                f"| {span} | {item.guard} | {item.kind} | {item.count} | "
                f"`{_md(item.subject)}` | {_md(item.message or '(answered from the cache)')} |"
            )
    out += ["", "## Summary", ""]
    out += [line.strip() and "    " + line for line in _summary_lines(summary, Style(), 100)]
    return "\n".join(out) + "\n"


def _md(text: str) -> str:
    return " ".join(text.replace("|", "\\|").replace("`", "'").split())


def render_json(
    results: Sequence[FileResult],
    errors: Sequence[InputError],
    summary: Summary,
    settings: Settings,
) -> str:
    """Everything, for programs: settings, files, errors and the summary."""
    options = dataclasses.asdict(settings)
    for output_only in ("format", "color", "progress"):
        options.pop(output_only, None)
    document = {
        "loopfuse": loopfuse.__version__,
        "settings": options,
        "files": [
            {
                **{k: v for k, v in dataclasses.asdict(r).items() if k != "interventions"},
                "clean": r.clean,
                "interventions": [dataclasses.asdict(item) for item in r.interventions],
            }
            for r in results
        ],
        "errors": [{"file": error.name, "problem": error.problem} for error in errors],
        "summary": {**dataclasses.asdict(summary), "found": summary.found},
    }
    return json.dumps(document, indent=2, ensure_ascii=False)


class Progress:
    """A one-line progress bar on ``stream``, redrawn in place; off unless ``enabled``."""

    def __init__(self, stream: TextIO, total: int, *, enabled: bool, width: int = WIDTH) -> None:
        self.stream = stream
        self.total = total
        self.enabled = enabled
        self.width = max(40, min(width, WIDTH))
        self.done = 0
        self._drawn = False

    def step(self, name: str) -> None:
        """Show that file ``name`` is next."""
        if not self.enabled:
            return
        bar_width = 20
        filled = bar_width * self.done // max(1, self.total)
        bar = "#" * filled + "-" * (bar_width - filled)
        text = f"[{bar}] {self.done}/{self.total} "
        room = self.width - 1 - len(text)
        label = name if len(name) <= room else "..." + name[-(room - 3) :]
        self.stream.write("\r" + (text + label).ljust(self.width - 1))
        self.stream.flush()
        self._drawn = True
        self.done += 1

    def clear(self) -> None:
        """Erase the bar (before other output on the same stream, and at the end)."""
        if self._drawn:
            self.stream.write("\r" + " " * (self.width - 1) + "\r")
            self.stream.flush()
            self._drawn = False
