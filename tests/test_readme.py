"""README is executable: its commands are the ones CI runs, its Python examples run."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def command_after(marker: str) -> str:
    match = re.search(rf"<!-- {marker} -->\s*```bash\n(.+?)\n```", README, re.DOTALL)
    assert match, f"README has no command after <!-- {marker} -->"
    return match.group(1).strip()


@pytest.mark.parametrize("marker", ["main-command", "test-command"])
def test_readme_commands_are_what_ci_runs(marker: str) -> None:
    command = command_after(marker)
    assert "\n" not in command
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert command in ci_lines, f".ci/run must run the README's {marker} verbatim"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.+?)\n```", README, re.DOTALL)


def test_readme_has_python_examples() -> None:
    assert len(python_blocks()) >= 2


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_python_example_runs(index: int) -> None:
    block = python_blocks()[index]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, f"README.md[python block {index}]", "exec"), {})
    # Every `print(...)  # expected` comment in the block is checked against the output.
    expected = [
        line.split("#", 1)[1].split(":")[0].strip()
        for line in block.splitlines()
        if line.lstrip().startswith("print(") and "#" in line
    ]
    printed = out.getvalue().splitlines()
    assert printed == expected
