"""The harness package: the detector names no harness, users' settings win, the generic
vocabulary is the fallback, the old names still read (issue 27 §1)."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

from harness_runs import openai_first_flag
from loopfuse.detector import DEFAULT_OBSERVATION_TOOLS, DetectorSettings, LoopDetector
from loopfuse.errors import ConfigError
from loopfuse.harness import HARNESSES, ToolKind, harness_named, reader_for, structured_failure
from loopfuse.harness.base import Harness, Tool
from loopfuse.harness.generic import DEFAULT_SHELL_TOOLS

DETECTOR = Path(__file__).resolve().parent.parent / "src" / "loopfuse" / "detector"


def test_the_detector_imports_no_harness() -> None:
    """Only the protocol (``loopfuse.harness``) and the generic vocabulary."""
    allowed = {"loopfuse.harness", "loopfuse.harness.generic", "loopfuse.harness.base"}
    for path in DETECTOR.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "loopfuse.harness"
            ):
                assert node.module in allowed, (path.name, node.module)
            if isinstance(node, ast.ImportFrom) and node.module == "loopfuse.harness":
                assert not {a.name for a in node.names} & set(HARNESSES), path.name


def test_every_harness_has_a_module() -> None:
    for name in HARNESSES:
        harness = harness_named(name)
        assert harness.name == name
        assert harness.tools
    with pytest.raises(ConfigError, match="unknown harness"):
        harness_named("nobody")


def test_auto_judges_each_tool_by_the_harness_declaring_it() -> None:
    auto = reader_for("auto")
    assert auto is not None
    assert auto.kind("write_stdin", {"chars": ""}) is ToolKind.WAIT
    assert auto.kind("BashOutput", {}) is ToolKind.WAIT
    assert auto.kind("my_tool", {}) is None
    # Two harnesses that disagree on one call: neither decides.
    a = Harness("a", "A", (Tool("run", ToolKind.READ),))
    b = Harness("b", "B", (Tool("run", ToolKind.OTHER),))
    from loopfuse.harness import _Every

    assert _Every((a, b)).kind("run", {}) is None


def test_generic_keeps_the_vocabulary_only() -> None:
    steps = [
        ("exec_command", {"cmd": "pytest"}, "Process running with session ID 3\nOutput:\n"),
        *[("write_stdin", {"session_id": 3, "chars": ""}, "Process running with session ID 3\n")]
        * 10,
    ]
    assert openai_first_flag(steps) is None
    assert openai_first_flag(steps, LoopDetector(harness="generic")) is not None


def test_a_users_own_names_win_over_a_harness() -> None:
    """``write_stdin`` named read-only by the user is a read (not a wait): the read-only
    allowance applies to its quiet polls."""
    steps = [("write_stdin", {"session_id": 3, "chars": ""}, "Process running with session ID 3\n")]
    steps = steps * 10
    det = LoopDetector(observation_tools=(*DEFAULT_OBSERVATION_TOOLS, "write_stdin"))
    assert openai_first_flag(steps, det) == 6  # the read-only allowance: 5
    assert openai_first_flag(steps) is None  # the harness's word: a wait
    settings = DetectorSettings(shell_tools=(*DEFAULT_SHELL_TOOLS, "BashOutput"))
    assert settings.reader.kinds(("BashOutput",), ({"command": "ls"},)) == (True, False, False)


def test_the_setting_is_checked() -> None:
    with pytest.raises(ConfigError, match="harness"):
        DetectorSettings(harness="nobody")
    with pytest.raises(ConfigError, match="max_waits"):
        DetectorSettings(max_waits=0)


def test_structured_failure() -> None:
    assert structured_failure({"isError": True}) is True
    assert structured_failure({"status": "cancelled"}) is True
    assert structured_failure({"status": "success"}) is False
    assert structured_failure({"returncode": 0}) is False
    assert structured_failure({"exit_code": True}) is None  # a bool is not an exit code


def test_the_old_vocabulary_module_still_reads_with_a_warning() -> None:
    import loopfuse.detector.vocabulary as old

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert old.DEFAULT_SHELL_TOOLS is DEFAULT_SHELL_TOOLS
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    with pytest.raises(AttributeError):
        old.NOTHING  # noqa: B018


GENERIC_INTERFACE = {"loopfuse.harness", "loopfuse.harness.base", "loopfuse.harness.generic"}


def _imports(tree: ast.AST) -> list[str]:
    """Every module a source file imports: ``import x``, ``from x import y`` (as ``x``
    and ``x.y``: ``y`` may be a module) and ``import_module("x")`` with a literal name."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
            found += [f"{node.module}.{alias.name}" for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.append(str(node.args[0].value))
    return found


def test_no_detector_module_imports_a_harness_module() -> None:
    """Whatever the form of the import: only the generic interface."""
    harness_modules = {f"loopfuse.harness.{name}" for name in HARNESSES}
    for path in DETECTOR.rglob("*.py"):
        for module in _imports(ast.parse(path.read_text())):
            if module.startswith("loopfuse.harness"):
                assert module not in harness_modules, (path.name, module)
                assert module in GENERIC_INTERFACE or module.rsplit(".", 1)[0] in {
                    "loopfuse.harness",
                    "loopfuse.harness.base",
                    "loopfuse.harness.generic",
                }, (path.name, module)


def _code_strings(tree: ast.AST) -> set[str]:
    """The string constants of a module's code (its docstrings left out)."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    }


def test_the_detector_holds_no_harness_table() -> None:
    """The editor tools and the frameworks' answers are declared by their harness
    (``Tool.files``, ``Harness.not_run``): the detector's code names none of them."""
    from loopfuse.harness import not_run_answers

    # (names that are plain words, "replace", "edit", are left out: codecs' "replace")
    owned = {
        tool.name
        for name in HARNESSES
        for tool in harness_named(name).tools
        if tool.files is not None and ("_" in tool.name or tool.name[0].isupper())
    }
    owned |= {start for start in not_run_answers().starts if len(start) > len("Error")}
    assert {"str_replace_editor", "apply_patch", "Read", "Unknown tool"} <= owned
    for path in DETECTOR.rglob("*.py"):
        strings = _code_strings(ast.parse(path.read_text()))
        assert not strings & owned, (path.name, strings & owned)
        assert not any("is not a valid tool" in text for text in strings), path.name


def test_every_editor_and_framework_answer_is_declared_by_its_harness() -> None:
    from loopfuse.harness import FileAccess, file_tools, not_run_answers

    tools = file_tools()
    assert tools["str_replace_editor"] is FileAccess.BY_COMMAND  # OpenHands, SWE-agent
    assert tools["Edit"] is FileAccess.EDITS  # Claude Code
    assert tools["read_file"] is FileAccess.READS  # Codex, Gemini CLI
    assert tools["str_replace_based_edit_tool"] is FileAccess.BY_COMMAND  # the API's own
    assert "think" not in tools  # reads, but no file tool
    assert "view_image" not in tools
    pattern = not_run_answers().pattern
    for name in ("langchain", "openai_agents", "pydantic_ai", "smolagents", "crewai"):
        declared = harness_named(name).not_run
        assert declared is not None
        assert declared.pattern in pattern, name
    assert harness_named("openhands").not_run is not None
