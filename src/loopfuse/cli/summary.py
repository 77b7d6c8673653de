"""Totals over a scan, shared by every report format, and the numbers as people read them.

>>> summary = Summary.of([], [], ("breaker", "detector", "dedup"))
>>> summary.files, summary.found
(0, False)
>>> tokens_text(4_612_345, estimated=True), tokens_text(1_234, estimated=False)
('~4.6M tokens', '1,234 tokens')
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from loopfuse.cli.config import GUARDS
from loopfuse.cli.readers import InputError, NotUnderstood
from loopfuse.cli.results import FileResult, Finding
from loopfuse.cli.tokens import Price
from loopfuse.detector.signals import signal_of

__all__ = [
    "GUARD_VERBS",
    "Summary",
    "finding_title",
    "money_text",
    "not_spent_parts",
    "plural",
    "spans_text",
    "tokens_text",
]

GUARD_VERBS: Final = {
    "breaker": "refused",
    "detector": "refused",
    "dedup": "answered from the cache",
}
"""What each guard does to a request it acts on."""

_MODE_TEXTS: Final = {
    "refuse": "refuse (every loop refused)",
    "warn": "warn (a loop noted the first time, refused when it goes on)",
    "note": "note (every loop noted, none refused)",
}


@dataclass(frozen=True, slots=True)
class Summary:
    """Totals over a scan: the last part of the text report, JSON's ``summary``."""

    guards: tuple[str, ...]
    files: int
    clean: int
    flagged: int
    errors: int
    requests: int
    unchecked: int
    acted: dict[str, int]
    findings: dict[str, int]
    """Findings each guard acted in."""
    kinds: dict[str, dict[str, int]]
    """Per guard, findings by kind."""
    spared_requests: int
    spared_tool_calls: int
    spared_tokens_in: int
    spared_tokens_out: int
    tokens_estimated: bool
    outcomes: dict[str, list[int]]
    """For files that record an ``outcome`` (trajectories): outcome -> [flagged, files]."""
    price: Price | None = None
    mode: str = "refuse"
    """The guard's mode replayed (``--mode``)."""
    noted: dict[str, int] | None = None
    """Requests each guard let go on with a note for the model (``acted``: stopped)."""
    not_understood: int = 0
    """Of the ``errors``, the files read but not understood (a format no reader knows;
    :class:`~loopfuse.cli.readers.NotUnderstood`): never counted clean."""
    unjudged_calls: int = 0
    """The tool calls those files seem to hold, none of them judged."""

    @classmethod
    def of(
        cls,
        results: Sequence[FileResult],
        errors: Sequence[InputError],
        guards: Sequence[str],
        price: Price | None = None,
        mode: str = "refuse",
    ) -> Summary:
        """Add up ``results``; ``errors`` are the files that could not be read; ``mode``
        is the guard's mode they were replayed in."""
        acted: Counter[str] = Counter()
        noted: Counter[str] = Counter()
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
            noted.update(result.noted)
            for finding in result.findings:
                # In span order, not a set's: kinds that tie are listed as first met,
                # the same on every run (a set's order moves with PYTHONHASHSEED).
                pairs = dict.fromkeys((span.guard, span.kind) for span in finding.spans)
                found.update({guard for guard, _ in pairs})
                for guard, kind in pairs:
                    kinds[guard][kind] += 1
        return cls(
            guards=tuple(guards),
            files=len(results) + len(errors),
            clean=sum(result.clean for result in results),
            flagged=sum(not result.clean for result in results),
            errors=len(errors),
            requests=sum(result.requests for result in results),
            unchecked=sum(result.unchecked for result in results),
            acted={guard: acted[guard] for guard in GUARDS},
            findings={guard: found[guard] for guard in GUARDS},
            kinds={guard: dict(kinds[guard].most_common()) for guard in GUARDS},
            spared_requests=sum(result.spared_requests for result in results),
            spared_tool_calls=sum(result.spared_tool_calls for result in results),
            spared_tokens_in=sum(result.spared_tokens_in for result in results),
            spared_tokens_out=sum(result.spared_tokens_out for result in results),
            tokens_estimated=any(
                result.tokens_estimated for result in results if result.spared_requests
            ),
            outcomes=dict(sorted(outcomes.items())),
            price=price,
            mode=mode,
            noted={guard: noted[guard] for guard in GUARDS},
            not_understood=sum(isinstance(error, NotUnderstood) for error in errors),
            unjudged_calls=sum(error.calls for error in errors if isinstance(error, NotUnderstood)),
        )

    def unread_text(self) -> str:
        """The files not scanned, as the summary words them: ``2 unreadable, 3 not
        understood (format unknown; 120 tool calls not judged)``; ``""`` when none."""
        parts = []
        unreadable = self.errors - self.not_understood
        if unreadable:
            parts.append(f"{unreadable:,} unreadable")
        if self.not_understood:
            text = f"{self.not_understood:,} not understood (format unknown"
            if self.unjudged_calls:
                text += f"; {plural(self.unjudged_calls, 'tool call')} not judged"
            parts.append(text + ")")
        return ", ".join(parts)

    @property
    def found(self) -> bool:
        """Whether the guard acted anywhere."""
        return self.flagged > 0

    @property
    def cost(self) -> float | None:
        """Dollars not spent, when a price was given."""
        if self.price is None:
            return None
        return self.price.cost(self.spared_tokens_in, self.spared_tokens_out)

    def rows(self, files: str, requests: str, quote: Callable[[str], str]) -> list[tuple[str, str]]:
        """The summary as (label, text) rows, the ``files`` and ``requests`` texts as
        the report words them: files, outcomes, requests, each guard, what was not spent.
        ``quote`` writes text a run wrote (an outcome) in the report's format
        (:mod:`loopfuse.cli.escape`)."""
        rows = [("files", files)]
        if self.outcomes:
            flagged = ", ".join(
                f"{n} of {total} {quote(o)}" for o, (n, total) in self.outcomes.items()
            )
            rows.append(("outcomes", f"flagged {flagged}"))
        rows.append(("requests", requests))
        rows.append(("mode", self.mode_text()))
        for guard in GUARDS:
            rows.append((guard, self.guard_text(guard)))
        if self.spared_requests:
            rows.append(("not spent", self.not_spent()))
        return rows

    def mode_text(self) -> str:
        """The mode replayed, as the report names it."""
        return _MODE_TEXTS.get(self.mode, self.mode)

    def guard_text(self, guard: str) -> str:
        """What ``guard`` did over the scan: ``2 requests refused, 1 noted in 1 finding
        (1 no_progress)``; ``off`` when it did not run. Notes and stops are counted apart:
        a noted request was sent (with a note for the model), a stopped one was not."""
        if guard not in self.guards:
            return "off"
        text = f"{plural(self.acted[guard], 'request')} {GUARD_VERBS[guard]}"
        noted = (self.noted or {}).get(guard, 0)
        if noted:
            text += f", {noted:,} noted"
        if self.findings[guard]:
            kinds = ", ".join(f"{n} {kind}" for kind, n in self.kinds[guard].items())
            text += f" in {plural(self.findings[guard], 'finding')} ({kinds})"
        return text

    def not_spent(self) -> str:
        """The "not spent" line: requests, tool calls, tokens, money."""
        text = (
            f"{plural(self.spared_requests, 'request')}, "
            f"{plural(self.spared_tool_calls, 'tool call')}, "
            f"{tokens_text(self.spared_tokens_in + self.spared_tokens_out, self.tokens_estimated)}"
        )
        if self.price is not None:
            text += f", {money_text(self.cost or 0.0)} at {self.price}"
        return text


