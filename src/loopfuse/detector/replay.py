"""Replaying a canonical conversation through a detector: the scanner's machinery.

:class:`Batch` and :class:`BatchAnswers` let a :class:`~loopfuse.detector.detector.LoopDetector`
compare the tool calls and results of a transcript lazily: arguments are compared with
Python's ``==`` first and hashed to a canonical signature only when they look equal,
answers are compared as they are and normalised only when they differ. :func:`replay`
walks messages forward from any index and returns the verdict of the last assistant
turn; :func:`loopfuse.detector.scan.scan` calls it on the few turns that can matter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from loopfuse.detector.detector import LoopDetector
from loopfuse.detector.signature import call_signature, normalize_answer
from loopfuse.detector.stagnation import StagnationDetected, StagnationDetector
from loopfuse.errors import InvalidInputError
from loopfuse.intent import canonical_json

__all__ = ["OK", "Batch", "BatchAnswers", "Verdict", "answers_of", "prose_text", "replay"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What :func:`~loopfuse.detector.scan.scan` found.

    ``ok`` is false when the conversation ends in a loop. Then ``kind`` is ``"repeat"``,
    ``"cycle"`` or ``"stagnation"``; ``signature`` names the repeated batch (for
    stagnation, the hash of the repeated text); ``index`` is the position of the
    offending assistant turn in ``extract_intent(body)["messages"]``; ``count`` how many
    times it has been asked for (laps, for a cycle); ``message`` is written for the model;
    ``tool_names`` are the tools involved.

    >>> OK.ok, OK.kind
    (True, None)
    """

    ok: bool
    kind: str | None = None
    signature: str | None = None
    index: int | None = None
    count: int = 0
    message: str | None = None
    tool_names: tuple[str, ...] = ()


OK: Final = Verdict(ok=True)
"""The verdict for a conversation that does not end in a loop."""


class Batch:
    """The calls of one assistant turn, compared cheaply and hashed only when equal."""

    __slots__ = ("_signature", "args", "names")

    def __init__(self, calls: list[Any]) -> None:
        self._signature: str | None = None
        if len(calls) == 1 and type(calls[0]) is dict:  # the common case, made cheap
            name = calls[0].get("name")
            self.names: tuple[str, ...] = (name if type(name) is str else "",)
            self.args: list[object] = [calls[0].get("arguments")]
            return
        names: list[str] = []
        args: list[object] = []
        for call in calls:
            if type(call) is dict:
                name = call.get("name")
                names.append(name if type(name) is str else "")
                args.append(call.get("arguments"))
            else:
                names.append("")
                args.append(call)
        self.names = tuple(names)
        self.args = args

    @property
    def signature(self) -> str:
        if self._signature is None:
            self._signature = "|".join(
                sorted(_safe_signature(n, a) for n, a in zip(self.names, self.args, strict=True))
            )
        return self._signature

    def call_signatures(self) -> list[str]:
        return [_safe_signature(n, a) for n, a in zip(self.names, self.args, strict=True)]

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Batch):
            return NotImplemented
        if len(self.names) == 1:
            if self.names != other.names or self.args[0] != other.args[0]:
                return False
            if _only_text(self.args[0]):
                return True  # text compares exactly: no need to hash
        elif sorted(self.names) != sorted(other.names):
            return False
        # Python's == says 1 == True == 1.0; the canonical signature has the last word.
        return self.signature == other.signature

    __hash__ = None  # type: ignore[assignment]


def _only_text(arguments: object) -> bool:
    """True for text, or an object of text values (most tool calls): where ``==`` is exact."""
    if type(arguments) is str:
        return True
    if type(arguments) is dict:
        return all(type(value) is str for value in arguments.values())
    return False


def _safe_signature(name: str, arguments: object) -> str:
    try:
        return call_signature(name, {} if arguments is None else arguments)
    except (InvalidInputError, RecursionError, ValueError):
        return f"{name}:{id(arguments):x}"  # never equal to another call: no false loop


def _plain_part(part: object) -> object:
    """One result part, comparable exactly: text as text, anything else as canonical JSON."""
    if type(part) is str:
        return part
    if type(part) is dict and part.get("type") == "json":
        value = part.get("value")
        if type(value) is str:
            return value  # a JSON string result *is* text (Gemini wraps results in JSON)
        part = value
    try:
        return ("json", canonical_json(part))
    except (InvalidInputError, RecursionError, ValueError):
        return ("repr", repr(part))


def _normal_part(part: object) -> object:
    plain = _plain_part(part)
    if type(plain) is str:
        return normalize_answer(plain)
    if type(plain) is tuple and plain[0] == "json":
        return ("json", normalize_answer(plain[1].decode("utf-8", "surrogatepass")))
    return plain


