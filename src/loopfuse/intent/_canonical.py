"""The canonical JSON writer: every rule of :func:`canonical_json`, applied by hand.

The fast paths in ``_json`` hand a parsed body to a C serialiser; this module is the
reference they must agree with (tests/test_intent_backends.py), and the path for any
value whose provenance is unknown (a caller's own mapping, a float subclass, ...).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from json.encoder import encode_basestring  # the C string escaper, ensure_ascii=False
from typing import Final

from loopfuse.errors import InvalidInputError
from loopfuse.intent import _native

MAX_DEPTH: Final = 254
"""Values nested deeper than this many arrays/objects are treated as not JSON.

Real LLM requests nest a few levels (tool schemas perhaps 10-20). 254 is the nesting
orjson can serialise, and far below both parsers' recursion limits, so whether a body
is "too deep" never depends on the backend.
"""

# orjson reads integers in this range exactly and every other integer as a double.
INT_MIN: Final = -(2**63)
INT_MAX: Final = 2**64 - 1


def format_float(value: float) -> str:
    """The canonical text of a float.

    Shortest round-trip digits; plain notation with a fractional part when
    ``1e-5 <= |x| < 1e16`` (``1.0``, ``0.00001``), otherwise ``d.ddde±N`` with no
    padding (``1e-6``, ``1.5e+16``); non-finite values are ``null`` (as JavaScript's
    ``JSON.stringify`` writes them).

    >>> [format_float(x) for x in (1.0, 0.1, 1e-5, 1.5e-7, 1e16, -0.0, float("nan"))]
    ['1.0', '0.1', '0.00001', '1.5e-7', '1e+16', '-0.0', 'null']
    """
    if value != value or value in (math.inf, -math.inf):
        return "null"
    text = float.__repr__(value)  # not repr(): a subclass (numpy's float64) may override it
    if "e" not in text:
        return text
    mantissa, _, exponent = text.partition("e")
    power = int(exponent)
    if power == -5:
        sign = "-" if mantissa.startswith("-") else ""
        return f"{sign}0.0000{mantissa.lstrip('-').replace('.', '')}"
    return f"{mantissa}e{power:+d}" if power > 0 else f"{mantissa}e{power}"


def canonical_json(value: object) -> bytes:
    """The canonical JSON bytes of ``value``.

    Rules (the same bytes whichever JSON backend is installed):

    - object keys sorted by code point; no whitespace (``,`` and ``:`` separators); UTF-8,
      non-ASCII characters written as themselves, control characters as ``\\\\u00XX``
      (``\\\\n``, ``\\\\t`` … in their short forms), a lone surrogate as ``\\\\udXXX``;
    - integers in ``[-2**63, 2**64)`` as decimal integers; other integers are read as
      doubles, as orjson reads them;
    - floats as :func:`format_float` writes them (``1.0`` stays ``1.0``, distinct from
      ``1``); ``NaN`` and infinities as ``null``;
    - tuples are arrays; non-string keys are written as ``json.dumps`` writes them.

    Raises :class:`~loopfuse.errors.InvalidInputError` for values JSON cannot express
    and for nesting deeper than :data:`MAX_DEPTH`.

    >>> canonical_json({"b": [1.0, 2, 1e-5, float("nan")], "a": "é"})
    b'{"a":"\\xc3\\xa9","b":[1.0,2,0.00001,null]}'
    """
    return dumps(value, MAX_DEPTH)


def dumps(value: object, limit: int) -> bytes:
    """:func:`canonical_json` with containers nested at most ``limit`` deep."""
    native = _native.speedups
    if native is not None:
        data: bytes | None = native.dumps(value, limit)
        if data is not None:
            return data  # the C twin of write(): the same bytes, or it declines
    out: list[str] = []
    write(value, out, limit)
    return utf8("".join(out))


def utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates: "backslashreplace" writes exactly the JSON escape \udXXX.
        return text.encode("utf-8", "backslashreplace")


def _number(value: int | float) -> str:
    if isinstance(value, float):
        return format_float(value)
    if INT_MIN <= value <= INT_MAX:
        return int.__repr__(value)
    try:
        return format_float(float(value))
    except OverflowError:
        return "null"


def _key(key: object) -> str:
    if isinstance(key, str):
        return str.__str__(key)  # the characters, even for a subclass overriding __str__
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int | float):
        return _number(key)
    raise InvalidInputError(f"object key of type {type(key).__name__} is not a JSON key")


def write(value: object, out: list[str], limit: int, depth: int = 0) -> None:
    """Append the canonical text of ``value`` to ``out``: every rule, applied by hand."""
    if isinstance(value, str):
        out.append(encode_basestring(value))
    elif value is None:
        out.append("null")
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, int | float):
        out.append(_number(value))
    elif isinstance(value, Mapping | list | tuple):
        if depth >= limit:
            raise InvalidInputError(f"value nested deeper than MAX_DEPTH={MAX_DEPTH}")
        if isinstance(value, Mapping):
            items = sorted({_key(k): v for k, v in value.items()}.items())
            out.append("{")
            for index, (k, v) in enumerate(items):
                if index:
                    out.append(",")
                out.append(encode_basestring(k))
                out.append(":")
                write(v, out, limit, depth + 1)
            out.append("}")
        else:
            out.append("[")
            for index, item in enumerate(value):
                if index:
                    out.append(",")
                write(item, out, limit, depth + 1)
            out.append("]")
    else:
        raise InvalidInputError(f"{type(value).__name__} is not a JSON value")
