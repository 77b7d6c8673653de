"""Build the optional C accelerators of ``loopfuse.dedup`` (FNV-1a 64) and
``loopfuse.intent`` (canonical writer and nesting check).

Everything else about the package lives in pyproject.toml. The extensions are
``optional``: without a C compiler or Python headers the build prints a warning and the
install goes on, and each module uses its bit-identical pure-Python twin. Set
``LOOPFUSE_NO_EXTENSIONS=1`` to skip the build on purpose.

On a regular (GIL) interpreter the modules are built against the stable ABI of Python
3.11, so one wheel per platform serves every later CPython (``LOOPFUSE_NO_LIMITED_API=1``
builds for the running interpreter only, which lets them declare support for
interpreters with their own GIL). A free-threaded interpreter has no stable ABI: there
only the FNV module is built, the intent accelerator being safe only under a GIL.
"""

from __future__ import annotations

import os
import sysconfig

from setuptools import Extension, setup

_FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
_LIMITED_API = not _FREE_THREADED and os.environ.get("LOOPFUSE_NO_LIMITED_API", "") == ""


# (module, C sources, whether it may run without a GIL): each module is optional on its own.
_MODULES = [
    ("loopfuse.dedup._fnv", ["src/loopfuse/dedup/_fnv.c"], True),
    ("loopfuse.intent._speedups", ["src/loopfuse/intent/_speedups.c"], False),
]


def _extensions() -> list[Extension]:
    if os.environ.get("LOOPFUSE_NO_EXTENSIONS", "") not in ("", "0"):
        return []
    return [
        Extension(
            name,
            sources=sources,
            optional=True,
            py_limited_api=_LIMITED_API,
            define_macros=[("Py_LIMITED_API", "0x030B0000")] if _LIMITED_API else [],
            extra_compile_args=["-O2"] if os.name != "nt" else [],
        )
        for name, sources, without_gil in _MODULES
        if without_gil or not _FREE_THREADED
    ]


setup(
    ext_modules=_extensions(),
    options={"bdist_wheel": {"py_limited_api": "cp311"}} if _LIMITED_API else {},
)
