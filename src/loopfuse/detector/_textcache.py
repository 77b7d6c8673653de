"""Caches of what the detector works out from client text, that keep none of that text.

A proxy's detector reads each tool answer, tool name and command line again in every
later request of a conversation, so what it works out from them is cached. That text
comes from the client, at any length: a cache keyed by the text itself keeps every
string it was asked about (512 answers of 1 MB held 492 MiB; 1,000 tool names of 250 KB,
717 MiB; issue 30). A :class:`TextCache` keys a text by itself only when it is at most
:data:`KEY_CHARS` characters long, and otherwise by its length and its 128-bit BLAKE3
digest: whatever the client sends, an entry's key holds at most ~300 bytes. What is
cached must be small too (a flag, a short tuple): callers cache nothing whose size the
client controls.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Final, Generic, TypeVar

from blake3 import blake3

__all__ = ["KEY_CHARS", "TextCache", "text_key"]

KEY_CHARS: Final = 64
"""A text up to this long is its own key; a longer one is keyed by its digest."""

V = TypeVar("V")


def text_key(text: str) -> str | tuple[int, bytes]:
    """A bounded key naming ``text``: itself when short, else ``(length, digest)``.

    >>> text_key("bash")
    'bash'
    >>> key = text_key("x" * 1_000_000)
    >>> key[0], len(key[1])
    (1000000, 16)
    """
    if len(text) <= KEY_CHARS:
        return text
    return (len(text), blake3(text.encode("utf-8", "surrogatepass")).digest(16))


class TextCache(Generic[V]):
    """A thread-safe LRU of ``maxsize`` values, each under a bounded key (:func:`text_key`
    of each text it is computed from).

    >>> cache: TextCache[int] = TextCache(2)
    >>> cache.get(len, "a" * 100), cache.get(len, "b"), cache.get(len, "c"), len(cache)
    (100, 1, 1, 2)
    """

    __slots__ = ("_entries", "_lock", "maxsize")

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._entries: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, compute: Callable[..., V], *texts: str | bool) -> V:
        """``compute(*texts)``, from the cache when it was computed for the same texts
        (a ``bool`` among them, say a flag, is part of the key as it is)."""
        key = tuple(text_key(text) if type(text) is str else text for text in texts)
        entries = self._entries
        with self._lock:
            found = entries.get(key, _MISSING)
            if found is not _MISSING:
                entries.move_to_end(key)
                return found  # type: ignore[return-value]  # only V is ever stored
        value = compute(*texts)
        with self._lock:
            entries[key] = value
            if len(entries) > self.maxsize:
                entries.popitem(last=False)
        return value

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


_MISSING: Final = object()
