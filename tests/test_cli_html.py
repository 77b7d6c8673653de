"""`loopfuse scan --format html`: one self-contained page, well formed, hostile text escaped,
and it renders in a real browser without errors (skipped, saying so, without chromium)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import unicodedata
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from hostile_runs import hostile_folder
from loopfuse.cli.main import main

VOID = {"meta", "link", "input", "br", "img", "hr", "wbr", "source", "area", "col", "base"}
HIDDEN_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}  # controls, format, surrogates, separators
HOSTILE = "<script>alert(1)</script>\"'</style>]]>\x00\ud800&amp;<!--"


class Tree(HTMLParser):
    """Checks that every element is closed, in order; collects tags, text and attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: list[str] = []
        self.text: list[str] = []
        self.attributes: list[str] = []
        self.errors: list[str] = []
        self.in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes += [value or "" for _, value in attrs]
        if tag not in VOID:
            self.stack.append(tag)
        self.in_script = tag in ("script", "style")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes += [value or "" for _, value in attrs]

    def handle_endtag(self, tag: str) -> None:
        self.in_script = False
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        if not self.in_script:
            self.text.append(data)


def parse(page: str) -> Tree:
    tree = Tree()
    tree.feed(page)
    tree.close()
    assert tree.errors == []
    assert tree.stack == []
    return tree


def looping(laps: int, name: str = "bash", answer: str = "error: no such file") -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix it"}]
    for i in range(laps):
        arguments = json.dumps({"command": f"cat missing.txt {name}"})
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": answer})
    return {"outcome": "failed", "model": "m", "messages": messages}


def healthy() -> dict[str, Any]:
    return {"outcome": "resolved", "model": "m", "messages": [{"role": "user", "content": "hi"}]}


def render(folder: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["scan", str(folder), "--format", "html", "--mode", "refuse", *args]) == 1
    page = capsys.readouterr().out
    page.encode("utf-8")  # no lone surrogate left: the page is valid UTF-8
    return page


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "a-loop.json").write_text(json.dumps(looping(9)), encoding="utf-8")
    (folder / "b-fine.json").write_text(json.dumps(healthy()), encoding="utf-8")
    (folder / "c-loop.json").write_text(json.dumps(looping(30, "read_file")), encoding="utf-8")
    return folder


def test_the_page_is_well_formed_and_self_contained(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = render(runs, capsys)
    tree = parse(page)
    assert page.startswith("<!DOCTYPE html>")
    assert tree.tags.count("script") == 1
    assert tree.tags.count("style") == 1
    assert "http://" not in page
    assert "https://" not in page  # nothing to fetch
    assert "Content-Security-Policy" in page
    assert "default-src 'none'" in page
    text = " ".join(tree.text)
    assert "3 scanned: 1 clean, 2 flagged" in text
    assert "Flagged runs (2)" in text
    # One timeline per flagged run; a row per run in the table.
    assert tree.tags.count("svg") == 2
    assert page.count('<tr class="flagged" data-flagged="1">') == 2
    assert page.count('<tr data-flagged="0">') == 1


def test_a_timeline_has_a_mark_per_call_the_loop_the_act_and_what_was_not_spent(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = render(runs, capsys, "--format", "json")
    report = json.loads(page)
    finding = report["files"][0]["findings"][0]
    page = render(runs, capsys)
    svg = page[page.index('<article class="run" id="run-1">') :]
    svg = svg[svg.index("<svg") : svg.index("</svg>")]
    assert svg.count("<title>turn ") == 9  # one mark per tool call
    assert svg.count("(not spent)</title>") == finding["requests"]
    assert svg.count('<line class="act"') == 1
    assert f"the guard acts here, turn {finding['first']}" in svg
    assert '<rect class="loop"' in svg
    assert '<rect class="unspent"' in svg
    marks = [part for part in svg.split("<rect ") if "<title>turn " in part]
    classes = {part.split('"')[1] for part in marks}
    assert len(classes) == 1
    assert classes < {f"t{i}" for i in range(10)}  # one tool, one colour


def test_hostile_text_is_escaped_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    name = 'evil<script>alert(1)<"x">.json'
    data = looping(9, name=HOSTILE, answer=HOSTILE)
    (folder / name).write_text(json.dumps(data), encoding="utf-8")
    page = render(folder, capsys)
    tree = parse(page)
    # Only the page's own elements: nothing the run wrote became a tag or a script.
    assert tree.tags.count("script") == 1
    assert page.count("</style>") == 1
    assert page.count("<script>") == 1
    assert "\x00" not in page
    assert set(tree.tags) <= {
        "html", "head", "meta", "link", "title", "style", "body", "h1", "h2", "h3", "p",
        "table", "thead", "tbody", "tr", "th", "td", "article", "code", "svg", "rect",
        "text", "line", "ul", "ol", "li", "i", "span", "br", "q", "input",
        "label", "a", "script",
    }  # fmt: skip
    # ... and it is all there, as text, with NUL and the lone surrogate replaced.
    shown = HOSTILE.replace("\x00", "\ufffd").replace("\ud800", "\ufffd")
    text = "".join(tree.text)
    assert shown in text  # the answer
    assert 'evil<script>alert(1)<"x">.json' in text  # the file name
    assert any(shown in value for value in tree.attributes + tree.text)


def test_a_long_run_is_drawn_with_a_bounded_number_of_marks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from loopfuse.cli.timeline import MAX_MARKS

    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "long.json").write_text(json.dumps(looping(MAX_MARKS + 500)), encoding="utf-8")
    page = render(folder, capsys)
    parse(page)
    assert page.count("<title>turn ") <= MAX_MARKS
    assert page.count("<title>turn ") > MAX_MARKS // 2


# --- in a real browser ------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# CI sets LOOPFUSE_REQUIRE_CHROMIUM=1: there a missing browser is a failure, not a skip.
REQUIRED = os.environ.get("LOOPFUSE_REQUIRE_CHROMIUM") == "1"
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None and not REQUIRED,
    reason="chromium is not installed (apt-get install -y chromium)",
)


