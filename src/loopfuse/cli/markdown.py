"""The Markdown report: a pull-request comment or a CI job summary, whatever the folder.

At most :data:`LIMIT` characters (GitHub refuses longer comments): the summary first,
then the flagged runs, as many as fit, then a note of what was left out. Every text
that comes from a run (file names, outcomes, tool calls, answers, errors) is
attacker-controlled and is written inside a code span (:func:`loopfuse.cli.escape.code`),
where Markdown and HTML mean nothing; backticks in it become ``'``, table pipes are
escaped and hidden or control characters replaced, so nothing can break out.

>>> from loopfuse.cli.summary import Summary
>>> text = render_markdown([], [], Summary.of([], [], ("breaker", "detector", "dedup")))
>>> text.splitlines()[0], len(text) <= LIMIT
('# loopfuse scan', True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from loopfuse.cli.escape import code
from loopfuse.cli.names import shown_name
from loopfuse.cli.readers import InputError
from loopfuse.cli.report import run_header
from loopfuse.cli.results import FileResult, Finding
from loopfuse.cli.summary import Summary, finding_title, not_spent_parts, plural, spans_text

__all__ = ["LIMIT", "render_markdown"]

LIMIT: Final = 60_000
"""Characters a Markdown report may hold."""

_RESERVE: Final = 600  # room kept for the note of what was left out
_ERRORS_SHOWN: Final = 20


def render_markdown(
    results: Sequence[FileResult],
    errors: Sequence[InputError],
    summary: Summary,
    problems: Sequence[str] = (),
    folder: str | None = None,
) -> str:
    """The report, at most :data:`LIMIT` characters; each file named relative to
    ``folder``, the scanned folder (see :mod:`~loopfuse.cli.names`)."""
    head = ["# loopfuse scan", "", *_summary(summary, folder), ""]
    flagged = [result for result in results if not result.clean]
    out = "\n".join(head) + "\n"
    if flagged:
        out += f"## Flagged runs ({len(flagged):,})\n\n"
    left_out = 0
    for number, result in enumerate(flagged):
        section = "\n".join(_run(result, folder)) + "\n\n"
        if len(out) + len(section) > LIMIT - _RESERVE:
            left_out = len(flagged) - number
            break
        out += section
    tail = _errors(errors, problems, folder)
    if left_out:
        note = (
            f"_{plural(left_out, 'flagged run')} left out to keep this report under "
            f"{LIMIT:,} characters: `loopfuse scan --format html` or `--format json` "
            "shows every one._\n"
        )
        tail = note + ("\n" + tail if tail else "")
    if len(out) + len(tail) > LIMIT:
        tail = tail[: max(0, LIMIT - len(out) - 40)] + "\n\n_(cut at the size limit)_\n"
    return out + tail


def _summary(summary: Summary, folder: str | None) -> list[str]:
    files = f"{summary.files:,} scanned: {summary.clean:,} clean, {summary.flagged:,} flagged"
    if summary.errors:
        files += f", {summary.unread_text()}"
    rows = summary.rows(files, f"{summary.requests:,} replayed", code)
    if folder is not None:
        rows = [("folder", code(folder)), *rows]
    return ["| | |", "|---|---|", *(f"| {label} | {text} |" for label, text in rows)]


def _run(result: FileResult, folder: str | None) -> list[str]:
    name = shown_name(result.name, folder)
    lines = [f"### {code(name)}", "", code(run_header(result), 1000), ""]
    lines += ["| where | what | repeated | not spent |", "|---|---|---|---|"]
    for finding in result.findings:
        lines.append(_row(result, finding))
    return lines


def _row(result: FileResult, finding: Finding) -> str:
    where = f"{finding.unit} {finding.first:,}"
    if finding.message_index is not None:
        where += f" (message {finding.message_index:,})"
    spans = spans_text(finding, 3)
    what = f"{code(finding_title(finding), 100)}<br>{code(spans, 200)}"
    repeated = "<br>".join(code(call) for call in finding.calls)
    if finding.answer:
        repeated += f"<br>answer: {code(finding.answer)}"
    spent = [
        plural(finding.requests, "request"),
        *not_spent_parts(finding, result.tokens_estimated),
    ]
    return f"| {where} | {what} | {repeated} | {', '.join(spent)} |"


def _errors(errors: Sequence[InputError], problems: Sequence[str], folder: str | None) -> str:
    lines = [
        f"- {code(f'{shown_name(error.name, folder)}: {error.problem}')}"
        for error in errors[:_ERRORS_SHOWN]
    ]
    lines += [f"- {code(problem)}" for problem in problems[: max(0, _ERRORS_SHOWN - len(lines))]]
    hidden = len(errors) + len(problems) - len(lines)
    if hidden > 0:
        lines.append(f"- and {hidden:,} more (on standard error)")
    return "## Not read\n\n" + "\n".join(lines) + "\n" if lines else ""