class BatchAnswers:
    """The tool results of one batch, each the canonical content of its tool message."""

    __slots__ = ("_normal", "_plain", "batch", "items")

    def __init__(self, batch: Batch, items: list[tuple[list[Any], bool]]) -> None:
        self.batch = batch
        self.items = items
        self._plain: tuple[object, ...] | None = None
        self._normal: tuple[object, ...] | None = None

    def _forms(self, form: Callable[[object], object]) -> tuple[object, ...]:
        per_call = [
            (tuple(form(part) for part in content), is_error) for content, is_error in self.items
        ]
        if len(per_call) == 1:
            return tuple(per_call)
        # Pair each answer with its call, so that call order does not matter.
        keyed = sorted(
            zip(self.batch.call_signatures(), per_call, strict=True),
            key=lambda pair: (pair[0], repr(pair[1])),
        )
        return tuple(answer for _, answer in keyed)

    def plain(self) -> tuple[object, ...]:
        """The answers, each part as text or canonical JSON, in canonical call order."""
        if self._plain is None:
            self._plain = self._forms(_plain_part)
        return self._plain

    def normal(self) -> tuple[object, ...]:
        """:meth:`plain` with incidental noise normalised away."""
        if self._normal is None:
            self._normal = self._forms(_normal_part)
        return self._normal

    def same_as(self, other: object, normalize: bool) -> bool | None:
        """Whether ``other`` holds the same answers (``None``: not comparable)."""
        if not isinstance(other, BatchAnswers) or len(other.items) != len(self.items):
            return None
        if len(self.items) == 1 and self.items == other.items and _all_text(self.items[0][0]):
            return True  # the common case: one result, the very same text
        if self.plain() == other.plain():
            return True
        if not normalize:
            return False
        return self.normal() == other.normal()


def _all_text(content: list[Any]) -> bool:
    return all(type(part) is str for part in content)


def answers_of(batch: Batch, messages: list[Any], start: int, stop: int) -> BatchAnswers | None:
    """The results of ``batch`` in ``messages[start:stop]``, or ``None`` if not all linked."""
    n = len(batch.names)
    if n == 1 and stop - start == 1:  # the common case: one call, one result
        message = messages[start]
        if message.get("call") != 0 or type(message.get("call")) is not int:
            return None
        content = message.get("content")
        parts = content if type(content) is list else [content]
        return BatchAnswers(batch, [(parts, bool(message.get("is_error")))])
    slots: list[tuple[list[Any], bool] | None] = [None] * n
    for k in range(start, stop):
        message = messages[k]
        call = message.get("call")
        if type(call) is not int or not 0 <= call < n or slots[call] is not None:
            return None  # unlinkable, out of range, or linked twice: unknown answers
        content = message.get("content")
        slots[call] = (
            content if type(content) is list else [content],
            bool(message.get("is_error")),
        )
    if any(slot is None for slot in slots):
        return None
    return BatchAnswers(batch, slots)  # type: ignore[arg-type]


def prose_text(content: object) -> str:
    if type(content) is not list:
        return content if type(content) is str else ""
    return "\n".join(part for part in content if type(part) is str)


def tool_run_end(messages: list[Any], start: int) -> int:
    """Index after the ``tool`` messages that follow ``messages[start - 1]``."""
    n = len(messages)
    j = start
    while j < n:
        message = messages[j]
        if type(message) is not dict or message.get("role") != "tool":
            break
        j += 1
    return j


def replay(
    messages: list[Any],
    det: LoopDetector,
    start: int = 0,
    batches: dict[int, Batch] | None = None,
    judge_from: int = 0,
) -> Verdict:
    """Walk ``messages[start:]`` through ``det`` (fresh) and a stagnation detector.

    Returns the verdict of the last assistant turn (``OK`` after a user or system
    message). ``batches`` may hold :class:`Batch` objects already built, by index; batches
    before index ``judge_from`` are only counted, not judged (their verdict is ``OK``).
    """
    steps = det.max_stagnation_steps
    stagnation = None if steps is None else StagnationDetector(steps)
    verdict = OK
    i = start
    n = len(messages)
    while i < n:
        message = messages[i]
        if type(message) is not dict:
            i += 1
            continue
        role = message.get("role")
        if role == "assistant":
            calls = message.get("tool_calls")
            if type(calls) is list and calls:
                j = tool_run_end(messages, i + 1)
                batch = batches.get(i) if batches else None
                if batch is None:
                    batch = Batch(calls)
                answers = answers_of(batch, messages, i + 1, j)
                verdict = batch_verdict(det, batch, answers, i, judge=i >= judge_from)
                i = j
                continue
            verdict = OK
            if stagnation is not None:
                try:
                    stagnation.record(prose_text(message.get("content")), made_tool_calls=False)
                except StagnationDetected as exc:
                    verdict = stagnation_verdict(exc, i)
        elif role == "user" or role == "system":
            det._break()
            if stagnation is not None:
                stagnation.clear()
            verdict = OK
        i += 1
    return verdict


def batch_verdict(
    det: LoopDetector,
    batch: Batch,
    answers: BatchAnswers | None,
    index: int,
    *,
    judge: bool = True,
) -> Verdict:
    """Check ``batch``, record its answers, and tell whether it is still a loop."""
    record, error = det._admit(batch, batch.names, judge)
    outcome = det._record(record, answers)
    if error is None or not det._refusal_stands(record, outcome):
        return OK
    return Verdict(
        ok=False,
        kind=error.kind,
        signature=error.signature,
        index=index,
        count=error.count,
        message=error.message,
        tool_names=error.tool_names,
    )


def stagnation_verdict(exc: StagnationDetected, index: int) -> Verdict:
    """The verdict for a prose turn the stagnation detector refused."""
    return Verdict(
        ok=False,
        kind="stagnation",
        signature=exc.text_hash,
        index=index,
        count=exc.count,
        message=exc.message,
    )
