"""``scan``: is this request — a whole replayed conversation — a lap of a loop?

A proxy sees each request an agent sends, history included, and nothing else. ``scan``
replays that history through a fresh run (:mod:`loopfuse.detector.replay`) and tells
whether the conversation *ends* in a loop: the verdict is the one the detector gives
the last assistant turn, with everything before it as evidence. A loop the agent has
since left (another batch, or a user turn) is not reported. A refused batch that ran
anyway and got a *new* answer (a poll that finally moved) is not reported either.

It walks the canonical intent (:func:`loopfuse.intent.extract_intent`), so every dialect
is read the same way: ``user`` and ``system`` messages end the run (an Anthropic user
message that only carries ``tool_result`` blocks has no ``user`` message in the intent);
tool results are joined to their calls by the intent's ``"call"`` index, and a batch
with a result missing, unlinkable (``None``) or linked twice has unknown answers, which
never count as progress. Junk never raises: a body that is not an LLM request, or not
JSON at all, passes.

Only the turns that can change the verdict are replayed: the last assistant turn's run
of identical batches, and the run's bounded history before it only when a cycle or an
answer-based signal could fire (or, for a prose turn, the stagnation window). That gives
the same verdict as replaying the whole conversation (``tests/test_detector_scan.py``
checks it on random conversations) at a cost that does not grow with the history.
"""

from __future__ import annotations

from typing import Any, Protocol

from loopfuse.detector.records import HistoryEntry
from loopfuse.detector.replay import OK, Verdict, replay, stagnation_verdict
from loopfuse.detector.settings import DetectorSettings, default_settings
from loopfuse.detector.signals import ANSWER_SIGNALS, CYCLE, STAGNATION
from loopfuse.detector.signals.stagnation import StagnationDetected
from loopfuse.detector.transcript import (
    Batch,
    BatchAnswers,
    answers_of,
    call_name,
    prose_text,
    tool_run_end,
)
from loopfuse.intent import extract_intent

__all__ = ["OK", "HasSettings", "Verdict", "scan", "scan_intent"]


class HasSettings(Protocol):
    """Anything that carries detector settings (a :class:`~loopfuse.detector.LoopDetector`)."""

    @property
    def settings(self) -> DetectorSettings: ...


def scan(body: object, detector: HasSettings | None = None) -> Verdict:
    """Whether the conversation in request ``body`` (any dialect) ends in a loop.

    Stateless; never raises. ``detector`` supplies the settings (its own state is not
    used); the default is ``LoopDetector()``'s.

    >>> def turn(i):  # the agent runs the same failing command again
    ...     return [
    ...         {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}",
    ...          "type": "function", "function": {"name": "bash",
    ...          "arguments": '{"command": "cd fastjson/ && mvn test"}'}}]},
    ...         {"role": "tool", "tool_call_id": f"c{i}",
    ...          "content": f"bash: line {100 + i}: cd: fastjson/: No such file or directory"}]
    >>> body = {"model": "m", "messages": [{"role": "user", "content": "fix it"}]}
    >>> body["messages"] += turn(1) + turn(2)
    >>> scan(body).ok
    True
    >>> body["messages"] += turn(3)  # the same error again: refused a repeat earlier
    >>> verdict = scan(body)
    >>> verdict.ok, verdict.kind, verdict.count, verdict.index
    (False, 'repeat', 3, 5)
    >>> scan(b"not json").ok
    True
    """
    try:
        intent = extract_intent(body)
    except Exception:  # an odd parsed body (e.g. objects JSON cannot hold) is a pass
        return OK
    return scan_intent(intent, detector)


def scan_intent(intent: object, detector: HasSettings | None = None) -> Verdict:
    """:func:`scan` for an intent already made by :func:`loopfuse.intent.extract_intent`.

    >>> scan_intent({"messages": [{"role": "user", "content": ["hi"]}]}).ok
    True
    >>> scan_intent("junk").ok
    True
    """
    try:
        if type(intent) is not dict:
            return OK
        messages = intent.get("messages")
        if type(messages) is not list:
            return OK
        settings = default_settings() if detector is None else detector.settings
        if not settings.enabled:
            return OK
        return _tail_verdict(messages, settings)
    except Exception:  # a guard must never break the request it guards
        return OK


def _tail_verdict(messages: list[Any], settings: DetectorSettings) -> Verdict:
    last = len(messages) - 1
    while last >= 0:
        message = messages[last]
        if type(message) is dict:
            role = message.get("role")
            if role == "assistant":
                break
            if role == "user" or role == "system":
                return OK  # the run has ended and nothing came after
        last -= 1
    if last < 0:
        return OK
    calls = messages[last].get("tool_calls")
    if type(calls) is list and calls:
        return _batch_tail(messages, last, Batch(calls), settings)
    return _prose_tail(messages, last, settings)


