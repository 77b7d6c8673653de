"""What loopfuse knows of each provider's API: the :class:`Dialect` protocol, the five
dialects, and the dialect of a request.

Every provider is one module of :mod:`loopfuse.intent` (:mod:`.openai_chat`,
:mod:`.openai_responses`, :mod:`.anthropic`, :mod:`.gemini`, :mod:`.ollama`) holding one
:class:`Dialect`: how its bodies are recognised and walked into the canonical intent,
which of their fields name the end user or ask for another sample, whether a request
streams, what a refusal looks like, where a note for the model goes, what a URL path
says. Everything else in loopfuse asks the dialects; nothing else knows a provider's
field names.

Three questions are asked of a request, each of the dialect that can answer it:

- **what the body is** (its intent, its dialect, the fields the intent read): the body
  alone, by :func:`reader_of` and :func:`dialect_of`;
- **whom the request goes to** (the refusal's shape, the end user, where a note goes):
  :func:`dialect_for`, the path first, then the body's dialect;
- **what the path or the fields ask for whatever the dialect** (the model a path names,
  a path that streams, a field that asks for another sample): every dialect, so that a
  gateway passing another provider's spelling through is still read
  (:func:`model_from_path`, :func:`is_streaming`, :func:`sampling_identity`,
  :func:`is_sampled`).

:func:`read`, :func:`reader_of` and :func:`dialect_of` are what
:func:`loopfuse.intent.analyse`, :func:`~loopfuse.intent.detect_dialect` and
:func:`~loopfuse.intent.conversation` are built on; their ``walk`` is the intent walk's
record of what it met (``loopfuse.intent._parts.Walk``), which a caller never builds
for any other purpose.

>>> import json
>>> dialect = dialect_for("/v1/messages", "openai_chat")  # an Anthropic body without system
>>> dialect
<dialect anthropic>
>>> json.loads(dialect.error_body("repeat", "stop"))["error"]
{'type': 'loop_detected', 'message': 'stop'}
>>> model_from_path("/v1beta/models/gemini-2.0-flash:generateContent")
'models/gemini-2.0-flash'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Protocol

from loopfuse.errors import InvalidInputError
from loopfuse.intent._parts import Walk
from loopfuse.intent._wire import field
from loopfuse.intent.anthropic import ANTHROPIC
from loopfuse.intent.gemini import GEMINI
from loopfuse.intent.ollama import OLLAMA
from loopfuse.intent.openai_chat import OPENAI_CHAT
from loopfuse.intent.openai_responses import OPENAI_RESPONSES

__all__ = [
    "ALL_DIALECTS",
    "ENDPOINTS",
    "Dialect",
    "add_note",
    "dialect_for",
    "dialect_named",
    "dialect_of",
    "is_sampled",
    "is_streaming",
    "model_from_path",
    "read",
    "reader_of",
    "sampling_identity",
]


class Dialect(Protocol):
    """One provider API: everything loopfuse reads from, and writes to, its requests.

    ``value`` is always a parsed request body (a ``dict``), ``path`` the request's URL
    path. Nothing here raises on junk: a field of the wrong type is absent.
    """

    @property
    def name(self) -> str:
        """The dialect's name (one of :data:`loopfuse.intent.DIALECTS`)."""

    @property
    def conversation(self) -> str:
        """The top-level field holding the conversation (``messages``, ``contents``,
        ``input``): a body whose field holds a list is of this dialect's family. The
        dialects that share a conversation share its walk."""

    @property
    def text_conversation(self) -> bool:
        """Whether a string in :attr:`conversation` is a conversation too (a Responses
        ``input`` string: one user message)."""

    @property
    def endpoints(self) -> tuple[str, ...]:
        """Endings of the request paths of its LLM endpoints (:data:`ENDPOINTS`)."""

    @property
    def seed_fields(self) -> tuple[tuple[str, ...], ...]:
        """Paths of the fields that seed the sampling (``("options", "seed")``)."""

    @property
    def choice_fields(self) -> tuple[tuple[str, ...], ...]:
        """Paths of the fields that ask for several choices (``("n",)``)."""

    @property
    def temperature_fields(self) -> tuple[tuple[str, ...], ...]:
        """Paths of the sampling temperature."""

    @property
    def answers_run(self) -> bool:
        """Whether a run of consecutive answers is one turn (one Responses response
        holds several output items), not one turn each."""

    def detect(self, value: Mapping[str, Any], walk: Walk) -> bool:
        """Whether a body whose conversation this dialect reads is this dialect's, given
        what the intent walk met (``walk``)."""

    def intent(self, value: dict[str, Any], walk: Walk | None = None) -> dict[str, Any]:
        """The canonical intent of a body holding this dialect's conversation."""

    def intent_fields(self, value: Mapping[str, Any]) -> frozenset[str]:
        """The top-level fields :meth:`intent` reads (a cache key keys them through the
        intent, not as parameters)."""

    def is_answer(self, item: object) -> bool:
        """Whether an item of the conversation is the model's: a turn starts there."""

    def end_users(self, value: Mapping[str, Any]) -> tuple[tuple[str, object], ...]:
        """The fields naming the end user, most preferred first, as ``(dotted name,
        value or None)``: the caller decides which one counts."""

    def streams(self, value: Mapping[str, Any]) -> bool:
        """Whether the body asks for a streamed answer."""

    def path_streams(self, path: str) -> bool:
        """Whether ``path`` asks for a streamed answer, whatever the body says."""

    def claims_path(self, path: str) -> bool:
        """Whether ``path`` alone names this API (its refusals then take this shape)."""

    def path_model(self, path: str) -> str | None:
        """The model ``path`` names in this provider's URL scheme, or ``None``."""

    def error_body(self, kind: str, message: str) -> bytes:
        """The JSON body of an HTTP 400 refusal of a loop of ``kind``, which the
        provider's SDK raises as its ordinary error, showing ``message``."""

    def add_note(self, value: object, note: str) -> dict[str, Any] | None:
        """A copy of ``value`` with ``note`` where this dialect wants text for the model,
        the conversation kept valid; ``None`` when ``value`` holds no conversation of
        this dialect's. ``value`` itself is never changed."""


