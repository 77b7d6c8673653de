"""Pieces the provider modules share when they read a request's fields and answer it.

The walks share :mod:`._parts`; what a provider says about a request besides its intent
(who the end user is, whether it streams, what its path names, where a note goes, what a
refusal looks like) shares these: a field read by its path, the answers most dialects
give alike, the ``type`` of a refusal, and a note joined to the last user turn of a
conversation of role-tagged turns.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from loopfuse.intent._parts import Walk

__all__ = [
    "ERROR_TYPE",
    "always",
    "dialect_repr",
    "field",
    "named_fields",
    "never",
    "no_model",
    "note_turns",
    "path_group",
    "stream_asked",
]

ERROR_TYPE: Final = "loop_detected"
"""The ``type`` of every refusal loopfuse writes (OpenAI and Anthropic shapes)."""


def field(value: Mapping[str, Any], path: tuple[str, ...]) -> object:
    """The value at ``path`` (``("metadata", "user_id")``) in ``value``, or ``None``.

    >>> field({"metadata": {"user_id": "u-1"}}, ("metadata", "user_id"))
    'u-1'
    >>> field({"metadata": "junk"}, ("metadata", "user_id")) is None
    True
    """
    found: object = value
    for name in path:
        if not isinstance(found, Mapping) or name not in found:
            return None
        found = found[name]
    return found


def named_fields(
    value: Mapping[str, Any], paths: tuple[tuple[str, ...], ...]
) -> tuple[tuple[str, object], ...]:
    """Each of ``paths`` as ``(dotted name, value or None)``, in order.

    >>> named_fields({"metadata": {"user_id": "u-1"}}, (("metadata", "user_id"), ("user",)))
    (('metadata.user_id', 'u-1'), ('user', None))
    """
    return tuple((".".join(path), field(value, path)) for path in paths)


def dialect_repr(dialect: Any) -> str:
    """A dialect's ``repr``: ``<dialect NAME>``."""
    return f"<dialect {dialect.name}>"


def always(value: Mapping[str, Any], walk: Walk) -> bool:
    """``detect`` of the dialect that takes every body of its conversation the others of
    it do not (OpenAI Chat for ``messages``; Gemini, Responses alone in theirs)."""
    return True


def stream_asked(value: Mapping[str, Any]) -> bool:
    """``stream: true``: how most APIs are asked for a streamed answer.

    >>> stream_asked({"stream": True}), stream_asked({"stream": "yes"}), stream_asked({})
    (True, False, False)
    """
    return value.get("stream") is True


def never(path: str) -> bool:
    """A path rule a dialect does not have (its path neither streams nor names its API)."""
    return False


def no_model(path: str) -> str | None:
    """``path_model`` of a dialect whose model is in the body, never in the path."""
    return None


def path_group(pattern: re.Pattern[str], path: str) -> str | None:
    """The first group of ``pattern``'s first match in ``path``, or ``None``.

    >>> path_group(re.compile(r"(?:^|/)(model/[^/?#]+)"), "/model/claude/invoke")
    'model/claude'
    """
    match = pattern.search(path)
    return None if match is None else match.group(1)


def note_turns(
    turns: list[Any],
    key: str,
    note: str,
    merge: Callable[[object, str], object],
    fresh: object,
) -> list[Any]:
    """``turns`` with ``note`` joined to the last user turn's ``key`` (``merge(content,
    note)``, ``None`` when that content cannot take it), or after them in a new user turn
    holding ``fresh``. The turns themselves are copied, never changed.

    >>> note_turns([{"role": "user", "content": "hi"}], "content", "stop",
    ...            lambda content, note: f"{content} {note}", "stop")
    [{'role': 'user', 'content': 'hi stop'}]
    >>> note_turns([{"role": "tool", "content": "x"}], "content", "stop",
    ...            lambda content, note: None, "stop")[-1]
    {'role': 'user', 'content': 'stop'}
    """
    last = turns[-1] if turns else None
    if isinstance(last, dict) and last.get("role", "user") == "user":
        merged = merge(last.get(key), note)
        if merged is not None:
            return [*turns[:-1], {**last, key: merged}]
    return [*turns, {"role": "user", key: fresh}]
