"""One flagged run as an inline SVG timeline: every tool call a mark, coloured by tool.

The marks run left to right, :data:`PER_ROW` to a row. Behind them, the stretch where
the run repeated itself is highlighted; a red line marks each request the guard acts
on first in a finding; the marks of the turns it refused (or answered from the cache)
are shaded as not spent. A turn that made no tool call is a short grey mark; a log's
marks are its requests, coloured by the tool their last turn called. A run longer than
:data:`MAX_MARKS` marks is drawn with one mark per several calls.

Everything written into the SVG that comes from the run goes through
:func:`~loopfuse.cli.escape.esc`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Final

from loopfuse.cli.escape import esc
from loopfuse.cli.results import FileResult

__all__ = ["MAX_MARKS", "PALETTE", "PER_ROW", "Palette", "timeline_svg"]

PER_ROW: Final = 100
MAX_MARKS: Final = 5000
PALETTE: Final = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#b07aa1",
    "#76b7b2",
    "#edc948",
    "#9c755f",
    "#ff9da7",
    "#e15759",
    "#86bcb6",
)
"""Colours of the most frequent tools (Tableau 10); other tools are grey."""

_STEP: Final = 8  # pixels per mark
_MARK: Final = 6
_ROW: Final = 22
_LEFT: Final = 52
_TOP: Final = 6


class Palette:
    """Tool name -> colour class: the most frequent tools of the report get colours."""

    def __init__(self, results: Sequence[FileResult]) -> None:
        counts: Counter[str] = Counter()
        for result in results:
            for step in result.steps:
                counts.update(step.calls)
        self.classes = {name: f"t{i}" for i, (name, _) in enumerate(counts.most_common(10))}

    def css(self) -> str:
        """The colour rules for the classes."""
        return "".join(f".t{i}{{fill:{c}}}.k{i}{{background:{c}}}" for i, c in enumerate(PALETTE))

    def of(self, name: str | None) -> str:
        """The class of a tool (``tn``: no tool call, ``to``: a tool without a colour)."""
        if name is None:
            return "tn"
        return self.classes.get(name, "to")


_Mark = tuple[int, str, str | None, bool]  # position, session, tool or None, not spent


def _marks(result: FileResult) -> list[_Mark]:
    """A mark per tool call (or per request without one), in order."""
    marks: list[_Mark] = []
    for step in result.steps:
        unspent = step.action in ("refuse", "hit")
        for name in step.calls or (None,):
            marks.append((step.position, step.session, name, unspent))
    if len(marks) <= MAX_MARKS:
        return marks
    size = math.ceil(len(marks) / MAX_MARKS)
    binned = []
    for start in range(0, len(marks), size):
        chunk = marks[start : start + size]
        tool = Counter(mark[2] for mark in chunk).most_common(1)[0][0]
        binned.append((chunk[0][0], chunk[0][1], tool, any(mark[3] for mark in chunk)))
    return binned


class _Grid:
    """Where each mark goes: short runs get wider marks, long ones wrap into rows."""

    def __init__(self, marks: int) -> None:
        self.step = max(_STEP, min(3 * _STEP, PER_ROW * _STEP // max(1, marks)))
        self.per_row = PER_ROW * _STEP // self.step
        self.mark = self.step - 2

    def xy(self, index: int) -> tuple[int, int]:
        row, column = divmod(index, self.per_row)
        return _LEFT + column * self.step, _TOP + row * _ROW

    def bands(self, flags: Sequence[bool], css: str) -> list[str]:
        """One rect per row-run of marks whose flag is set."""
        out = []
        index = 0
        while index < len(flags):
            if not flags[index]:
                index += 1
                continue
            end = index
            while end + 1 < len(flags) and flags[end + 1] and (end + 1) % self.per_row:
                end += 1
            x, y = self.xy(index)
            width = (end - index + 1) * self.step
            out.append(
                f'<rect class="{css}" x="{x - 1}" y="{y - 2}" width="{width}" height="{_ROW - 4}"/>'
            )
            index = end + 1
        return out


def timeline_svg(result: FileResult, palette: Palette) -> str:
    """The run's timeline; ``""`` when the run has no requests to draw."""
    marks = _marks(result)
    if not marks:
        return ""
    unit = "turn" if result.kind != "log" else "line"
    positions = [mark[0] for mark in marks]
    loops = [False] * len(marks)
    firsts: dict[int, str] = {}
    for finding in result.findings:
        # The repeated stretch: what the detector counted, or since the same request
        # was first sent (the breaker and the cache), in the finding's session.
        start = finding.loop_from if finding.loop_from is not None else finding.same_as
        start = finding.first if start is None else start
        for i, (position, session, _, _) in enumerate(marks):
            if start <= position < finding.first and session == finding.session:
                loops[i] = True
        firsts.setdefault(finding.first, f"{finding.guard}: {finding.kind}")
    grid = _Grid(len(marks))
    rows = math.ceil(len(marks) / grid.per_row)
    width, height = _LEFT + PER_ROW * _STEP + 4, _TOP + rows * _ROW + 4
    label = esc(f"{unit}s and tool calls of {result.name}")
    out = [
        f'<svg class="timeline" role="img" aria-label="{label}" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}">'
    ]
    out += grid.bands(loops, "loop")
    for row in range(rows):
        _, y = grid.xy(row * grid.per_row)
        start = positions[row * grid.per_row]
        out.append(f'<text class="row" x="2" y="{y + _MARK + 3}">{unit} {start:,}</text>')
    for i, (position, _, name, unspent) in enumerate(marks):
        x, y = grid.xy(i)
        tall = _MARK + 8 if name is not None else _MARK
        title = f"{unit} {position:,}: {name if name is not None else 'no tool call'}"
        if unspent:
            title += " (not spent)"
        out.append(
            f'<rect class="{palette.of(name)}" x="{x}" y="{y + 14 - tall}" width="{grid.mark}" '
            f'height="{tall}"><title>{esc(title)}</title></rect>'
        )
    out += grid.bands([mark[3] for mark in marks], "unspent")
    seen: set[int] = set()
    for i, position in enumerate(positions):
        if position in firsts and position not in seen:
            seen.add(position)
            x, y = grid.xy(i)
            what = esc(f"the guard acts here, {unit} {position:,} ({firsts[position]})")
            out.append(
                f'<line class="act" x1="{x - 1}" y1="{y - 3}" x2="{x - 1}" y2="{y + _ROW - 5}">'
                f"<title>{what}</title></line>"
            )
    out.append("</svg>")
    return "".join(out)
