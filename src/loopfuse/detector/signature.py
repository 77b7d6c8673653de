"""What a tool-call batch *is*: calls and their signatures.

A batch signature names a batch of tool calls independently of the order of the calls
and of the key order inside their arguments. What a batch *got back* is named by a
results digest (:mod:`loopfuse.detector.digests`).
"""

from __future__ import annotations

from collections.abc import Iterable

from blake3 import blake3

from loopfuse.errors import InvalidInputError
from loopfuse.intent import canonical_json, json_loads

__all__ = ["ToolCall", "batch_signature", "call_signature"]


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
        return json_loads(text)  # never the stdlib's recursion on a deep text
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
