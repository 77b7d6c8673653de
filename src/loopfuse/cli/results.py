"""What a scan found in one file: its requests, the guard's decision on each, findings.

A **finding** is one loop as a person would name it: the requests of one session the
guard acted on, joined while they follow each other (a loop the agent keeps going
round) or when they are the same request again (a retry storm, however spread out).
Within a finding, each run of one guard and one kind is a :class:`Span`: an agent that
first repeats the same error (``error_streak``) and then the same call (``repeat``) is
one finding with two spans; a storm that the cache answers four times before the
breaker refuses the rest is one finding, a cache span and a breaker span.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["FileResult", "Finding", "Span", "Step"]


@dataclass(slots=True)
class Step:
    """One request, as the guard decided it (kept for the timelines of flagged runs).

    ``action`` is ``"forward"``, ``"refuse"``, ``"note"`` (sent with a note for the
    model), ``"hit"`` (answered from the cache) or
    ``"unchecked"`` (a body loopfuse cannot read goes through as it is); ``guard``,
    ``kind`` and ``count`` say who acted and why. ``calls`` are the tool names of the
    turn the request produced (transcripts; for a log, of the request's last turn).
    """

    position: int
    session: str
    action: str
    guard: str | None = None
    kind: str | None = None
    count: int = 0
    calls: tuple[str, ...] = ()


@dataclass(slots=True)
class Span:
    """Consecutive acts of one guard, of one kind, within a finding; ``noted`` when they
    were notes (the requests went on with a note for the model), not stops."""

    guard: str
    kind: str
    first: int
    last: int
    requests: int = 1
    count: int = 0
    max_count: int = 0
    noted: bool = False


@dataclass(slots=True)
class Finding:
    """One loop: see the module docstring.

    Positions are turns (transcripts, counted from 1) or lines (logs), per ``unit``.
    ``count`` is the guard's count at the first act (the detector's repeats or laps,
    the breaker's repeats in its window, the times a cached request had been asked) and
    ``max_count`` the highest over the finding. ``calls`` shows what repeated (the
    repeated tool call; each step of a cycle; the request's last message for the
    breaker and the cache) and ``answer`` the first line of the repeated answer.
    ``message`` is what the model would have been told (``None`` when the cache
    answered). ``message_index`` is where, in the conversation list, the turn the
    first refused request produced starts; ``loop_from`` the turn where the repeated
    stretch began; ``same_as`` where the same request was first sent. What was not
    spent: ``requests`` (every request the guard stopped or answered), their
    ``tool_calls`` and tokens (``tokens_in`` the context they carried, ``tokens_out``
    their answers). ``notes`` counts the requests that went on with a note for the model
    (``--mode warn`` or ``note``): they were sent, so nothing of them was spared.
    """

    session: str
    unit: str
    first: int
    last: int
    guard: str
    kind: str
    count: int
    max_count: int
    calls: list[str]
    answer: str | None
    message: str | None
    message_index: int | None = None
    loop_from: int | None = None
    same_as: int | None = None
    requests: int = 0
    tool_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    notes: int = 0
    spans: list[Span] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        """Tokens not spent: context and answers."""
        return self.tokens_in + self.tokens_out


@dataclass(slots=True)
class FileResult:
    """What the guard would have done to one file's requests.

    ``tokens_estimated`` is true when some token count is an estimate (no ``usage`` in
    the file for it; see :mod:`loopfuse.cli.tokens`). ``unchecked`` counts requests
    the guard could not read (they go through unchecked); ``bad_lines`` the lines of a
    log that are not requests (reported and skipped). ``steps`` is kept for flagged
    files only.
    """

    name: str
    kind: str
    dialect: str
    meta: dict[str, str]
    requests: int = 0
    sessions: int = 0
    tool_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_estimated: bool = False
    unchecked: int = 0
    bad_lines: int = 0
    acted: dict[str, int] = field(default_factory=dict)
    """Requests each guard stopped (refused, or answered from the cache)."""
    noted: dict[str, int] = field(default_factory=dict)
    """Requests each guard let go on with a note for the model."""
    findings: list[Finding] = field(default_factory=list)
    spared_requests: int = 0
    spared_tool_calls: int = 0
    spared_tokens_in: int = 0
    spared_tokens_out: int = 0
    steps: list[Step] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """No guard acted on any request."""
        return not self.findings

    @property
    def spared_tokens(self) -> int:
        """Tokens not spent."""
        return self.spared_tokens_in + self.spared_tokens_out
