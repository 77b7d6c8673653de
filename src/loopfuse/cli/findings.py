"""Turning the guard's acts on a file's requests into findings, and describing them.

See :mod:`loopfuse.cli.results` for what a finding is. :class:`Grouper` is told about
every request of a file in order (:meth:`Grouper.step`) and builds the findings; the
``describe_*`` functions say, from a canonical conversation, what repeated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from loopfuse import intent
from loopfuse.cli.results import FileResult, Finding, Span
from loopfuse.detector import Verdict
from loopfuse.detector.signals import CYCLE, signal_of
from loopfuse.errors import LoopfuseError

__all__ = [
    "Act",
    "Described",
    "Grouper",
    "describe_request",
    "describe_turn",
    "describer",
    "last_calls",
    "turn_names",
    "undescribed",
]

_CALL_CHARS: Final = 300
_ANSWER_CHARS: Final = 200
_SHORT_LINE: Final = 20
_STEPS_SHOWN: Final = 4


@dataclass(frozen=True, slots=True)
class Described:
    """What repeated, as :class:`~loopfuse.cli.results.Finding` shows it."""

    call: str
    answer: str | None = None
    loop_from: int | None = None


@dataclass(frozen=True, slots=True)
class Act:
    """The guard acting on one request. ``identity`` names the request exactly (two
    requests of a session with the same identity are the same request); ``describe``
    is called only when the act opens a finding (or adds a step to a cycle)."""

    position: int
    identity: int
    guard: str
    kind: str
    count: int
    message: str | None
    describe: Callable[[], Described]
    message_index: int | None = None
    same_as: int | None = None
    tool_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    noted: bool = False  # the request went on with a note for the model (nothing spared)


class Grouper:
    """Builds the findings of one file (see :mod:`loopfuse.cli.results`)."""

    def __init__(self, result: FileResult, unit: str) -> None:
        self.result = result
        self.unit = unit
        self._open: dict[str, Finding] = {}  # session -> the finding its last request is in
        self._same: dict[tuple[str, int], Finding] = {}  # (session, identity) -> finding
        self._gaps: set[int] = set()  # findings whose request went through since their last act

    def step(self, session: str, identity: int, act: Act | None) -> None:
        """The next request of ``session`` (``identity`` names it): ``act`` when the
        guard acted on it."""
        same = self._same.get((session, identity))
        if act is None:
            self._open.pop(session, None)
            if same is not None:
                self._gaps.add(id(same))  # the same request went through: a new stretch
            return
        result = self.result
        if act.noted:  # the request was sent, with a note: nothing was spared
            result.noted[act.guard] = result.noted.get(act.guard, 0) + 1
        else:
            result.acted[act.guard] = result.acted.get(act.guard, 0) + 1
            result.spared_requests += 1
            result.spared_tool_calls += act.tool_calls
            result.spared_tokens_in += act.tokens_in
            result.spared_tokens_out += act.tokens_out
        finding = same or self._open.get(session)
        if finding is None:
            finding = self._open_finding(session, act)
        else:
            contiguous = id(finding) not in self._gaps
            self._gaps.discard(id(finding))
            self._extend(finding, act, contiguous, new_request=same is None)
        if act.noted:
            finding.notes += 1
        else:
            finding.requests += 1
            finding.tool_calls += act.tool_calls
            finding.tokens_in += act.tokens_in
            finding.tokens_out += act.tokens_out
        self._open[session] = finding
        self._same[(session, act.identity)] = finding

    def _open_finding(self, session: str, act: Act) -> Finding:
        described = act.describe()
        finding = Finding(
            session=session,
            unit=self.unit,
            first=act.position,
            last=act.position,
            guard=act.guard,
            kind=act.kind,
            count=act.count,
            max_count=act.count,
            calls=[described.call],
            answer=described.answer,
            message=act.message,
            message_index=act.message_index,
            loop_from=described.loop_from,
            same_as=act.same_as,
            spans=[_span(act)],
        )
        self.result.findings.append(finding)
        return finding

    def _extend(self, finding: Finding, act: Act, contiguous: bool, new_request: bool) -> None:
        finding.first = min(finding.first, act.position)
        finding.last = max(finding.last, act.position)
        finding.max_count = max(finding.max_count, act.count)
        span = finding.spans[-1]
        same = span.guard == act.guard and span.kind == act.kind and span.noted == act.noted
        if contiguous and same:
            span.last = act.position
            span.requests += 1
            span.max_count = max(span.max_count, act.count)
        else:
            finding.spans.append(_span(act))
        if finding.message is None:
            finding.message = act.message
        # Each step of a cycle, each request of a client hammering several: what repeated.
        several = act.kind == CYCLE.kind or (new_request and act.guard != "detector")
        if several and len(finding.calls) < _STEPS_SHOWN:
            call = act.describe().call
            if call not in finding.calls:
                finding.calls.append(call)


def describe_turn(messages: list[Any], index: int | None) -> Described:
    """The assistant turn at ``messages[index]`` (a detector verdict's ``index``): its
    calls (or its text) and the first line of the first answer it got."""
    if index is None or not 0 <= index < len(messages):
        return describe_request(messages)
    message = messages[index]
    answer = None
    for later in messages[index + 1 :]:
        if type(later) is not dict or later.get("role") != "tool":
            break
        answer = _first_line(later.get("content"))
        if answer:
            break
    return Described(_describe(message), answer)


def describe_request(messages: list[Any]) -> Described:
    """A request by its last message (what the breaker and the cache act on)."""
    if not messages:
        return Described("(an empty conversation)")
    return Described(_describe(messages[-1]))


def _describe(message: object) -> str:
    if type(message) is not dict:
        return _clip(f"(not a message: {message!r})", _CALL_CHARS)
    calls = message.get("tool_calls")
    if type(calls) is list and calls:
        return _clip("; ".join(_call(call) for call in calls), _CALL_CHARS)
    text = _first_line(message.get("content")) or "(no text)"
    return _clip(f"{message.get('role', '?')}: {text}", _CALL_CHARS)


def _call(call: object) -> str:
    if type(call) is not dict:
        return str(call)
    return f"{call.get('name')} {_canonical(call.get('arguments'))}"


def _canonical(value: object) -> str:
    try:
        return intent.canonical_json(value).decode("utf-8", "replace")
    except (LoopfuseError, ValueError, RecursionError):
        return str(value)


def _first_line(content: object) -> str | None:
    """The first line with text in a canonical content list."""
    parts = content if type(content) is list else [content]
    for part in parts:
        if type(part) is str:
            text = part
        elif type(part) is dict and part.get("type") == "json":
            value = part.get("value")  # a JSON string is text, as the detector reads it
            text = value if type(value) is str else _canonical(value)
        elif type(part) is dict and type(part.get("text")) is str:
            text = part["text"]
        else:
            continue
        lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
        if lines:
            # The first line; a very short one ("F", "1") says little: the next ones too.
            shown = lines[0]
            for line in lines[1:3]:
                if len(shown) >= _SHORT_LINE:
                    break
                shown += " / " + line
            return _clip(shown, _ANSWER_CHARS)
    return None


def _clip(text: str, room: int) -> str:
    return text if len(text) <= room else text[: room - 3] + "..."


def undescribed(guard: str, kind: str) -> Described:
    return Described("(a body loopfuse cannot read)")


def describer(
    messages: list[Any],
    verdict: Verdict | None,
    turns: tuple[intent.Turn, ...] = (),
    held: int | None = None,
) -> Callable[[str, str], Described]:
    """What repeated in a request, said lazily: its conversation is ``messages`` (or
    their first ``held``, for a cut of a recorded run)."""

    def describe(guard: str, kind: str) -> Described:
        if guard != "detector" or verdict is None:
            return describe_request(messages if held is None else messages[:held])
        described = describe_turn(messages, verdict.index)
        start = _loop_from(turns, messages, verdict, kind) if turns else None
        return Described(described.call, described.answer, start)

    return describe


def last_calls(messages: list[Any]) -> tuple[str, ...]:
    """The tool names of a request's last assistant turn (colours its timeline mark)."""
    for message in reversed(messages):
        if type(message) is dict and message.get("role") == "assistant":
            return tool_names(message)
    return ()


def tool_names(message: dict[str, Any]) -> tuple[str, ...]:
    calls = message.get("tool_calls")
    if type(calls) is not list:
        return ()
    return tuple(
        call["name"] if type(call) is dict and type(call.get("name")) is str else ""
        for call in calls
    )


def turn_names(messages: list[Any], turn: intent.Turn | None) -> tuple[str, ...]:
    if turn is None:
        return ()
    names: tuple[str, ...] = ()
    for message in messages[turn.messages : turn.end]:
        if message.get("role") == "assistant":
            names += tool_names(message)
    return names


def _loop_from(
    turns: tuple[intent.Turn, ...], messages: list[Any], verdict: Verdict, kind: str
) -> int | None:
    """The turn where the stretch the detector counted began: ``count`` occurrences
    back from the offending turn (laps of the cycle's period for a cycle, and the same
    for a check re-run across edits)."""
    index = verdict.index
    if index is None:
        return None
    numbers = [n for n, turn in enumerate(turns, start=1) if turn.messages <= index < turn.end]
    if not numbers:
        return None
    offending = numbers[0]
    period = 1
    signal = signal_of(kind)
    if signal is not None and signal.per_lap:
        calls = messages[index].get("tool_calls")
        for back in range(offending - 2, -1, -1):
            turn = turns[back]
            if any(m.get("tool_calls") == calls for m in messages[turn.messages : turn.end]):
                period = offending - 1 - back
                break
    return max(1, offending - max(1, verdict.count) * period + 1)


def _span(act: Act) -> Span:
    """The stretch an act opens."""
    return Span(act.guard, act.kind, act.position, act.position, 1, act.count, act.count, act.noted)
