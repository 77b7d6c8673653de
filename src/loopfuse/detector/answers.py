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

These functions read attacker-controlled text: they never raise, and they look at a
bounded prefix and suffix of the text (:data:`SCAN_HEAD` and :data:`SCAN_TAIL`
characters), so their cost does not grow with the answer. No pattern here backtracks
more than a bounded amount per character (no nested or overlapping quantifiers that a
crafted answer could drive into quadratic time): where a pattern would, a plain scan
does its work (line ends, Windows temp folders, test summary banners).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterator
from typing import Final

from loopfuse.detector._textcache import TextCache
from loopfuse.detector.errors import framework_error, normalize_framework_error

__all__ = [
    "SCAN_HEAD",
    "SCAN_TAIL",
    "error_line",
    "error_lines",
    "is_contentless",
    "looks_like_error",
    "normalize_answer",
]

SCAN_HEAD: Final = 4096
"""Characters read from the start of an answer."""
SCAN_TAIL: Final = 1024
"""Characters read from the end of an answer (exit codes and summaries come last)."""

# What tools, shells, compilers and test runners print when something failed. Phrases
# count anywhere; line patterns only at the start of a line, so that a grep hit inside
# source code ("raise ValueError(...)") is not an error; in-line patterns anywhere in a
# line that holds one of their hints.
_PHRASES: Final = (
    "Traceback (most recent call last)", "command not found", "No such file or directory",
    "ermission denied", "syntax error", "EXECUTION TIMED OUT", "Segmentation fault",
)  # fmt: skip
_LINE_START: Final = re.compile(
    r"(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)(?::|$)"
    r"|(?:error|Error|ERROR|fatal|FATAL|panic)(?:\[\w+\])?:"
    r"|\[ERROR\]|npm ERR!|E: |Usage: |FAILED\b"
)
_IN_LINE: Final = re.compile(
    r":\d+(?::\d+)?: (?:fatal )?error:"
    r"|\b(?:exit code|exit status|exited with code|return ?code)[\s:=]*-?[1-9]"
    r"|<returncode>\s*-?[1-9]\d*\s*</returncode>"
)
_FAILED: Final = re.compile(r"\bfailed\b")
# Every line pattern holds one of these: only lines holding one are matched.
_HINTS: Final = (
    "rror", "RROR", "xception", "fatal", "FATAL", "panic", "ERR!", "E: ", "Usage:",
    "FAILED", "failed", "exit code", "exit status", "exited with code", "return code",
    "returncode",
)  # fmt: skip
_LINES_READ: Final = 64  # hinted lines matched, at most (the last ones first)

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


def _line_starts(window: str, needles: tuple[str, ...]) -> list[int]:
    """Where the lines holding a needle start (at most :data:`_LINES_READ`), last first:
    exit codes and summaries come at the end."""
    starts: set[int] = set()
    for needle in needles:
        at = window.rfind(needle)
        while at >= 0 and len(starts) < _LINES_READ:
            start = window.rfind("\n", 0, at) + 1
            starts.add(start)
            at = window.rfind(needle, 0, start) if start else -1
    return sorted(starts, reverse=True)


def _line_at(window: str, start: int) -> str:
    end = window.find("\n", start)
    return window[start : end if end >= 0 else len(window)]


def _has_phrase(text: str) -> bool:
    return any(phrase in text for phrase in _PHRASES)


def _matches_a_pattern(line: str) -> bool:
    return (
        _LINE_START.match(line.lstrip()) is not None
        or _IN_LINE.search(line) is not None
        or _is_failed_banner(line)
    )


def _is_failed_banner(line: str) -> bool:
    """Whether ``line`` is a test runner's summary banner that says ``failed``
    (``==== 2 failed, 3 passed in 0.1s ====``).

    What the pattern ``^=+ .*\\bfailed\\b.* =+$`` says, in one pass: its two ``.*`` on
    each side of ``failed`` backtrack, so that a line of many ``failed`` words would cost
    time quadratic in its length.
    """
    if line.endswith("\n"):
        line = line[:-1]  # ``$`` matches before a last newline; ``.`` crosses no other
    if "\n" in line or not line.startswith("="):
        return False
    lead = len(line) - len(line.lstrip("="))
    trail = len(line) - len(line.rstrip("="))
    # "=+ " then the middle then " =+": each run of "=" has exactly one way to match.
    first, last = lead + 1, len(line) - trail - 1
    if not trail or line[lead : lead + 1] != " " or last < first or line[last] != " ":
        return False
    return any(first <= found.start() and found.end() <= last for found in _FAILED.finditer(line))


# What was found about recent answers, under bounded keys (the answers are the client's,
# of any length: see loopfuse.detector._textcache).
# An answer up to _ANSWER_KEY characters is its own key (most are: a digest would cost
# more than the lookup saves); a longer one's digest, or (for the framework check, which
# reads little of it) not cached. See SECURITY.md for the memory this holds at most.
_ANSWER_KEY: Final = 2048