ALL_DIALECTS: Final[tuple[Dialect, ...]] = (
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    ANTHROPIC,
    GEMINI,
    OLLAMA,
)
"""Every dialect, in the order of :data:`loopfuse.intent.DIALECTS`."""

_NAMED: Final = {dialect.name: dialect for dialect in ALL_DIALECTS}

# Bodies are recognised in this order: a ``messages`` body first (Anthropic and Ollama
# by their own marks, else OpenAI Chat), then ``contents``, then ``input``. The dialects
# that share a conversation share its walk: the first of them reads, each detects.
_RECOGNISED: Final[tuple[Dialect, ...]] = (ANTHROPIC, OLLAMA, OPENAI_CHAT, GEMINI, OPENAI_RESPONSES)


_Family = tuple[str, type | tuple[type, ...], Dialect, tuple[Dialect, ...]]


def _families(order: tuple[Dialect, ...]) -> tuple[_Family, ...]:
    """Per conversation, in ``order``: its field, the types it may hold, the dialect that
    reads it (the first), and every dialect of it, in order."""
    families: dict[str, list[Dialect]] = {}
    for dialect in order:
        families.setdefault(dialect.conversation, []).append(dialect)
    return tuple(
        (key, (str, list) if members[0].text_conversation else list, members[0], tuple(members))
        for key, members in families.items()
    )


_FAMILIES: Final = _families(_RECOGNISED)

# Requests are told apart in this order: a dialect named by the path or by the body,
# Anthropic first (an Anthropic body reads like an OpenAI Chat one); OpenAI paths name
# nothing (every compatible server answers there), so OpenAI Chat is what is left.
_ADDRESSED: Final[tuple[Dialect, ...]] = (ANTHROPIC, GEMINI, OLLAMA, OPENAI_RESPONSES)

# Paths are read for a model in this order: Vertex AI's scheme, then Azure's, then
# Bedrock's (a path that names two is junk; its cache key stays what it was).
_PATH_MODELS: Final[tuple[Dialect, ...]] = (
    GEMINI,
    OPENAI_CHAT,
    ANTHROPIC,
    OPENAI_RESPONSES,
    OLLAMA,
)

ENDPOINTS: Final = tuple(path for dialect in ALL_DIALECTS for path in dialect.endpoints)
"""Path endings of every dialect's LLM endpoints: OpenAI Chat Completions and Responses
(and every server compatible with them), Anthropic Messages, Gemini, Ollama."""


def _union(fields: tuple[tuple[str, ...], ...]) -> tuple[tuple[str, ...], ...]:
    return tuple(dict.fromkeys(fields))


_SEED_FIELDS: Final = _union(tuple(p for d in ALL_DIALECTS for p in d.seed_fields))
_CHOICE_FIELDS: Final = _union(tuple(p for d in ALL_DIALECTS for p in d.choice_fields))
_TEMPERATURE_FIELDS: Final = _union(tuple(p for d in ALL_DIALECTS for p in d.temperature_fields))


