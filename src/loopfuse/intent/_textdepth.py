"""How deep a JSON text nests, measured on the text, before any parser recurses into it.

The standard library's JSON parser recurses in C: about 130 bytes of C stack per level
of nesting, up to the interpreter's recursion limit (about 1,000 levels, 130 KB). That
is more stack than a thread has on musl (128 KiB) or wherever a server sets
``threading.stack_size``, and running out of stack kills the process. So a text that
could nest deeper than :data:`STDLIB_SAFE_DEPTH` is measured here first, without
recursion, and one that does nest deeper never reaches that parser.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any, Final

STDLIB_SAFE_DEPTH: Final = 512
"""The deepest nesting handed to the standard library's parser: about 67 KB of C stack,
half of a 128 KiB thread's. Deeper than :data:`~loopfuse.intent.MAX_DEPTH`, so a body
the intent layer accepts is never measured twice."""

# A backslash escape is never a quote or a bracket of the JSON structure.
_ESCAPE: Final = re.compile(rb"\\.", re.DOTALL)
_STRING: Final = re.compile(rb'"[^"]*"')
_NOT_BRACKETS: Final = bytes(c for c in range(256) if c not in b"[]{}")
_STEP: Final = tuple(1 if c in b"[{" else -1 if c in b"]}" else 0 for c in range(256))
_CHUNK: Final = 4096


def _structure(text: bytes | str) -> bytes:
    """The brackets of ``text`` that are outside strings, in order."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if b"\\" in data:
        data = _ESCAPE.sub(b"", data)
    return _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)


def nesting(text: bytes | str) -> int:
    """How deep the brackets outside strings of ``text`` nest.

    For a JSON text this is the depth of its containers; for any other text it is at
    least as deep as a JSON parser gets before it meets the first error.

    >>> nesting(b'{"a": [1, {"b": "]]]"}]}'), nesting('"[[["'), nesting(b"1")
    (3, 0, 0)
    """
    return max(accumulate(map(_STEP.__getitem__, _structure(text))), default=0)


def nests_deeper(text: bytes | str, limit: int) -> bool:
    """Whether ``text`` nests deeper than ``limit`` (see :func:`nesting`).

    Cheap for a text with at most ``limit`` opening brackets, which cannot nest deeper:
    only other texts are measured, and a measure stops at the first chunk that goes
    deeper (a 100,000-deep text is rejected after its first few thousand brackets).

    >>> nests_deeper("[" * 600, 512), nests_deeper('["' + "[" * 600 + '"]', 512)
    (True, False)
    """
    if len(text) <= limit:
        return False
    if isinstance(text, str):
        openings = text.count("[") + text.count("{")
    else:
        openings = text.count(b"[") + text.count(b"{")
    if openings <= limit:
        return False
    structure = _structure(text)
    depth = 0
    for start in range(0, len(structure), _CHUNK):
        chunk = structure[start : start + _CHUNK]
        if max(accumulate(map(_STEP.__getitem__, chunk), initial=depth)) > limit:
            return True
        depth += chunk.count(b"[") + chunk.count(b"{") - chunk.count(b"]") - chunk.count(b"}")
    return False


def json_loads(text: str | bytes) -> Any:
    """:func:`json.loads`, except that a text nested deeper than
    :data:`STDLIB_SAFE_DEPTH` raises :class:`RecursionError` without being parsed
    (where ``json.loads`` recurses until the interpreter's limit, or past the end of a
    small thread stack).

    >>> json_loads('{"a": [1]}')
    {'a': [1]}
    >>> json_loads("[" * 600 + "]" * 600)
    Traceback (most recent call last):
        ...
    RecursionError: JSON nested deeper than 512
    """
    if nests_deeper(text, STDLIB_SAFE_DEPTH):
        raise RecursionError(f"JSON nested deeper than {STDLIB_SAFE_DEPTH}")
    return json.loads(text)
