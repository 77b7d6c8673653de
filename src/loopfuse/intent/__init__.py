"""One canonical, dialect-free form of an LLM request, and its fingerprint.

Every guard sees requests through this package: it is the only part of loopfuse that
knows what an OpenAI, Anthropic, Gemini or Ollama body looks like, one module per
provider (:mod:`loopfuse.intent.dialect` says what each knows and asks them).

Dialects (detected from the body; see :func:`detect_dialect`):

==================  ========================================  ==============================
dialect             body                                      tool calls / results
==================  ========================================  ==============================
``openai_chat``     ``messages`` (``system``/``developer``    ``tool_calls[].function``
                    roles), ``tools``, legacy ``functions``   (arguments: JSON string),
                                                              ``role: tool`` +
                                                              ``tool_call_id``, legacy
                                                              ``function_call``
``openai_responses`` ``instructions``, ``input`` (string or   ``function_call`` /
                    items), ``tools``                         ``function_call_output`` items
                                                              by ``call_id``
``anthropic``       top-level ``system``, ``messages`` of     ``tool_use`` / ``tool_result``
                    blocks, ``tools`` (``input_schema``)      blocks by ``tool_use_id``
``gemini``          ``contents``, ``systemInstruction``,      ``functionCall`` /
                    ``tools[].functionDeclarations``          ``functionResponse`` parts
``ollama``          ``messages``, ``tools``, ``options``      ``tool_calls`` with object
                                                              arguments and no ids
==================  ========================================  ==============================

The canonical intent is a plain dict::

    {"system": [part, ...],            # omitted when there is no system prompt
     "messages": [message, ...],
     "tools": [tool, ...]}             # omitted when no tool is offered

    part    = "text"
            | {"type": "thinking", "text": ...} | {"type": "image", ...}
            | {"type": "json", "value": ...}    | {other part, volatile keys removed}
    message = {"role": "user" | "system", "content": [part, ...]}
            | {"role": "assistant", "content": [part, ...],
               "tool_calls": [{"name": ..., "arguments": <parsed JSON>}, ...]}  # if any
            | {"role": "tool", "call": <index of the call answered> | None,
               "content": [part, ...], "name": ...?,
               "is_error": bool?}  # flagged: failed (True) or succeeded (False)
            | {"role": "unknown", "value": <junk where a message should be>}
    tool    = {"name": ..., "description": ...?, "parameters": ...?, "strict": ...?}
            | {built-in tool}

Dropped as volatile: sampling parameters, ``stream``/``stream_options``, ``user``,
``metadata``, ``store``, ``service_tier``, the model, provider ids (``id``, ``call_id``,
``tool_use_id``, ``tool_call_id``, ``previous_response_id``), ``cache_control``,
thinking signatures, encrypted and redacted reasoning. Tool results are linked to their
call by position in the calling turn (``"call"``), which stays the same when a client
regenerates ids.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Final, NamedTuple

from blake3 import blake3

from loopfuse.errors import InvalidInputError
from loopfuse.intent._json import (
    MAX_BODY_BYTES,
    MAX_DEPTH,
    NOT_JSON,
    canonical_json,
    dumps_trusted,
    format_float,
    json_backend,
    json_bytes,
    load,
    load_trusted,
    parse,
)
from loopfuse.intent._native import c_extension_available
from loopfuse.intent._parts import Walk
from loopfuse.intent._textdepth import json_loads
from loopfuse.intent._threads import call_ids
from loopfuse.intent._turns import Conversation, Turn, conversation
from loopfuse.intent.dialect import ALL_DIALECTS, Dialect, dialect_of, read, reader_of

__all__ = [
    "DIALECTS",
    "MAX_BODY_BYTES",
    "MAX_DEPTH",
    "NOT_JSON",
    "Analysis",
    "Conversation",
    "Turn",
    "analyse",
    "c_extension_available",
    "call_ids",
    "canonical_intent_bytes",
    "canonical_json",
    "conversation",
    "detect_dialect",
    "extract_intent",
    "fingerprint",
    "fingerprint_canonical",
    "format_float",
    "json_backend",
    "json_bytes",
    "json_loads",
    "load",
    "parse",
    "raw_bytes",
]

DIALECTS: Final = tuple(dialect.name for dialect in ALL_DIALECTS)
"""The dialects :func:`detect_dialect` can name (``openai_chat``, ``openai_responses``,
``anthropic``, ``gemini``, ``ollama``): one module of this package each, see
:mod:`loopfuse.intent.dialect`."""


def detect_dialect(body: object) -> str | None:
    """The dialect of a request body, or ``None`` when it is not a known LLM request.

    >>> detect_dialect({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    'openai_chat'
    >>> detect_dialect({"system": "be brief", "messages": []})
    'anthropic'
    >>> detect_dialect({"contents": [{"parts": [{"text": "hi"}]}]})
    'gemini'
    >>> detect_dialect(b'{"input": "hi"}')
    'openai_responses'
    >>> detect_dialect(b"not json") is None
    True
    """
    found = read(load(body), Walk())
    return None if found is None else found[0].name


def _intent_of(value: object, walk: Walk | None = None) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None
    reader = reader_of(value)
    return None if reader is None else reader.intent(value, walk)


_HASH_JOINED_UP_TO = 1024 * 1024

# An intent nests a few levels deeper than the body it came from (parsed tool-call
# arguments sit inside a message inside a list), so its writer allows for that.
_INTENT_DEPTH_SLACK = 8


def _canonical_bytes(body: object) -> bytes | None:
    """Canonical bytes of the intent of ``body``, of its JSON value when it is not an
    LLM request, or ``None`` when it is not JSON."""
    value, trusted = load_trusted(body)
    if value is NOT_JSON:
        return None
    walk = Walk(trusted)
    intent = _intent_of(value, walk)
    if intent is None:
        return dumps_trusted(value, trusted)
    return dumps_trusted(intent, walk.ok, MAX_DEPTH + _INTENT_DEPTH_SLACK)


def extract_intent(body: object) -> dict[str, Any] | None:
    """The canonical intent of an LLM request, or ``None`` when it is not one.

    ``body`` may be ``bytes``, ``str`` or an already-parsed mapping. Never raises on
    ``bytes``/``str``: a body that is not JSON, or not a request of a known dialect,
    gives ``None``.

    >>> call = {"id": "call_9", "type": "function",
    ...         "function": {"name": "ls", "arguments": '{"path": "."}'}}
    >>> body = {"model": "gpt-4o", "temperature": 0.2, "messages": [
    ...     {"role": "system", "content": "You are terse."},
    ...     {"role": "user", "content": "List files."},
    ...     {"role": "assistant", "content": None, "tool_calls": [call]},
    ...     {"role": "tool", "tool_call_id": "call_9", "content": "a.py"}]}
    >>> extract_intent(body) == {
    ...     "system": ["You are terse."],
    ...     "messages": [
    ...         {"role": "user", "content": ["List files."]},
    ...         {"role": "assistant", "content": [],
    ...          "tool_calls": [{"name": "ls", "arguments": {"path": "."}}]},
    ...         {"role": "tool", "call": 0, "content": ["a.py"]}]}
    True
    """
    return _intent_of(load(body))


def canonical_intent_bytes(body: object) -> bytes | None:
    """Canonical JSON of the intent of ``body``; ``None`` when it is not an LLM request.

    >>> canonical_intent_bytes({"input": "hi", "temperature": 1})
    b'{"messages":[{"content":["hi"],"role":"user"}]}'
    """
    value, trusted = load_trusted(body)
    walk = Walk(trusted)
    intent = _intent_of(value, walk)
    if intent is None:
        return None
    return dumps_trusted(intent, walk.ok, MAX_DEPTH + _INTENT_DEPTH_SLACK)


class Analysis(NamedTuple):
    """Everything :func:`analyse` learns from one parse of a body."""

    value: object
    """The parsed JSON value, or :data:`NOT_JSON`."""
    dialect: str | None
    """The dialect of the whole body (see :func:`detect_dialect`), or ``None``."""
    intent: bytes | None
    """The canonical JSON of the intent, or ``None`` when the body is not an LLM request."""
    parsed_intent: dict[str, Any] | None = None
    """The intent itself (what :func:`extract_intent` returns), or ``None``."""
    key_dialect: str | None = None
    """The dialect detected with the ``ignore`` fields left out (``dialect`` when none are)."""
    ignored: frozenset[str] = frozenset()
    """The ``ignore`` fields this analysis was made with."""


def analyse(body: object, ignore: Collection[str] = ()) -> Analysis:
    """Parse ``body`` once: its value, dialects, canonical intent bytes and the intent.

    For callers that need more than a fingerprint (a cache key reads the parameters
    too; a proxy also scans the conversation) without paying for a second parse.
    ``dialect`` is detected on the whole body; ``key_dialect`` with the top-level fields
    named in ``ignore`` left out (a cache key must not flip dialect on a field it does
    not key, such as Ollama's ``keep_alive``).
    Never raises on ``bytes``/``str``. For a request of a known dialect,
    ``fingerprint(body, path) == fingerprint_canonical(analysis.intent, path)``.

    >>> found = analyse(b'{"input": "hi", "model": "m"}')
    >>> found.value["model"], found.dialect, found.intent
    ('m', 'openai_responses', b'{"messages":[{"content":["hi"],"role":"user"}]}')
    >>> found.parsed_intent
    {'messages': [{'role': 'user', 'content': ['hi']}]}
    >>> analyse(b"not json").value is NOT_JSON
    True
    >>> ollama = b'{"model": "m", "keep_alive": "5m", "messages": []}'
    >>> found = analyse(ollama, ignore={"keep_alive"})
    >>> found.dialect, found.key_dialect
    ('ollama', 'openai_chat')
    """
    ignored = frozenset(ignore)
    value, trusted = load_trusted(body)
    if value is NOT_JSON:
        return Analysis(NOT_JSON, None, None, ignored=ignored)
    walk = Walk(trusted)
    found = read(value, walk)
    if found is None:
        return Analysis(value, None, None, ignored=ignored)
    dialect, intent = found
    canon = dumps_trusted(intent, walk.ok, MAX_DEPTH + _INTENT_DEPTH_SLACK)
    key_dialect: Dialect | None = dialect
    if ignored and isinstance(value, dict) and not value.keys().isdisjoint(ignored):
        keyed = {name: field for name, field in value.items() if name not in ignored}
        key_dialect = dialect_of(keyed, walk)
    return Analysis(
        value,
        dialect.name,
        canon,
        intent,
        None if key_dialect is None else key_dialect.name,
        ignored,
    )


def fingerprint_canonical(canonical: bytes, path: str = "") -> int:
    """The fingerprint of already-canonical bytes: what :func:`fingerprint` hashes.

    >>> analysis = analyse(b'{"input": "hi"}')
    >>> fingerprint_canonical(analysis.intent, "/v1/responses") == fingerprint(
    ...     b'{"input": "hi"}', "/v1/responses")
    True
    """
    return _hashed(_path_bytes(path), canonical)


def _hashed(path: bytes, canonical: bytes) -> int:
    prefix = path + b"\n"
    if len(canonical) <= _HASH_JOINED_UP_TO:
        # One buffer hashes faster than a stream that starts with a few bytes (15 -> 12 us
        # for 45 KB): the copy costs less than it saves.
        return int.from_bytes(blake3(prefix + canonical).digest(8), "little")
    hasher = blake3(prefix)
    hasher.update(canonical)  # hashed where it lies: no copy of a body-sized buffer
    return int.from_bytes(hasher.digest(8), "little")


def raw_bytes(body: object) -> bytes:
    """The bytes a body that is not JSON is hashed as: ``bytes`` as they are, a ``str``
    as UTF-8 with lone surrogates kept (``surrogatepass``).

    Anything else cannot be hashed raw: :class:`~loopfuse.errors.InvalidInputError`.

    >>> raw_bytes("é\\ud800")
    b'\xc3\xa9\xed\xa0\x80'
    """
    if isinstance(body, str):
        return body.encode("utf-8", "surrogatepass")
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body)
    raise InvalidInputError(
        f"cannot hash a {type(body).__name__}: pass bytes, str, or a JSON-compatible "
        f"mapping nested at most {MAX_DEPTH} deep"
    )


def _path_bytes(path: object) -> bytes:
    if not isinstance(path, str):
        raise InvalidInputError(f"path must be a str, not {type(path).__name__}")
    return path.encode("utf-8", "surrogatepass")


def fingerprint(body: object, path: str = "") -> int:
    """The 64-bit fingerprint of a request's intent.

    ``blake3(path + "\\n" + canonical intent)``, first 8 bytes read as a little-endian
    unsigned integer. Two bodies that ask the same thing (ids regenerated, cache
    breakpoints moved, temperature changed, keys reordered) fingerprint the same.

    Fallbacks, so that any ``bytes``/``str`` gets a fingerprint and none raises:
    JSON that is not a known dialect hashes the canonical JSON of the whole value;
    a body that is not JSON (see :func:`parse`) hashes its raw bytes (a ``str`` as
    UTF-8, lone surrogates kept as ``surrogatepass`` bytes). An already-parsed value
    that JSON cannot express raises :class:`~loopfuse.errors.InvalidInputError`.

    >>> a = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0}
    >>> b = {"messages": [{"content": "hi", "role": "user"}], "model": "m", "temperature": 1}
    >>> fingerprint(a) == fingerprint(b)
    True
    >>> fingerprint(a, path="/v1/chat/completions") == fingerprint(a)
    False
    >>> fingerprint(b'{"messages": [{"role": "user", "content": "hi"}]}')
    7915524336615399434
    """
    encoded = _path_bytes(path)  # a bad path is an error before any work
    data = _canonical_bytes(body)
    if data is None:
        data = raw_bytes(body)
    return _hashed(encoded, data)


def __dir__() -> list[str]:
    """What ``dir()`` shows: the public API, not the imports and helpers."""
    from loopfuse._api import public_dir

    return public_dir(globals())
