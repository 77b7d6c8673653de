"""The ``loopfuse`` commands themselves: bare ``loopfuse`` lists every one, each one's
``--help`` says what it does, ``loopfuse hook`` typed at a terminal says what it is for
instead of waiting, and the command line's modules import one another one way only."""

from __future__ import annotations

import ast
import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loopfuse.cli.entry import main as entry
from loopfuse.harness.agent_cli import AGENT_CLIS, agent_cli

SRC = Path(__file__).resolve().parents[1] / "src"
COMMANDS = ["scan", "demo", "init", "hook", "doctor"]


def _listed_by_help(text: str) -> list[str]:
    """The commands ``loopfuse --help`` lists under COMMAND."""
    section = text[text.index("  COMMAND\n") :].split("\n\n")[0]
    return re.findall(r"^    (\S+)", section, flags=re.MULTILINE)


def test_bare_loopfuse_lists_every_command_with_what_it_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert entry([]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert lines[0].startswith("loopfuse: error: choose a command")
    listed = {line.split()[0]: line.split(None, 1)[1] for line in lines[1:]}
    assert list(listed) == COMMANDS
    assert all(len(summary) > 20 for summary in listed.values()), listed
    assert entry(["--help"]) == 0
    assert _listed_by_help(capsys.readouterr().out) == COMMANDS  # the parser's, all of them


def _options_without_help(text: str) -> list[str]:
    """The options of a ``--help`` text that have no help of their own."""
    lines = text.splitlines()
    missing = []
    for number, line in enumerate(lines):
        if not re.match(r"  -", line):
            continue
        if re.search(r"\S  +\S", line.strip()):
            continue  # the help follows on the same line
        following = lines[number + 1] if number + 1 < len(lines) else ""
        if re.match(r" {8,}\S", following) and not following.strip().startswith("-"):
            continue  # the help is on the next line, indented
        missing.append(line.strip())
    return missing


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_help_says_what_it_does(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    assert entry([command, "--help"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"usage: loopfuse {command} ")
    # Below the usage, a description of the command: a sentence, not only the options.
    description = text.split("\n\n")[1]
    assert not description.startswith(("options:", "positional arguments:")), text
    assert len(description.split()) >= 8, description
    assert _options_without_help(text) == []


def test_options_without_help_are_found() -> None:
    text = "options:\n  -h, --help  show this\n  --color {a,b}\n  --format X\n        the format\n"
    assert _options_without_help(text) == ["--color {a,b}"]


# --- loopfuse hook at a terminal ------------------------------------------------------------


def _hook_at_a_terminal(*args: str) -> tuple[int, str, str, float]:
    """Run ``loopfuse hook`` with a terminal for stdin (and nothing ever typed on it):
    its exit status, stdout, stderr and how long it took."""
    controller, terminal = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(SRC), "LOOPFUSE_STATE_DIR": os.devnull}
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "loopfuse", "hook", *args],
            stdin=terminal,
            capture_output=True,
            text=True,
            env=env,
            timeout=30,  # only reached when it waits for the terminal: the bug
            check=False,
        )
    finally:
        os.close(terminal)
        os.close(controller)
    return done.returncode, done.stdout, done.stderr, time.monotonic() - started


def test_hook_typed_at_a_terminal_says_what_it_is_for_and_does_not_wait() -> None:
    status, out, err, _ = _hook_at_a_terminal("--agent", "claude-code")
    assert status == 2  # a usage error
    assert out == ""  # nothing a CLI could take for an answer
    titles = [agent_cli(name).title for name in AGENT_CLIS]  # every CLI it guards, by name
    assert f"{', '.join(titles[:-1])} and {titles[-1]} run this at each tool call" in err
    assert "loopfuse init --agent" in err


def test_hook_help_at_a_terminal_is_still_the_help() -> None:
    status, out, err, _ = _hook_at_a_terminal("--help")
    assert status == 0
    assert out.startswith("usage: loopfuse hook")
    assert err == ""


def test_hook_from_a_pipe_reads_its_event(tmp_path: Path) -> None:
    # The CLIs' way: the event on a pipe. An empty one is a payload error: allowed, logged.
    env = {**os.environ, "PYTHONPATH": str(SRC), "LOOPFUSE_STATE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "loopfuse", "hook"],
        input="",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert "not JSON" in (tmp_path / "hook.log").read_text(encoding="utf-8")


# --- imports go one way ---------------------------------------------------------------------


def _module_of(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, module: str, known: set[str]) -> set[str]:
    """The modules of the package that ``path`` imports when it runs (in a function too;
    not under ``if TYPE_CHECKING:``, which never runs)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {
        id(child)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for statement in node.body
        for child in ast.walk(statement)
    }
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                name = f"{base}.{alias.name}"
                if name in known:
                    found.add(name)  # a module of the package, imported by name
                elif base in known:
                    found.add(base)
    found.discard(module)
    return found


def _graph() -> dict[str, set[str]]:
    """Each module of the package and the modules of the package it imports."""
    files = {_module_of(path): path for path in (SRC / "loopfuse").rglob("*.py")}
    # A compiled module (its .pyi beside it, built or not) is imported by name too.
    stubs = {_module_of(path) for path in (SRC / "loopfuse").rglob("*.pyi")}
    known = set(files) | stubs
    graph = {module: _imports(path, module, known) for module, path in files.items()}
    graph.update({stub: set() for stub in stubs - set(files)})
    return graph


def _circles() -> list[list[str]]:
    graph = _graph()
    circles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                circles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return circles


def test_no_module_of_loopfuse_imports_one_that_imports_it_back() -> None:
    assert _circles() == []


def test_the_library_never_imports_the_command_line() -> None:
    """The command line sits on top of the library: a settings file's ``[scan]`` and
    ``[hook]`` tables are declared below the loader (``loopfuse._sections``), so that
    ``load_settings`` checks them without importing ``loopfuse.cli``."""
    upward = {
        module: sorted(target for target in targets if target.startswith("loopfuse.cli"))
        for module, targets in _graph().items()
        if not module.startswith("loopfuse.cli") and module != "loopfuse.__main__"
    }
    assert {module: found for module, found in upward.items() if found} == {}
