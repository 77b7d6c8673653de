"""``RequestKey``: the 64-bit FNV-1a key of a cached answer, plus a digest that proves it.

FNV-1a 64 is what users of the original cache expect, bit for bit, and it is fast, but
it is not collision-resistant: collisions can be constructed on purpose, and
``from_messages`` collides by construction on content that contains its own separators
(``[("u", "x\\x01y\\x00z")]`` and ``[("u", "x"), ("y", "z")]`` hash the same bytes). So a
key built from content also carries a 32-byte BLAKE3 digest of an *unambiguous*
encoding of that content, and :class:`~loopfuse.dedup.DedupCache` never returns an entry
whose digest differs from the probing key's. Equality and hashing of a key stay on the
64-bit value.

``from_request`` keys are not FNV: nobody needs them to match the original, so their
value is taken from the digest itself (its first 8 bytes, little-endian), which saves a
second pass over the request.

Each constructor hashes its own encoding with its own BLAKE3 key (keyed mode, one fixed
public key per kind), so keys of different kinds never prove each other even when their
64-bit values are equal by design (``from_messages`` equals ``from_str`` of the joined
text). ``from_str(s)`` and ``from_bytes(s.encode())`` are the same content and the same key.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final, final

from blake3 import blake3

from loopfuse.dedup import fnv
from loopfuse.dedup.request import analysis_material, request_material
from loopfuse.errors import InvalidInputError

if TYPE_CHECKING:
    from loopfuse.intent import Analysis

__all__ = ["DIGEST_SIZE", "RequestKey"]

DIGEST_SIZE: Final = 32
"""Bytes in a key's content digest (BLAKE3, 256 bits)."""

_MAX_VALUE: Final = 0xFFFFFFFFFFFFFFFF


def _kind_key(kind: str) -> bytes:
    return blake3(f"loopfuse.dedup.RequestKey.{kind}/v1".encode()).digest()


_BYTES_KEY: Final = _kind_key("bytes")
_MESSAGES_KEY: Final = _kind_key("messages")
_REQUEST_KEY: Final = _kind_key("request")


def _utf8(text: str) -> bytes:
    # surrogatepass: a lone surrogate (legal in a Python str) still gets a stable key.
    return text.encode("utf-8", "surrogatepass")


