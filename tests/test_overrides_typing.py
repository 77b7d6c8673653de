"""The guards' keyword settings are typed (issue 29 §3): mypy refuses `Guard(mode="wran")`
and `Guard(max_strike=3)` as the constructors refuse them at run time.

This test runs mypy (strict) on a small snippet in a subprocess, so it runs in the default
suite, not only in CI's `mypy --strict src` step (which checks src alone)."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loopfuse import BreakerSettings, CacheSettings, DetectorSettings, GuardSettings
from loopfuse.overrides import BreakerOverrides, CacheOverrides, DetectorOverrides, GuardOverrides

SRC = Path(__file__).resolve().parent.parent / "src"

SNIPPET = """\
from datetime import timedelta

from loopfuse import DedupCache, Guard, LoopBreaker
from loopfuse.detector import LoopDetector

Guard(mode="wran")  # line 6
Guard(max_strike=3)  # line 7
LoopDetector(max_strike=3)  # line 8
LoopBreaker(max_repeat=3)  # line 9
DedupCache[str](capasity=3)  # line 10
LoopDetector(max_strikes="3")  # line 11
Guard(mode="refuse", warn_window=timedelta(minutes=5), fail_closed=True, breaker=None)
LoopDetector(max_strikes=None, ignore_tools={"think"}, tool_limits={"deploy": 1})
LoopBreaker(window=30, max_repeats=5)
DedupCache[str](capacity=3, default_ttl=60)
"""


@pytest.mark.parametrize(
    ("typed", "settings"),
    [
        (GuardOverrides, GuardSettings),
        (BreakerOverrides, BreakerSettings),
        (DetectorOverrides, DetectorSettings),
        (CacheOverrides, CacheSettings),
    ],
)
def test_each_typed_dict_has_every_setting_of_its_class(typed: type, settings: type) -> None:
    fields = [field.name for field in dataclasses.fields(settings) if field.init]
    assert list(typed.__annotations__) == fields


def _mypy() -> list[str]:
    """The mypy command: the one beside this Python, else on the path."""
    beside = Path(sys.executable).with_name("mypy")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("mypy")
    if found is None:
        pytest.skip("mypy is not installed")
    return [found]


def test_mypy_refuses_a_misspelt_or_mistyped_setting(tmp_path: Path) -> None:
    snippet = tmp_path / "snippet.py"
    snippet.write_text(SNIPPET, encoding="utf-8")
    done = subprocess.run(
        [
            *_mypy(),
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--python-version",
            "3.11",
            str(snippet),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "MYPYPATH": str(SRC)},
    )
    errors = {
        int(match.group(1)): match.group(2)
        for match in re.finditer(r"snippet\.py:(\d+): error: (.+)", done.stdout)
    }
    assert sorted(errors) == [6, 7, 8, 9, 10, 11], done.stdout + done.stderr
    assert "\"Literal['wran']\"" in errors[6]
    assert 'Unexpected keyword argument "max_strike" for "Guard"' in errors[7]
    assert 'did you mean "max_strikes"' in errors[8]
    assert 'did you mean "max_repeats"' in errors[9]
    assert 'did you mean "capacity"' in errors[10]
    assert '"max_strikes"' in errors[11]
