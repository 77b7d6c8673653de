"""``loopfuse demo``: scan the bundled example transcripts and explain what happened.

The examples (package :mod:`loopfuse.examples`) are small and synthetic: a looping
agent, an A -> B cycle, a retry storm in a proxy log, and a healthy run. Each has an
expected result (which guards act, and how); the demo checks it, so it is also a smoke
test of an installation: exit status 0 when every example came out as expected (the
healthy run clean, the others caught), 1 otherwise.
"""

from __future__ import annotations

import importlib.resources
import textwrap
from dataclasses import dataclass
from typing import Final, TextIO

from loopfuse.cli.config import Settings
from loopfuse.cli.decisions import scan_source
from loopfuse.cli.html import render_html
from loopfuse.cli.markdown import render_markdown
from loopfuse.cli.readers import read_bytes
from loopfuse.cli.report import Style, render_json, render_text
from loopfuse.cli.results import FileResult
from loopfuse.cli.summary import Summary, tokens_text

__all__ = ["EXAMPLES", "Example", "results", "run"]


@dataclass(frozen=True, slots=True)
class Example:
    """One bundled file, what it shows, and the (guard, kind) pairs it must trigger."""

    name: str
    story: str
    expected: frozenset[tuple[str, str]]


EXAMPLES: Final = (
    Example(
        "looping_agent.json",
        "An agent re-runs the same failing test and gets the same failure each time.",
        frozenset({("detector", "repeat")}),
    ),
    Example(
        "ab_cycle.json",
        "An Anthropic agent alternates the same edit and the same test run "
        "(A -> B -> A -> B); every lap gets the same answers.",
        frozenset({("detector", "cycle")}),
    ),
    Example(
        "retry_storm.jsonl",
        "A proxy log: a client re-sends one identical request after each timeout, "
        "beside a healthy session.",
        frozenset({("breaker", "repeated_request"), ("dedup", "cache_hit")}),
    ),
    Example(
        "healthy_run.json",
        "A healthy run: it edits, polls a build whose output moves, and passes.",
        frozenset(),
    ),
)


_NAMES: Final = {"breaker": "LoopBreaker", "detector": "LoopDetector", "dedup": "DedupCache"}


def results(settings: Settings | None = None) -> list[FileResult]:
    """Replay every bundled example with ``settings`` (default: ``loopfuse scan``'s, so
    that the demo and a scan of the same files say the same: the one default mode,
    ``warn``, a note first and a refusal when the loop goes on)."""
    settings = settings or Settings()
    package = importlib.resources.files("loopfuse.examples")
    out = []
    for example in EXAMPLES:
        data = package.joinpath(example.name).read_bytes()
        source = read_bytes(example.name, data, log=example.name.endswith(".jsonl"))
        out.append(scan_source(source, settings)[0])
    return out


def _verdict(example: Example, result: FileResult) -> tuple[bool, str]:
    spans = [(span, finding) for finding in result.findings for span in finding.spans]
    found = {(span.guard, span.kind) for span, _ in spans}
    if not example.expected:
        return not found, "no guard acted, as it should." if not found else "a guard acted!"
    acts = []
    for guard in ("breaker", "detector", "dedup"):
        mine = [(span, finding) for span, finding in spans if span.guard == guard]
        if mine:
            first, finding = mine[0]
            acts.append(
                f"{_NAMES[guard]} would have acted on {result.acted[guard]} "
                f"request(s) from {finding.unit} {first.first} ({first.kind})"
            )
    text = "; ".join(acts) or "no guard acted"
    if result.spared_requests:
        tokens = tokens_text(result.spared_tokens, result.tokens_estimated)
        text += f". Not spent: {result.spared_tool_calls} tool call(s), {tokens}."
    return found == example.expected, text


def run(stdout: TextIO, style: Style, output_format: str = "text", width: int = 80) -> int:
    """Run the demo, write the report (and, as text, the explanation); 0 if as expected."""
    settings = Settings()  # loopfuse scan's: the demo says what a scan of its files says
    found = results(settings)
    summary = Summary.of(found, [], settings.guards, mode=settings.guard.mode)
    checks = [_verdict(example, result) for example, result in zip(EXAMPLES, found, strict=True)]
    if output_format == "json":
        stdout.write(render_json(found, [], summary, settings) + "\n")
    elif output_format == "markdown":
        stdout.write(render_markdown(found, [], summary))
    elif output_format == "html":
        stdout.write(render_html(found, [], summary))
    else:
        stdout.write(style.paint("loopfuse demo", "file") + ": four small synthetic agent ")
        stdout.write("runs, replayed turn by turn\nthrough LoopBreaker, LoopDetector ")
        stdout.write("and DedupCache with their default settings.\n\n")
        stdout.write(render_text(found, [], summary, style, width, verbose=True) + "\n\n")
        stdout.write(style.paint("What happened", "file") + "\n")
        for example, (ok, text) in zip(EXAMPLES, checks, strict=True):
            mark = style.paint("ok", "green") if ok else style.paint("UNEXPECTED", "red")
            story = textwrap.wrap(f"{example.name}: {example.story}", width - 7)
            stdout.write(f"  [{mark}] " + "\n       ".join(story) + "\n")
            stdout.write(
                "\n".join(
                    textwrap.wrap(
                        text, width, initial_indent="       -> ", subsequent_indent=" " * 10
                    )
                )
                + "\n"
            )
        stdout.write(
            "\nScan your own agent's traffic: loopfuse scan PATH... "
            "(request bodies, JSON Lines\nlogs, trajectories, folders). "
            "Exit status 1 means a guard would have acted.\n"
        )
    stdout.flush()
    return 0 if all(ok for ok, _ in checks) else 1