def _window_is_error(window: str) -> bool:
    if _has_phrase(window):  # then no line needs looking at for one
        return True
    return any(_matches_a_pattern(_line_at(window, k)) for k in _line_starts(window, _HINTS))


def _window(text: str) -> str:
    if len(text) <= SCAN_HEAD + SCAN_TAIL:
        return text
    return text[:SCAN_HEAD] + "\n" + text[-SCAN_TAIL:]


def looks_like_error(text: str, *, frameworks: bool = True) -> bool:
    """Whether ``text`` reads like a failure: a traceback, a shell or compiler error,
    a failed test summary, a non-zero exit code; with ``frameworks``, also an agent
    framework's answer to a call it could not run (:mod:`loopfuse.detector.errors`:
    ``Tool 'x' not found``, an unknown tool, invalid arguments).

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
    >>> looks_like_error("Tool 'hex' not found."), looks_like_error("Tool 'hex' not found.",
    ...                                                             frameworks=False)
    (True, False)
    """
    if type(text) is not str:
        return False
    # Only lines holding a hint can match: a few substring searches skip the rest. The
    # answer is cached: the scanner asks again about the same answer within a request.
    # Cached as the window check is: a proxy's scan reads the same answers request after
    # request, and most are not a framework's (so every check runs to its end).
    return _ERROR_WINDOWS.call(_window(text)) or (frameworks and _FRAMEWORK_ERRORS.call(text))


def error_line(text: str) -> str | None:
    """The line of ``text`` that says what failed: the last one with an error marker.

    >>> error_line("Traceback (most recent call last):\\n  File 'x'\\nKeyError: 'a'\\n")
    "KeyError: 'a'"
    >>> error_line("all fine") is None
    True
    """
    return next(_error_lines(text), None)


def error_lines(text: str) -> tuple[str, ...]:
    """Every line of ``text`` that says something failed (stripped, the last one first;
    the :data:`SCAN_HEAD` and :data:`SCAN_TAIL` windows, at most 64 lines): what the
    answer says of its failure, without the rest of its text.

    >>> error_lines("$ make\\nmain.c:3: error: x undeclared\\nmake: *** [all] Error 1\\n")
    ('main.c:3: error: x undeclared',)
    >>> error_lines("all fine")
    ()
    """
    return tuple(_error_lines(text))


def _error_lines(text: str) -> Iterator[str]:
    if type(text) is not str:
        return
    window = _window(text)
    for start in _line_starts(window, (*_PHRASES, *_HINTS)):  # the last line first
        line = _line_at(window, start)
        if (_has_phrase(line) or _matches_a_pattern(line)) and line.strip():
            yield line.strip()


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
    (re.compile(r"\b(pid|PID|process)([\s:=#]+)\d+"), r"\1\2<pid>"),
    (re.compile(r"\b((?:ba|da|z|k)?sh): line \d+:"), r"\1: line <n>:"),
)
# What each of the _NORMALISERS cannot match without (one of them, in the text as it is
# by then): a pattern whose text holds none is not run. The same output, for less.
_NEEDED: Final[tuple[tuple[str, ...], ...]] = (
    ("-",), ("-",), (":",), (), ("0x",), (), ("pid", "PID", "process"), (": line ",),
)  # fmt: skip


_CACHED_TEXT: Final = 16_384  # answers up to this long keep their normal form a while


def normalize_answer(text: str, *, frameworks: bool = True) -> str:
    """``text`` with incidental noise replaced by placeholders.

    Rewritten: UUIDs, timestamps and clock times, durations (``0.53s``, ``120 ms``), hex
    ids and addresses, temp paths, pids, a shell's ``line N:`` error prefix, trailing
    blanks; with ``frameworks``, the invented tool name and echoed arguments of a
    framework's unknown-tool or invalid-arguments answer
    (:func:`~loopfuse.detector.errors.normalize_framework_error`). Everything else — in
    particular counters and percentages — is kept. An answer longer than ``SCAN_HEAD +
    SCAN_TAIL`` characters is normalised in its first :data:`SCAN_HEAD` and last
    :data:`SCAN_TAIL` characters and kept as it is between them, so that its cost does
    not grow with the answer (each rewrite is linear in the text it reads).

    >>> normalize_answer("/bin/bash: line 13068: cd: fastjson/: No such file or directory")
    '/bin/bash: line <n>: cd: fastjson/: No such file or directory'
    >>> normalize_answer("ok in 0.53s at 2024-05-01T10:00:03Z, /tmp/tmpab12cd9x/out.log")
    'ok in <duration> at <timestamp>, <tmp>'
    >>> normalize_answer("Compiling 34/120 (28%)")
    'Compiling 34/120 (28%)'
    """
    # A proxy sees each answer again in every later request of the conversation: the
    # normal form of a recent (not too long) answer is kept rather than made again.
    if type(text) is str and len(text) <= _CACHED_TEXT:
        return _NORMAL_FORMS.call(text, bool(frameworks))
    return _normalize(text, frameworks)


