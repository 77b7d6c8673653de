"""Every pattern run on an answer is linear and reads the same windows, and says what the
old, backtracking patterns said (kept in ``answers_reference.py`` as the oracle).

The old trailing-blank pattern backtracked on a run of blanks inside a line, the Windows
temp-path pattern on ``a:\\`` repeated, the test-summary banner on many ``failed`` words:
time quadratic in the answer. Cost is checked in ``test_reliability_linear.py``; here the
rewrite is checked for equality with the old patterns on random text made of the pieces
those patterns look for, and the windows for being the only text any pattern reads.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import strategies as st

import answers_reference as reference
from conftest import fast_and_full, run_property
from loopfuse.detector import answers, looks_like_error, normalize_answer
from loopfuse.detector.answers import error_line

PIECES = st.sampled_from(
    [
        " ", "  ", "\t", "\n", " \n", "\t\n", "a", "x", "=", "== ", " ==", "failed", "Failed",
        "C:\\", "a:\\", "\\", "\\Temp\\", "\\tmp\\", "Temp", "tmp", "\\tm", "'", '"', "`", ":",
        ";", ")", "]", "/tmp/", "/private", "/var/tmp/", "/var/folders/", "tmpab12cd9x",
        "tmp_1", "pid ", "PID=", "process #", "12", "0x1f", "deadbeef1", "2024-05-01T10:00:03",
        ".5", "Z", "+01:00", "10:00:03", "0.53s", " ms", "bash: line 7:", "é", "\u2028",
        "exit code 1", "<returncode>2</returncode>", "error:", "x.py:3:1: error:",
        "3f2a9c1e-0b7d-4e55-9a1c-2b3c4d5e6f70", "\r", "\x0b",
    ]
)  # fmt: skip
texts = st.lists(PIECES, max_size=60).map("".join) | st.text(max_size=40)


def normalises_as_before(text: str) -> None:
    assert answers._normalize_window(text) == reference.normalize(text)
    if len(text) <= answers.SCAN_HEAD + answers.SCAN_TAIL:
        assert normalize_answer(text) == reference.normalize(text)


def old_matches(line: str) -> bool:
    return answers._LINE_START.match(line.lstrip()) is not None or (
        reference.IN_LINE.search(line) is not None
    )


def matches_as_before(line: str) -> None:
    assert answers._matches_a_pattern(line) == old_matches(line)


@pytest.mark.parametrize(
    "text",
    [
        "C:\\x\\tmp\\a/tmp/b c:\\\\Temp\\q a:\\a:\\b\\tmp\\c",
        "a:\\" * 50 + "\\Temp\\x y",
        " " * 300 + "x  \n\t \n",
        "= a failed b =\n",
        "== failed ==\nx",
    ],
)
def test_normalises_these_as_the_old_patterns_did(text: str) -> None:
    normalises_as_before(text)


@pytest.mark.parametrize(
    "line",
    [
        "=== 2 failed, 1 passed ===", "= failed =", "=failed =", "= failed=", "= xfailed =",
        "= failed =\n", "= failed =\n\n", "== failed ", "====", "= failed failed =",
    ],
)  # fmt: skip
def test_matches_these_lines_as_the_old_patterns_did(line: str) -> None:
    matches_as_before(line)


@pytest.mark.parametrize("examples", fast_and_full(200, 6000))
def test_normalises_random_text_as_the_old_patterns_did(examples: int) -> None:
    run_property(examples, normalises_as_before, texts)


@pytest.mark.parametrize("examples", fast_and_full(200, 6000))
def test_matches_random_lines_as_the_old_patterns_did(examples: int) -> None:
    run_property(examples, matches_as_before, texts)


class Recording:
    """A compiled pattern that records the length of each text it is run on."""

    def __init__(self, pattern: re.Pattern[str], seen: list[int]) -> None:
        self.pattern = pattern
        self.seen = seen

    def sub(self, replacement: str, text: str) -> str:
        self.seen.append(len(text))
        return self.pattern.sub(replacement, text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pattern, name)


def test_normalisation_reads_only_the_head_and_tail_windows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[int] = []  # what the first pattern reads: the raw text it is given
    first, *rest = answers._NORMALISERS
    monkeypatch.setattr(answers, "_NORMALISERS", ((Recording(first[0], seen), first[1]), *rest))
    middle = "took 0.5s at 10:00:03 in /tmp/tmpab12cd9x \n" * 2000
    text = "started 10:00:01 - \n" + middle + "done - in 0.2s  "
    normal = normalize_answer(text)
    assert seen == [answers.SCAN_HEAD, answers.SCAN_TAIL]
    # The windows are normalised; the middle is kept as it is.
    assert normal.startswith("started <time> -\n")
    assert normal.endswith("done - in <duration>")
    assert middle[answers.SCAN_HEAD : -answers.SCAN_TAIL] in normal


@pytest.mark.parametrize("examples", fast_and_full(100, 3000))
def test_long_answers_keep_their_middle_and_normalise_their_windows(examples: int) -> None:
    def check(head: str, middle: str, tail: str) -> None:
        text = (head * 200)[: answers.SCAN_HEAD] + middle + (tail * 60)[-answers.SCAN_TAIL :]
        if len(text) <= answers.SCAN_HEAD + answers.SCAN_TAIL:
            return
        expected = (
            reference.normalize(text[: answers.SCAN_HEAD])
            + text[answers.SCAN_HEAD : -answers.SCAN_TAIL]
            + reference.normalize(text[-answers.SCAN_TAIL :])
        )
        assert normalize_answer(text) == expected
        looks_like_error(text)
        error_line(text)

    run_property(examples, check, texts.filter(bool), texts.filter(bool), texts.filter(bool))