def dialect_named(name: str) -> Dialect:
    """The dialect called ``name`` (one of :data:`loopfuse.intent.DIALECTS`).

    >>> dialect_named("gemini")
    <dialect gemini>
    >>> dialect_named("cohere")
    Traceback (most recent call last):
    ...
    loopfuse.errors.InvalidInputError: unknown dialect 'cohere': one of openai_chat, openai_responses, anthropic, gemini, ollama
    """  # noqa: E501
    found = _NAMED.get(name) if isinstance(name, str) else None
    if found is None:
        raise InvalidInputError(f"unknown dialect {name!r}: one of {', '.join(_NAMED)}")
    return found


def reader_of(value: object) -> Dialect | None:
    """The dialect whose walk reads the parsed body ``value`` into its intent
    (``reader_of(value).intent(value)``): the first whose conversation the body holds.
    ``None`` when ``value`` is not a request of a known dialect.

    >>> reader_of({"system": "x", "messages": []}), reader_of({"prompt": "hi"})
    (<dialect anthropic>, None)
    """
    if not isinstance(value, dict):
        return None
    for key, kinds, reader, _ in _FAMILIES:
        if isinstance(value.get(key), kinds):
            return reader
    return None


def read(value: object, walk: Walk) -> tuple[Dialect, dict[str, Any]] | None:
    """The dialect of the parsed body ``value`` and its canonical intent, walked with
    ``walk`` (one walk: the dialect is told by what it met); ``None`` when ``value`` is
    not a request of a known dialect.

    >>> from loopfuse.intent._parts import Walk
    >>> read({"model": "m", "input": "hi"}, Walk())
    (<dialect openai_responses>, {'messages': [{'role': 'user', 'content': ['hi']}]})
    """
    if not isinstance(value, dict):
        return None
    for key, kinds, reader, members in _FAMILIES:
        if isinstance(value.get(key), kinds):
            found = reader.intent(value, walk)
            dialect = _detected(members, value, walk)
            return None if dialect is None else (dialect, found)
    return None


def dialect_of(value: object, walk: Walk) -> Dialect | None:
    """The dialect of the parsed body ``value``, whose intent ``walk`` went through.

    >>> from loopfuse.intent._parts import Walk
    >>> dialect_of({"model": "m", "keep_alive": "5m", "messages": []}, Walk())
    <dialect ollama>
    """
    if not isinstance(value, dict):
        return None
    for key, kinds, _, members in _FAMILIES:
        if isinstance(value.get(key), kinds):
            return _detected(members, value, walk)
    return None


def _detected(members: tuple[Dialect, ...], value: dict[str, Any], walk: Walk) -> Dialect | None:
    """The first of one family's ``members`` that detects ``value`` as its own."""
    for dialect in members:
        if dialect.detect(value, walk):
            return dialect
    return None


def dialect_for(path: str, body_dialect: str | None) -> Dialect:
    """The dialect of the API a request to ``path`` goes to, its body of dialect
    ``body_dialect`` (``None``: not known): the one its refusal is written in, its end
    user read from, its note written for.

    The path first, where it names an API (``/messages``, ``:generateContent``,
    ``/api/chat``), then the body's dialect: an Anthropic body without a system prompt
    reads like an OpenAI Chat one, a plain ``messages`` body to ``/api/chat`` is Ollama's.
    Anthropic wins over Gemini and Ollama, Gemini over Ollama; what is left is OpenAI
    Chat (Responses when the body is).

    >>> dialect_for("/v1/messages", "openai_chat"), dialect_for("/x", "anthropic")
    (<dialect anthropic>, <dialect anthropic>)
    >>> dialect_for("/v1beta/models/m:streamGenerateContent", None)
    <dialect gemini>
    >>> dialect_for("/api/chat", "openai_chat"), dialect_for("/v1/responses", "openai_responses")
    (<dialect ollama>, <dialect openai_responses>)
    >>> dialect_for("/v1/chat/completions", None)
    <dialect openai_chat>
    """
    for dialect in _ADDRESSED:
        if dialect.claims_path(path) or dialect.name == body_dialect:
            return dialect
    return OPENAI_CHAT


