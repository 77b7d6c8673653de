"""What a tool-call batch *got back*: results digests.

A results digest names the answers a batch got, independently of call order, in two
forms — the raw answers, and the answers after
:func:`~loopfuse.detector.answers.normalize_answer` — each paired with its call; then the
normalised answers alone (so that two *different* batches that got the same answer can
be told so); then two facts about them: whether an answer looks like an error, and
whether every answer says nothing (see :mod:`loopfuse.detector.answers`). Its text is
``"<raw>/<normalised>/<answers>/<facts>"``: 32, 32 and 16 hex digits, then ``-`` or
``e`` (an error), ``z`` (no content), ``r`` (an answer says the thing a wait waits on
still runs, :mod:`loopfuse.harness`), in that order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final

from blake3 import blake3

from loopfuse.detector.answers import is_contentless, looks_like_error, normalize_answer
from loopfuse.detector.errors import READ_EVERY_ERROR, ErrorReading, flagged_error
from loopfuse.detector.signature import ToolCall
from loopfuse.errors import InvalidInputError
from loopfuse.intent import canonical_json

__all__ = [
    "answers_part",
    "digest_facts",
    "digest_running",
    "is_digest",
    "results_digest",
    "same_digest",
]

_HEX: Final = 32  # 128-bit halves
_ANSWERS_HEX: Final = 16
_FACTS_AT: Final = 2 * _HEX + _ANSWERS_HEX + 3
_DIGEST: Final = re.compile(r"[0-9a-f]{32}/[0-9a-f]{32}/[0-9a-f]{16}/(?:-|ez?r?|zr?|r)")


def normal_text(text: str, frameworks: bool = True) -> bytes:
    """What a text answer's normalised form is hashed as (a JSON answer is tagged ``j``)."""
    return b"t" + normalize_answer(text, frameworks=frameworks).encode("utf-8", "surrogatepass")


def answers_name(normal_hashes: list[bytes]) -> str:
    """The ``answers`` part of a digest: the normalised answers' hashes, in any order."""
    return blake3(b"".join(sorted(normal_hashes))).hexdigest(length=8)


def _answer_forms(answer: object, frameworks: bool) -> tuple[bytes, bytes, str | None]:
    """Raw and normalised bytes of one answer (text and JSON never collide), and its text."""
    if isinstance(answer, bytes | bytearray):
        answer = bytes(answer).decode("utf-8", "replace")
    if isinstance(answer, str):
        raw = b"t" + answer.encode("utf-8", "surrogatepass")
        return raw, normal_text(answer, frameworks), answer
    try:
        canon = canonical_json(answer)
    except (InvalidInputError, RecursionError) as exc:
        raise InvalidInputError(f"an answer is neither text nor a JSON value: {exc}") from None
    text = canon.decode("utf-8", "surrogatepass")
    normal = normalize_answer(text, frameworks=frameworks).encode("utf-8", "surrogatepass")
    return b"j" + canon, b"j" + normal, text


