"""One file's requests through the guard decision every integration runs, on a fake clock.

Each file gets its own :class:`~loopfuse.Guard` (``guard_of`` in
:mod:`loopfuse.cli.config`: breaker, detector and cache on a fake clock, in the mode
replayed: ``--mode``), so files never influence each other, and every request goes through
:meth:`Guard.prepare <loopfuse.Guard.prepare>` and :meth:`Guard.decide
<loopfuse.Guard.decide>`: ``check`` in two steps, the very decision a deployed guard
makes (which guard speaks first, what a refused request does to the cache, sessions,
cache plans). The cache is then used as
an integration uses it: a planned request whose key is cached is answered from it, any
other forwarded one stores its answer (unless the log says the upstream failed).

**A log** holds the requests as they were sent: each line is one, parsed once (by the
guard). A ``status`` recorded with a line is told to the guard after it
(``Guard.outcome``), so a client's retry of a failed request is forgiven as live.

**A transcript** (a request body, a trajectory) holds one conversation: the request
before each assistant turn is the body with its conversation list cut there
(:func:`loopfuse.intent.conversation`), and a request body is itself the request sent
next. Building and checking each of those bodies would cost the square of the run's
length, so the run is walked once:

- the detector's verdict on each request comes from one
  :class:`~loopfuse.detector.Replay` fed the conversation message by message; at a
  turn boundary it is exactly ``scan`` of that request (the rare boundary inside a run
  of tool results is scanned directly);
- the breaker and the cache only ever compare requests for equality. Within one
  conversation the requests are cuts of one list, and ``intent.conversation`` gives
  each the prefix of the whole intent it holds: its first ``messages`` messages and
  ``system`` system parts. Two cuts have the same intent exactly when those two numbers
  are equal, and every other part of the fingerprint and of the cache key (path,
  sampling parameters, model, the other fields) is the same for all of them; for the
  dialects whose detection reads the messages (Anthropic and Ollama look like OpenAI
  Chat until a block of theirs appears), every turn adds a message, so no two cuts are
  ever equal. So the request is named to the breaker and the cache by
  ``(messages, system)`` instead of its hash (:meth:`PreparedRequest.named
  <loopfuse.PreparedRequest.named>`): the same equalities, hence the same decisions,
  without hashing each prefix. ``tests/test_cli_guard_replay.py`` checks it
  against ``Guard.check`` on every prefix body, in every dialect.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from loopfuse import Guard, GuardDecision, PreparedRequest, RequestContext, intent
from loopfuse.cli.agent_sessions import AgentRun, AgentSession, read_runs, session_calls
from loopfuse.cli.config import Settings, guard_of
from loopfuse.cli.findings import (
    Act,
    Described,
    Grouper,
    describer,
    last_calls,
    turn_names,
    undescribed,
)
from loopfuse.cli.loglines import BadLine, LineProblem, entry_problem, parse_line
from loopfuse.cli.readers import InputError, Log, NotUnderstood, Source, Transcript
from loopfuse.cli.results import FileResult, Step
from loopfuse.cli.seen_calls import seeming_calls
from loopfuse.cli.tokens import estimate_tokens, usage_tokens
from loopfuse.detector import DetectorSettings, LoopDetector, Replay, Verdict
from loopfuse.harness.agent_cli import AGENT_CLIS, agent_cli

__all__ = ["FakeClock", "scan_file", "scan_source"]

_LINE_PROBLEMS_SHOWN: Final = 5

Progress = Callable[[float], None]
"""Told the fraction of the file done so far."""


class FakeClock:
    """A clock the replay moves by hand: ``clock.now = t``; ``clock()`` returns it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass(frozen=True, slots=True)
class _Request:
    """What an act on one request would report, known before the guard decides."""

    position: int
    identity: int
    session: str
    tokens: tuple[int, int]
    describe: Callable[[str, str], Described]
    tool_calls: int = 0
    message_index: int | None = None


