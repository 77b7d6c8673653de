"""The C extensions declare only what holds for sub-interpreters (issue 12, section 2).

Built against the stable ABI of 3.11 (the default), a module cannot declare
``Py_mod_multiple_interpreters``, so an interpreter with its own GIL refuses to import it.
Built for one interpreter (``LOOPFUSE_NO_LIMITED_API=1``, as ``.ci/run`` does for 3.13),
both modules declare ``Py_MOD_PER_INTERPRETER_GIL_SUPPORTED``: they keep no state and no
Python object outside a call, so several own-GIL interpreters may run them at once.

loopfuse itself cannot be imported there yet (blake3 and orjson refuse sub-interpreters),
so the extension files are loaded on their own. Needs CPython 3.12+.
"""

from __future__ import annotations

import sys
import textwrap
import threading
from pathlib import Path
from types import ModuleType

import pytest

from conftest import THREAD_GUARD

if sys.version_info < (3, 12):
    pytest.skip("interpreters with their own GIL need CPython 3.12+", allow_module_level=True)

speedups = pytest.importorskip("loopfuse.intent._speedups")
fnv = pytest.importorskip("loopfuse.dedup._fnv")

VALUES = [
    '{"b": [1, 2.5, null, true, 1e-7], "a": "\\u00e9\\n"}',
    "[[[]]]",
    '{"k": ' * 40 + "1" + "}" * 40,
]


def run_isolated(code: str) -> str | None:
    """Run ``code`` in a new interpreter with its own GIL; the error text, or None."""
    if sys.version_info >= (3, 13):
        import _interpreters

        interpreter = _interpreters.create("isolated")
        try:
            failure = _interpreters.exec(interpreter, code)
            return None if failure is None else str(failure.formatted)
        finally:
            _interpreters.destroy(interpreter)
    import _xxsubinterpreters

    interpreter = _xxsubinterpreters.create(isolated=True)
    try:
        _xxsubinterpreters.run_string(interpreter, code)
        return None
    except _xxsubinterpreters.RunFailedError as error:
        return str(error)
    finally:
        _xxsubinterpreters.destroy(interpreter)


def loader(module: ModuleType, name: str) -> str:
    """Code that loads the extension file of ``module`` as ``name``, loopfuse not imported."""
    return textwrap.dedent(
        f"""
        import importlib.util, json
        spec = importlib.util.spec_from_file_location({name!r}, {module.__file__!r})
        {name} = importlib.util.module_from_spec(spec)
        spec.loader.exec_module({name})
        """
    )


def workload(out: Path) -> str:
    """Code that runs both extensions on VALUES many times and writes what they gave."""
    return (
        loader(speedups, "_speedups")
        + loader(fnv, "_fnv")
        + textwrap.dedent(
            f"""
        results = []
        for _ in range(300):
            results = []
            for text in {VALUES!r}:
                value = json.loads(text)
                results.append(_speedups.dumps(value, 254).decode())
                results.append(_speedups.too_deep(value, 20))
                results.append(_fnv.fnv1a64(text.encode()))
        with open({str(out)!r}, "w") as file:
            json.dump(results, file)
        """
        )
    )


def expected() -> list[object]:
    import json

    results: list[object] = []
    for text in VALUES:
        value = json.loads(text)
        results += [speedups.dumps(value, 254).decode(), speedups.too_deep(value, 20)]
        results.append(fnv.fnv1a64(text.encode()))
    return results


def built_for_one_interpreter() -> bool:
    return not str(speedups.__file__).endswith(".abi3.so")


@pytest.mark.skipif(built_for_one_interpreter(), reason="not the stable-ABI build")
def test_a_stable_abi_build_is_refused_by_an_own_gil_interpreter() -> None:
    for module, name in ((speedups, "_speedups"), (fnv, "_fnv")):
        failure = run_isolated(loader(module, name))
        assert failure is not None
        assert "does not support loading in subinterpreters" in failure


@pytest.mark.skipif(not built_for_one_interpreter(), reason="a stable-ABI build")
def test_own_gil_interpreters_run_the_extensions_at_once(tmp_path: Path) -> None:
    import json

    outputs = [tmp_path / f"out{i}.json" for i in range(4)]
    failures: list[str | None] = [None] * len(outputs)

    def one(i: int) -> None:
        failures[i] = run_isolated(workload(outputs[i]))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(outputs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(THREAD_GUARD)
        assert not thread.is_alive()
    assert failures == [None] * len(outputs)
    for out in outputs:
        assert json.loads(out.read_text()) == expected()
