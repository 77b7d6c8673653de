"""What identifies the answer to an LLM request: the bytes behind ``RequestKey.from_request``.

A cached answer may be served for a new request only when the model would be asked the
same thing in the same way, so the key material is:

- ``dialect``: the API shape (an OpenAI Chat answer cannot be served to a Responses
  client, even for the same conversation);
- ``model``: the body's ``model``; when the body has none, the model named by the URL
  path (:func:`loopfuse.intent.dialect.model_from_path`: Gemini and Vertex
  ``…/models/NAME:generateContent``, ``tunedModels/NAME``, ``endpoints/ID``, Azure
  ``…/deployments/NAME/…``, Bedrock ``…/model/ID/…``); when neither names one, the whole
  path (query string dropped), so that two endpoints whose model we cannot see never
  share answers;
- ``intent``: the canonical, dialect-free conversation from :mod:`loopfuse.intent`
  (system prompt, messages, tool calls with parsed arguments, tools offered), which
  already ignores provider ids, ``cache_control`` and signatures;
- ``params``: every other top-level field of the body, except the few that cannot
  change the answer (:data:`IGNORED_PARAMS`), and those the intent was built from (each
  dialect's :meth:`~loopfuse.intent.dialect.Dialect.intent_fields`: they are keyed
  through the intent). Listing what to *drop* rather than what to
  keep is deliberate: a parameter we have never heard of (a new sampling knob, a
  provider extension) can then only cost a cache miss, never serve a wrong answer.
  Temperature, ``top_p``/``top_k``, ``seed``, every spelling of the token limit
  (``max_tokens``, ``max_completion_tokens``, ``max_output_tokens``, Gemini
  ``generationConfig.maxOutputTokens``, Ollama ``options.num_predict``), ``stop`` /
  ``stop_sequences``, ``tool_choice``, ``response_format`` / ``text.format``,
  ``reasoning`` / ``reasoning_effort`` / ``thinking``, ``n``, ``logit_bias``,
  penalties, Gemini ``generationConfig`` / ``safetySettings`` / ``cachedContent``,
  Ollama ``options`` / ``format`` / ``think``, ``previous_response_id`` (it names
  server-side conversation state) all count.

Numbers are written as :func:`loopfuse.intent.canonical_json` writes them, and key
order never matters.

Fallbacks (never an exception for ``bytes``/``str``): JSON that is not a request of a
known dialect keys on the canonical JSON of the whole value plus the path; a body that
is not JSON at all keys on its raw bytes (a ``str`` as UTF-8, lone surrogates kept as
``surrogatepass`` bytes) plus the path. The query string of a path (which may carry an
API key) is never part of a key. An already-parsed value that JSON cannot express
(or nested deeper than :data:`loopfuse.intent.MAX_DEPTH`) raises
:class:`~loopfuse.errors.InvalidInputError`, as :func:`loopfuse.intent.fingerprint` does.
"""

from __future__ import annotations

import struct
from typing import Any, Final

from loopfuse import intent
from loopfuse.errors import InvalidInputError
from loopfuse.intent.dialect import dialect_named, model_from_path

__all__ = [
    "IGNORED_PARAMS",
    "analysis_material",
    "canonical_object",
    "request_material",
]

IGNORED_PARAMS: Final = frozenset(
    {
        "stream",
        "stream_options",
        "user",
        "metadata",
        "store",
        "service_tier",
        "safety_identifier",  # OpenAI's successor of ``user``
        "prompt_cache_key",  # routes to a prompt cache; same answer
        "prompt_cache_retention",
        "keep_alive",  # Ollama: how long the model stays loaded
        "cache_control",  # Anthropic automatic prompt caching
    }
)
"""Top-level body fields that do not change the answer, so they are not in the key."""

_SCHEME: Final = "loopfuse.request/1"
# The member names and constant values request_material writes, written once (they are
# in every key): a str equal to one of them has the same canonical JSON.
_WRITTEN: Final = {
    text: intent.canonical_json(text)
    for text in (
        *("dialect", "endpoint", "intent", "key", "model", "params", "path_model", _SCHEME),
        *intent.DIALECTS,
    )
}
_RAW_TAG: Final = b"loopfuse.request.raw/1\x00"


def _path_str(path: object) -> str:
    if not isinstance(path, str):
        raise InvalidInputError(f"path must be a str, not {type(path).__name__}")
    return path


def _without_query(path: str) -> str:
    return path.split("?", 1)[0].split("#", 1)[0]


