"""The docs run as written: their Python examples, and their install lines.

**Examples.** Every ```python block of docs/*.md runs on its own, in a fresh namespace, as
a reader pastes it; a block that builds on the one before it says so with the marker
``<!-- continues -->`` on the line(s) just above its fence, and then runs in the
namespace the previous block left. A block that imports a package that is not installed
(an optional exporter the docs show) is skipped, and so is a block continuing it.
(docs/integrations/*.md: tests/test_integration_docs.py runs every block on its own.)

**Install lines.** loopfuse is not on PyPI yet (the README's Install section), so every
``pip install`` in README.md and docs/ (in a code block, or inline code in the prose)
installs loopfuse from a clone (``pip install '.[extra]'``), never by name
(``loopfuse``, ``loopfuse[extra]``); every extra it names exists in pyproject.toml; and
the third-party packages a page's examples import are installed by that page's install
lines (the extras' requirements, and what those require in turn). The hint of a
``MissingExtraError`` follows the same rule.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import re
import shlex
import sys
import tomllib
from functools import cache
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from loopfuse.integrations._extras import install_command, installed

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
ALL_PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
IMPORT = re.compile(r"^(?:from|import)\s+([A-Za-z_][\w.]*)", re.MULTILINE)
CONTINUES = "<!-- continues -->"
BLOCK = re.compile(r"(<!-- continues -->\s*)?```python\n(.+?)\n```", re.DOTALL)
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
EXTRAS: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]


def python_blocks(text: str) -> list[tuple[bool, str]]:
    """The page's Python blocks: (continues the previous block, code)."""
    return [(bool(marker), code) for marker, code in BLOCK.findall(text)]


def test_docs_exist() -> None:
    assert {"index.md", "intent.md", "breaker.md"} <= {page.name for page in PAGES}


def test_a_continuing_block_is_marked() -> None:
    page = f"```python\nx = 1\n```\n\ntext\n\n{CONTINUES}\n```python\nprint(x)\n```\n"
    assert python_blocks(page) == [(False, "x = 1"), (True, "print(x)")]
    page = f"{CONTINUES} is the marker\n\nthe prose goes on\n\n```python\nprint(x)\n```\n"
    assert python_blocks(page) == [(False, "print(x)")]  # only right above the fence


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_python_examples_run(page: Path) -> None:
    namespace: dict[str, object] = {}
    skipped: list[str] = []
    previous_skipped = False
    for index, (continues, block) in enumerate(python_blocks(page.read_text(encoding="utf-8"))):
        if index == 0:
            assert not continues, f"{page.name}: the first block has nothing to continue"
        missing = sorted({name for name in IMPORT.findall(block) if not installed(name)})
        if missing or (continues and previous_skipped):
            why = ", ".join(missing) if missing else "the block it continues"
            skipped.append(f"block {index} needs {why}")
            previous_skipped = True
            continue
        previous_skipped = False
        if not continues:
            namespace = {}  # as a reader pastes it: on its own
        name = f"{page.name}[python block {index}]"
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                exec(compile(block, name, "exec"), namespace)
            except NameError as exc:
                raise AssertionError(
                    f"{name} fails on its own ({exc}): make it self-contained, or mark it "
                    f"{CONTINUES} if it goes on from the block before"
                ) from exc
    if skipped:
        pytest.skip(f"{page.name}: ran the rest; {'; '.join(skipped)} (not installed)")


# --- install lines ---------------------------------------------------------------------


def install_lines(text: str) -> list[str]:
    """Every ``pip install`` command of a page: lines of its code blocks, inline code."""
    lines = []
    for fenced in re.findall(r"```[\w-]*\n(.*?)```", text, re.DOTALL):
        lines += [line for line in fenced.splitlines() if "pip install" in line]
    prose = re.sub(r"```[\w-]*\n.*?```", "", text, flags=re.DOTALL)
    lines += [span for span in re.findall(r"`([^`\n]+)`", prose) if "pip install" in span]
    return lines


def install_targets(line: str) -> list[str]:
    """What the ``pip install``s of one command line install (options and comments out)."""
    words = shlex.split(line, comments=True)
    targets: list[str] = []
    taking = False
    for before, word in zip(["", *words], words, strict=False):
        if word in {"&&", "||", ";", "|"}:
            taking = False
        elif taking and not word.startswith("-"):
            targets.append(word)
        elif word == "install" and Path(before).name in {"pip", "pip3"}:
            taking = True
    return targets