def browse(page: Path, profile: Path, fragment: str = "") -> tuple[str, str]:
    """The DOM after the page's script ran, and the browser's log."""
    assert CHROMIUM is not None, "LOOPFUSE_REQUIRE_CHROMIUM=1 but chromium is not installed"
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            page.as_uri() + fragment,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, done.stderr


@needs_chromium
def test_the_page_renders_in_a_browser_without_errors(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (runs / "hostile.json").write_text(json.dumps(looping(9, HOSTILE, HOSTILE)), encoding="utf-8")
    page = tmp_path / "report.html"
    page.write_text(render(runs, capsys), encoding="utf-8")
    dom, log = browse(page, tmp_path / "profile")
    problems = [line for line in log.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert problems == []
    assert 'data-ready="1"' in dom  # the script ran to its end
    assert dom.count("<tr ") == 4 + 0  # every run has its row
    assert "4 of 4 runs shown" in dom
    assert "alert(1)" in dom
    assert "<script>alert" not in dom


@needs_chromium
def test_hostile_text_in_every_field_runs_nothing_in_a_browser(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Markup that would retitle the page, bidi overrides, zero-width characters, ESC,
    # C1 and NUL in every field a run controls (see tests/hostile_runs.py).
    page = tmp_path / "report.html"
    page.write_text(render(hostile_folder(tmp_path / "runs"), capsys), encoding="utf-8")
    dom, log = browse(page, tmp_path / "profile")
    problems = [line for line in log.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert problems == []
    assert 'data-ready="1"' in dom  # the page's own script ran to its end
    title = dom[dom.index("<title>") + 7 : dom.index("</title>")]
    assert title.startswith("loopfuse scan: ")  # no script of the run's ran
    assert "<img" not in dom  # the page has none: the run's stayed text
    assert dom.count("<script") == 1
    assert "document.title='hacked'" in dom  # ... shown as text
    hidden = {c for c in dom if c != "\n" and unicodedata.category(c) in HIDDEN_CATEGORIES}
    assert hidden == set()  # no bidi override, zero-width or control character in the page


@needs_chromium
def test_the_table_filters_and_sorts_from_the_address(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "report.html"
    page.write_text(render(runs, capsys), encoding="utf-8")
    dom, _ = browse(page, tmp_path / "profile", "#flagged=1&sort=requests:desc")
    assert "2 of 3 runs shown" in dom
    body = dom[dom.index('<table id="runs">') :]
    rows = body[body.index("<tbody>") : body.index("</tbody>")].split("<tr")[1:]
    hidden = [row for row in rows if " hidden" in row.split(">")[0]]
    assert len(hidden) == 1
    assert "b-fine.json" in hidden[0]
    order = [row for row in rows if "-loop.json" in row]
    assert "c-loop.json" in order[0]
    assert "a-loop.json" in order[1]  # 30 requests, then 9
    assert 'aria-sort="descending"' in body
    dom, _ = browse(page, tmp_path / "profile", "#filter=a-loop")
    assert "1 of 3 runs shown" in dom


def test_a_retry_storm_timeline_shows_the_requests_since_the_first_send(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo", "--format", "html"]) == 0
    page = capsys.readouterr().out
    parse(page)
    article = page[page.index("retry_storm.jsonl</code>") :]
    svg = article[article.index("<svg") : article.index("</svg>")]
    assert svg.count("<title>line ") == 10  # one mark per request of the log
    # 4 answered from the cache, 1 refused (warn: the one before it went out with a note)
    assert svg.count("(not spent)</title>") == 5
    assert '<rect class="loop"' in svg  # since the request was first sent, in its session
    assert "the guard acts here, line 3" in svg


def _rows(dom: str) -> list[str]:
    body = dom[dom.index('<table id="runs">') :]
    return body[body.index("<tbody>") : body.index("</tbody>")].split("<tr")[1:]


@needs_chromium
def test_the_table_lists_flagged_runs_first_and_what_was_not_spent(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "report.html"
    page.write_text(render(runs, capsys), encoding="utf-8")
    dom, _ = browse(page, tmp_path / "profile")
    # In the order of the timelines above, the flagged ones first, then the clean one.
    names = [re.findall(r"[a-z]-(?:loop|fine)\.json", row)[0] for row in _rows(dom)]
    assert names == ["a-loop.json", "c-loop.json", "b-fine.json"]
    heads = re.findall(r"<th [^>]*>([^<]*)</th>", dom[dom.index('<table id="runs">') :])
    assert heads[-2:] == ["requests not spent", "tokens not spent"]
    dom, _ = browse(page, tmp_path / "profile", "#sort=unsent:desc")
    first = _rows(dom)[0]
    assert "c-loop.json" in first  # 30 requests, the most refused
    assert 'aria-sort="descending"' in dom


def test_runs_are_named_in_the_scanned_folder(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = render(runs, capsys)
    text = " ".join(parse(page).text)
    assert f"folder {runs}" in text  # said once, in the summary
    assert page.count(f">{runs}") == 1
    assert f'<h3><code title="{runs / "a-loop.json"}">a-loop.json</code></h3>' in page
