"""Parsing and canonical serialisation of JSON, identical with or without orjson.

A fingerprint is state shared across processes, hosts and languages, so the bytes it
hashes must not depend on which JSON library happens to be installed. This module
parses with orjson when it is there (several times faster) and falls back to the
standard library for everything orjson refuses, then writes one canonical form whose
rules are spelled out in :func:`canonical_json`.

Speed comes from provenance: a value that a parser produced under these rules (no
non-finite or tiny float, no integer orjson would read as a float) can be written by a
C serialiser as it is. Anything else goes to ``_canonical.dumps``, which applies every
rule itself (in C when the ``_speedups`` extension is built, else a Python walk).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any, Final

from loopfuse.intent import _native
from loopfuse.intent._canonical import (
    INT_MAX,
    INT_MIN,
    MAX_DEPTH,
    canonical_json,
    dumps,
    format_float,
    utf8,
)
from loopfuse.intent._textdepth import STDLIB_SAFE_DEPTH, nests_deeper

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
    "format_float",
    "json_backend",
    "json_bytes",
    "load",
    "parse",
]

MAX_BODY_BYTES: Final = 16 * 1024 * 1024
"""Bodies larger than this (bytes, or characters for ``str``) are not parsed.

They are treated as not JSON: :func:`parse` returns ``None`` and a fingerprint falls
back to the raw bytes, which keeps the cost of a hostile 1 GB body linear and small.
"""

# orjson reads integers in [INT_MIN, INT_MAX] exactly and every other integer as a double.
_INT_MIN: Final = INT_MIN
_INT_MAX: Final = INT_MAX
# Characters of the longest integer text in that range ("-9223372036854775808" and
# "18446744073709551615"); JSON has no leading zeros, so a longer text is out of range.
_INT_CHARS: Final = 20
# Longer integers are not JSON to us. This is CPython's default int/str digit limit,
# fixed here rather than read from the process (PYTHONINTMAXSTRDIGITS and
# sys.set_int_max_str_digits change it), so that a body is JSON in every process or none.
_MAX_INT_DIGITS: Final = 4300
# Python's repr switches to exponent notation below 1e-4; the canonical form below 1e-5.
_TINY: Final = 1e-4
_COUNT_BRACKETS_BELOW: Final = 32 * 1024


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


def _orjson_follows_the_rules() -> bool:
    """orjson >= 3.11.7 writes floats exactly as :func:`format_float` and refuses depth
    255; older or future versions may not, and are then used for parsing only."""
    if _orjson is None:
        return False
    probes = (1.0, -0.0, 0.1, 1e-4, 1e-5, -1.5e-5, 1e-6, 9.99e-6, 1e15, 1e16, 1.5e300, 5e-324)
    try:
        if any(_orjson.dumps(x).decode() != format_float(x) for x in probes):
            return False
        _orjson.dumps(_nested(MAX_DEPTH))
    except Exception:
        return False
    try:
        _orjson.dumps(_nested(MAX_DEPTH + 1))
    except _orjson.JSONEncodeError:
        return True
    return False


def _nested(depth: int) -> list[Any]:
    root: list[Any] = []
    for _ in range(depth - 1):
        root = [root]
    return root


_ORJSON_WRITES: Final = _orjson_follows_the_rules()
_use_orjson: bool = _orjson is not None


def _trusted_loads() -> Callable[[str], object] | None:
    if _use_orjson and _ORJSON_WRITES and _orjson is not None:
        loads: Callable[[str], object] = _orjson.loads
        return loads
    return None


trusted_loads = _trusted_loads()
"""A parser whose every result :func:`load_trusted` would call trusted (orjson, when it is
the backend and writes by the rules), or ``None``. Short tool-call argument strings go to
it first: for it, "it parsed" means "trusted", and a ``ValueError`` hands the string on."""


def json_backend() -> str:
    """Name of the JSON backend in use: ``"orjson"`` or ``"json"`` (the standard library).

    >>> json_backend() in {"orjson", "json"}
    True
    """
    return "orjson" if _use_orjson else "json"


def _set_backend(name: str) -> None:
    """Switch the backend (tests compare both in one process). Not thread-safe."""
    global _use_orjson, trusted_loads
    if name == "orjson":
        if _orjson is None:
            raise RuntimeError("orjson is not installed")
        _use_orjson = True
    elif name == "json":
        _use_orjson = False
    else:
        raise ValueError(f"unknown JSON backend {name!r}")
    trusted_loads = _trusted_loads()


class _SpecialNumber(Exception):
    """A number the strict decoder leaves to the tolerant one."""


def _strict_float(text: str) -> float:
    value = float(text)
    if value != 0.0 and not _TINY <= abs(value) < math.inf:
        raise _SpecialNumber  # tiny or non-finite: needs the careful writer
    return value


def _strict_int(text: str) -> int:
    if len(text) > _INT_CHARS:
        raise _SpecialNumber  # out of range: read as a double by the tolerant decoder
    value = int(text)
    if not _INT_MIN <= value <= _INT_MAX:
        raise _SpecialNumber  # orjson reads it as a double
    return value


def _strict_constant(text: str) -> float:
    raise _SpecialNumber  # NaN, Infinity, -Infinity


def _tolerant_int(text: str) -> int | float:
    if len(text) > _INT_CHARS:
        # Out of range: the double it rounds to. float() of the text is that double (both
        # round correctly, both give inf past the largest) without int()'s digit limit,
        # which a process may have changed: the limit applied is _MAX_INT_DIGITS.
        if len(text) - text.startswith("-") > _MAX_INT_DIGITS:
            raise ValueError(f"integer of more than {_MAX_INT_DIGITS} digits")
        return float(text)
    value = int(text)
    if _INT_MIN <= value <= _INT_MAX:
        return value
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


# Shared, stateless decoders (as json.loads shares one): the strict one reads bodies
# whose numbers a C serialiser writes canonically, and stops at the first that is not.
_STRICT = json.JSONDecoder(
    parse_float=_strict_float, parse_int=_strict_int, parse_constant=_strict_constant
)
_TOLERANT = json.JSONDecoder(parse_int=_tolerant_int)


def _loads(text: bytes | str) -> tuple[object, bool]:
    """Parse; return ``(value, trusted)`` or ``(NOT_JSON, False)``.

    ``trusted`` means a C serialiser may write the value as it is.
    """
    if _use_orjson and _orjson is not None:
        try:
            return _orjson.loads(text), _ORJSON_WRITES
        except _orjson.JSONDecodeError:
            pass  # the standard library decides: it accepts NaN, lone surrogates, ...
    if nests_deeper(text, STDLIB_SAFE_DEPTH):
        return NOT_JSON, False  # deeper than MAX_DEPTH: not JSON to us, whatever follows
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            return NOT_JSON, False
    if not _use_orjson:
        try:
            return _STRICT.decode(text), True
        except _SpecialNumber:
            pass
        except (ValueError, RecursionError):
            return NOT_JSON, False
    try:
        return _TOLERANT.decode(text), False
    except (ValueError, RecursionError):
        # ValueError covers JSONDecodeError and integers over sys.int_info's digit limit.
        return NOT_JSON, False


loads_small = _loads
""":func:`load_trusted` for a ``str`` of at most ``2 * MAX_DEPTH`` characters, which
cannot nest deeper than :data:`MAX_DEPTH`: the parse alone decides."""


def _too_deep(value: object, limit: int) -> bool:
    """True when ``value`` nests more than ``limit`` containers deep."""
    native = _native.speedups
    if native is not None:
        found: bool | None = native.too_deep(value, limit)
        if found is not None:
            return found
    try:
        return _deeper(value, 1, limit)
    except RecursionError:  # the caller's own stack was already deep: walk iteratively
        stack: list[tuple[object, int]] = [(value, 1)]
        while stack:
            node, depth = stack.pop()
            if depth > limit:
                return True
            children = node.values() if isinstance(node, Mapping) else node
            stack.extend((c, depth + 1) for c in children if _is_container(c))  # type: ignore[attr-defined]
        return False


def _deeper(node: Any, depth: int, limit: int) -> bool:
    # Recursion (at most `limit` frames) is the fastest walk in CPython; parsed values
    # hold only exact dicts and lists, a caller's own mappings take the slower check.
    if depth > limit:
        return True
    for child in node.values() if type(node) is dict else node:
        kind = type(child)
        if kind is dict or kind is list:
            if _deeper(child, depth + 1, limit):
                return True
        elif kind is not str and _is_container(child) and _deeper(child, depth + 1, limit):
            return True
    return False


def _is_container(value: object) -> bool:
    return not isinstance(value, str | bytes) and isinstance(value, Mapping | list | tuple)


def _deeper_than_max(value: object, body: bytes | str | None, trusted: bool) -> bool:
    if _native.speedups is not None:
        return _too_deep(value, MAX_DEPTH)  # in C: a few microseconds for 50 KB
    if body is not None:
        # Nesting cannot exceed half the length, nor the number of opening brackets.
        if len(body) <= 2 * MAX_DEPTH:
            return False
        # Counting costs about half a walk; large bodies nearly always have more than
        # MAX_DEPTH brackets, so they go straight to the walk.
        if not (trusted and _use_orjson) and len(body) <= _COUNT_BRACKETS_BELOW:
            if isinstance(body, bytes):
                brackets = body.count(b"[") + body.count(b"{")
            else:
                brackets = body.count("[") + body.count("{")
            if brackets <= MAX_DEPTH:
                return False
    if trusted and _use_orjson and _orjson is not None:
        # An orjson-parsed value has valid strings and 64-bit integers, so orjson's
        # serialiser refuses it exactly when it is nested deeper than MAX_DEPTH.
        try:
            _orjson.dumps(value)
            return False
        except _orjson.JSONEncodeError:
            return True
    return _too_deep(value, MAX_DEPTH)


def load_trusted(body: object) -> tuple[object, bool]:
    """:func:`load`, also telling whether the value may be written without a walk."""
    text: bytes | str | None
    if isinstance(body, str):
        text = body
    elif isinstance(body, bytes | bytearray | memoryview):
        text = bytes(body)
    elif isinstance(body, Mapping | list | tuple):
        return (NOT_JSON, False) if _too_deep(body, MAX_DEPTH) else (body, False)
    else:
        return NOT_JSON, False
    if len(text) > MAX_BODY_BYTES:
        return NOT_JSON, False
    value, trusted = _loads(text)
    if type(value) is not dict and type(value) is not list:
        return value, trusted
    if _deeper_than_max(value, text, trusted):
        return NOT_JSON, False
    return value, trusted


def load(body: object) -> object:
    """Parse ``body`` like :func:`parse`, but return :data:`NOT_JSON` instead of ``None``.

    Use it where a JSON ``null`` must be told apart from "not JSON".

    >>> load(b"null") is None
    True
    >>> load(b"{oops") is NOT_JSON
    True
    """
    return load_trusted(body)[0]


def parse(body: object) -> object | None:
    """Parse an LLM request body; ``None`` when it is not JSON.

    ``body`` may be ``bytes`` (must be UTF-8), ``str``, or an already-parsed mapping or
    list, which is returned as it is when it is within :data:`MAX_DEPTH`. Never raises:
    bad UTF-8, a syntax error, nesting deeper than :data:`MAX_DEPTH` and bodies over
    :data:`MAX_BODY_BYTES` all give ``None``.

    Numbers are read as orjson reads them, whichever backend is installed: integers
    outside ``[-2**63, 2**64)`` become floats. ``NaN``, ``Infinity`` and ``-Infinity``
    are accepted (as Python's ``json`` does). A JSON ``null`` body also returns
    ``None``; use :func:`load` to tell them apart.

    >>> parse(b'{"model": "gpt-4o", "messages": []}')
    {'model': 'gpt-4o', 'messages': []}
    >>> parse(b"\\xff\\xfe not utf-8") is None
    True
    >>> parse("[" * 1000 + "]" * 1000) is None
    True
    """
    value = load(body)
    return None if value is NOT_JSON else value


def dumps_trusted(value: object, trusted: bool, depth_limit: int = MAX_DEPTH) -> bytes:
    """Canonical bytes of ``value``, by the fastest writer that applies the rules to it.

    A ``trusted`` value (see :func:`load_trusted`) may go to orjson's writer, which is
    about twice as fast as ours; everything else to our C writer
    (``loopfuse.intent._speedups``), which applies every rule itself, or without it to
    ``json.dumps`` when trusted and the reference writer when not.
    """
    if trusted and _use_orjson and _orjson is not None:
        # Trusted under orjson means orjson parsed it and writes by the rules (_ORJSON_WRITES).
        try:
            dumped: bytes = _orjson.dumps(value, option=_orjson.OPT_SORT_KEYS)
            return dumped
        except _orjson.JSONEncodeError:
            pass  # lone surrogates, nesting: the careful writer decides
    elif trusted and _native.speedups is None:
        try:
            text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            return utf8(text)
        except (ValueError, RecursionError):
            pass
    return dumps(value, depth_limit)


def json_bytes(value: object, *, compact: bool = True) -> bytes:
    """``value`` as JSON in UTF-8, non-ASCII text as it is, keys in their order: the
    bytes a body sent on (a request with a note, a refusal) is written as.

    Text that UTF-8 cannot hold — a lone surrogate, which JSON may escape and so a
    parsed body may carry (a tool output cut in the middle of an emoji) — is written
    as the escape the client sent (``\\ud83d``): the whole value is then written
    ASCII-only, rather than the write raising on the request path. ``compact=False``
    keeps ``json.dumps``'s spaces after ``,`` and ``:``. Raises what ``json.dumps``
    raises for a value JSON cannot express.

    >>> json_bytes({"a": "é"}).decode()
    '{"a":"é"}'
    >>> json_bytes({"a": "cut " + chr(0xD83D)})
    b'{"a":"cut \\\\ud83d"}'
    >>> json_bytes({"a": 1}, compact=False)
    b'{"a": 1}'
    """
    separators = (",", ":") if compact else None
    text = json.dumps(value, ensure_ascii=False, separators=separators)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, separators=separators).encode("ascii")
