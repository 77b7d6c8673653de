"""Code examples in docs/ run: every ```python block, in order, one namespace per page."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = sorted(DOCS.glob("*.md"))


def test_docs_exist() -> None:
    assert {"index.md", "intent.md", "breaker.md"} <= {page.name for page in PAGES}


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_python_examples_run(page: Path) -> None:
    namespace: dict[str, object] = {}
    blocks = re.findall(r"```python\n(.+?)\n```", page.read_text(encoding="utf-8"), re.DOTALL)
    for index, block in enumerate(blocks):
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(block, f"{page.name}[python block {index}]", "exec"), namespace)
