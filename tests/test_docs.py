"""Code examples in docs/ run: every ```python block, in order, one namespace per page.

A block that imports a package that is not installed (an optional exporter the docs
show) is skipped, and only that block.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from loopfuse.integrations._extras import installed

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = sorted(DOCS.glob("*.md"))
IMPORT = re.compile(r"^(?:from|import)\s+([A-Za-z_][\w.]*)", re.MULTILINE)


def test_docs_exist() -> None:
    assert {"index.md", "intent.md", "breaker.md"} <= {page.name for page in PAGES}


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_python_examples_run(page: Path) -> None:
    namespace: dict[str, object] = {}
    blocks = re.findall(r"```python\n(.+?)\n```", page.read_text(encoding="utf-8"), re.DOTALL)
    skipped = []
    for index, block in enumerate(blocks):
        missing = sorted({name for name in IMPORT.findall(block) if not installed(name)})
        if missing:
            skipped.append(f"block {index} needs {', '.join(missing)}")
            continue
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(block, f"{page.name}[python block {index}]", "exec"), namespace)
    if skipped:
        pytest.skip(f"{page.name}: ran the rest; {'; '.join(skipped)} (not installed)")