def results_digest(
    calls: Sequence[ToolCall],
    answers: Sequence[object] | Mapping[str, object],
    *,
    error: bool | None = None,
    reading: ErrorReading = READ_EVERY_ERROR,
) -> str | None:
    """A digest of the answers a batch got, for :meth:`LoopDetector.record_results`.

    ``answers`` is either a sequence in call order (one answer per call) or a mapping
    from call id to answer. Each answer is text (``str``; ``bytes`` are decoded as UTF-8)
    or any JSON value; a JSON value that is a string *is* text, while ``None`` (``null``)
    differs from the text ``"null"``. Returns ``None`` — "unknown", which never counts
    as progress — when an answer is missing or the counts differ. ``error`` says whether
    the batch failed when the caller knows (a tool that raised); by default an MCP result
    flagged ``isError`` or an answer that
    :func:`~loopfuse.detector.answers.looks_like_error` (framework answers included)
    marks the batch as failed. ``reading`` turns either off (a detector passes its
    ``error_flags`` and ``framework_errors`` settings).

    >>> ls = ToolCall("ls", {"path": "."}, id="a")
    >>> cat = ToolCall("cat", {"path": "x"}, id="b")
    >>> results_digest([ls, cat], ["x", "hello"]) == results_digest([cat, ls], ["hello", "x"])
    True
    >>> by_id = results_digest([ls, cat], {"b": "hello", "a": "x"})
    >>> by_id == results_digest([ls, cat], ["x", "hello"])
    True
    >>> results_digest([ls], [None]) == results_digest([ls], ["null"])
    False
    >>> results_digest([ls, cat], ["x"]) is None
    True
    >>> results_digest([ls], ["cat: x: No such file or directory"])[-2:]
    '/e'
    """
    if error is not None and not isinstance(error, bool):
        raise InvalidInputError(f"error must be a bool or None, not {type(error).__name__}")
    call_list = list(calls)
    resolved: list[object]
    if isinstance(answers, Mapping):
        resolved = []
        for call in call_list:
            if not isinstance(call, ToolCall):
                raise InvalidInputError(f"expected ToolCall, got {type(call).__name__}")
            if call.id is None or call.id not in answers:
                return None
            resolved.append(answers[call.id])
    elif isinstance(answers, Sequence) and not isinstance(answers, str | bytes | bytearray):
        resolved = list(answers)
    else:
        raise InvalidInputError(
            f"answers must be a sequence or a mapping by call id, not {type(answers).__name__}"
        )
    if len(resolved) != len(call_list) or not call_list:
        return None
    raw_pairs: list[bytes] = []
    norm_pairs: list[bytes] = []
    norm_only: list[bytes] = []
    failed = False
    empty = True
    running = False
    for call, answer in zip(call_list, resolved, strict=True):
        if not isinstance(call, ToolCall):
            raise InvalidInputError(f"expected ToolCall, got {type(call).__name__}")
        raw, norm, text = _answer_forms(answer, reading.frameworks)
        if not failed and error is None:
            flag = True if flagged_error(answer if type(answer) is dict else text) else None
            said: bool | None = flag if reading.flags else None
            if said is None and text is not None:
                said, plain = reading.read(call.name, text, None)
                if said is None:
                    said = looks_like_error(plain, frameworks=reading.frameworks)
            failed = bool(said)
        empty = empty and text is not None and is_contentless(text)
        if text is not None and not running:
            running = reading.still_running(call.name, text)
        key = call.signature.encode("utf-8", "surrogatepass") + b"\x00"
        norm_hash = blake3(norm).digest(16)
        raw_pairs.append(key + blake3(raw).digest(16))
        norm_pairs.append(key + norm_hash)
        norm_only.append(norm_hash)
    raw_pairs.sort()
    norm_pairs.sort()
    raw_hex = blake3(b"\x01".join(raw_pairs)).hexdigest(length=16)
    norm_hex = blake3(b"\x01".join(norm_pairs)).hexdigest(length=16)
    answers_hex = answers_name(norm_only)
    if error is not None:
        failed = error
    facts = ("e" if failed else "") + ("z" if empty else "") + ("r" if running else "")
    return f"{raw_hex}/{norm_hex}/{answers_hex}/{facts or '-'}"


def is_digest(value: object) -> bool:
    """Whether ``value`` is a digest made by :func:`results_digest`.

    >>> is_digest(results_digest([ToolCall("ls")], ["a.py"])), is_digest("error")
    (True, False)
    """
    return type(value) is str and _DIGEST.fullmatch(value) is not None


def digest_facts(digest: str) -> tuple[bool, bool]:
    """``(looks like an error, says nothing)`` of a :func:`results_digest` digest.

    >>> digest_facts(results_digest([ToolCall("ls")], ["<returncode>0</returncode>"]))
    (False, True)
    """
    facts = digest[_FACTS_AT:]
    return "e" in facts, "z" in facts


def digest_running(digest: str) -> bool:
    """Whether a :func:`results_digest` digest says an answer reports the thing a wait
    waits on as still running.

    >>> from loopfuse.detector import DetectorSettings
    >>> reading = DetectorSettings().error_reading
    >>> poll = ToolCall("write_stdin", {"session_id": 3, "chars": ""})
    >>> digest_running(results_digest([poll], ["Process running with session ID 3"],
    ...                               reading=reading))
    True
    """
    return "r" in digest[_FACTS_AT:]


def normalised_half(digest: str) -> str:
    """The part of a digest that names the normalised answers, each with its call."""
    return digest[_HEX + 1 : 2 * _HEX + 1]


def answers_part(digest: str) -> str:
    """The part of a digest that names the normalised answers alone, whatever the calls.

    >>> a = results_digest([ToolCall("ls", {"p": 1})], ["No such file"])
    >>> b = results_digest([ToolCall("ls", {"p": 2})], ["No such file"])
    >>> a == b, answers_part(a) == answers_part(b)
    (False, True)
    """
    return digest[2 * _HEX + 2 : _FACTS_AT - 1]


def same_digest(a: str, b: str, *, normalize: bool = True) -> bool:
    """Whether two digests name the same answers.

    They do when their raw halves are equal, or — with ``normalize`` — when their
    normalised halves are.

    >>> c = ToolCall("cd", {"command": "cd fastjson/"})
    >>> one = results_digest([c], ["bash: line 13068: cd: fastjson/: No such file"])
    >>> two = results_digest([c], ["bash: line 13083: cd: fastjson/: No such file"])
    >>> same_digest(one, two), same_digest(one, two, normalize=False)
    (True, False)
    """
    if a[:_HEX] == b[:_HEX]:
        return True
    return normalize and normalised_half(a) == normalised_half(b)
