"""Caches of what the detector works out from client text, that keep none of that text.

A proxy's detector reads each tool answer, tool name and command line again in every
later request of a conversation, so what it works out from them is cached. That text
comes from the client, at any length: a cache keyed by the text itself keeps every
string it was asked about (512 answers of 1 MB held 492 MiB; 1,000 tool names of 250 KB,
717 MiB; issue 30). A :class:`TextCache` keys a text by itself only up to a length it is
given (:data:`KEY_CHARS` by default), and a longer one by its length and its 128-bit
BLAKE3 digest (or does not cache it): whatever the client sends, an entry's key holds at
most that many characters. What is cached must be bounded too (a flag, a short tuple, a
text of bounded length): callers cache nothing whose size the client controls.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from functools import lru_cache
from typing import Final, Generic, TypeVar

from blake3 import blake3

__all__ = ["KEY_CHARS", "TextCache", "text_key"]

KEY_CHARS: Final = 256
"""By default, a text up to this long is its own key; a longer one is keyed by its digest."""

V = TypeVar("V")


def text_key(text: str, key_chars: int = KEY_CHARS) -> str | tuple[int, bytes]:
    """A bounded key naming ``text``: itself when at most ``key_chars`` long, else
    ``(length, 128-bit BLAKE3 digest)``.

    >>> text_key("bash")
    'bash'
    >>> key = text_key("x" * 1_000_000)
    >>> key[0], len(key[1])
    (1000000, 16)
    """
    if len(text) <= key_chars:
        return text
    return (len(text), blake3(text.encode("utf-8", "surrogatepass")).digest(16))


class TextCache(Generic[V]):
    """``compute`` of texts, cached: the last ``maxsize`` calls whose texts are all at most
    ``key_chars`` long under those texts (functools' LRU, in C), and the last ``maxsize``
    others under their digests (:func:`text_key`), or with ``digest=False`` not at all
    (for a value cheaper to compute than a digest of the whole text). Thread-safe.
    :attr:`call` is the cached function.

    >>> lengths: TextCache[int] = TextCache(len, 2, key_chars=4)
    >>> lengths.call("a" * 1000), lengths.call("b"), lengths.call("c"), len(lengths)
    (1000, 1, 1, 3)
    >>> TextCache(len, 2, key_chars=4, digest=False).call("a" * 1000)
    1000
    """

    __slots__ = ("_long", "_short", "call")

    def __init__(
        self,
        compute: Callable[..., V],
        maxsize: int,
        key_chars: int = KEY_CHARS,
        digest: bool = True,
    ) -> None:
        short = self._short = lru_cache(maxsize=maxsize)(compute)
        pending = threading.local()  # a miss of the digest cache: what to compute, per thread

        def miss(key: Hashable) -> V:
            return compute(*pending.texts)

        long = self._long = lru_cache(maxsize=maxsize)(miss)

        def call(*texts: str | bool) -> V:
            if len(texts) == 1:  # the usual case, kept short: one length check, then C
                text = texts[0]
                if type(text) is not str or len(text) <= key_chars:
                    return short(text)
                if not digest:
                    return compute(text)
                pending.texts = texts
                return long(text_key(text, key_chars))
            if all(type(t) is not str or len(t) <= key_chars for t in texts):
                return short(*texts)
            if not digest:
                return compute(*texts)
            pending.texts = texts
            return long(tuple(text_key(t, key_chars) if type(t) is str else t for t in texts))

        self.call: Callable[..., V] = call

    def clear(self) -> None:
        """Forget every entry."""
        self._short.cache_clear()
        self._long.cache_clear()

    def __len__(self) -> int:
        return self._short.cache_info().currsize + self._long.cache_info().currsize
