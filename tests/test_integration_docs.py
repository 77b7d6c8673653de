"""docs/integrations/*.md: every ```python block runs on its own, as pasted: a fresh
namespace per block.

A block that imports a package that is not installed (an extra CI installs, or a package
the page's install line names) is skipped, and only that block, naming the package.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

from loopfuse.integrations._extras import installed

DOCS = Path(__file__).resolve().parent.parent / "docs" / "integrations"
PAGES = sorted(DOCS.glob("*.md"))
IMPORT = re.compile(r"^(?:from|import)\s+([A-Za-z_][\w]*)", re.MULTILINE)


def blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.+?)\n```", page.read_text(encoding="utf-8"), re.DOTALL)


def test_every_integration_has_a_page() -> None:
    names = {page.name for page in PAGES}
    assert names >= {"httpx.md", "langchain.md", "litellm.md", "openai_agents.md"}
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        assert blocks(page), f"{page.name} has no Python example"
        # An unclosed fence would swallow (and so skip) the examples after it.
        assert len(blocks(page)) == text.count("```python"), f"{page.name}: unclosed block"
        assert text.count("```") % 2 == 0, f"{page.name}: unbalanced code fences"


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_integration_examples_run(page: Path) -> None:
    # LiteLLM fetches a model price map from the network at import unless told not to.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    skipped = []
    for index, block in enumerate(blocks(page)):
        missing = sorted({name for name in IMPORT.findall(block) if not installed(name)})
        if missing:
            skipped.append(f"block {index} needs {', '.join(missing)}")
            continue
        namespace: dict[str, object] = {}  # each block on its own, as a reader pastes it
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(block, f"{page.name}[python block {index}]", "exec"), namespace)
    if skipped:
        pytest.skip(f"{page.name}: ran the rest; {'; '.join(skipped)} (not installed)")


def test_the_litellm_page_says_how_to_run_offline() -> None:
    """``import litellm`` downloads a price map unless told not to: the page says how."""
    text = (DOCS / "litellm.md").read_text(encoding="utf-8")
    assert re.search(r"```bash\nexport LITELLM_LOCAL_MODEL_COST_MAP=True\n```", text)
