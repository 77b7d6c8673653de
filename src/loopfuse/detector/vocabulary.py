"""Deprecated home of the detector's default vocabulary: it moved to
:mod:`loopfuse.harness.generic` (issue 27), the fallback for tools no harness declared.

The names are still read here (with a :class:`DeprecationWarning`); ``loopfuse.detector``
re-exports ``DEFAULT_OBSERVATION_TOOLS`` and ``DEFAULT_COSTLY_TOOLS`` as before.
"""

from __future__ import annotations

from loopfuse._api import deprecated

_MOVED = (
    "DEFAULT_COSTLY_TOOLS",
    "DEFAULT_OBSERVATION_TOOLS",
    "DEFAULT_READ_ONLY_COMMANDS",
    "DEFAULT_SHELL_TOOLS",
)


def __getattr__(name: str) -> object:
    if name in _MOVED:
        deprecated(f"loopfuse.detector.vocabulary.{name}", f"use loopfuse.harness.generic.{name}")
        from loopfuse.harness import generic

        return getattr(generic, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
