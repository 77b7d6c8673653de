"""What a tool-call batch *is* and what it *got back*: signatures, digests, normalisation.

A batch signature names a batch of tool calls independently of the order of the calls
and of the key order inside their arguments. A results digest names the answers the
batch got, independently of call order, in two forms: the raw answers, and the answers
with incidental noise (timestamps, durations, temp paths, hex ids, shell line numbers)
normalised away — so that a command failing again with a different ``line 13083`` in its
error is recognised as the same answer, while ``Compiling 56/120`` after
``Compiling 34/120`` is not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from blake3 import blake3

from loopfuse.errors import InvalidInputError
from loopfuse.intent import canonical_json

__all__ = [
    "ToolCall",
    "batch_signature",
    "normalize_answer",
    "results_digest",
    "same_digest",
]

_DIGEST_SEP: Final = "/"
_DIGEST_HEX: Final = 32  # 128-bit halves


class ToolCall:
    """One tool call: a name and its arguments (``id`` only links it to its result).

    ``arguments`` may be a parsed JSON value or a JSON string, which is parsed (a string
    that is not JSON is kept as it is). The call's :attr:`signature` is computed once,
    here, from the name and the canonical JSON of the arguments, so key order does not
    matter. A name that is not a ``str`` or arguments JSON cannot express raise
    :class:`~loopfuse.errors.InvalidInputError`.

    >>> a = ToolCall("read_file", {"path": "a.py", "lines": [1, 20]})
    >>> b = ToolCall("read_file", '{"lines": [1, 20], "path": "a.py"}', id="call_7")
    >>> a.signature == b.signature
    True
    >>> a.signature
    'read_file:b15116f7278a4ff7'
    >>> ToolCall("ls", "not json").arguments
    'not json'
    """

    __slots__ = ("arguments", "id", "name", "signature")

    name: str
    arguments: object
    id: str | None
    signature: str

    def __init__(self, name: str, arguments: object = None, id: str | None = None) -> None:
        if not isinstance(name, str):
            raise InvalidInputError(f"ToolCall name must be a str, not {type(name).__name__}")
        if id is not None and not isinstance(id, str):
            raise InvalidInputError(f"ToolCall id must be a str or None, not {type(id).__name__}")
        if isinstance(arguments, str | bytes | bytearray):
            arguments = _parse_arguments(arguments)
        elif arguments is None:
            arguments = {}
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "arguments", arguments)
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "signature", call_signature(name, arguments))

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("ToolCall is immutable")

    def __repr__(self) -> str:
        extra = "" if self.id is None else f", id={self.id!r}"
        return f"ToolCall({self.name!r}, {self.arguments!r}{extra})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolCall):
            return NotImplemented
        return (self.signature, self.name, self.id) == (other.signature, other.name, other.id)

    def __hash__(self) -> int:
        return hash((self.signature, self.id))


def _parse_arguments(raw: str | bytes | bytearray) -> object:
    text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8", "replace")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def call_signature(name: str, arguments: object) -> str:
    """``name:hash`` of one call; the hash covers the canonical JSON of ``arguments``.

    >>> call_signature("ls", {"path": "."}) == call_signature("ls", {"path": "."})
    True
    >>> call_signature("ls", {"path": "."}) == call_signature("ls", {"path": "src"})
    False
    """
    try:
        canon = canonical_json(arguments)
    except (InvalidInputError, RecursionError) as exc:
        raise InvalidInputError(f"arguments of tool call {name!r} are not JSON: {exc}") from None
    return f"{name}:{blake3(canon).hexdigest(length=8)}"


def batch_signature(calls: Iterable[ToolCall]) -> str:
    """The signature of a batch: its calls' signatures, sorted, joined with ``|``.

    Independent of the order of the calls and of key order inside their arguments.

    >>> read, grep = ToolCall("read", {"p": 1, "q": 2}), ToolCall("grep", {"q": "x"})
    >>> batch_signature([read, grep]) == batch_signature([grep, ToolCall("read", {"q": 2, "p": 1})])
    True
    >>> batch_signature([read]) == batch_signature([read, read])
    False
    """
    signatures = []
    for call in calls:
        if not isinstance(call, ToolCall):
            raise InvalidInputError(f"expected ToolCall, got {type(call).__name__}")
        signatures.append(call.signature)
    signatures.sort()
    return "|".join(signatures)


# --- answer normalisation -------------------------------------------------------------
#
# Only numbers that *look incidental* are rewritten: a timestamp, a clock time, a
# duration, a hex id or address, a UUID, a temp path, a pid, a shell's "line N:" prefix.
# Every other digit is kept, which is what lets a real progress poll
# ("Compiling 34/120" -> "Compiling 56/120", "45%" -> "60%") count as a moving answer.
_NORMALISERS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    (
        re.compile(
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
        ),
        "<uuid>",
    ),
    (
        re.compile(
            r"\b\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
            r"(?:\s?(?:Z|UTC|[+-]\d{2}:?\d{2}))?"
        ),
        "<timestamp>",
    ),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"), "<time>"),
    (
        re.compile(r"\b\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|s|sec|secs|seconds?|mins?|minutes?)\b(?!/)"),
        "<duration>",
    ),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "0x<hex>"),
    (re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,}\b"), "<hex>"),
    (
        re.compile(
            r"(?:/private)?/(?:tmp|var/tmp|var/folders)/[^\s'\"`:;,)\]]*"
            r"|\b[A-Za-z]:\\[^\s'\"]*?\\(?:Temp|tmp)\\[^\s'\"`:;,)\]]*"
            r"|\btmp[A-Za-z0-9_]{6,}\b"
        ),
        "<tmp>",
    ),
    (re.compile(r"\b(pid|PID|process)([\s:=#]+)\d+"), r"\1\2<pid>"),
    (re.compile(r"\b((?:ba|da|z|k)?sh): line \d+:"), r"\1: line <n>:"),
    (re.compile(r"[ \t]+(?=\n|$)"), ""),
)


def normalize_answer(text: str) -> str:
    """``text`` with incidental noise replaced by placeholders.

    Rewritten: UUIDs, timestamps and clock times, durations (``0.53s``, ``120 ms``), hex
    ids and addresses, temp paths, pids, a shell's ``line N:`` error prefix, trailing
    blanks. Everything else — in particular counters and percentages — is kept.

    >>> normalize_answer("/bin/bash: line 13068: cd: fastjson/: No such file or directory")
    '/bin/bash: line <n>: cd: fastjson/: No such file or directory'
    >>> normalize_answer("ok in 0.53s at 2024-05-01T10:00:03Z, /tmp/tmpab12cd9x/out.log")
    'ok in <duration> at <timestamp>, <tmp>'
    >>> normalize_answer("Compiling 34/120 (28%)")
    'Compiling 34/120 (28%)'
    """
    for pattern, replacement in _NORMALISERS:
        text = pattern.sub(replacement, text)
    return text


# --- results digests ------------------------------------------------------------------


def _answer_forms(answer: object) -> tuple[bytes, bytes]:
    """Raw and normalised bytes of one answer; text and JSON values never collide."""
    if isinstance(answer, bytes | bytearray):
        answer = bytes(answer).decode("utf-8", "replace")
    if isinstance(answer, str):
        raw = b"t" + answer.encode("utf-8", "surrogatepass")
        norm = b"t" + normalize_answer(answer).encode("utf-8", "surrogatepass")
        return raw, norm
    try:
        canon = canonical_json(answer)
    except (InvalidInputError, RecursionError) as exc:
        raise InvalidInputError(f"an answer is neither text nor a JSON value: {exc}") from None
    text = canon.decode("utf-8", "surrogatepass")
    return b"j" + canon, b"j" + normalize_answer(text).encode("utf-8", "surrogatepass")


def results_digest(
    calls: Sequence[ToolCall], answers: Sequence[object] | Mapping[str, object]
) -> str | None:
    """A digest of the answers a batch got, for :meth:`LoopDetector.record_results`.

    ``answers`` is either a sequence in call order (one answer per call) or a mapping
    from call id to answer. Each answer is text (``str``; ``bytes`` are decoded as UTF-8)
    or any JSON value; a JSON value that is a string *is* text, while ``None`` (``null``)
    differs from the text ``"null"``. Returns ``None`` — "unknown", which never counts
    as progress — when an answer is missing or the counts differ.

    The digest is ``"<raw>/<normalised>"``: 32 hex digits for the answers as given and
    32 for them after :func:`normalize_answer`. Both halves are independent of call
    order (each answer is paired with its call's signature).

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
    """
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
    for call, answer in zip(call_list, resolved, strict=True):
        if not isinstance(call, ToolCall):
            raise InvalidInputError(f"expected ToolCall, got {type(call).__name__}")
        raw, norm = _answer_forms(answer)
        key = call.signature.encode("utf-8", "surrogatepass") + b"\x00"
        raw_pairs.append(key + blake3(raw).digest(16))
        norm_pairs.append(key + blake3(norm).digest(16))
    raw_pairs.sort()
    norm_pairs.sort()
    raw_hex = blake3(b"\x01".join(raw_pairs)).hexdigest(length=16)
    norm_hex = blake3(b"\x01".join(norm_pairs)).hexdigest(length=16)
    return raw_hex + _DIGEST_SEP + norm_hex


def _is_two_part(digest: str) -> bool:
    return len(digest) == 2 * _DIGEST_HEX + 1 and digest[_DIGEST_HEX] == _DIGEST_SEP


def same_digest(a: str, b: str, *, normalize: bool = True) -> bool:
    """Whether two digests name the same answers.

    Digests made by :func:`results_digest` are the same when their raw halves are, or —
    with ``normalize`` — when their normalised halves are. Any other string is opaque
    and compared whole.

    >>> c = ToolCall("cd", {"command": "cd fastjson/"})
    >>> one = results_digest([c], ["bash: line 13068: cd: fastjson/: No such file"])
    >>> two = results_digest([c], ["bash: line 13083: cd: fastjson/: No such file"])
    >>> same_digest(one, two), same_digest(one, two, normalize=False)
    (True, False)
    """
    if a == b:
        return True
    if normalize and _is_two_part(a) and _is_two_part(b):
        return a[_DIGEST_HEX + 1 :] == b[_DIGEST_HEX + 1 :]
    return False
