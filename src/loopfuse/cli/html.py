"""The HTML report (``--format html``): one self-contained file to look at.

The summary, one timeline per flagged run (:mod:`loopfuse.cli.timeline`) with its
findings, and a table of every run, the flagged ones first, with what the guard did not
spend of each (requests and tokens), that sorts (click a heading) and filters (type, or
tick "flagged only"). Files are named relative to the scanned folder, which the summary
gives (:mod:`~loopfuse.cli.names`); the whole path shows on hovering a name. No network:
inline CSS and SVG, a few lines of plain JavaScript, and a Content-Security-Policy that
forbids loading anything. Every text that comes from a run (file names, outcomes, tool
names and arguments, answers, messages, session ids, errors) is escaped
(:func:`~loopfuse.cli.escape.esc`: hidden and control characters replaced, bidi
overrides included); none of it is ever put inside the script or the style sheet. The
page reads ``#filter=TEXT&flagged=1&sort=KEY:desc`` from its address (the keys: file,
kind, outcome, requests, findings, kinds, unsent, tokens), so a link can open it
filtered and sorted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import loopfuse
from loopfuse.cli.escape import esc
from loopfuse.cli.names import shown_name
from loopfuse.cli.readers import InputError
from loopfuse.cli.report import run_header
from loopfuse.cli.results import FileResult, Finding
from loopfuse.cli.summary import (
    Summary,
    finding_title,
    not_spent_parts,
    plural,
    spans_text,
)
from loopfuse.cli.timeline import Palette, timeline_svg

__all__ = ["render_html"]

_STYLE: Final = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;
max-width:1100px;padding:0 16px 48px;color:#1d232a;background:#fff}
h1{font-size:22px;margin:20px 0 4px}h2{font-size:18px;margin:28px 0 8px;
border-bottom:1px solid #d6dbe0}h3{font-size:15px;margin:0 0 2px;word-break:break-all}
code{font:12px/1.4 ui-monospace,Menlo,Consolas,monospace;word-break:break-all}
.lead{color:#56606b;margin:0 0 12px}
table{border-collapse:collapse}td,th{padding:3px 8px;text-align:left;vertical-align:top}
.summary th{font-weight:600;color:#56606b}
.run{border:1px solid #d6dbe0;border-radius:6px;padding:12px;margin:12px 0}
.meta{color:#56606b;margin:0 0 8px}
.timeline{display:block;max-width:100%;height:auto;margin:4px 0}
.timeline .row{font:10px ui-monospace,monospace;fill:#56606b}
.tn{fill:#c8ced4}.to{fill:#8d969e}
.loop{fill:#fde68a}.unspent{fill:#5a6570;fill-opacity:.45}
.act{stroke:#c81e1e;stroke-width:2}
.legend{list-style:none;padding:0;margin:4px 0 8px;display:flex;flex-wrap:wrap;gap:4px 14px;
font-size:12px;color:#38414a}.legend i{display:inline-block;width:10px;height:10px;
margin-right:4px;vertical-align:-1px}.kn{background:#c8ced4}.ko{background:#8d969e}
.kl{background:#fde68a}.ku{background:#8a939b}.ka{background:#c81e1e}
.findings{margin:6px 0 0;padding-left:20px}.findings li{margin:6px 0}
.kind{font-weight:600;color:#b42318}.kind.dedup{color:#a15c07}
#runs{width:100%}#runs th{cursor:pointer;user-select:none;border-bottom:1px solid #aab2ba;
white-space:nowrap}#runs th[aria-sort=ascending]::after{content:" \\25B2"}
#runs th[aria-sort=descending]::after{content:" \\25BC"}
#runs td{border-bottom:1px solid #eef1f3}#runs td.num{text-align:right}
#runs tr.flagged td:first-child{border-left:3px solid #c81e1e}
.tools{margin:8px 0}input[type=search]{font:inherit;padding:3px 6px;width:280px}
"""

