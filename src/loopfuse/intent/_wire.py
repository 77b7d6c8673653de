"""Pieces the provider modules share when they read a request's fields and answer it.

The walks share :mod:`._parts`; what a provider says about a request besides its intent
(who the end user is, where a note goes, what a refusal looks like) shares these: a
field read by its path, the ``type`` of a refusal, and a note joined to the last user
turn of a conversation of role-tagged turns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

__all__ = ["ERROR_TYPE", "field", "named_fields", "note_turns"]

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
