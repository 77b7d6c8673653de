"""How a shared store turns cached values into bytes and back: never with pickle.

A value read back from a shared store may have been written by anyone who can write to
that store, so it is decoded as *data*: bytes, text or JSON. ``pickle`` (which runs code
while it loads) is never used. A caller with other needs passes its own :class:`Codec`.

:data:`DEFAULT_CODEC` (a :class:`TaggedCodec`) keeps the type of three kinds of values:

- ``bytes`` (also ``bytearray`` and ``memoryview``, read back as ``bytes``): as they are;
- ``str``: UTF-8 (lone surrogates kept, as ``surrogatepass``);
- anything else JSON can write (``None``, ``bool``, ``int``, ``float``, lists, dicts):
  JSON, read back as JSON reads it, so tuples come back as lists and non-``str`` dict
  keys as ``str``; NaN and infinities survive. Anything else raises ``TypeError``.

>>> codec = TaggedCodec()
>>> [codec.decode(codec.encode(v)) for v in (b"\\x00raw", "text", {"a": [1, 2.5, None]})]
[b'\\x00raw', 'text', {'a': [1, 2.5, None]}]
>>> codec.encode(object())
Traceback (most recent call last):
    ...
TypeError: Object of type object is not JSON serializable
"""

from __future__ import annotations

import json
from typing import Final, Protocol, runtime_checkable

__all__ = ["DEFAULT_CODEC", "Codec", "TaggedCodec"]


@runtime_checkable
class Codec(Protocol):
    """Turns a value into bytes and back.

    ``encode`` raises ``TypeError`` or ``ValueError`` for a value it cannot write;
    ``decode`` raises ``ValueError`` (or any ``Exception``) for bytes it cannot read,
    which the store treats as a miss.
    """

    def encode(self, value: object) -> bytes:
        """The bytes of ``value``."""
        ...

    def decode(self, data: bytes) -> object:
        """The value of ``data``, as written by :meth:`encode`."""
        ...


_BYTES: Final = b"b"
_TEXT: Final = b"s"
_JSON: Final = b"j"


class TaggedCodec:
    """One tag byte (``b`` bytes, ``s`` text, ``j`` JSON), then the payload.

    >>> TaggedCodec().encode("hé")
    b's h\\xc3\\xa9'
    >>> TaggedCodec().decode(b"x?")
    Traceback (most recent call last):
        ...
    ValueError: not a value written by TaggedCodec (tag b'x')
    """

    __slots__ = ()

    def encode(self, value: object) -> bytes:
        """See :class:`Codec`."""
        if isinstance(value, bytes | bytearray | memoryview):
            return _BYTES + b" " + bytes(value)
        if isinstance(value, str):
            return _TEXT + b" " + value.encode("utf-8", "surrogatepass")
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        return _JSON + b" " + text.encode("utf-8", "surrogatepass")

    def decode(self, data: bytes) -> object:
        """See :class:`Codec`."""
        tag, payload = data[:1], data[2:]
        if tag == _BYTES:
            return bytes(payload)
        if tag == _TEXT:
            return payload.decode("utf-8", "surrogatepass")
        if tag == _JSON:
            try:
                return json.loads(payload.decode("utf-8", "surrogatepass"))
            except RecursionError:  # nested deeper than the interpreter allows
                raise ValueError("JSON nested too deeply") from None
        raise ValueError(f"not a value written by TaggedCodec (tag {tag!r})")

    def __repr__(self) -> str:
        return "TaggedCodec()"


DEFAULT_CODEC: Final = TaggedCodec()
"""The codec a store uses unless given another: bytes, text and JSON values."""
