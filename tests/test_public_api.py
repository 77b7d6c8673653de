"""The public API: everything public is re-exported from `loopfuse`, and `__all__` is complete."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import pytest

import loopfuse


def test_all_is_sorted_and_unique() -> None:
    assert list(loopfuse.__all__) == sorted(set(loopfuse.__all__))


def test_every_name_in_all_exists() -> None:
    for name in loopfuse.__all__:
        assert hasattr(loopfuse, name), name


def test_every_public_class_and_function_of_every_module_is_exported() -> None:
    """A public name in the `__all__` of a first-level module or subpackage (`loopfuse.X`)
    must be the same object at the top. Deeper modules are that subpackage's business."""
    missing = []
    for module_info in pkgutil.iter_modules(loopfuse.__path__, "loopfuse."):
        if module_info.name.split(".")[-1].startswith("_"):
            continue
        if module_info.name == "loopfuse.intent":
            continue  # `loopfuse.intent` is exported as a module: its names live there
        if module_info.name == "loopfuse.integrations":
            continue  # optional extras, never imported by `import loopfuse`
        module = importlib.import_module(module_info.name)
        for name in getattr(module, "__all__", []):
            if name.isupper():
                continue  # constants stay in their module
            if getattr(loopfuse, name, None) is not getattr(module, name):
                missing.append(f"{module_info.name}.{name}")
    assert not missing, f"not exported from loopfuse: {missing}"


def test_version() -> None:
    assert isinstance(loopfuse.__version__, str)
    assert loopfuse.__version__


PUBLIC_PACKAGES = [
    "loopfuse",
    "loopfuse.intent",
    "loopfuse.detector",
    "loopfuse.dedup",
    "loopfuse.stores",
    "loopfuse.integrations",
]
DUNDERS = {"__all__", "__doc__", "__file__", "__name__", "__path__", "__version__"}


@pytest.mark.parametrize("name", PUBLIC_PACKAGES)
def test_dir_shows_the_public_api_and_nothing_else(name: str) -> None:
    """No imported helper (``Any``, ``Final``, ``annotations``, ``blake3``), no private name:
    ``__all__``, the public submodules, and the dunders a reader looks for."""
    module = importlib.import_module(name)
    shown = dir(module)
    assert shown == sorted(set(shown))
    assert set(module.__all__) <= set(shown)
    for extra in set(shown) - set(module.__all__):
        value = getattr(module, extra)
        is_submodule = isinstance(value, ModuleType) and value.__name__ == f"{name}.{extra}"
        assert extra in DUNDERS or (is_submodule and not extra.startswith("_")), extra
    assert not {"Any", "Final", "annotations", "blake3", "Walk", "_json"} & set(shown)
    assert all(hasattr(module, shown_name) for shown_name in shown)