def problems(line: str) -> list[str]:
    """What is wrong with an install line: loopfuse by name, an extra that does not exist."""
    found = []
    for target in install_targets(line):
        name = re.split(r"[\[<>=!~;@ ]", target, maxsplit=1)[0]
        if canonicalize_name(name) == "loopfuse":
            found.append(f"{target!r}: loopfuse is not on PyPI; install '.[...]' from a clone")
        if name == "." or (name == "" and target.startswith(".[")):
            extras = re.fullmatch(r"\.(?:\[([\w,-]*)\])?", target)
            if extras is None:
                found.append(f"{target!r}: not '.' or '.[extra,...]'")
                continue
            for extra in filter(None, (extras.group(1) or "").split(",")):
                if extra not in EXTRAS:
                    found.append(f"{target!r}: no extra {extra!r} in pyproject.toml")
    return found


def test_the_install_line_check_catches_what_it_must() -> None:
    assert problems("pip install loopfuse")
    assert problems("pip install 'loopfuse[openai]'   # or '.[openai]'")
    assert problems("python3 -m venv .venv && .venv/bin/pip install -U 'loopfuse[redis]'")
    assert problems("pip install '.[no-such-extra]'")
    assert problems("pip install '.[openai,nope]' smolagents")
    assert not problems("pip install '.[openai,anthropic]' smolagents  # in a clone")
    assert not problems("python3 -m venv .venv && .venv/bin/pip install --upgrade -e '.[test]'")
    assert not problems("pip install dist/loopfuse-0.1.0.dev0-*.whl orjson")
    assert install_lines("a `pip install '.[x]'` b\n```bash\npip install y\nls\n```\n") == [
        "pip install y",
        "pip install '.[x]'",
    ]


@pytest.mark.parametrize("page", ALL_PAGES, ids=[str(p.relative_to(ROOT)) for p in ALL_PAGES])
def test_install_lines_install_from_a_clone(page: Path) -> None:
    found = [
        f"{line.strip()}: {problem}"
        for line in install_lines(page.read_text(encoding="utf-8"))
        for problem in problems(line)
    ]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_the_missing_extra_hint_installs_from_a_clone(extra: str) -> None:
    command, _, where = install_command(extra).partition(" in a ")
    assert install_targets(command) == [f".[{extra}]"]
    assert not problems(command)
    assert "clone" in where


@cache
def distribution_of(module: str) -> str | None:
    """The installed distribution that provides ``module`` (None: not installed, or the
    standard library, or loopfuse)."""
    top = module.split(".")[0]
    if top in sys.stdlib_module_names or top == "loopfuse":
        return None
    candidates = importlib.metadata.packages_distributions().get(top, [])
    if len(candidates) <= 1:
        return canonicalize_name(candidates[0]) if candidates else None
    # A namespace shared by several distributions (opentelemetry): the one with the file.
    path = module.replace(".", "/")
    files = {f"{path}.py", f"{path}/__init__.py"}
    for name in candidates:
        if files & {str(file) for file in importlib.metadata.distribution(name).files or []}:
            return canonicalize_name(name)
    return None


def requirements_of(requirement: str, extras: frozenset[str] = frozenset()) -> set[str]:
    """``requirement``'s distribution and everything it requires, installed ones only."""
    seen: set[str] = set()
    todo = [(Requirement(requirement), extras)]
    while todo:
        req, wanted = todo.pop()
        name = canonicalize_name(req.name)
        if name == "loopfuse":
            for extra in wanted | set(req.extras):
                todo += [(Requirement(r), frozenset()) for r in EXTRAS[extra]]
            todo += [(Requirement(r), frozenset()) for r in PYPROJECT["project"]["dependencies"]]
            continue
        key = f"{name}[{','.join(sorted(req.extras))}]"
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for raw in requires:
            sub = Requirement(raw)
            if sub.marker is None or any(
                sub.marker.evaluate({"extra": extra}) for extra in (req.extras or {""})
            ):
                todo.append((sub, frozenset()))
    return {key.split("[")[0] for key in seen}


def installed_by(lines: list[str]) -> set[str]:
    """The distributions the install lines bring in (loopfuse's own dependencies too)."""
    wanted = {"loopfuse"}
    for line in lines:
        for target in install_targets(line):
            if target.startswith("."):
                wanted.add(target.replace(".", "loopfuse", 1))
            elif "/" not in target:
                wanted.add(target)
    return set().union(*(requirements_of(target) for target in wanted))


@pytest.mark.parametrize("page", ALL_PAGES, ids=[str(p.relative_to(ROOT)) for p in ALL_PAGES])
def test_install_lines_bring_what_the_examples_import(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    imported = {name for _, block in python_blocks(text) for name in IMPORT.findall(block)}
    needed = {(name, distribution_of(name)) for name in imported}
    have = installed_by(install_lines(text))
    missing = sorted(f"{dist} (for {name})" for name, dist in needed if dist and dist not in have)
    assert not missing, f"no install line of {page.name} installs {', '.join(missing)}"
