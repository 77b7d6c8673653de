"""What ``dir()`` shows of a public package: its API, not its imports and helpers."""

from __future__ import annotations

from types import ModuleType
from typing import Any

_DUNDERS = frozenset({"__all__", "__doc__", "__file__", "__name__", "__path__", "__version__"})


def public_dir(namespace: dict[str, Any]) -> list[str]:
    """The names of ``__all__``, the public submodules already imported, and the dunders
    a reader looks for: a package's ``__dir__`` returns this.

    >>> import loopfuse.dedup
    >>> names = public_dir(vars(loopfuse.dedup))
    >>> "RequestKey" in names, "fnv" in names, "annotations" in names, "_core" in names
    (True, True, False, False)
    """
    package = namespace["__name__"]
    names = set(namespace.get("__all__", ())) | (_DUNDERS & namespace.keys())
    for name, value in namespace.items():
        if (
            isinstance(value, ModuleType)
            and not name.startswith("_")
            and value.__name__ == f"{package}.{name}"
        ):
            names.add(name)
    return sorted(names)