def _batch_tail(
    messages: list[Any], last: int, final: Batch, settings: DetectorSettings
) -> Verdict:
    """Replay what the final batch's verdict depends on, and nothing more.

    That is its run of identical batches (the repeat count and strikes); the run's
    history before it when a cycle through the final batch is possible; and the window
    the answer-based signals read when the final batch's answers could trip one. Only
    the final batch's own answers decide its verdict, so the signals are judged there
    alone.
    """
    period = CYCLE.reach(settings)
    history = settings.history_len
    window = _answers_can_trip(messages, last, final, settings)
    # Walk back cheaply: a batch is built only when its names could make it the final
    # batch; the replay builds the others itself, when it needs them at all.
    wanted = sorted(final.names)
    single = len(final.names) == 1
    same: dict[int, Batch] = {last: final}
    seen = 1  # batches from the final one back
    start = last
    in_final_run = True
    cycle_possible = False
    first_name = final.names[0]
    first_args = final.args[0]
    for k in range(last - 1, -1, -1):
        message = messages[k]
        if type(message) is not dict:
            continue
        role = message.get("role")
        if role == "tool":
            continue
        if role == "user" or role == "system":
            break
        calls = message.get("tool_calls") if role == "assistant" else None
        if type(calls) is not list or not calls:
            continue
        distance = seen  # this batch is history[n - distance]
        seen += 1
        batch = None
        if single:
            # One call: a different name or arguments (==) can never be equal.
            call = calls[0] if len(calls) == 1 else None
            if (
                type(call) is dict
                and call.get("name") == first_name
                and call.get("arguments") == first_args
            ):
                batch = Batch(calls)
        elif sorted(map(call_name, calls)) == wanted:
            batch = Batch(calls)
        if batch is not None and batch == final:
            if batch.names == final.names:
                batch = final  # one key object for the run: later compares are `is`
            same[k] = batch
            if in_final_run:
                start = k
                continue
            cycle_possible = cycle_possible or distance <= period
        in_final_run = False
        if distance > (history if window or cycle_possible else period):
            break  # older than anything the verdict depends on
        if window or cycle_possible:
            start = k
    return replay(messages, settings, start, same, judge_from=last)


def _answers_can_trip(
    messages: list[Any], last: int, final: Batch, settings: DetectorSettings
) -> bool:
    """Whether the final batch's answers could trip an answer-based signal: they must say
    something, and one of the signals that are on must say they could
    (:meth:`~loopfuse.detector.signals.base.AnswerSignal.could_trip`)."""
    if settings.ignore_tools:
        return True  # ignored calls reshape batches: do not guess, replay the window
    reading = settings.error_reading
    answers = answers_of(final, messages, last + 1, tool_run_end(messages, last + 1), reading)
    if answers is None:
        return False
    error, empty = answers.facts
    if empty:
        return False
    tail = _Tail(messages, last, final, answers, error)
    for signal in ANSWER_SIGNALS:
        if getattr(settings, signal.setting) is not None and signal.could_trip(tail):
            return True
    return False


class _Tail:
    """The final batch of a conversation, its answers known (a signals' ``Tail``)."""

    __slots__ = ("answers", "error", "final", "last", "messages")

    def __init__(
        self, messages: list[Any], last: int, final: Batch, answers: BatchAnswers, error: bool
    ) -> None:
        self.messages = messages
        self.last = last
        self.final = final
        self.answers = answers
        self.error = error

    def pair(self) -> tuple[HistoryEntry, HistoryEntry] | None:
        messages, final = self.messages, self.final
        k = self.last - 1
        while k >= 0:  # the batch before, if the run has one
            message = messages[k]
            if type(message) is dict:
                role = message.get("role")
                if role == "user" or role == "system":
                    return None
                calls = message.get("tool_calls") if role == "assistant" else None
                if type(calls) is list and calls:
                    before = Batch(calls)
                    if before.names != final.names:
                        return None
                    end = tool_run_end(messages, k + 1)
                    earlier = HistoryEntry(before, before.names, False, tuple(before.args))
                    earlier.answers = answers_of(before, messages, k + 1, end, self.answers.reading)
                    newest = HistoryEntry(final, final.names, False, tuple(final.args))
                    newest.answers = self.answers
                    return earlier, newest
            k -= 1
        return None


def _prose_tail(messages: list[Any], last: int, settings: DetectorSettings) -> Verdict:
    """Replay the prose turns of the stagnation window (turns with tool calls don't count)."""
    window = STAGNATION.window(settings)
    if window is None:
        return OK
    texts: list[str] = []
    k = last
    while k >= 0 and len(texts) < window:
        message = messages[k]
        if type(message) is dict:
            role = message.get("role")
            if role == "user" or role == "system":
                break
            if role == "assistant":
                calls = message.get("tool_calls")
                if not (type(calls) is list and calls):
                    text = prose_text(message.get("content"))
                    if text.strip():
                        texts.append(text)
        k -= 1
    if not texts or not prose_text(messages[last].get("content")).strip():
        return OK
    stagnation = STAGNATION.detector(settings)
    assert stagnation is not None  # the window is known: the signal is on
    verdict = OK
    for text in reversed(texts):  # only the last turn's outcome is the verdict
        try:
            stagnation.record(text, made_tool_calls=False)
            verdict = OK
        except StagnationDetected as exc:
            verdict = stagnation_verdict(exc, last)
    return verdict
