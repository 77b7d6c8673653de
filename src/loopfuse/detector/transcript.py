"""A canonical conversation's tool calls and results, as a detector compares them.

:class:`Batch` and :class:`BatchAnswers` let a :class:`~loopfuse.detector.core.RunCore`
compare the tool calls and results of a transcript lazily: arguments are compared with
Python's ``==`` first and hashed to a canonical signature only when they look equal,
answers are compared as they are and normalised only when they differ. Tool results are
joined to their calls by the intent's ``"call"`` index (:func:`answers_of`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Final

from blake3 import blake3

from loopfuse.detector.answers import (
    SCAN_HEAD,
    SCAN_TAIL,
    is_contentless,
    looks_like_error,
    normalize_answer,
)
from loopfuse.detector.digests import answers_name, normal_text
from loopfuse.detector.errors import READ_EVERY_ERROR, ErrorReading, flagged_error
from loopfuse.detector.signature import call_signature
from loopfuse.errors import InvalidInputError
from loopfuse.intent import canonical_json

__all__ = [
    "Batch",
    "BatchAnswers",
    "answers_of",
    "call_name",
    "clip_text",
    "prose_text",
    "tool_run_end",
]

_DETAIL_CHARS: Final = 2000


def call_name(call: object) -> str:
    """A canonical call's tool name (``""`` for a call without one)."""
    name = call.get("name") if type(call) is dict else None
    return name if type(name) is str else ""


class Batch:
    """The calls of one assistant turn, compared cheaply and hashed only when equal."""

    __slots__ = ("_signature", "args", "kinds", "names")

    def __init__(self, calls: list[Any]) -> None:
        self._signature: str | None = None
        # (read-only, costly, a wait), once classified
        self.kinds: tuple[bool, bool, bool] | None = None
        if len(calls) == 1 and type(calls[0]) is dict:  # the common case: call_name inline
            name = calls[0].get("name")
            self.names: tuple[str, ...] = (name if type(name) is str else "",)
            self.args: list[object] = [calls[0].get("arguments")]
            return
        self.names = tuple(map(call_name, calls))
        self.args = [call.get("arguments") if type(call) is dict else call for call in calls]

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


def _normal_part(part: object, frameworks: bool = True) -> object:
    plain = _plain_part(part)
    if type(plain) is str:
        return normalize_answer(plain, frameworks=frameworks)
    if type(plain) is tuple and plain[0] == "json":
        text = plain[1].decode("utf-8", "surrogatepass")
        return ("json", normalize_answer(text, frameworks=frameworks))
    return plain


def _flagged(content: list[Any]) -> bool:
    """Whether a result's content is an MCP result flagged ``isError`` (as text or JSON)."""
    for part in content:
        if type(part) is dict and part.get("type") == "json":
            part = part.get("value")
        if flagged_error(part):
            return True
    return False


