"""Every field a run controls is escaped in every report format.

One folder holds a payload of hostile text (HTML and a script, table pipes, backticks,
newlines, NUL, ESC sequences, C1 controls, bidi overrides, zero-width characters, a
lone surrogate) in every field a run controls: file names, the trajectory's outcome,
exit reason, agent, model and task, tool names, commands, answers, what the user said,
session ids, keys of a bad log line and of a file that is not a request. Each field's
payload starts with a marker (``MoutcomeM``) so the test knows the field was shown, not
dropped. Then, for each format (text, Markdown, HTML, JSON):

- no character a reader cannot see or that acts on a terminal reaches the output:
  Unicode's control, format, surrogate and line/paragraph separator categories (an
  oracle independent of the code: ``unicodedata``), the report's own newlines aside;
- the format's structure holds (Markdown rendered by GitHub's own renderer without a
  sanitiser; HTML parsed; JSON parsed and every field read back exactly);
- every field the format shows is there, marked.
"""

from __future__ import annotations

import json
import re
import unicodedata
from html.parser import HTMLParser
from pathlib import Path

import pytest

from hostile_runs import file_name, hostile, hostile_folder, trajectory
from loopfuse.cli.escape import UNSAFE
from loopfuse.cli.main import main


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hostile_folder(tmp_path_factory.mktemp("hostile") / "runs")


SHOWN = {
    # Fields each format shows (the text report's errors and bad lines are on stderr;
    # it clips a line at 80 columns: a file name keeps its end, the command is past the
    # long tool name).
    "text": {"name", "outcome", "exitreason", "tool", "answer", "user", "sessiona",
             "sessionb", "badkey", "errname", "errkey"},
    "markdown": {"name", "outcome", "exitreason", "tool", "command", "answer", "user",
                 "badkey", "errname", "errkey"},
    "html": {"name", "outcome", "exitreason", "tool", "command", "answer", "user", "sessiona",
             "sessionb", "badkey", "errname", "errkey"},
    "json": {"name", "outcome", "exitreason", "agent", "model", "task", "tool", "command",
             "answer", "user", "sessiona", "sessionb", "badkey", "errname", "errkey"},
}  # fmt: skip


def report(folder: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    code = main(["scan", str(folder), "--format", fmt, "--verbose", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 1, captured.err
    assert "Traceback" not in captured.out + captured.err
    assert "internal error" not in captured.err
    return captured.out, captured.err


def unsafe_characters(text: str) -> list[str]:
    """What a reader cannot see or a terminal acts on, by Unicode's own categories."""
    return sorted(
        {
            f"U+{ord(c):04X}"
            for c in text
            if c != "\n" and unicodedata.category(c) in {"Cc", "Cf", "Cs", "Zl", "Zp"}
        }
    )


def assert_every_field_shown(fmt: str, text: str) -> None:
    missing = {field for field in SHOWN[fmt] if f"M{field}M" not in text}
    assert missing == set(), f"{fmt}: fields not shown: {sorted(missing)}"


@pytest.mark.parametrize("fmt", ["text", "markdown", "html", "json"])
def test_no_hidden_or_control_character_reaches_any_report(
    folder: Path, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out, err = report(folder, fmt, capsys)
    assert unsafe_characters(out) == []
    assert unsafe_characters(err) == []
    assert_every_field_shown(fmt, out + err)


def test_text_lines_cannot_be_forged(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, err = report(folder, "text", capsys)
    # Run text shown at the start of a line (a file name) cannot start another one;
    # wrapped run text continues indented.
    for line in (out + err).splitlines():
        assert not line.startswith(("forged-line", "# heading")), line
    assert "\x1b" not in out + err  # no colour here: an escape would be the run's
    assert "gnp.exe" in out  # the bidi override is gone, the text it hid is not


class Elements(HTMLParser):
    """The tags and attributes of rendered HTML, and the text inside ``<code>``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attributes: set[str] = set()
        self.code: list[str] = []
        self.cells: list[int] = []
        self._in_code = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes |= {name for name, _ in attrs}
        if tag == "tr":
            self.cells.append(0)
        if tag in ("td", "th"):
            self.cells[-1] += 1
        self._in_code += tag == "code"

    def handle_endtag(self, tag: str) -> None:
        self._in_code -= tag == "code"

    def handle_data(self, data: str) -> None:
        if self._in_code:
            self.code.append(data)


def test_markdown_rendered_without_a_sanitiser_runs_nothing(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cmarkgfm = pytest.importorskip("cmarkgfm", reason="the Markdown renderer is a test extra")
    from cmarkgfm.cmark import Options

    out, _ = report(folder, "markdown", capsys)
    # GitHub's renderer with raw HTML allowed: what a viewer without a sanitiser shows.
    page = cmarkgfm.github_flavored_markdown_to_html(out, options=Options.CMARK_OPT_UNSAFE)
    elements = Elements()
    elements.feed(page)
    elements.close()
    assert set(elements.tags) <= {
        "h1", "h2", "h3", "p", "table", "thead", "tbody", "tr", "th", "td", "code", "br",
        "ul", "li", "em",
    }  # fmt: skip
    assert elements.attributes <= {"align"}  # no onerror, no src, no href
    assert elements.tags.count("h1") == 1  # no heading forged by a newline
    widths = set(elements.cells)
    assert widths <= {2, 4}, widths  # the summary's 2 columns, the findings' 4: no cell split
    shown = "".join(elements.code)
    assert "<script>document.title='hacked'</script>" in shown  # as text
    assert_every_field_shown("markdown", shown)


def test_markdown_outcomes_row_is_code(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = report(folder, "markdown", capsys)
    row = next(line for line in out.splitlines() if line.startswith("| outcomes |"))
    outside = re.sub(r"`[^`]*`", "", row)
    assert "MoutcomeM" not in outside
    assert "<" not in outside


def test_json_keeps_every_field_exactly(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = report(folder, "json", capsys)
    document = json.loads(out)
    run = next(f for f in document["files"] if f["kind"] == "trajectory")
    for key, field in [
        ("outcome", "outcome"),
        ("exit_reason", "exitreason"),
        ("agent", "agent"),
        ("model", "model"),
        ("task", "task"),
    ]:
        assert run["meta"][key] == hostile(field)  # the data, exactly: escaped, not replaced
    assert run["name"].endswith(file_name("name").decode("utf-8", "surrogateescape"))
    log = next(f for f in document["files"] if f["kind"] == "log")
    assert {finding["session"] for finding in log["findings"]} == {
        hostile("sessiona"),
        hostile("sessionb"),
    }


def test_the_escaping_covers_every_hidden_character_of_this_python() -> None:
    # The pattern is written out (fast, no table built at import); this checks it
    # against the Unicode database of the running Python.
    missed = [
        f"U+{point:04X}"
        for point in range(0x110000)
        if unicodedata.category(chr(point)) in {"Cc", "Cf", "Cs", "Zl", "Zp"}
        and not UNSAFE.fullmatch(chr(point))
    ]
    assert missed == []


def test_a_line_break_in_a_short_name_cannot_start_a_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    data = trajectory()
    data["outcome"] = "failed\nforged-outcome"
    (runs / "run\nforged-line.json").write_text(json.dumps(data), encoding="utf-8")
    (runs / "clean.json").write_text(json.dumps({"messages": [], "model": "m"}))
    assert main(["scan", str(runs), "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "run forged-line.json" in out
    for line in out.splitlines():
        assert not line.lstrip().startswith("forged"), line
