"""What a parsed request body says about who sent it and how it samples.

Pure functions over parsed JSON values, each dialect's fields named once here:

- the **end user** a body names, which is a breaker session when the integration has
  none: OpenAI Chat and Responses ``safety_identifier`` then ``user``, Anthropic
  ``metadata.user_id``. Gemini and Ollama bodies carry no end-user field;
- the **sampling identity**: ``seed`` and ``n`` (Gemini ``generationConfig.seed`` and
  ``candidateCount``, Ollama ``options.seed``). The same prompt with another seed, or
  asking for more choices, is deliberate re-sampling, not a repeat;
- whether a request is **sampled**: an explicit temperature above 0 and no seed;
- whether it **streams**.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from blake3 import blake3

from loopfuse.intent import canonical_json

__all__ = [
    "MAX_SESSION_CHARS",
    "conversation_anchor",
    "end_user",
    "first_text",
    "is_sampled",
    "is_streaming",
    "sampling_identity",
    "session_name",
]

MAX_SESSION_CHARS: Final = 256
"""A session id longer than this is kept as its BLAKE3 digest (``"blake3:<hex>"``): ids
now come from request bodies, and a 1 MB ``user`` must not become 1 MB of breaker state."""

# The end-user fields of each provider API (told apart by path first, as refusals are:
# an Anthropic body without a system prompt reads like an OpenAI Chat one), in order.
_END_USER_FIELDS: Final[dict[str, tuple[tuple[str, ...], ...]]] = {
    "openai": (("safety_identifier",), ("user",)),  # Chat Completions and Responses
    "anthropic": (("metadata", "user_id"),),
    "gemini": (),
    "ollama": (),
}


# Where each dialect puts a sampling seed, the number of choices and the temperature
# (OpenAI and Anthropic top level, Gemini generationConfig, Ollama options).
_SEED_FIELDS: Final = (("seed",), ("generationConfig", "seed"), ("options", "seed"))
_CHOICES_FIELDS: Final = (("n",), ("generationConfig", "candidateCount"))
_TEMPERATURE_FIELDS: Final = (
    ("temperature",),
    ("generationConfig", "temperature"),
    ("options", "temperature"),
)


def _field(value: Mapping[str, Any], path: tuple[str, ...]) -> object:
    found: object = value
    for name in path:
        if not isinstance(found, Mapping) or name not in found:
            return None
        found = found[name]
    return found


def end_user(value: Mapping[str, Any], api: str) -> tuple[str | None, list[str]]:
    """The end user a request body to provider ``api`` (an error format: ``"openai"``,
    ``"anthropic"``, ``"gemini"``, ``"ollama"``) names, and a note for each junk field.

    A field that is present but not a non-empty string is junk: it is skipped (the next
    field, or none, is used) and reported, so the caller can count it.

    >>> end_user({"user": "u-1", "safety_identifier": "h-9"}, "openai")
    ('h-9', [])
    >>> end_user({"metadata": {"user_id": "u-1"}}, "anthropic")
    ('u-1', [])
    >>> end_user({"user": 42}, "openai")
    (None, ['user is a int, not a non-empty string'])
    >>> end_user({"user": "u-1"}, "gemini")
    (None, [])
    """
    fields = _END_USER_FIELDS.get(api, ())
    return first_text((".".join(path), _field(value, path)) for path in fields)


def first_text(candidates: Iterable[tuple[str, object]]) -> tuple[str | None, list[str]]:
    """The first non-empty string among named ``candidates`` (``None`` ones are absent),
    and a note for each junk one met before it (present, but not a non-empty string).

    >>> first_text([("a", None), ("b", 42), ("c", "u-1"), ("d", [])])
    ('u-1', ['b is a int, not a non-empty string'])
    """
    junk: list[str] = []
    for name, found in candidates:
        if isinstance(found, str) and found:
            return found, junk
        if found is not None:
            junk.append(f"{name} is a {type(found).__name__}, not a non-empty string")
    return None, junk


def session_name(session: str) -> str:
    """``session``, or its digest when it is longer than :data:`MAX_SESSION_CHARS`.

    >>> session_name("run-42")
    'run-42'
    >>> session_name("x" * 1000).startswith("blake3:")
    True
    """
    if len(session) <= MAX_SESSION_CHARS:
        return session
    return "blake3:" + blake3(session.encode("utf-8", "surrogatepass")).hexdigest()


def conversation_anchor(intent: Mapping[str, Any] | None) -> str:
    """A short digest of how a conversation opens (system prompt and first message).

    Names a conversation when no session does, so that a note given to one conversation
    is remembered for it and not for another that happens to loop the same way.

    >>> a = conversation_anchor({"messages": [{"role": "user", "content": ["hi"]}]})
    >>> a == conversation_anchor({"messages": [{"role": "user", "content": ["hi"]}, {}]})
    True
    >>> a == conversation_anchor({"messages": [{"role": "user", "content": ["yo"]}]})
    False
    """
    if intent is None:
        return "conversation:"
    messages = intent.get("messages")
    first = messages[0] if isinstance(messages, list) and messages else None
    opening = canonical_json({"first": first, "system": intent.get("system")})
    return "conversation:" + blake3(opening).hexdigest(length=8)


def _scalar(value: object) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)


def sampling_identity(value: Mapping[str, Any]) -> dict[str, object] | None:
    """The fields that ask for another sample of the same prompt, or ``None``.

    >>> sampling_identity({"seed": 7, "n": 2, "temperature": 1})
    {'seed': 7, 'n': 2}
    >>> sampling_identity({"generationConfig": {"seed": 3, "candidateCount": 2}})
    {'generationConfig.seed': 3, 'generationConfig.candidateCount': 2}
    >>> sampling_identity({"temperature": 0.2}) is None
    True
    """
    found: dict[str, object] = {}
    for path in (*_SEED_FIELDS, *_CHOICES_FIELDS):
        field = _field(value, path)
        if _scalar(field):
            found[".".join(path)] = field
    return found or None


def is_sampled(value: Mapping[str, Any]) -> bool:
    """Whether the request asks for a random sample: an explicit temperature above 0
    (``temperature``, Gemini ``generationConfig.temperature``, Ollama
    ``options.temperature``) and no seed. A request that names no temperature is not:
    its randomness is the provider's default, not something the caller asked for.

    >>> is_sampled({"temperature": 0.7}), is_sampled({"temperature": 0.7, "seed": 1})
    (True, False)
    >>> is_sampled({"options": {"temperature": 0}}), is_sampled({})
    (False, False)
    """
    if any(_field(value, path) is not None for path in _SEED_FIELDS):
        return False
    for path in _TEMPERATURE_FIELDS:
        found = _field(value, path)
        if isinstance(found, int | float) and not isinstance(found, bool) and found > 0:
            return True
    return False


def is_streaming(value: Mapping[str, Any], path: str, dialect: str | None) -> bool:
    """Whether the request asks for a streamed answer.

    ``stream: true``; Gemini's ``:streamGenerateContent``; Ollama streams unless told not to.

    >>> is_streaming({"stream": True}, "/v1/chat/completions", "openai_chat")
    True
    >>> is_streaming({}, "/api/chat", "ollama"), is_streaming({}, "/v1/messages", "anthropic")
    (True, False)
    """
    if ":streamGenerateContent" in path:
        return True
    stream = value.get("stream")
    if dialect == "ollama" and stream is None:
        return True
    return stream is True
