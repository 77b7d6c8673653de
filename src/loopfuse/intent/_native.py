"""The optional C accelerator of :mod:`loopfuse.intent` (``loopfuse.intent._speedups``).

Built by setup.py wherever a C compiler is available (``LOOPFUSE_NO_EXTENSIONS=1`` skips
it). Each of its functions is the twin of a pure-Python reference in this package and
either returns exactly what the reference returns or ``None`` ("declined": the caller
runs the reference). So the extension changes speed only, never a result; the tests
compare each twin with its reference on generated data.
"""

from __future__ import annotations

from types import ModuleType

_BUILT: ModuleType | None
try:
    from loopfuse.intent import _speedups as _BUILT
except ImportError:  # no compiler at install time, or LOOPFUSE_NO_EXTENSIONS=1
    _BUILT = None

speedups: ModuleType | None = _BUILT
"""The extension while it is in use, else ``None``: read at each call, not imported."""


def c_extension_available() -> bool:
    """Whether :mod:`loopfuse.intent` runs its C accelerator in this process.

    The results are the same either way; only the speed differs (see docs/intent.md).

    >>> isinstance(c_extension_available(), bool)
    True
    """
    return speedups is not None


def set_c_extension(enabled: bool) -> None:
    """Use (``True``) or bypass (``False``) the C accelerator. For tests; not thread-safe.

    Raises :class:`RuntimeError` when asked to enable an extension that was not built.
    """
    global speedups
    if enabled and _BUILT is None:
        raise RuntimeError("loopfuse.intent._speedups was not built")
    speedups = _BUILT if enabled else None
