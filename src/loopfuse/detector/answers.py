"""What a tool answer *says*: its noise-free form, whether it looks like an error, whether
it says anything at all.

Answers are compared after :func:`normalize_answer` takes incidental noise out of them
(timestamps, durations, temp paths, hex ids, shell line numbers), so that a command
failing again with a different ``line 13083`` in its error is recognised as the same
answer, while ``Compiling 56/120`` after ``Compiling 34/120`` is not.

Two facts about an answer feed the detector's answer-based signals (see
docs/detector.md): an agent that gets **the same error** again and again is stuck
whatever it varies in its calls, and an answer that **says nothing** (an edit's empty
output, "ran successfully and did not produce any output") repeating is what healthy
runs do all the time, so it never counts as a repeated answer.

Both functions read attacker-controlled text: they never raise, and they look at a
bounded prefix and suffix of the text (:data:`SCAN_HEAD` and :data:`SCAN_TAIL`
characters), so their cost does not grow with the answer.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "SCAN_HEAD",
    "SCAN_TAIL",
    "error_line",
    "is_contentless",
    "looks_like_error",
    "normalize_answer",
]

SCAN_HEAD: Final = 4096
"""Characters read from the start of an answer."""
SCAN_TAIL: Final = 1024
"""Characters read from the end of an answer (exit codes and summaries come last)."""

# Each alternative is a marker that tools, shells, compilers and test runners print when
# something failed. Anchored alternatives (^) only count at the start of a line, so a
# grep hit inside source code ("raise ValueError(...)") is not an error.
_ERROR: Final = re.compile(
    r"""
    Traceback\ \(most\ recent\ call\ last\)
    | ^\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)(?::|$)
    | ^\s*(?:error|Error|ERROR|fatal|FATAL|panic)(?:\[\w+\])?:
    | :\d+(?::\d+)?:\ (?:fatal\ )?error:
    | ^\[ERROR\] | ^npm\ ERR! | ^E:\ 
    | command\ not\ found | No\ such\ file\ or\ directory | [Pp]ermission\ denied
    | \bsyntax\ error\b | ^\s*Usage:\ | EXECUTION\ TIMED\ OUT | Segmentation\ fault
    | ^FAILED\b | ^=+\ .*\bfailed\b.*\ =+$
    | \b(?:exit\ code|exit\ status|exited\ with\ code|return\ ?code)[\s:=]*-?[1-9]
    | <returncode>\s*-?[1-9]\d*\s*</returncode>
    """,
    re.MULTILINE | re.VERBOSE,
)

# Wrappers that agents put around every answer, and the sentences some print when a
# command printed nothing: an answer made only of these says nothing.
_WRAPPER: Final = re.compile(
    r"<returncode>\s*-?\d+\s*</returncode>|</?output>|^\((?:Open file|Current directory):[^\n]*\)$"
    r"|^bash-\$$",
    re.MULTILINE,
)
_SILENT: Final = re.compile(
    r"(?:Your command ran successfully and did not produce any output\.?"
    r"|\(no output\)|no output|ok|done|success)",
    re.IGNORECASE,
)


def _window(text: str) -> str:
    if len(text) <= SCAN_HEAD + SCAN_TAIL:
        return text
    return text[:SCAN_HEAD] + "\n" + text[-SCAN_TAIL:]


def looks_like_error(text: str) -> bool:
    """Whether ``text`` reads like a failure: a traceback, a shell or compiler error,
    a failed test summary, a non-zero exit code.

    >>> looks_like_error("/bin/bash: line 7: javac: command not found")
    True
    >>> looks_like_error("<returncode>1</returncode>\\n<output>\\n</output>")
    True
    >>> looks_like_error("ModuleNotFoundError: No module named 'yaml'")
    True
    >>> looks_like_error("src/a.py:12:        raise ValueError('bad')")  # a grep hit
    False
    >>> looks_like_error("<returncode>0</returncode>\\n<output>\\n3 passed\\n</output>")
    False
    """
    if type(text) is not str:
        return False
    return _ERROR.search(_window(text)) is not None


def error_line(text: str) -> str | None:
    """The line of ``text`` that says what failed: the last one with an error marker.

    >>> error_line("Traceback (most recent call last):\\n  File 'x'\\nKeyError: 'a'\\n")
    "KeyError: 'a'"
    >>> error_line("all fine") is None
    True
    """
    if type(text) is not str:
        return None
    found = None
    for match in _ERROR.finditer(_window(text)):
        found = match
    if found is None:
        return None
    window = _window(text)
    start = window.rfind("\n", 0, found.start()) + 1
    end = window.find("\n", found.end())
    line = window[start : end if end >= 0 else len(window)].strip()
    return line or None


def is_contentless(text: str) -> bool:
    """Whether ``text`` says nothing beyond "it ran": empty output, wrappers only.

    >>> is_contentless("<returncode>0</returncode>\\n<output>\\n</output>")
    True
    >>> is_contentless("Your command ran successfully and did not produce any output.\\n"
    ...                "(Open file: n/a)\\n(Current directory: /repo)\\nbash-$")
    True
    >>> is_contentless("No matches found")
    False
    """
    if type(text) is not str:
        return False
    if len(text) > 512:
        return False  # a long answer always says something
    rest = _WRAPPER.sub("", text).strip()
    return not rest or _SILENT.fullmatch(rest) is not None


# --- normalisation ----------------------------------------------------------------------
#
# Only numbers that *look incidental* are rewritten: a timestamp, a clock time, a
# duration, a hex id or address, a UUID, a temp path, a pid, a shell's "line N:" prefix.
# Every other digit is kept, which is what lets a real progress poll
# ("Compiling 34/120" -> "Compiling 56/120", "45%" -> "60%") count as a moving answer.
_NORMALISERS: Final[tuple[tuple[re.Pattern[str], str], ...]] = (
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


def normalize_answer(text: str) -> str:
    """``text`` with incidental noise replaced by placeholders.

    Rewritten: UUIDs, timestamps and clock times, durations (``0.53s``, ``120 ms``), hex
    ids and addresses, temp paths, pids, a shell's ``line N:`` error prefix, trailing
    blanks. Everything else — in particular counters and percentages — is kept.

    >>> normalize_answer("/bin/bash: line 13068: cd: fastjson/: No such file or directory")
    '/bin/bash: line <n>: cd: fastjson/: No such file or directory'
    >>> normalize_answer("ok in 0.53s at 2024-05-01T10:00:03Z, /tmp/tmpab12cd9x/out.log")
    'ok in <duration> at <timestamp>, <tmp>'
    >>> normalize_answer("Compiling 34/120 (28%)")
    'Compiling 34/120 (28%)'
    """
    for pattern, replacement in _NORMALISERS:
        text = pattern.sub(replacement, text)
    return text