@final
class RequestKey:
    """The key of one cacheable answer: an unsigned 64-bit FNV-1a value and, when the key
    was built from content, a BLAKE3 digest of that content.

    Build keys with :meth:`from_str`, :meth:`from_bytes`, :meth:`from_messages` or
    :meth:`from_request`. Keys compare and hash by :attr:`value` only.

    ``RequestKey(value)`` makes a *bare* key: no digest, so the cache cannot check what
    it stands for. A bare probe is served whatever entry lives under that value (the
    behaviour of the original cache, for callers that keep only the 64-bit number); an
    entry stored under a bare key is never served to a key built from content, because
    that key cannot be proven to match it. ``RequestKey(value, digest)`` rebuilds a key
    saved as its two parts.

    >>> key = RequestKey.from_str("What is Rust?")
    >>> hex(key.value)
    '0x78c9a145b24bf4e2'
    >>> key == RequestKey(key.value)  # equality is on the value; the digest is checked by the cache
    True
    >>> RequestKey(key.value).digest is None, len(key.digest or b"")
    (True, 32)
    >>> RequestKey(-1)
    Traceback (most recent call last):
        ...
    loopfuse.errors.InvalidInputError: a RequestKey value must be in [0, 2**64), got -1
    """

    __slots__ = ("_digest", "_value")

    _value: int
    _digest: bytes | None

    def __init__(self, value: int, digest: bytes | None = None) -> None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise InvalidInputError(
                f"a RequestKey value must be an int, not {type(value).__name__}"
            )
        if not 0 <= value <= _MAX_VALUE:
            raise InvalidInputError(f"a RequestKey value must be in [0, 2**64), got {value}")
        if digest is not None and (not isinstance(digest, bytes) or len(digest) != DIGEST_SIZE):
            raise InvalidInputError(f"a RequestKey digest must be {DIGEST_SIZE} bytes or None")
        object.__setattr__(self, "_value", int(value))
        object.__setattr__(self, "_digest", None if digest is None else bytes(digest))

    @classmethod
    def _make(cls, value: int, digest: bytes) -> RequestKey:
        key = object.__new__(cls)
        object.__setattr__(key, "_value", value)
        object.__setattr__(key, "_digest", digest)
        return key

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> RequestKey:
        """The key of raw bytes: FNV-1a 64 of ``data``.

        >>> RequestKey.from_bytes(b"foobar") == RequestKey.from_str("foobar")
        True
        """
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidInputError(f"from_bytes() needs bytes, not {type(data).__name__}")
        raw = bytes(data)
        return cls._make(fnv.fnv1a64(raw), blake3(raw, key=_BYTES_KEY).digest())

    @classmethod
    def from_str(cls, text: str) -> RequestKey:
        """The key of a string: FNV-1a 64 of its UTF-8 bytes.

        >>> hex(RequestKey.from_str("").value), hex(RequestKey.from_str("a").value)
        ('0xcbf29ce484222325', '0xaf63dc4c8601ec8c')
        >>> hex(RequestKey.from_str("foobar").value)
        '0x85944171f73967e8'
        """
        if not isinstance(text, str):
            raise InvalidInputError(f"from_str() needs a str, not {type(text).__name__}")
        raw = _utf8(text)
        return cls._make(fnv.fnv1a64(raw), blake3(raw, key=_BYTES_KEY).digest())

    @classmethod
    def from_messages(cls, messages: Iterable[tuple[str, str]]) -> RequestKey:
        """The key of a conversation of ``(role, content)`` pairs.

        The value is FNV-1a 64 over, per message, the role's UTF-8 bytes, ``0x00``, the
        content's UTF-8 bytes and ``0x01``, so it equals :meth:`from_str` of that text.
        The digest also covers every length, so contents holding ``0x00``/``0x01`` cannot
        pass for a different split into messages.

        >>> key = RequestKey.from_messages([("user", "hi"), ("assistant", "hello")])
        >>> key.value == RequestKey.from_str("user\\x00hi\\x01assistant\\x00hello\\x01").value
        True
        >>> a = RequestKey.from_messages([("u", "x\\x01y\\x00z")])
        >>> b = RequestKey.from_messages([("u", "x"), ("y", "z")])
        >>> a.value == b.value, a.digest == b.digest
        (True, False)
        """
        if isinstance(messages, str | bytes | bytearray | dict):
            raise InvalidInputError("from_messages() needs an iterable of (role, content) pairs")
        chunks: list[bytes] = []
        lengths: list[int] = []
        try:
            items = iter(messages)
        except TypeError:
            raise InvalidInputError(
                f"from_messages() needs an iterable of (role, content) pairs, "
                f"not {type(messages).__name__}"
            ) from None
        for index, message in enumerate(items):
            if not isinstance(message, tuple | list) or len(message) != 2:
                raise InvalidInputError(
                    f"message {index} must be a (role, content) pair, not {message!r:.80}"
                )
            role, content = message
            if not isinstance(role, str) or not isinstance(content, str):
                raise InvalidInputError(f"message {index}: role and content must both be str")
            role_bytes = _utf8(role)
            content_bytes = _utf8(content)
            chunks += (role_bytes, b"\x00", content_bytes, b"\x01")
            lengths += (len(role_bytes), len(content_bytes))
        payload = b"".join(chunks)
        header = struct.pack(f"<{len(lengths) + 1}Q", len(lengths) // 2, *lengths)
        digest = blake3(header, key=_MESSAGES_KEY)
        digest.update(payload)
        return cls._make(fnv.fnv1a64(payload), digest.digest())

    @classmethod
    def from_request(cls, body: object, path: str = "") -> RequestKey:
        """The key of a whole LLM request, in any dialect loopfuse knows.

        Keys on the canonical intent, the model (for Gemini, from ``path``) and every
        parameter that can change the answer; ignores ``stream``, ``user``, ``metadata``,
        ``store``, ``service_tier`` and provider ids. See :mod:`loopfuse.dedup.request`
        for the exact material and the fallbacks for bodies that are not JSON or not a
        known dialect (which get a key too: this never raises for ``bytes``/``str``).
        The value is not FNV-1a but the first 8 bytes (little-endian) of the digest.

        >>> body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
        >>> key = RequestKey.from_request(body)
        >>> key == RequestKey.from_request({**body, "stream": True, "user": "u-1"})
        True
        >>> key == RequestKey.from_request({**body, "model": "gpt-4o-mini"})
        False
        >>> key == RequestKey.from_request({**body, "temperature": 0.2})
        False
        """
        return cls._of_request_material(request_material(body, path))

    @classmethod
    def from_analysis(cls, analysis: Analysis, path: str = "") -> RequestKey:
        """:meth:`from_request` of a body already analysed with
        ``loopfuse.intent.analyse(body, ignore=loopfuse.dedup.request.IGNORED_PARAMS)``:
        the same key, bit for bit, without parsing the body again.

        For callers that analyse a body anyway (the integrations' ``Guard`` does, for
        the breaker and the detector). An analysis made without those ``ignore`` fields,
        or of a body that is not JSON, raises :class:`~loopfuse.errors.InvalidInputError`
        (see :func:`loopfuse.dedup.request.analysis_material`).

        >>> from loopfuse import intent
        >>> from loopfuse.dedup.request import IGNORED_PARAMS
        >>> body = b'{"model": "llama3", "keep_alive": "5m", "messages": []}'
        >>> found = intent.analyse(body, ignore=IGNORED_PARAMS)
        >>> RequestKey.from_analysis(found) == RequestKey.from_request(body)
        True
        """
        return cls._of_request_material(analysis_material(analysis, path))

    @classmethod
    def _of_request_material(cls, material: bytes) -> RequestKey:
        digest = blake3(material, key=_REQUEST_KEY).digest()
        # No caller needs FNV here (it is for the original's from_str/from_messages keys),
        # so the value is the digest's first 8 bytes: one hash pass instead of two, and
        # as fast without the C extension as with it.
        return cls._make(int.from_bytes(digest[:8], "little"), digest)

    @property
    def value(self) -> int:
        """The unsigned 64-bit key.

        >>> RequestKey(42).value
        42
        """
        return self._value

    @property
    def digest(self) -> bytes | None:
        """BLAKE3 digest of the content the key was built from; ``None`` for a bare key.

        >>> RequestKey(42).digest is None
        True
        """
        return self._digest

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RequestKey):
            return self._value == other._value
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        if self._digest is None:
            return f"RequestKey(0x{self._value:016x})"
        return f"RequestKey(0x{self._value:016x}, digest={self._digest[:8].hex()}…)"

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("RequestKey is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("RequestKey is immutable")

    def __reduce__(self) -> tuple[type[RequestKey], tuple[int, bytes | None]]:
        return (RequestKey, (self._value, self._digest))