def plural(n: int, word: str) -> str:
    """``1 request``, ``2 requests``, with thousands separators."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def not_spent_parts(finding: Finding, estimated: bool) -> list[str]:
    """What a finding did not spend, each report's way: its tool calls (when it made
    any) and its tokens (``estimated``: see :func:`tokens_text`)."""
    parts = [plural(finding.tool_calls, "tool call")] if finding.tool_calls else []
    parts.append(tokens_text(finding.tokens, estimated))
    return parts


def tokens_text(tokens: int, estimated: bool) -> str:
    """Tokens as people read them; an estimate is rounded and marked ``~``."""
    if not estimated:
        return plural(tokens, "token")
    if tokens >= 1_000_000:
        return f"~{tokens / 1_000_000:.1f}M tokens"
    if tokens >= 10_000:
        return f"~{tokens / 1000:.0f}k tokens"
    return f"~{tokens:,} tokens"


def money_text(dollars: float) -> str:
    """``$12.34``; cents below a dollar."""
    return f"${dollars:,.2f}" if dollars >= 0.01 or dollars == 0 else f"${dollars:.4f}"


def spans_text(finding: Finding, shown: int | None = None) -> str:
    """What the guard did, stretch by stretch: ``refused turns 8-10``, or ``answered
    from the cache lines 3-7 (4), refused lines 9-10``; kinds named when they change."""
    spans = finding.spans if shown is None else finding.spans[:shown]
    named = len({span.kind for span in finding.spans}) > 1
    parts: list[str] = []
    verb = None
    for span in spans:
        if span.first == span.last:
            where = f"{finding.unit} {span.first:,}"
        else:
            where = f"{finding.unit}s {span.first:,}-{span.last:,}"
            if span.requests != span.last - span.first + 1:
                where += f" ({span.requests:,})"
        if named and span.guard == "detector":
            where += f" ({span.kind})"
        this = "noted" if span.noted else GUARD_VERBS.get(span.guard, "acted on")
        parts.append(where if this == verb else f"{this} {where}")
        verb = this
    if len(spans) < len(finding.spans):
        parts.append(f"{len(finding.spans) - len(spans)} more stretches")
    return ", ".join(parts)


def finding_title(finding: Finding) -> str:
    """What the finding is, in a few words: ``repeat: 4 in a row`` or ``the same
    request, sent 3 more times``."""
    kinds = [span.kind for span in finding.spans]
    head = " then ".join(dict.fromkeys(kinds))
    if finding.guard == "detector":
        signal = signal_of(finding.kind)
        unit = "in a row" if signal is None else signal.unit
        return f"{head}: {finding.count} {unit}" + (
            f", up to {finding.max_count}" if finding.max_count > finding.count else ""
        )
    return f"the same request, sent {plural(finding.requests, 'more time')}"
