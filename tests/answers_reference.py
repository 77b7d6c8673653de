"""The answer patterns as they were before they became linear (backtracking on purpose).

Kept verbatim as the oracle of ``tests/test_detector_answers_linear.py``: normalised
answers are hashed into digests that stores keep, so the linear rewrite must say exactly
what these patterns said.
"""

from __future__ import annotations

import re
from typing import Final

IN_LINE: Final = re.compile(
    r":\d+(?::\d+)?: (?:fatal )?error:"
    r"|\b(?:exit code|exit status|exited with code|return ?code)[\s:=]*-?[1-9]"
    r"|<returncode>\s*-?[1-9]\d*\s*</returncode>"
    r"|^=+ .*\bfailed\b.* =+$"
)
NORMALISERS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
    (
        re.compile(
            r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
        ),
        "<uuid>",
    ),
    (
        re.compile(
            r"\b\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
            r"(?:\s?(?:Z|UTC|[+-]\d{2}:?\d{2}))?"
        ),
        "<timestamp>",
    ),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"), "<time>"),
    (
        re.compile(r"\b\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|s|sec|secs|seconds?|mins?|minutes?)\b(?!/)"),
        "<duration>",
    ),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "0x<hex>"),
    (re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,}\b"), "<hex>"),
    (
        re.compile(
            r"(?:/private)?/(?:tmp|var/tmp|var/folders)/[^\s'\"`:;,)\]]*"
            r"|\b[A-Za-z]:\\[^\s'\"]*?\\(?:Temp|tmp)\\[^\s'\"`:;,)\]]*"
            r"|\btmp[A-Za-z0-9_]{6,}\b"
        ),
        "<tmp>",
    ),
    (re.compile(r"\b(pid|PID|process)([\s:=#]+)\d+"), r"\1\2<pid>"),
    (re.compile(r"\b((?:ba|da|z|k)?sh): line \d+:"), r"\1: line <n>:"),
    (re.compile(r"[ \t]+(?=\n|$)"), ""),
)


def normalize(text: str) -> str:
    """The old normalisation, applied to all of ``text``."""
    for pattern, replacement in NORMALISERS:
        text = pattern.sub(replacement, text)
    return text
