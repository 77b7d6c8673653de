"""Optional extras: a clear error, naming the ``pip install`` command, when one is missing.

loopfuse is not published on PyPI yet, so ``pip install 'loopfuse[openai]'`` fails; the
command named is the one that works, run in a clone of the repository (the README's
Install section): ``pip install '.[openai]'``. :func:`install_command` is the one place
that says it, for the errors here and for the docs test that checks every install line.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any

from loopfuse.errors import LoopfuseError

__all__ = ["MissingExtraError", "install_command", "installed", "require", "stand_in"]


class MissingExtraError(LoopfuseError, ImportError):
    """An integration was used without the package it integrates with.

    It is also an :class:`ImportError`, and its message names the command that fixes it.

    >>> try:
    ...     require("not_here", extra="openai", what="GuardTransport")
    ... except ImportError as exc:
    ...     print(exc)
    GuardTransport needs not_here: pip install '.[openai]' in a loopfuse clone (not on PyPI yet)
    """


def install_command(extra: str) -> str:
    """The command that installs loopfuse's ``extra``, as the README's Install section says.

    >>> install_command("redis")
    "pip install '.[redis]' in a loopfuse clone (not on PyPI yet)"
    """
    return f"pip install '.[{extra}]' in a loopfuse clone (not on PyPI yet)"


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
        raise MissingExtraError(f"{what} needs {names}: {install_command(extra)}")


def stand_in(name: str, *, package: str, extra: str) -> type[Any]:
    """A placeholder for class ``name`` of a missing ``package``.

    An integration's class can still be defined on top of it (so its module imports,
    and its docs build, without the extra), and subscripted like a generic; creating an
    instance raises :class:`MissingExtraError` naming the install command.

    >>> Base = stand_in("AgentMiddleware", package="langchain", extra="otel")  # any extra
    >>> class Middleware(Base[int]):
    ...     pass
    >>> try:
    ...     Middleware()
    ... except ImportError as exc:
    ...     print(exc)
    AgentMiddleware needs langchain: pip install '.[otel]' in a loopfuse clone (not on PyPI yet)
    """
    message = f"{name} needs {package}: {install_command(extra)}"

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
