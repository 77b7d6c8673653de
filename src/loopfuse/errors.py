"""The exceptions loopfuse raises.

Every exception that loopfuse raises on purpose derives from :class:`LoopfuseError`,
so a caller can catch them all with one ``except`` clause.
"""

from __future__ import annotations

__all__ = ["ConfigError", "InvalidInputError", "LoopfuseError"]


class LoopfuseError(Exception):
    """Base class of every error loopfuse raises on purpose."""


class ConfigError(LoopfuseError, ValueError):
    """A guard was configured with a value it cannot use.

    It is also a :class:`ValueError`, so code that validates input generically
    still catches it.

    >>> raise ConfigError("max_repeats must be >= 0, got -1")
    Traceback (most recent call last):
        ...
    loopfuse.errors.ConfigError: max_repeats must be >= 0, got -1
    """


class InvalidInputError(LoopfuseError, TypeError):
    """An argument has a type or shape loopfuse cannot work with.

    Raised for programming errors (a session id that is not a string, a parsed body
    holding objects that JSON cannot express), never for a malformed request body in
    ``bytes`` or ``str``: those get a documented fallback instead. It is also a
    :class:`TypeError`.
    """
