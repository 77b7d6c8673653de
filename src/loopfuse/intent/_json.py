"""Parsing and canonical serialisation of JSON, identical with or without orjson.

A fingerprint is state shared across processes, hosts and languages, so the bytes it
hashes must not depend on which JSON library happens to be installed. This module
parses with orjson when it is there (several times faster) and falls back to the
standard library for everything orjson refuses, then writes one canonical form
whose rules are spelled out in :func:`canonical_json`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from types import ModuleType
from typing import Any, Final

from loopfuse.errors import InvalidInputError

_orjson: ModuleType | None
try:  # the optional ``fast`` extra
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised by the backend tests instead
    _orjson = None

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_DEPTH",
    "NOT_JSON",
    "canonical_json",
    "json_backend",
    "load",
    "parse",
]

MAX_BODY_BYTES: Final = 16 * 1024 * 1024
"""Bodies larger than this (bytes, or characters for ``str``) are not parsed.

They are treated as not JSON: :func:`parse` returns ``None`` and a fingerprint falls
back to the raw bytes, which keeps the cost of a hostile 1 GB body linear and small.
"""

MAX_DEPTH: Final = 128
"""Values nested deeper than this many arrays/objects are treated as not JSON.

Real LLM requests nest a few levels (tool schemas perhaps 10-20). The limit sits far
below the recursion limits of both JSON backends, so the outcome never depends on the
backend or on how deep the caller's own stack already is.
"""

# Integers beyond +-2**53 are not exactly representable as IEEE-754 doubles; orjson
# parses integers beyond 64 bits as floats while the standard library keeps them exact.
# Interpreting every number as a double (as RFC 8785 does) makes both agree.
_MAX_SAFE_INT: Final = 2**53


class _NotJSON:
    """Sentinel type for "this body is not JSON" (``None`` is a valid JSON value)."""

    _instance: _NotJSON | None = None

    def __new__(cls) -> _NotJSON:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NOT_JSON"

    def __bool__(self) -> bool:
        return False


NOT_JSON: Final = _NotJSON()
"""Returned by :func:`load` for a body that is not JSON (unlike ``None``, which is ``null``)."""

_use_orjson: bool = _orjson is not None


def json_backend() -> str:
    """Name of the JSON backend in use: ``"orjson"`` or ``"json"`` (the standard library).

    >>> json_backend() in {"orjson", "json"}
    True
    """
    return "orjson" if _use_orjson else "json"


def _set_backend(name: str) -> None:
    """Switch the backend (tests compare both in one process). Not thread-safe."""
    global _use_orjson
    if name == "orjson":
        if _orjson is None:
            raise RuntimeError("orjson is not installed")
        _use_orjson = True
    elif name == "json":
        _use_orjson = False
    else:
        raise ValueError(f"unknown JSON backend {name!r}")


def _too_deep(value: object, limit: int) -> bool:
    """True when ``value`` nests more than ``limit`` containers deep.

    Iterative, and it only descends into containers, so it costs a fraction of the
    parse that produced the value.
    """
    stack: list[tuple[object, int]] = [(value, 1)]
    pop = stack.pop
    push = stack.append
    while stack:
        node, depth = pop()
        if depth > limit:
            return True
        children = node.values() if type(node) is dict else node
        for child in children:  # type: ignore[attr-defined]
            t = type(child)
            if t is dict or t is list:
                push((child, depth + 1))
    return False


def load(body: object) -> object:
    """Parse ``body`` like :func:`parse`, but return :data:`NOT_JSON` instead of ``None``.

    Use it where a JSON ``null`` must be told apart from "not JSON".

    >>> load(b"null") is None
    True
    >>> load(b"{oops") is NOT_JSON
    True
    """
    if isinstance(body, bytes | bytearray | memoryview):
        raw = bytes(body)
        if len(raw) > MAX_BODY_BYTES:
            return NOT_JSON
        value = _loads_bytes(raw)
        # Nesting cannot exceed the number of opening brackets: skip the walk when few.
        shallow = raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH
    elif isinstance(body, str):
        if len(body) > MAX_BODY_BYTES:
            return NOT_JSON
        value = _loads_str(body)
        shallow = body.count("[") + body.count("{") <= MAX_DEPTH
    elif isinstance(body, Mapping | list | tuple):
        value = body
        shallow = False
    else:
        return NOT_JSON
    if value is NOT_JSON or shallow:
        return value
    if type(value) is dict or type(value) is list:
        if _too_deep(value, MAX_DEPTH):
            return NOT_JSON
    elif isinstance(value, Mapping | list | tuple):
        # A caller's own container type: check its depth while normalising it.
        try:
            _Canonicaliser().prepare(value, 0)
        except (InvalidInputError, RecursionError):
            return NOT_JSON
    return value


def parse(body: object) -> object | None:
    """Parse an LLM request body; ``None`` when it is not JSON.

    ``body`` may be ``bytes`` (must be UTF-8), ``str``, or an already-parsed mapping or
    list, which is returned as it is when it is within :data:`MAX_DEPTH`. Never raises:
    bad UTF-8, a syntax error, ``NaN`` aside any non-standard token, nesting deeper than
    :data:`MAX_DEPTH` and bodies over :data:`MAX_BODY_BYTES` all give ``None``.

    ``NaN``, ``Infinity`` and ``-Infinity`` are accepted (as Python's ``json`` does).
    A JSON ``null`` body also returns ``None``; use :func:`load` to tell them apart.

    >>> parse(b'{"model": "gpt-4o", "messages": []}')
    {'model': 'gpt-4o', 'messages': []}
    >>> parse(b"\\xff\\xfe not utf-8") is None
    True
    >>> parse("[" * 1000 + "]" * 1000) is None
    True
    """
    value = load(body)
    return None if value is NOT_JSON else value


def _loads_bytes(raw: bytes) -> object:
    if _use_orjson and _orjson is not None:
        try:
            return _orjson.loads(raw)
        except _orjson.JSONDecodeError:
            pass  # the standard library decides: it accepts NaN, huge numbers, ...
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return NOT_JSON
    return _loads_stdlib(text)


def _loads_str(text: str) -> object:
    if _use_orjson and _orjson is not None:
        try:
            return _orjson.loads(text)
        except _orjson.JSONDecodeError:
            pass  # lone surrogates, NaN, ... : the standard library decides
    return _loads_stdlib(text)


def _loads_stdlib(text: str) -> object:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        # ValueError covers JSONDecodeError and integers over sys.int_info's digit limit.
        return NOT_JSON


class _Canonicaliser:
    """One pass over a value: numbers to their canonical form, containers copied.

    ``plain`` stays true while no non-integral float was seen; only then may orjson
    write the output, because orjson and ``repr`` format small floats differently.
    """

    __slots__ = ("plain",)

    def __init__(self) -> None:
        self.plain = True

    def prepare(self, value: object, depth: int) -> Any:
        t = type(value)
        if t is str or t is bool or value is None:
            return value
        if t is int:
            number: int = value  # type: ignore[assignment]
            return number if -_MAX_SAFE_INT <= number <= _MAX_SAFE_INT else self.number(number)
        if t is dict or t is list or t is tuple or isinstance(value, Mapping | list | tuple):
            if depth >= MAX_DEPTH:
                raise InvalidInputError(f"value nested deeper than MAX_DEPTH={MAX_DEPTH}")
            if isinstance(value, Mapping):
                return {
                    (k if type(k) is str else self.key(k)): self.prepare(v, depth + 1)
                    for k, v in value.items()
                }
            return [self.prepare(v, depth + 1) for v in value]  # type: ignore[attr-defined]
        if t is float or isinstance(value, int | float):
            if isinstance(value, bool):  # a bool subclass
                return bool(value)
            return self.number(value)  # type: ignore[arg-type]
        if isinstance(value, str):
            return str(value)
        raise InvalidInputError(f"{t.__name__} is not a JSON value")

    def number(self, value: int | float) -> int | float | str:
        try:
            as_float = float(value)
        except OverflowError:
            as_float = math.inf if value > 0 else -math.inf
        if math.isnan(as_float):
            return "NaN"
        if math.isinf(as_float):
            return "Infinity" if as_float > 0 else "-Infinity"
        if as_float.is_integer():
            return int(as_float)
        self.plain = False
        return as_float

    def key(self, key: object) -> str:
        # The keys json.dumps would accept, written the way it writes them.
        if key is None or isinstance(key, bool | int | float):
            prepared = self.prepare(key, 0)
            return prepared if isinstance(prepared, str) else json.dumps(prepared)
        if isinstance(key, str):
            return str(key)
        raise InvalidInputError(f"object key of type {type(key).__name__} is not a JSON key")


def _is_plain(value: object, depth: int) -> bool:
    """True when ``value`` can be written as it is: exact JSON types, no float, no
    integer beyond +-2**53, within :data:`MAX_DEPTH`. Most request bodies are, and
    checking costs far less than copying."""
    t = type(value)
    if t is dict:
        if depth >= MAX_DEPTH:
            return False
        for k, v in value.items():  # type: ignore[attr-defined]
            if type(k) is not str:
                return False
            tv = type(v)
            if tv is str or tv is bool or v is None:
                continue
            if not _is_plain(v, depth + 1):
                return False
        return True
    if t is list:
        if depth >= MAX_DEPTH:
            return False
        for v in value:  # type: ignore[attr-defined]
            tv = type(v)
            if tv is str or tv is bool or v is None:
                continue
            if not _is_plain(v, depth + 1):
                return False
        return True
    if t is int:
        return -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT  # type: ignore[operator]
    return t is str or t is bool or value is None


def canonical_json(value: object) -> bytes:
    """The canonical JSON bytes of ``value``.

    Rules (the same bytes whichever JSON backend is installed):

    - object keys sorted by code point; no whitespace (``,`` and ``:`` separators); UTF-8,
      non-ASCII characters written as themselves, control characters as ``\\u00XX``
      (``\\n``, ``\\t`` … in their short forms), a lone surrogate as ``\\udXXX``;
    - every number is read as an IEEE-754 double (as RFC 8785 does): an integral value
      is written as a decimal integer (``1.0`` and ``1`` are both ``1``), any other
      finite value in Python's shortest round-trip form (``0.1``, ``1e-05``); ``NaN``,
      ``Infinity`` and ``-Infinity`` are written as those *strings*;
    - tuples and other sequences are arrays; non-string keys are written as
      ``json.dumps`` writes them.

    Raises :class:`~loopfuse.errors.InvalidInputError` for values JSON cannot express
    and for nesting deeper than :data:`MAX_DEPTH`.

    >>> canonical_json({"b": [1.0, 2.5, float("nan")], "a": "é"})
    b'{"a":"\\xc3\\xa9","b":[1,2.5,"NaN"]}'
    """
    if _is_plain(value, 0):
        return _dumps(value, True)
    canon = _Canonicaliser()
    prepared = canon.prepare(value, 0)
    return _dumps(prepared, canon.plain)


def _dumps(prepared: object, plain: bool) -> bytes:
    if plain and _use_orjson and _orjson is not None:
        try:
            dumped: bytes = _orjson.dumps(prepared, option=_orjson.OPT_SORT_KEYS)
            return dumped
        except (TypeError, _orjson.JSONEncodeError):
            pass  # lone surrogates, integers beyond 64 bits: the standard library writes them
    text = json.dumps(
        prepared, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates: "backslashreplace" writes exactly the JSON escape \udXXX.
        return text.encode("utf-8", "backslashreplace")
