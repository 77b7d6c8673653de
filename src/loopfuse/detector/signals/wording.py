"""How the signals' messages name tools and quote answers.

A message is read by the model in place of the tool result (or as a note), so each says
what the agent repeated, how many times, and what would move it on; these are the
pieces every signal's message is made of.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

__all__ = ["names_text", "quoted"]

_QUOTE_CHARS: Final = 160


def names_text(names: Iterable[str]) -> str:
    """Tool names for a message: unique, back-quoted, at most four.

    >>> names_text(["edit", "python", "edit"])
    '`edit`, `python`'
    """
    unique = list(dict.fromkeys(name or "<unnamed>" for name in names))
    return ", ".join(f"`{name}`" for name in unique[:4]) + (" …" if len(unique) > 4 else "")


def quoted(detail: str | None) -> str:
    """`` (`first line`)`` of an answer, clipped; empty when unknown.

    >>> quoted("\\n  Error: no such file\\nmore"), quoted(None)
    (' (`Error: no such file`)', '')
    """
    if not detail:
        return ""
    line = next((part.strip() for part in detail.splitlines() if part.strip()), "")
    if not line:
        return ""
    if len(line) > _QUOTE_CHARS:
        line = line[: _QUOTE_CHARS - 1] + "…"
    return " (`" + line.replace("`", "'") + "`)"