def request_material(body: object, path: str = "") -> bytes:
    """The bytes ``RequestKey.from_request(body, path)`` hashes.

    Canonical JSON for a JSON body, a tagged raw encoding for anything else; the two
    cannot be confused (canonical JSON never starts with the raw tag's ``l``).

    >>> a = request_material({"model": "m", "stream": True, "temperature": 1,
    ...                       "messages": [{"role": "user", "content": "hi"}]})
    >>> a
    b'{"dialect":"openai_chat","intent":{"messages":[{"content":["hi"],"role":"user"}]},"key":"loopfuse.request/1","model":"m","params":{"temperature":1}}'
    >>> a == request_material(b'{"messages":[{"role":"user","content":"hi"}],"model":"m",'
    ...                       b'"temperature":1,"user":"u-42"}')
    True
    >>> request_material(b"\\xff not json", path="/x")
    b'loopfuse.request.raw/1\\x00\\x02\\x00\\x00\\x00\\x00\\x00\\x00\\x00/x\\xff not json'
    """
    path = _path_str(path)
    # One parse: the value, the dialect (detected on what is keyed, so that an ignored
    # field such as Ollama's keep_alive cannot flip it) and the canonical intent.
    analysis = intent.analyse(body, ignore=IGNORED_PARAMS)
    if analysis.value is intent.NOT_JSON:
        return _raw_material(body, path)
    return _json_material(analysis, path)


def analysis_material(analysis: intent.Analysis, path: str = "") -> bytes:
    """:func:`request_material` of a body already analysed with
    ``intent.analyse(body, ignore=IGNORED_PARAMS)``: the same bytes, without a second parse.

    An analysis made with other ``ignore`` fields, or of a body that is not JSON (its key
    is made of the raw bytes, which an analysis does not keep), raises
    :class:`~loopfuse.errors.InvalidInputError`.

    >>> body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    >>> found = intent.analyse(body, ignore=IGNORED_PARAMS)
    >>> analysis_material(found) == request_material(body)
    True
    """
    path = _path_str(path)
    if not isinstance(analysis, intent.Analysis):
        raise InvalidInputError(f"expected an intent.Analysis, not {type(analysis).__name__}")
    if not analysis.ignored >= IGNORED_PARAMS:
        raise InvalidInputError(
            "the analysis must be made with intent.analyse(body, ignore=IGNORED_PARAMS)"
        )
    if analysis.value is intent.NOT_JSON:
        raise InvalidInputError("the body is not JSON: key it with RequestKey.from_request")
    return _json_material(analysis, path)


def _json_material(analysis: intent.Analysis, path: str) -> bytes:
    """The material of a JSON body's analysis (made with ``ignore=IGNORED_PARAMS``)."""
    value, dialect, intent_bytes = analysis.value, analysis.key_dialect, analysis.intent
    if dialect is None or intent_bytes is None or not isinstance(value, dict):
        # The value is written on its own, not inside the wrapper: the wrapper adds a
        # level, and a body nested exactly MAX_DEPTH deep is JSON and must get a key.
        fallback = {
            "key": _SCHEME,
            "path": _without_query(path),
            "value": intent.canonical_json(value),
        }
        return canonical_object(fallback)
    keyed = {name: field for name, field in value.items() if name not in IGNORED_PARAMS}
    # A field is left out of the params only when the intent really read it.
    consumed = dialect_named(dialect).intent_fields(keyed)
    params = {name: field for name, field in keyed.items() if name not in consumed}
    model = params.pop("model", None)
    path_model = model_from_path(path)
    if model is None:
        model, path_model = path_model, None
    members = {
        "dialect": dialect,
        "intent": intent_bytes,
        "key": _SCHEME,
        "model": model,
        "params": params,
    }
    if model is None:
        members["endpoint"] = _without_query(path)
    if path_model is not None:
        # The upstream may serve the path's model (an Azure deployment, a Gemini URL)
        # whatever the body says: two such endpoints must never share an answer.
        members["path_model"] = path_model
    return canonical_object(members)


def canonical_object(members: dict[str, Any]) -> bytes:
    """The canonical JSON of an object, written one member at a time; a ``bytes`` member
    is taken as canonical JSON already.

    Equal to ``canonical_json`` of the object (a canonical object is its members in key
    order, each canonical), so a member that is expensive to write the careful way (a
    parsed value, a float) costs only its own walk, and a member already canonical
    costs nothing.

    >>> fields = {"b": [1.0, 0.25], "a": {"y": "é", "x": None}}
    >>> canonical_object(fields) == intent.canonical_json(fields)
    True
    >>> canonical_object({"b": 2, "a": b'{"x":1}'})
    b'{"a":{"x":1},"b":2}'
    """
    parts = [b"{"]
    for name in sorted(members):
        member = members[name]
        if len(parts) > 1:
            parts.append(b",")
        parts.append(_written(name))
        parts.append(b":")
        # A bytes member (the intent, tens of KB) is copied once, by the join below.
        parts.append(member if isinstance(member, bytes) else _written(member))
    parts.append(b"}")
    return b"".join(parts)


def _written(value: object) -> bytes:
    if type(value) is str:
        known = _WRITTEN.get(value)
        if known is not None:
            return known
    return intent.canonical_json(value)


def _raw_material(body: object, path: str) -> bytes:
    raw = intent.raw_bytes(body)
    encoded_path = _without_query(path).encode("utf-8", "surrogatepass")
    return _RAW_TAG + struct.pack("<Q", len(encoded_path)) + encoded_path + raw