class _Run:
    """The state of one file's replay: its guard, clock, cache use and findings."""

    def __init__(self, source: Transcript | Log | AgentRun, settings: Settings) -> None:
        if isinstance(source, AgentRun) and not _notes_heard(source.meta.get("agent")):
            # A CLI that throws notes away (Kimi Code): `loopfuse hook` gives it no early
            # note, its first loop is refused at the detector's count.
            late = dataclasses.replace(settings.guard, note_early=False)
            settings = dataclasses.replace(settings, guard=late)
        self.settings = settings
        self.clock = FakeClock()
        self.guard: Guard = guard_of(settings, self.clock)
        detector = self.guard.detector
        self.detector = detector if isinstance(detector, LoopDetector) else None
        early = self.guard.early_detector  # warn's note_early: the one its notes come from
        self.early = early if isinstance(early, LoopDetector) else None
        unit = "line" if isinstance(source, Log) else "turn"
        self.result = FileResult(source.name, source.kind, "none", dict(source.meta))
        self.grouper = Grouper(self.result, unit)
        self.first_sent: dict[tuple[str, int], int] = {}
        self.asked: dict[tuple[str, int], int] = {}
        self.sessions: set[str] = set()
        self.problems: list[str] = []

    def verdicts(self, parsed: dict[str, Any]) -> tuple[Verdict | None, Verdict | None]:
        """The detector's verdict on a request's intent and, in warn mode, the early
        detector's, as the guard computes them: the early one first, the detector only
        when it found a loop (it finds every loop the detector does)."""
        if self.detector is None:
            return None, None
        if self.early is None:
            return self.detector.scan_intent(parsed), None
        early = self.early.scan_intent(parsed)
        return (early if early.loop is None else self.detector.scan_intent(parsed)), early

    def check(
        self,
        request: _Request,
        prepared: PreparedRequest,
        verdict: Verdict | None,
        stored: bool = True,
        early: Verdict | None = None,
    ) -> GuardDecision:
        """The guard's decision on one request (given the detector's verdict, and the
        early detector's when the replay has it), the cache used as an integration uses
        it (a planned request whose key is cached is answered from it; any other
        forwarded one stores its answer when ``stored``), and the bookkeeping."""
        decision = self.guard.decide(prepared, verdict=verdict, early=early)
        where = (request.session, request.identity)
        first = self.first_sent.setdefault(where, request.position)
        self.asked[where] = self.asked.get(where, 0) + 1
        action: str = decision.action
        same_as = first
        cache, cache_key = self.guard.cache, decision.cache_key
        if action == "forward" and cache is not None and cache_key is not None:
            cached = cache.get(cache_key) if decision.cache == "use" else None
            if cached is not None:
                action = "hit"
                same_as = cached
            elif stored:
                cache.insert(cache_key, request.position)
        self._record(request, action, decision, same_as)
        return decision

    def unchecked(self, request: _Request) -> None:
        """A request the guard cannot read: it goes through as it is."""
        self.result.unchecked += 1
        self._record(request, "unchecked", None, None)

    def _record(
        self, request: _Request, action: str, decision: GuardDecision | None, same_as: int | None
    ) -> None:
        result = self.result
        result.requests += 1
        result.tool_calls += request.tool_calls
        result.tokens_in += request.tokens[0]
        result.tokens_out += request.tokens[1]
        self.sessions.add(request.session)
        step = Step(request.position, request.session, action)
        result.steps.append(step)
        if decision is None or action in ("forward", "unchecked"):
            self.grouper.step(request.session, request.identity, None)
            return
        count = decision.count
        if action == "hit":
            guard, kind = "dedup", "cache_hit"
            count = self.asked[(request.session, request.identity)]
        else:
            kind = decision.kind or "loop"
            guard = "detector" if decision.loop is None else decision.loop.guard
        step.guard, step.kind, step.count = guard, kind, count
        act = Act(
            request.position,
            request.identity,
            guard,
            kind,
            count,
            decision.message,
            partial(request.describe, guard, kind),
            message_index=request.message_index,
            same_as=None if guard == "detector" else same_as,
            tool_calls=request.tool_calls,
            tokens_in=request.tokens[0],
            tokens_out=request.tokens[1],
            noted=action == "note",
        )
        self.grouper.step(request.session, request.identity, act)

    def finish(self) -> FileResult:
        result = self.result
        result.sessions = len(self.sessions)
        if result.clean:
            result.steps = []  # timelines are drawn for flagged runs only
        return result


