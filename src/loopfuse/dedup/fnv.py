"""FNV-1a 64: a pure-Python loop and a bit-identical C accelerator.

:func:`fnv1a64` is what the rest of loopfuse calls. It runs the small C extension
``loopfuse.dedup._fnv`` when the package was installed with it (the default wherever a C
compiler is available) and :func:`fnv1a64_py` otherwise. The two give the same result
for every input; the tests compare them on generated data.

Why a C extension of our own, rather than a dependency: the PyPI packages that offer
FNV-1a are unmaintained, 32-bit only, or pure Python, and the algorithm is ten lines of
C. The extension is built against the stable ABI (one wheel serves CPython 3.11+), keeps
no state, and is optional: an install without a compiler falls back to the pure loop.

>>> hex(fnv1a64(b"foobar"))
'0x85944171f73967e8'
>>> fnv1a64(b"foobar") == fnv1a64_py(b"foobar")
True
>>> fnv1a64(b"bar", fnv1a64(b"foo")) == fnv1a64(b"foobar")  # a hash can be continued
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal

__all__ = [
    "FNV64_OFFSET",
    "FNV64_PRIME",
    "Backend",
    "backend",
    "c_extension_available",
    "fnv1a64",
    "fnv1a64_py",
    "set_backend",
]

FNV64_OFFSET: Final = 0xCBF29CE484222325
"""The FNV-1a 64 offset basis: the hash of the empty input."""

FNV64_PRIME: Final = 0x100000001B3
"""The FNV-1a 64 prime."""

_MASK64: Final = 0xFFFFFFFFFFFFFFFF

Backend = Literal["c", "python"]
"""Names of the FNV implementations: ``"c"`` (the extension) or ``"python"``."""

_Hasher = Callable[[bytes | bytearray | memoryview, int], int]


def fnv1a64_py(data: bytes | bytearray | memoryview, seed: int = FNV64_OFFSET) -> int:
    """FNV-1a 64 of ``data`` in pure Python, continuing from ``seed``.

    The reference implementation, and the fallback when the C extension is missing.
    Accepts any contiguous bytes-like object, exactly like the extension (a
    non-contiguous buffer raises :class:`BufferError`; a ``seed`` that is not an
    ``int`` raises :class:`TypeError`, one outside ``[0, 2**64)`` :class:`OverflowError`).

    >>> hex(fnv1a64_py(b""))
    '0xcbf29ce484222325'
    >>> hex(fnv1a64_py(b"a"))
    '0xaf63dc4c8601ec8c'
    """
    if not isinstance(seed, int):
        raise TypeError("fnv1a64() seed must be an int")
    if not 0 <= seed <= _MASK64:
        raise OverflowError("fnv1a64() seed must be in [0, 2**64)")
    octets: bytes | memoryview
    if type(data) is bytes:
        octets = data
    else:
        view = memoryview(data)
        if not view.c_contiguous:
            raise BufferError("fnv1a64() needs a contiguous buffer")
        octets = view.cast("B")
    value = int(seed)
    prime = FNV64_PRIME
    mask = _MASK64
    for octet in octets:
        value = ((value ^ octet) * prime) & mask
    return value


try:
    from loopfuse.dedup._fnv import fnv1a64 as _fnv1a64_c
except ImportError:  # no compiler at install time, or LOOPFUSE_NO_EXTENSIONS=1
    _c_hasher: _Hasher | None = None
else:
    _c_hasher = _fnv1a64_c

_hasher: _Hasher = _c_hasher if _c_hasher is not None else fnv1a64_py


def fnv1a64(data: bytes | bytearray | memoryview, seed: int = FNV64_OFFSET) -> int:
    """FNV-1a 64 of ``data`` (a contiguous bytes-like object), continuing from ``seed``.

    Runs the C extension when it is available (see :func:`backend`), else
    :func:`fnv1a64_py`; the results are identical.

    >>> hex(fnv1a64(b"a"))
    '0xaf63dc4c8601ec8c'
    >>> fnv1a64(bytearray(b"a")) == fnv1a64(memoryview(b"xa")[1:])
    True
    """
    return _hasher(data, seed)


def backend() -> Backend:
    """The implementation :func:`fnv1a64` runs now: ``"c"`` or ``"python"``.

    >>> backend() in ("c", "python")
    True
    """
    return "python" if _hasher is fnv1a64_py else "c"


def c_extension_available() -> bool:
    """Whether the C extension was built and imported.

    >>> isinstance(c_extension_available(), bool)
    True
    """
    return _c_hasher is not None


def set_backend(name: Backend) -> None:
    """Force an implementation for this process: ``"python"``, or ``"c"`` back again.

    For tests and for ruling the extension out while debugging; the results do not
    change, only the speed. Raises :class:`ValueError` for an unknown name and
    :class:`RuntimeError` when ``"c"`` is asked for but the extension is not built.

    >>> previous = backend()
    >>> set_backend("python"); backend()
    'python'
    >>> set_backend(previous)
    """
    global _hasher
    if name == "python":
        _hasher = fnv1a64_py
    elif name == "c":
        if _c_hasher is None:
            raise RuntimeError("the loopfuse.dedup._fnv extension is not built")
        _hasher = _c_hasher
    else:
        raise ValueError(f"unknown FNV backend {name!r}; use 'c' or 'python'")
