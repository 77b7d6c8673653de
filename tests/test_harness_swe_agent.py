"""SWE-agent / mini-swe-agent: ``<returncode>N</returncode>`` (issue 27 §1)."""

from __future__ import annotations

from loopfuse.detector import LoopDetector
from loopfuse.harness import ToolKind
from loopfuse.harness.swe_agent import HARNESS


def test_the_tools_are_data() -> None:
    assert HARNESS.kind("bash", {"command": "ls"}) is ToolKind.SHELL
    assert HARNESS.kind("str_replace_editor", {"command": "view"}) is ToolKind.EDITOR
    # Its window commands are left to the generic vocabulary (see the module).
    assert HARNESS.kind("open", {"path": "a.py"}) is None
    assert HARNESS.kind("scroll_down", {}) is None


def test_the_return_code() -> None:
    assert HARNESS.failed("bash", "<returncode>2</returncode>\n<output>\n</output>") is True
    assert HARNESS.failed("bash", "<returncode>0</returncode>\n<output>\n</output>") is None


def test_a_non_zero_return_code_without_output_is_an_error_in_the_detector() -> None:
    det = LoopDetector(harness="swe_agent")
    assert det.settings.error_reading.failed("bash", "<returncode>2</returncode>", None) is True
