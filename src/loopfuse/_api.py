"""What ``dir()`` shows of a public package (its API, not its imports and helpers), its
names imported on first use, and the one warning a deprecated name gives."""

from __future__ import annotations

import importlib
from collections.abc import Callable
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


def lazy_exports(
    package: str,
    namespace: dict[str, Any],
    exports: dict[str, str],
    moved: dict[str, str] | None = None,
) -> Callable[[str], object]:
    """A package's ``__getattr__`` (PEP 562) that imports each public name from its
    module (``exports``: name → module) the first time it is asked for, and keeps it
    in ``namespace``; a name that is the package's submodule of that name (``"intent"``
    → ``"loopfuse.intent"``) is the module. No name may be that of another submodule:
    importing the submodule would set the package's attribute to the module.

    A program that uses one part of a package (``loopfuse hook`` uses the detector)
    then does not pay for importing the others; ``from package import X`` works as ever.
    ``moved`` names what the package no longer exports (name → the module that does):
    it still works, with a :class:`DeprecationWarning` saying where to import it from.

    >>> space = {}
    >>> getattr_ = lazy_exports("os", space, {"sep": "os.path", "path": "os.path"})
    >>> getattr_("sep"), "sep" in space, getattr_("path").__name__
    ('/', True, 'posixpath')
    """

    def __getattr__(name: str) -> object:
        module = exports.get(name)
        if module is None and moved is not None and name in moved:
            deprecated(f"{package}.{name}", f"import it from {moved[name]}")
            return getattr(importlib.import_module(moved[name]), name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value: object = importlib.import_module(module)
        if module != f"{package}.{name}":
            value = getattr(value, name)
        namespace[name] = value  # the next lookup is a plain attribute
        return value

    return __getattr__


def deprecated(what: str, instead: str, *, stacklevel: int = 1) -> None:
    """Warn (:class:`DeprecationWarning`) that ``what`` is deprecated and what to do
    ``instead``, pointing at the code that used it: the caller of the function that
    calls this, ``stacklevel`` frames further up.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     deprecated("Old.name", "use New.name")
    >>> str(caught[0].message)
    'Old.name is deprecated: use New.name'
    """
    import warnings  # here: only a deprecated use pays for it

    warnings.warn(f"{what} is deprecated: {instead}", DeprecationWarning, stacklevel=2 + stacklevel)