_SCRIPT: Final = """
(function () {
  var table = document.getElementById("runs");
  var body = table.tBodies[0];
  var filter = document.getElementById("filter");
  var only = document.getElementById("flagged-only");
  var shown = document.getElementById("shown");
  function apply() {
    var text = filter.value.toLowerCase(), count = 0;
    for (var i = 0; i < body.rows.length; i++) {
      var row = body.rows[i];
      var hide = (text && row.textContent.toLowerCase().indexOf(text) < 0) ||
        (only.checked && row.getAttribute("data-flagged") !== "1");
      row.hidden = hide;
      if (!hide) { count++; }
    }
    shown.textContent = count + " of " + body.rows.length + " runs shown";
  }
  function sort(th, descending) {
    var index = th.cellIndex, numeric = th.getAttribute("data-type") === "num";
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[index].getAttribute("data-v"), y = b.cells[index].getAttribute("data-v");
      var order = numeric ? Number(x) - Number(y) : x.localeCompare(y);
      return descending ? -order : order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    var heads = table.tHead.rows[0].cells;
    for (var i = 0; i < heads.length; i++) { heads[i].removeAttribute("aria-sort"); }
    th.setAttribute("aria-sort", descending ? "descending" : "ascending");
  }
  table.tHead.addEventListener("click", function (event) {
    var th = event.target.closest("th");
    if (th) { sort(th, th.getAttribute("aria-sort") === "ascending"); }
  });
  filter.addEventListener("input", apply);
  only.addEventListener("change", apply);
  var wanted = new URLSearchParams(location.hash.slice(1));
  if (wanted.get("filter")) { filter.value = wanted.get("filter"); }
  if (wanted.get("flagged") === "1") { only.checked = true; }
  var order = (wanted.get("sort") || "").split(":");
  var heads = table.tHead.rows[0].cells;
  for (var i = 0; i < heads.length; i++) {
    if (heads[i].getAttribute("data-key") === order[0]) { sort(heads[i], order[1] === "desc"); }
  }
  apply();
  document.documentElement.setAttribute("data-ready", "1");
})();
"""

_NUM: Final = ' class="num"'
_POLICY: Final = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
)
_COLUMNS: Final = (
    # (key, for #sort=KEY; heading; what the heading says on hovering; text or number)
    ("file", "file", "the file, in the scanned folder", "text"),
    ("kind", "kind", "what the file holds", "text"),
    ("outcome", "outcome", "the run's outcome, as the file records it", "text"),
    ("requests", "requests", "requests replayed", "num"),
    ("findings", "findings", "loops found", "num"),
    ("kinds", "kinds", "the kinds of loop found", "text"),
    (
        "unsent",
        "requests not spent",
        "requests the guard refused or answered from the cache: never sent to the model",
        "num",
    ),
    ("tokens", "tokens not spent", "the tokens of those requests and their answers", "num"),
)


def render_html(
    results: Sequence[FileResult],
    errors: Sequence[InputError],
    summary: Summary,
    problems: Sequence[str] = (),
    folder: str | None = None,
) -> str:
    """The whole page; ``folder`` is the scanned folder, the files' names are relative
    to it."""
    flagged = [result for result in results if not result.clean]
    palette = Palette(flagged)
    title = f"loopfuse scan: {summary.flagged:,} flagged of {summary.files:,} runs"
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_POLICY}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<link rel="icon" href="data:,">',
        f"<title>{esc(title)}</title>",
        f"<style>{_STYLE}{palette.css()}</style>",
        "</head>",
        "<body>",
        "<h1>loopfuse scan</h1>",
        f'<p class="lead">{esc(title)}; loopfuse {esc(loopfuse.__version__)}.</p>',
        *_summary(summary, folder),
    ]
    if flagged:
        out.append(f'<h2 id="flagged">Flagged runs ({len(flagged):,})</h2>')
        for number, result in enumerate(flagged, start=1):
            out += _run(number, result, palette, folder)
    out += _table(results, flagged, folder)
    out += _errors(errors, problems, folder)
    out += [f"<script>{_SCRIPT}</script>", "</body>", "</html>"]
    return "\n".join(out) + "\n"


def _summary(summary: Summary, folder: str | None) -> list[str]:
    files = f"{summary.files:,} scanned: {summary.clean:,} clean, {summary.flagged:,} flagged"
    if summary.errors:
        files += f", {summary.unread_text()}"
    # Every row is escaped whole (the run's outcomes in it as well), so they go in as is.
    rows = summary.rows(files, f"{summary.requests:,} replayed", str)
    if folder is not None:
        rows = [("folder", folder), *rows]
    body = "".join(f"<tr><th>{esc(label)}</th><td>{esc(text)}</td></tr>" for label, text in rows)
    return ['<h2 id="summary">Summary</h2>', f'<table class="summary">{body}</table>']


def _legend(result: FileResult, palette: Palette) -> str:
    tools: dict[str, int] = {}
    for step in result.steps:
        for name in step.calls:
            tools[name] = tools.get(name, 0) + 1
    items = [
        f'<li><i class="k{palette.of(name)[1:]}"></i>{esc(name or "(unnamed)")} ({count:,})</li>'
        for name, count in sorted(tools.items(), key=lambda item: -item[1])[:12]
    ]
    items += [
        '<li><i class="kn"></i>no tool call</li>',
        '<li><i class="kl"></i>repeating</li>',
        '<li><i class="ka"></i>the guard acts</li>',
        '<li><i class="ku"></i>not spent</li>',
    ]
    return f'<ul class="legend">{"".join(items)}</ul>'