def add_note(value: object, note: str, dialect: Dialect) -> dict[str, Any] | None:
    """A copy of the parsed body ``value`` with ``note`` for the model, where ``dialect``
    (the request's: :func:`dialect_for`) wants it; ``None`` when the body has no place
    for one. ``value`` itself is never changed.

    A body whose conversation is another dialect's (an OpenAI Chat body sent on a Gemini
    path) gets the note where its own dialect wants it: a note must fit the body it is
    written into.

    >>> body = {"messages": [{"role": "user", "content": "hi"}]}
    >>> add_note(body, "stop", ANTHROPIC)["messages"][-1]["content"]
    [{'type': 'text', 'text': 'hi'}, {'type': 'text', 'text': 'stop'}]
    >>> add_note(body, "stop", GEMINI)["messages"][-1]["content"]
    'hi\\n\\nstop'
    >>> add_note({"prompt": "hi"}, "stop", OPENAI_CHAT) is None
    True
    """
    reader = reader_of(value)
    if reader is None:
        return None
    if reader.conversation != dialect.conversation:
        own = dialect_of(value, Walk())
        if own is not None:
            dialect = own
    return dialect.add_note(value, note)


def _scalar(value: object) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)


def sampling_identity(value: Mapping[str, Any]) -> dict[str, object] | None:
    """The fields of the parsed body ``value`` that ask for another sample of the same
    prompt (any dialect's seed or number of choices), or ``None``.

    The same prompt with another seed, or asking for more choices, is deliberate
    re-sampling, not a repeat. Every dialect's fields are read, whatever the body's
    dialect: a gateway may take another provider's spelling, and reading one field too
    many can only keep two requests apart.

    >>> sampling_identity({"seed": 7, "n": 2, "temperature": 1})
    {'seed': 7, 'n': 2}
    >>> sampling_identity({"generationConfig": {"seed": 3, "candidateCount": 2}})
    {'generationConfig.seed': 3, 'generationConfig.candidateCount': 2}
    >>> sampling_identity({"temperature": 0.2}) is None
    True
    """
    found: dict[str, object] = {}
    for path in (*_SEED_FIELDS, *_CHOICE_FIELDS):
        named = field(value, path)
        if _scalar(named):
            found[".".join(path)] = named
    return found or None


def is_sampled(value: Mapping[str, Any]) -> bool:
    """Whether the parsed body ``value`` asks for a random sample: an explicit
    temperature above 0 and no seed (any dialect's fields, as
    :func:`sampling_identity` reads them). A request that names no temperature is not:
    its randomness is the provider's default, not something the caller asked for.

    >>> is_sampled({"temperature": 0.7}), is_sampled({"temperature": 0.7, "seed": 1})
    (True, False)
    >>> is_sampled({"options": {"temperature": 0}}), is_sampled({})
    (False, False)
    """
    if any(field(value, path) is not None for path in _SEED_FIELDS):
        return False
    for path in _TEMPERATURE_FIELDS:
        found = field(value, path)
        if isinstance(found, int | float) and not isinstance(found, bool) and found > 0:
            return True
    return False


def is_streaming(value: Mapping[str, Any], path: str, dialect: Dialect) -> bool:
    """Whether a request to ``path`` with the parsed body ``value``, of dialect
    ``dialect`` (the body's), asks for a streamed answer: a path that streams
    (Gemini's ``:streamGenerateContent``), or the body as its dialect reads it
    (``stream: true``; Ollama streams unless told not to).

    >>> is_streaming({"stream": True}, "/v1/chat/completions", OPENAI_CHAT)
    True
    >>> is_streaming({}, "/api/chat", OLLAMA), is_streaming({}, "/v1/messages", ANTHROPIC)
    (True, False)
    >>> is_streaming({}, "/v1beta/models/m:streamGenerateContent", OPENAI_CHAT)
    True
    """
    return any(each.path_streams(path) for each in ALL_DIALECTS) or dialect.streams(value)


def model_from_path(path: str) -> str | None:
    """The model a URL path names, with its collection, or ``None``: Gemini and Vertex
    AI ``…/models/NAME:generateContent`` (``tunedModels/NAME``, ``endpoints/ID``), Azure
    OpenAI ``…/deployments/NAME/…``, Amazon Bedrock ``…/model/ID/…``. Every dialect's
    URL scheme is read, whatever the body.

    >>> model_from_path("/v1beta/models/gemini-2.0-flash:generateContent")
    'models/gemini-2.0-flash'
    >>> model_from_path("/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse")
    'models/gemini-2.0-flash'
    >>> model_from_path("/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21")
    'deployments/gpt4o-prod'
    >>> model_from_path("/v1/chat/completions") is None
    True
    """
    for dialect in _PATH_MODELS:
        found = dialect.path_model(path)
        if found is not None:
            return found
    return None