def _normalize(text: str, frameworks: bool) -> str:
    """The head and the tail of ``text`` normalised (all of it when it is short), the
    middle as it is: the same windows as :func:`looks_like_error` reads."""
    if frameworks:
        text = normalize_framework_error(text)
    if len(text) <= SCAN_HEAD + SCAN_TAIL:
        return _normalize_window(text)
    head = _normalize_window(text[:SCAN_HEAD])
    tail = _normalize_window(text[-SCAN_TAIL:])
    return head + text[SCAN_HEAD:-SCAN_TAIL] + tail


def _normalize_window(text: str) -> str:
    for k, (pattern, replacement) in enumerate(_NORMALISERS):
        if k == _TMP_AT:
            text = _replace_temp_paths(text)
        needed = _NEEDED[k]
        if not needed or any(needle in text for needle in needed):
            text = pattern.sub(replacement, text)
    return _strip_line_ends(text)


# Temp paths, in the order the one pattern that found them took its alternatives:
# ``(?:/private)?/(?:tmp|var/tmp|var/folders)/[^\s'"`:;,)\]]*``, then
# ``\b[A-Za-z]:\\[^\s'"]*?\\(?:Temp|tmp)\\[^\s'"`:;,)\]]*`` (a Windows temp folder), then
# ``\btmp[A-Za-z0-9_]{6,}\b``. The Windows one is found in linear time: as a pattern, its
# lazy ``[^\s'"]*?`` scanned to the end of the word from every drive letter in it, so
# that ``a:\`` repeated cost time quadratic in its length.
_TMP_AT: Final = 6  # where the temp paths are replaced among the _NORMALISERS
_UNIX_TMP: Final = r"(?:/private)?/(?:tmp|var/tmp|var/folders)/[^\s'\"`:;,)\]]*"
_TMP_NAME: Final = r"\btmp[A-Za-z0-9_]{6,}\b"
_TMP_PATHS: Final = re.compile(f"{_UNIX_TMP}|(?P<drive>\\b[A-Za-z]:\\\\)|{_TMP_NAME}")
_TMP_PATHS_NO_DRIVE: Final = re.compile(f"{_UNIX_TMP}|{_TMP_NAME}")
_TEMP_FOLDER: Final = re.compile(r"(?=\\(?:Temp|tmp)\\)")  # where "\Temp\" / "\tmp\" start
_WORD_BREAK: Final = re.compile(r"[\s'\"]")  # what the lazy part cannot cross
_PATH_REST: Final = re.compile(r"[^\s'\"`:;,)\]]*")


def _replace_temp_paths(text: str) -> str:
    """``text`` with its temp paths replaced by ``<tmp>``."""
    if "tmp" not in text and "/var/folders/" not in text and "\\Temp\\" not in text:
        return text  # no alternative can match
    if "\\Temp\\" not in text and "\\tmp\\" not in text:
        # No Windows temp folder: the drive alternative cannot match.
        return _TMP_PATHS_NO_DRIVE.sub("<tmp>", text)
    folders = [found.start() for found in _TEMP_FOLDER.finditer(text)]
    pieces: list[str] = []
    done = 0  # text[:done] is in pieces
    at = 0  # where the next match may start
    word_from, word_end = -1, -1  # no break in text[word_from:word_end]
    while (found := _TMP_PATHS.search(text, at)) is not None:
        start = found.start()
        if found.group("drive") is None:
            end = found.end()
        else:
            after = found.end()  # just past "X:\"
            if not word_from <= after <= word_end:  # each word is searched once
                word_break = _WORD_BREAK.search(text, after)
                word_from, word_end = after, len(text) if word_break is None else word_break.start()
            k = bisect_left(folders, after)  # the lazy part's choice: the first folder
            if k == len(folders) or folders[k] >= word_end:
                at = start + 1  # no temp folder in this word: nothing matches here
                continue
            folder = folders[k]
            folder_end = folder + (6 if text.startswith("\\Temp\\", folder) else 5)
            rest = _PATH_REST.match(text, folder_end)
            end = folder_end if rest is None else rest.end()
        pieces.append(text[done:start])
        pieces.append("<tmp>")
        done = at = end
    pieces.append(text[done:])
    return "".join(pieces)


def _strip_line_ends(text: str) -> str:
    """``text`` without the blanks that end its lines (``[ \\t]+(?=\\n|$)`` without the
    backtracking that made a long run of blanks inside a line cost quadratic time)."""
    if " \n" not in text and "\t\n" not in text and not text.endswith((" ", "\t")):
        return text
    return "\n".join(line.rstrip(" \t") for line in text.split("\n"))


# Defined last: each names the function it caches.
_ERROR_WINDOWS: Final[TextCache[bool]] = TextCache(_window_is_error, 512, _ANSWER_KEY)
_FRAMEWORK_ERRORS: Final[TextCache[bool]] = TextCache(
    framework_error, 512, _ANSWER_KEY, digest=False
)
_NORMAL_FORMS: Final[TextCache[str]] = TextCache(_normalize, 256, _ANSWER_KEY)