def _name(result: FileResult, folder: str | None) -> str:
    """The run's file, named in the folder, its whole path on hovering."""
    return f'<code title="{esc(result.name)}">{esc(shown_name(result.name, folder))}</code>'


def _run(number: int, result: FileResult, palette: Palette, folder: str | None) -> list[str]:
    out = [
        f'<article class="run" id="run-{number}">',
        f"<h3>{_name(result, folder)}</h3>",
        f'<p class="meta">{esc(run_header(result))}</p>',
        timeline_svg(result, palette),
        _legend(result, palette),
        '<ol class="findings">',
    ]
    out += [_finding(result, finding) for finding in result.findings]
    out += ["</ol>", "</article>"]
    return out


def _finding(result: FileResult, finding: Finding) -> str:
    where = f"{finding.unit} {finding.first:,}"
    if finding.message_index is not None:
        where += f", message {finding.message_index:,}"
    if result.kind == "log" and result.sessions > 1:
        where += f", session {finding.session}"
    css = "kind dedup" if finding.guard == "dedup" else "kind"
    title = finding_title(finding)
    if finding.loop_from is not None and finding.loop_from < finding.first:
        title += f", repeating since {finding.unit} {finding.loop_from:,}"
    parts = [f'<span class="{css}">{esc(title)}</span> at {esc(where)}']
    parts += [f"<br><code>{esc(call)}</code>" for call in finding.calls]
    if finding.answer:
        parts.append(f"<br>answer: <code>{esc(finding.answer)}</code>")
    spans = spans_text(finding)
    parts.append(f"<br>{esc(spans)}")
    spent = [
        plural(finding.requests, "request"),
        *not_spent_parts(finding, result.tokens_estimated),
    ]
    parts.append(f"<br>not spent: {esc(', '.join(spent))}")
    if finding.message:
        parts.append(f"<br>the model is told: <q>{esc(finding.message)}</q>")
    return f"<li>{''.join(parts)}</li>"


def _table(
    results: Sequence[FileResult], flagged: Sequence[FileResult], folder: str | None
) -> list[str]:
    """Every run, the flagged ones first (in the order of their timelines above)."""
    anchors = {id(result): number for number, result in enumerate(flagged, start=1)}
    heads = "".join(
        f'<th data-key="{key}" data-type="{kind}" title="{esc(help_)}">{esc(heading)}</th>'
        for key, heading, help_, kind in _COLUMNS
    )
    rows = []
    clean = [result for result in results if result.clean]
    for result in [*flagged, *clean]:
        kinds = ", ".join(sorted({s.kind for f in result.findings for s in f.spans}))
        number = anchors.get(id(result))
        name = _name(result, folder)
        link = f'<a href="#run-{number}">{name}</a>' if number else name
        estimated = result.tokens_estimated and result.spared_tokens
        tokens = f"{'~' if estimated else ''}{result.spared_tokens:,}"
        cells = [
            (shown_name(result.name, folder), link),
            (result.kind, esc(result.kind)),
            (result.meta.get("outcome", ""), esc(result.meta.get("outcome", ""))),
            (result.requests, f"{result.requests:,}"),
            (len(result.findings), f"{len(result.findings):,}"),
            (kinds, esc(kinds)),
            (result.spared_requests, f"{result.spared_requests:,}"),
            (result.spared_tokens, tokens),
        ]
        tds = "".join(
            f'<td data-v="{esc(value)}"{_NUM if isinstance(value, int) else ""}>{shown}</td>'
            for value, shown in cells
        )
        css = ' class="flagged" data-flagged="1"' if not result.clean else ' data-flagged="0"'
        rows.append(f"<tr{css}>{tds}</tr>")
    return [
        '<h2 id="all">All runs</h2>',
        '<p class="tools"><input id="filter" type="search" placeholder="Filter runs" '
        'aria-label="Filter runs"> <label><input id="flagged-only" type="checkbox"> '
        'flagged only</label> <span id="shown"></span></p>',
        f'<table id="runs"><thead><tr>{heads}</tr></thead><tbody>{"".join(rows)}</tbody></table>',
    ]


def _errors(errors: Sequence[InputError], problems: Sequence[str], folder: str | None) -> list[str]:
    if not errors and not problems:
        return []
    items = [
        f"<li><code>{esc(shown_name(error.name, folder))}: {esc(error.problem)}</code></li>"
        for error in errors
    ]
    items += [f"<li><code>{esc(problem)}</code></li>" for problem in problems]
    return ['<h2 id="unread">Not read</h2>', f"<ul>{''.join(items)}</ul>"]