class BatchAnswers:
    """The tool results of one batch, each the canonical content of its tool message and
    its ``is_error`` flag (``None``: not said); ``reading`` says which evidence of an
    error beyond the text heuristics counts (:class:`~loopfuse.detector.errors.ErrorReading`)."""

    __slots__ = ("_facts", "_key", "_normal", "_plain", "batch", "items", "reading")

    def __init__(
        self,
        batch: Batch,
        items: list[tuple[list[Any], bool | None]],
        reading: ErrorReading = READ_EVERY_ERROR,
    ) -> None:
        self.batch = batch
        self.items = items
        self.reading = reading
        self._plain: tuple[object, ...] | None = None
        self._normal: tuple[object, ...] | None = None
        self._facts: tuple[bool, bool] | None = None
        self._key: str | None = None

    @property
    def facts(self) -> tuple[bool, bool]:
        """``(some answer looks like an error, every answer says nothing)``."""
        if self._facts is None:
            error = False
            empty = True
            reading = self.reading
            names = self.batch.names
            for k, (content, is_error) in enumerate(self.items):
                # The flag a result carries first (True or False), an MCP result's own
                # flag, then its harness's conventions; the text heuristics only when
                # none of them says.
                text = _text_of(content)
                flag = is_error
                if flag is None and reading.flags and _flagged(content):
                    flag = True
                name = names[k] if k < len(names) else ""
                failed, plain = reading.read(name, text, flag)
                if failed is None:
                    failed = looks_like_error(plain, frameworks=reading.frameworks)
                error = error or failed
                empty = empty and not (reading.flags and flag is True) and is_contentless(text)
            self._facts = (error, empty)
        return self._facts

    def detail(self) -> str | None:
        """The first answer's text (clipped), for a message."""
        text = _text_of(self.items[0][0]) if self.items else ""
        return text[:_DETAIL_CHARS] or None

    def text(self) -> str:
        """Every answer's text, joined, each and the whole clipped to their first and last
        few KB (as a live detector keeps the text it is given)."""
        return clip_text("\n".join(clip_text(_text_of(content)) for content, _ in self.items))

    def key(self) -> str:
        """The normalised answers alone, whatever the calls: 16 hex digits, equal to the
        ``answers`` part of a :func:`~loopfuse.detector.results_digest` of the same text."""
        if self._key is not None:
            return self._key
        hashes = []
        for content, _ in self.items:
            if len(content) == 1 and type(content[0]) is str:
                material = normal_text(content[0], self.reading.frameworks)
            else:
                frameworks = self.reading.frameworks
                forms = repr(tuple(_normal_part(part, frameworks) for part in content))
                material = b"p" + forms.encode("utf-8", "surrogatepass")
            hashes.append(blake3(material).digest(16))
        self._key = answers_name(hashes)
        return self._key

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
            self._normal = self._forms(partial(_normal_part, frameworks=self.reading.frameworks))
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


def _text_of(content: list[Any]) -> str:
    """A result's text parts joined (other parts as canonical JSON)."""
    if len(content) == 1 and type(content[0]) is str:
        return content[0]
    out = []
    for part in content:
        plain = _plain_part(part)
        if type(plain) is str:
            out.append(plain)
        elif type(plain) is tuple and plain[0] == "json":
            out.append(plain[1].decode("utf-8", "surrogatepass"))
    return "\n".join(out)


def clip_text(text: str) -> str:
    """``text``, or of a long one its first and last few KB (what error checks read too)."""
    if len(text) <= SCAN_HEAD + SCAN_TAIL:
        return text
    return text[:SCAN_HEAD] + "\n" + text[-SCAN_TAIL:]


def _all_text(content: list[Any]) -> bool:
    return all(type(part) is str for part in content)


def answers_of(
    batch: Batch,
    messages: list[Any],
    start: int,
    stop: int,
    reading: ErrorReading = READ_EVERY_ERROR,
) -> BatchAnswers | None:
    """The results of ``batch`` in ``messages[start:stop]``, or ``None`` if not all linked;
    ``reading`` as in :class:`BatchAnswers`."""
    n = len(batch.names)
    if n == 1 and stop - start == 1:  # the common case: one call, one result
        message = messages[start]
        if message.get("call") != 0 or type(message.get("call")) is not int:
            return None
        content = message.get("content")
        parts = content if type(content) is list else [content]
        flag = message.get("is_error")  # _flag(message), inline: the common case
        return BatchAnswers(batch, [(parts, flag if type(flag) is bool else None)], reading)
    slots: list[tuple[list[Any], bool | None] | None] = [None] * n
    for k in range(start, stop):
        message = messages[k]
        call = message.get("call")
        if type(call) is not int or not 0 <= call < n or slots[call] is not None:
            return None  # unlinkable, out of range, or linked twice: unknown answers
        content = message.get("content")
        slots[call] = (content if type(content) is list else [content], _flag(message))
    if any(slot is None for slot in slots):
        return None
    return BatchAnswers(batch, slots, reading)  # type: ignore[arg-type]


def _flag(message: dict[str, Any]) -> bool | None:
    """A tool message's structured flag: ``True`` failed, ``False`` succeeded, ``None``
    not said (:mod:`loopfuse.intent` carries the dialects' ``is_error``)."""
    flag = message.get("is_error")
    return flag if type(flag) is bool else None


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