def _notes_heard(agent: str | None) -> bool:
    """Whether a note the hook gives reaches the model of the CLI ``agent`` (``None``,
    or a name no CLI has: as most CLIs, yes)."""
    if agent is None or agent not in AGENT_CLIS:
        return True
    return agent_cli(agent).notes_reach_model


def scan_file(
    source: Source, settings: Settings, progress: Progress | None = None
) -> tuple[list[FileResult], list[str]]:
    """What the guard would have done to each run of a file: one, or for a CLI's
    transcript each run it holds (the session, its subagents); and the problems met."""
    if not isinstance(source, AgentSession):
        result, problems = scan_source(source, settings, progress)
        if isinstance(source, Transcript) and not result.tool_calls:
            _check_understood(source.name, f"a {source.kind}", lambda: seeming_calls(source.body))
        return [result], problems
    try:
        runs, problems = read_runs(source)
    except OSError as exc:
        raise InputError(source.name, f"cannot read: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:  # a whole-file JSON session
        raise InputError(source.name, f"not valid JSON: {exc}") from None
    if not runs and problems:
        raise InputError(source.name, problems[0])
    results = [scan_source(run, settings, progress)[0] for run in runs]
    if not any(result.tool_calls for result in results):
        _check_understood(
            source.name, f"a {source.agent} {source.kind}", lambda: session_calls(source)
        )
    if not results:  # a transcript that holds no conversation (only notes, say)
        results = [FileResult(source.name, source.kind, "none", {"agent": source.agent})]
    return results, problems


def _check_understood(name: str, kind: str, calls: Callable[[], int]) -> None:
    """Raise :class:`NotUnderstood` for a file read without a single tool call that
    seems to hold some: its calls were not read, so it is not clean. Counted only for a
    file read without calls (the walk costs a pass over it)."""
    seen = calls()
    if seen:
        raise NotUnderstood(name, f"read as {kind} with no tool calls", seen)


def scan_source(
    source: Source | AgentRun, settings: Settings, progress: Progress | None = None
) -> tuple[FileResult, list[str]]:
    """What the guard would have done to ``source``'s requests, and the problems met on
    the way (bad lines of a log, one line each, ``"line N: ..."``). A CLI's transcript
    is scanned run by run: :func:`scan_file`."""
    if isinstance(source, AgentSession):
        raise TypeError("a CLI's transcript is scanned run by run: read_runs() first")
    run = _Run(source, settings)
    if isinstance(source, Log):
        _scan_log(run, source, progress)
    elif isinstance(source, AgentRun):
        _scan_transcript(run, source.name, source.body, False, progress, source.history)
        run.result.bad_lines = source.bad_lines
    else:
        _scan_transcript(run, source.name, source.body, source.kind == "request", progress)
    return run.finish(), run.problems


# --- logs -------------------------------------------------------------------------------


def _scan_log(run: _Run, log: Log, progress: Progress | None) -> None:
    settings, result = run.settings, run.result
    dialects: set[str] = set()
    now: float | None = None
    bad: list[BadLine] = []
    unknown = calls = 0  # lines that are JSON of an unknown shape, the calls they hold
    for entry in log.open():
        if progress is not None and log.size:
            progress(entry.offset / log.size)
        if isinstance(entry, BadLine):
            bad.append(entry)
            continue
        if now is None:
            now = entry.time if entry.time is not None else 0.0
        else:
            now = now + settings.turn_seconds if entry.time is None else max(now, entry.time)
        run.clock.now = now
        path = settings.path if entry.path is None else entry.path
        prepared = run.guard.prepare(entry.body, RequestContext(path, entry.session))
        recorded = usage_tokens(entry.usage)
        tokens = recorded or (estimate_tokens(_size(entry.body)), 0)  # sized only if needed
        result.tokens_estimated |= recorded is None
        if prepared is None or prepared.analysis.parsed_intent is None:
            problem = entry_problem(entry.body)
            if problem is not None:
                bad.append(BadLine(entry.line, problem, entry.offset))
                unknown += 1
                calls += _line_calls(entry.body)
                continue
            session = entry.session or "default"
            run.unchecked(_Request(entry.line, 0, session, tokens, undescribed))
            continue
        dialects.add(prepared.dialect)
        parsed = prepared.analysis.parsed_intent
        verdict, early = run.verdicts(parsed)
        request = _Request(
            entry.line,
            prepared.fingerprint,
            prepared.session or "default",
            tokens,
            describer(parsed["messages"], _described(verdict, early)),
        )
        stored = entry.status is None or entry.status == 200
        decision = run.check(request, prepared, verdict, stored=stored, early=early)
        result.steps[-1].calls = last_calls(parsed["messages"])
        went_upstream = result.steps[-1].action in ("forward", "note")
        if went_upstream and entry.status is not None:  # a failure there makes a retry
            run.guard.outcome(decision, entry.status)
    result.dialect = _dialect(dialects)
    result.bad_lines = len(bad)
    for line in bad[:_LINE_PROBLEMS_SHOWN]:
        run.problems.append(f"line {line.line}: {line.problem}")
    if len(bad) > _LINE_PROBLEMS_SHOWN:
        run.problems.append(f"{len(bad) - _LINE_PROBLEMS_SHOWN} more lines that are not requests")
    if not result.requests and bad:
        if unknown:  # JSON lines of a shape no reader knows
            raise NotUnderstood(log.name, run.problems[0], calls)
        raise InputError(log.name, run.problems[0])


def _line_calls(body: object) -> int:
    """The tool calls a line that is not a request seems to hold."""
    if isinstance(body, bytes):
        try:
            body = parse_line(body)
        except LineProblem:
            return 0
    return seeming_calls(body)


def _dialect(dialects: set[str]) -> str:
    if not dialects:
        return "none"
    return dialects.pop() if len(dialects) == 1 else "mixed"


def _size(value: object) -> int:
    """Characters of ``value`` as compact JSON (a line's bytes: their length)."""
    if isinstance(value, bytes):
        return len(value)
    try:
        return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
    except (TypeError, ValueError, RecursionError):
        return 0


# --- transcripts ------------------------------------------------------------------------


def _scan_transcript(
    run: _Run,
    name: str,
    body: dict[str, Any],
    is_request: bool,
    progress: Progress | None,
    history: int = 0,
) -> None:
    """Each request of one conversation; the turns that start in its first ``history``
    items (a copy of an earlier session, reported with it) are context only."""
    prepared = run.guard.prepare(body, RequestContext(run.settings.path))
    found = None if prepared is None else intent.conversation(body)
    if prepared is None or found is None:
        _scan_one(run, name, body, prepared)
        return
    run.result.dialect = found.dialect
    session = prepared.session or "default"
    items: list[Any] = body[found.key]
    messages: list[Any] = found.intent["messages"]
    sizes = [_size(item) for item in items]
    base = _size({**body, found.key: []})
    held = [0]  # characters of items[:i], with the commas between them
    for size in sizes:
        held.append(held[-1] + size + (1 if len(held) > 1 else 0))
    # In warn mode the early detector is replayed (its loops are noted): the detector is
    # asked only at a request the early one found a loop in (it finds every loop the
    # detector does, one count sooner), as the guard does; its own replay is fed up to
    # there then, so each message is walked at most once by each.
    replayed = run.early or run.detector
    replay = Replay(replayed.settings) if replayed is not None else None
    behind = None
    if run.detector is not None and replayed is not run.detector:
        behind = _Behind(run.detector.settings, messages)
    fed = 0
    cuts: list[tuple[int, int, int, intent.Turn | None]]
    cuts = [(turn.start, turn.messages, turn.system, turn) for turn in found.turns]
    if is_request:  # a request body is itself the next request
        cuts.append((len(items), len(messages), len(found.intent.get("system", [])), None))
    for number, (cut, held_messages, held_system, turn) in enumerate(cuts, start=1):
        if progress is not None:
            progress(number / len(cuts))
        if cut < history:
            continue  # the replay is fed these messages before the next request
        verdict: Verdict | None = None
        early: Verdict | None = None
        if replay is not None and replayed is not None and run.detector is not None:
            while fed < held_messages:
                replay.add(messages[fed], fed)
                fed += 1
            if _inside_results(messages, held_messages):
                verdict = replayed.scan_intent({"messages": messages[:held_messages]})
            else:
                verdict = replay.verdict()
            if behind is not None:
                early = verdict
                if early.loop is not None:
                    verdict = behind.verdict(held_messages)
        run.clock.now = (number - 1) * run.settings.turn_seconds
        recorded = usage_tokens(items[turn.start]) if turn is not None else None
        answer = sum(sizes[turn.start : turn.stop]) if turn is not None else 0
        tokens = recorded or (estimate_tokens(base + held[cut]), estimate_tokens(answer))
        run.result.tokens_estimated |= recorded is None
        identity = (held_messages << 32) | held_system
        request = _Request(
            number,
            identity,
            session,
            tokens,
            describer(messages, _described(verdict, early), found.turns, held_messages),
            tool_calls=turn.calls if turn is not None else 0,
            message_index=cut if turn is not None else None,
        )
        # The cache, like the breaker, knows the request by its identity.
        run.check(request, prepared.named(identity), verdict, early=early)
        run.result.steps[-1].calls = turn_names(messages, turn)


class _Behind:
    """The detector's replay of a conversation whose early detector is replayed in front
    (warn's ``note_early``): fed only when its verdict is asked, up to that request."""

    def __init__(self, settings: DetectorSettings, messages: list[Any]) -> None:
        self.replay = Replay(settings)
        self.detector = LoopDetector(settings)
        self.messages = messages
        self.fed = 0

    def verdict(self, held: int) -> Verdict:
        """The detector's verdict on the request that holds the first ``held`` messages."""
        messages = self.messages
        while self.fed < held:
            self.replay.add(messages[self.fed], self.fed)
            self.fed += 1
        if _inside_results(messages, held):
            return self.detector.scan_intent({"messages": messages[:held]})
        return self.replay.verdict()


def _described(verdict: Verdict | None, early: Verdict | None) -> Verdict | None:
    """The verdict whose loop a request's finding describes: the detector's; with none
    there, an early note's, if any."""
    return early if verdict is not None and verdict.loop is None else verdict


def _inside_results(messages: list[Any], cut: int) -> bool:
    """Whether a cut falls inside a run of tool results (a Responses turn of reasoning
    alone between two outputs): a replay asked there would close the batch before its
    last results, so that request is scanned on its own."""
    return cut < len(messages) and messages[cut].get("role") == "tool"


def _scan_one(run: _Run, name: str, body: dict[str, Any], prepared: PreparedRequest | None) -> None:
    """A body that is not a conversation of turns (``prepared`` by the guard, or
    ``None``): one request (a Responses ``input`` string), one loopfuse cannot read
    (nested too deep: it goes through unchecked), or not a request at all."""
    tokens = (estimate_tokens(_size(body)), 0)
    run.result.tokens_estimated = True
    if prepared is None or prepared.analysis.parsed_intent is None:
        problem = entry_problem(body)  # for an object: why it is not a request
        if problem is not None:
            raise InputError(name, problem)
        run.result.dialect = "unparsed"
        run.unchecked(_Request(1, 0, "default", tokens, undescribed))
        return
    run.result.dialect = prepared.dialect
    parsed = prepared.analysis.parsed_intent
    verdict, early = run.verdicts(parsed)
    session = prepared.session or "default"
    describe = describer(parsed["messages"], _described(verdict, early))
    request = _Request(1, prepared.fingerprint, session, tokens, describe)
    run.check(request, prepared, verdict, early=early)
