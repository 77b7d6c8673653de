"""Optional extras: a clear error, naming the ``pip install`` command, when one is missing."""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any

from loopfuse.errors import LoopfuseError

__all__ = ["MissingExtraError", "installed", "require", "stand_in"]


class MissingExtraError(LoopfuseError, ImportError):
    """An integration was used without the package it integrates with.

    It is also an :class:`ImportError`, and its message names the command that fixes it.

    >>> try:
    ...     require("surely_not_installed_here", extra="openai", what="GuardTransport")
    ... except ImportError as exc:
    ...     print(exc)
    GuardTransport needs surely_not_installed_here: pip install 'loopfuse[openai]'
    """


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it)."""
    try:
        return find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a broken __spec__
        return False


def require(*modules: str, extra: str, what: str) -> None:
    """Raise :class:`MissingExtraError` unless at least one of ``modules`` is installed."""
    if not any(installed(name) for name in modules):
        names = " or ".join(modules)
        raise MissingExtraError(f"{what} needs {names}: pip install 'loopfuse[{extra}]'")


def stand_in(name: str, *, package: str, extra: str) -> type[Any]:
    """A placeholder for class ``name`` of a missing ``package``.

    An integration's class can still be defined on top of it (so its module imports,
    and its docs build, without the extra), and subscripted like a generic; creating an
    instance raises :class:`MissingExtraError` naming the install command.

    >>> Base = stand_in("AgentMiddleware", package="langchain", extra="langchain")
    >>> class Middleware(Base[int]):
    ...     pass
    >>> try:
    ...     Middleware()
    ... except ImportError as exc:
    ...     print(exc)
    AgentMiddleware needs langchain: pip install 'loopfuse[langchain]'
    """
    message = f"{name} needs {package}: pip install 'loopfuse[{extra}]'"

    def __init__(self: object, *args: object, **kwargs: object) -> None:
        raise MissingExtraError(message)

    def __class_getitem__(cls: type[Any], item: object) -> type[Any]:
        return cls

    namespace = {
        "__init__": __init__,
        "__class_getitem__": classmethod(__class_getitem__),
        "__doc__": f"Stand-in for {package}'s {name}: {message}",
    }
    return type(name, (), namespace)
