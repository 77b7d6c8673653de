"""The scan report for people (text, the default) and for programs (JSON).

Text puts the flagged runs first, each finding with where it starts (turn or line, and
the message index), the repeated call, the first line of the repeated answer, the
count and what was not spent; then the summary (with the scanned folder, which the
files are named from: :mod:`~loopfuse.cli.names`) and the list of flagged files. Clean
runs are counted, and listed only with ``--verbose``. A name too long for a line goes
on over the next ones, whole. It fits an 80-column terminal
(narrower if the terminal is), is ASCII apart from what the runs themselves contain, and
uses colour only when asked to (``main`` decides: on a TTY, unless ``NO_COLOR`` is set
or ``--color never``).

>>> print(render_text([], [], Summary.of([], [], ("breaker", "detector", "dedup"))))
Summary
  files      0 scanned
  requests   0 replayed
  mode       refuse (every loop refused)
  breaker    0 requests refused
  detector   0 requests refused
  dedup      0 requests answered from the cache
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Final

import loopfuse
from loopfuse.cli.config import OPTIONS, Settings, value_of
from loopfuse.cli.escape import json_text, printable
from loopfuse.cli.names import shown_name
from loopfuse.cli.readers import InputError, NotUnderstood
from loopfuse.cli.results import FileResult, Finding
from loopfuse.cli.summary import (
    Summary,
    finding_title,
    money_text,
    not_spent_parts,
    plural,
    spans_text,
)

__all__ = ["Style", "render_json", "render_text", "run_header"]

WIDTH: Final = 80
FINDINGS_SHOWN: Final = 3
"""Findings shown per run without ``--verbose``."""
_SPANS_SHOWN: Final = 3
_PAD: Final = "      "


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


def _clip(text: str, room: int) -> str:
    text = printable(text)
    return text if len(text) <= room else text[: max(0, room - 3)] + "..."


def _name_lines(name: str, width: int) -> list[str]:
    """``name`` whole, over as many lines of ``width`` as it takes (cut, it could not be
    found or copied)."""
    name = printable(name)
    return [name[start : start + width] for start in range(0, len(name), width)] or [""]


def run_header(result: FileResult) -> str:
    """``trajectory, openai_chat, failed (max_steps), 10 requests``; a CLI's session
    says which (``codex session 01a2..., /home/me/app, started 2026-12-01T22:23:54Z,
    openai_responses, 3 requests``). The run's own text is as it is: each report escapes
    it its way."""
    parts = [result.kind, result.dialect]
    if result.kind == "session":
        parts = [*_session_parts(result.meta), result.dialect]
    if result.meta.get("outcome"):
        exit_reason = result.meta.get("exit_reason")
        parts.append(result.meta["outcome"] + (f" ({exit_reason})" if exit_reason else ""))
    parts.append(plural(result.requests, "request"))
    if result.kind == "log" and result.sessions > 1:
        parts.append(plural(result.sessions, "session"))
    if result.unchecked:
        parts.append(f"{result.unchecked:,} not checked (unreadable bodies)")
    if result.bad_lines:
        parts.append(f"{plural(result.bad_lines, 'line')} skipped (not requests)")
    return ", ".join(parts)


def _session_parts(meta: dict[str, str]) -> list[str]:
    """Which session of which CLI a run is, where and when it ran."""
    parts = [f"{meta.get('agent', 'agent')} session {meta.get('session', '(no id)')}"]
    if meta.get("subagent"):
        parts.append("subagent" + ("" if meta["subagent"] == "yes" else f" {meta['subagent']}"))
    if meta.get("continues"):
        parts.append(f"continues {meta['continues']}")
    if meta.get("forked_from"):
        parts.append(f"forked from {meta['forked_from']}")
    if meta.get("project"):
        parts.append(meta["project"])
    if meta.get("started"):
        parts.append(f"started {meta['started']}")
    return parts


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=True,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def _where(result: FileResult, finding: Finding) -> str:
    where = f"{finding.unit} {finding.first:,}"
    if finding.message_index is not None:
        where += f" (message {finding.message_index:,})"
    if result.kind == "log" and result.sessions > 1:
        where += f", session {printable(finding.session)}"
    return where


def _finding_lines(
    result: FileResult, finding: Finding, style: Style, width: int, verbose: bool
) -> list[str]:
    color = "yellow" if finding.guard == "dedup" else "red"
    where = _where(result, finding)
    title = finding_title(finding)
    if finding.same_as is not None:
        title += f", first at {finding.unit} {finding.same_as:,}"
    if len(where) + len(title) + 4 <= width:
        lines = [f"  {where}  {style.paint(title, color)}"]
    else:
        lines = [_clip(f"  {where}", width), _clip(f"{_PAD}{title}", width)]
        lines[1] = _PAD + style.paint(lines[1][len(_PAD) :], color)
    for step, call in enumerate(finding.calls):
        lines.append(_clip(_PAD + ("-> " if step else "") + call, width))
    if finding.answer:
        lines.append(_clip(f"{_PAD}answer: {finding.answer}", width))
    spent = not_spent_parts(finding, result.tokens_estimated)
    acts = spans_text(finding, None if verbose else _SPANS_SHOWN)
    text = f"{acts}: {', '.join(spent)} not spent"
    lines.extend(_wrap(text, width, _PAD, _PAD))
    if verbose and finding.message:
        told = _wrap("model told: " + printable(finding.message), width, _PAD, _PAD + "  ")
        lines.extend(style.paint(line, "dim") for line in told)
    return lines


def _run_lines(
    result: FileResult, style: Style, width: int, verbose: bool, folder: str | None
) -> list[str]:
    lines = [
        style.paint(line, "file") for line in _name_lines(shown_name(result.name, folder), width)
    ]
    header = printable(run_header(result)) + (": clean" if result.clean else "")
    for line in _wrap(header, width, "  ", "    "):
        lines.append(style.paint(line, "green") if result.clean else line)
    shown = result.findings if verbose else result.findings[:FINDINGS_SHOWN]
    for finding in shown:
        lines.extend(_finding_lines(result, finding, style, width, verbose))
    if len(shown) < len(result.findings):
        more = len(result.findings) - len(shown)
        lines.append(f"  ... {plural(more, 'more finding')} (--verbose shows all)")
    return lines


def render_text(
    results: Sequence[FileResult],
    errors: Sequence[InputError],
    summary: Summary,
    style: Style | None = None,
    width: int = WIDTH,
    verbose: bool = False,
    folder: str | None = None,
) -> str:
    """The report for people: flagged runs, the summary, the flagged files; each file
    named relative to ``folder``, the scanned folder (see :mod:`~loopfuse.cli.names`)."""
    style = style or Style()
    width = max(40, min(width, WIDTH))
    lines: list[str] = []
    flagged = [result for result in results if not result.clean]
    for result in flagged if not verbose else results:
        lines.extend(_run_lines(result, style, width, verbose, folder))
        lines.append("")
    lines.extend(_summary_lines(summary, style, width, folder))
    if flagged and len(results) > 1:
        lines += ["", style.paint(f"Flagged files ({len(flagged):,})", "file")]
        for result in flagged:
            lines.extend(
                "  " + line for line in _name_lines(shown_name(result.name, folder), width - 2)
            )
    return "\n".join(lines)


def _summary_lines(summary: Summary, style: Style, width: int, folder: str | None) -> list[str]:
    files = f"{summary.files:,} scanned"
    if summary.files:
        files += f": {summary.clean:,} clean, {summary.flagged:,} flagged"
        if summary.errors:
            files += f", {summary.unread_text()} (reported on stderr)"
    requests = f"{summary.requests:,} replayed"
    if summary.unchecked:
        requests += f" ({summary.unchecked:,} not checked: bodies loopfuse cannot read)"
    lines = [style.paint("Summary", "file")]
    rows = summary.rows(files, requests, printable)
    if folder is not None:
        rows = [("folder", printable(folder)), *rows]
    for label, text in rows:
        lines.extend(_wrap(text, width, f"  {label:<11}", " " * 13))
    return lines


def _error(error: InputError) -> dict[str, object]:
    """A file not scanned, for programs: ``kind`` says whether it could not be read
    (``"unreadable"``) or was read but not understood (``"not understood"``, with the
    tool ``calls`` it seems to hold)."""
    if isinstance(error, NotUnderstood):
        return {
            "file": error.name,
            "problem": error.problem,
            "kind": "not understood",
            "calls": error.calls,
        }
    return {"file": error.name, "problem": error.problem, "kind": "unreadable"}


def render_json(
    results: Sequence[FileResult],
    errors: Sequence[InputError],
    summary: Summary,
    settings: Settings,
    problems: Sequence[str] = (),
    folder: str | None = None,
) -> str:
    """Everything but the per-request steps, for programs: settings, the scanned
    ``folder``, files (each named by its path as found, which a program can open),
    errors, problems (bad lines of logs) and the summary."""
    output_only = ("format", "color", "progress", "verbose")
    options = {o.name: value_of(settings, o) for o in OPTIONS if o.name not in output_only}
    price = settings.price_per_mtok
    options["price_per_mtok"] = None if price is None else [price.input, price.output]
    files = []
    for result in results:
        data = dataclasses.asdict(result)
        data.pop("steps")
        data["clean"] = result.clean
        files.append(data)
    document = {
        "loopfuse": loopfuse.__version__,
        "settings": options,
        "folder": folder,
        "files": files,
        "errors": [_error(error) for error in errors],
        "problems": list(problems),
        "summary": {
            **{k: v for k, v in dataclasses.asdict(summary).items() if k != "price"},
            "found": summary.found,
            "cost": summary.cost,
            "cost_text": None if summary.cost is None else money_text(summary.cost),
        },
    }
    return json_text(document)
