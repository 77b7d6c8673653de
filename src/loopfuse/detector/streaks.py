"""Answer-based signals: loops that vary their calls but not what they get back.

Stuck agents rarely repeat byte for byte: they run six variants of a command that all
fail the same way, re-apply an edit with one space more, or re-run the same failing test
after edits that change nothing (docs/detector.md, "Loops in the wild"). Each function
here reads the newest batch of a run's history *after its answers are known* and
returns a :class:`Finding` when its pattern has gone past the limit:

- :func:`error_streak` — the same error-looking answer again and again, whatever the
  arguments;
- :func:`near_repeat` — calls that differ only slightly (whitespace, one token, a
  number), each getting the same answer as the one before;
- :func:`unchanged_check` — the same failing check run again after edits, failing the
  same way every time (no progress across edits);
- :func:`error_storm` — nearly every recent call failing.

They look only at the run's bounded history, so a call costs the same however long the
run, and a batch refused and never run is looked through. An answer that says nothing
(an edit's empty output) never counts as a repeated answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Final

from loopfuse.detector.editors import mentions_file
from loopfuse.detector.records import HistoryEntry, same_answers, same_answers_across
from loopfuse.intent import canonical_json

__all__ = ["Finding", "error_storm", "error_streak", "is_near", "near_repeat", "unchanged_check"]

_TOKENS: Final = re.compile(r"\w+|[^\w\s]")
_DIGITS: Final = re.compile(r"\d+")
_NEAR_TEXT_LIMIT: Final = 16_384  # longer arguments are never "near" (and cost nothing)


@dataclass(frozen=True, slots=True)
class Finding:
    """A pattern past its limit: its ``kind``, ``count``, the entries involved."""

    kind: str
    count: int
    newest: HistoryEntry
    names: tuple[str, ...]


def _ran(history: Sequence[HistoryEntry]) -> Iterator[HistoryEntry]:
    """The entries before the newest, newest first, skipping batches refused unrun."""
    for k in range(len(history) - 2, -1, -1):
        entry = history[k]
        if not (entry.refused and entry.answers is None):
            yield entry


def _says_something(entry: HistoryEntry) -> tuple[bool, bool] | None:
    facts = entry.facts()
    return None if facts is None or facts[1] else facts


def error_streak(history: Sequence[HistoryEntry], limit: int) -> Finding | None:
    """The same error more than ``limit`` times in a row, whatever the calls.

    >>> from loopfuse.detector import ToolCall, results_digest
    >>> def entry(command, answer):
    ...     e = HistoryEntry(command, ("bash",), False)
    ...     e.answers = results_digest([ToolCall("bash")], [answer])
    ...     return e
    >>> err = "ModuleNotFoundError: No module named 'yaml'"
    >>> h = [entry(f"python -m tool{i}", err) for i in range(4)]
    >>> error_streak(h, 3).count
    4
    >>> error_streak(h[:3], 3) is None
    True
    """
    newest = history[-1]
    facts = _says_something(newest)
    if facts is None or not facts[0]:
        return None
    count = 1
    names = list(newest.names)
    for entry in _ran(history):
        facts = _says_something(entry)
        if facts is None or not facts[0]:
            break
        if same_answers_across(entry.answers, newest.answers) is not True:
            break
        count += 1
        names.extend(entry.names)
    if count <= limit:
        return None
    return Finding("error_streak", count, newest, tuple(dict.fromkeys(names)))


def _call_text(argument: object) -> str:
    """The text of one call's arguments that a person would compare by eye."""
    if type(argument) is dict and len(argument) == 1:
        (value,) = argument.values()
        if type(value) is str:
            return value  # {"command": "..."}: the command line itself
    if type(argument) is str:
        return argument
    try:
        return canonical_json(argument).decode("utf-8", "surrogatepass")
    except Exception:  # arguments JSON cannot hold are never near anything
        return "\x00" + repr(id(argument))


def _near_texts(a: str, b: str) -> bool:
    """Equal but for whitespace or numbers, or one token inserted, removed or replaced."""
    if a == b:
        return False  # identical is a repeat, not a near repeat
    if len(a) > _NEAR_TEXT_LIMIT or len(b) > _NEAR_TEXT_LIMIT:
        return False
    if _DIGITS.sub("#", " ".join(a.split())) == _DIGITS.sub("#", " ".join(b.split())):
        return True
    ta, tb = _TOKENS.findall(a), _TOKENS.findall(b)
    if abs(len(ta) - len(tb)) > 1:
        return False
    short = min(len(ta), len(tb))
    head = 0
    while head < short and ta[head] == tb[head]:
        head += 1
    tail = 0
    while tail < short - head and ta[-1 - tail] == tb[-1 - tail]:
        tail += 1
    return max(len(ta), len(tb)) - head - tail <= 1


def is_near(a: HistoryEntry, b: HistoryEntry) -> bool:
    """Whether two batches call the same tools with arguments that differ only slightly.

    >>> near = HistoryEntry("k1", ("find",), True, ({"command": "find /usr -name java"},))
    >>> other = HistoryEntry("k2", ("find",), True, ({"command": "find /opt -name java"},))
    >>> is_near(near, other)
    True
    >>> far = HistoryEntry("k3", ("find",), True, ({"command": "ls -la"},))
    >>> is_near(near, far)
    False
    """
    if a.names != b.names or len(a.args) != len(b.args) or not a.args:
        return False
    if a.key == b.key:
        return False
    pairs = list(zip(a.args, b.args, strict=True))
    differing = [(x, y) for x, y in pairs if x != y]
    if len(differing) != 1:
        return False  # one call of the batch may vary, the others must not
    x, y = differing[0]
    return _near_texts(_call_text(x), _call_text(y))


def near_repeat(history: Sequence[HistoryEntry], limit: int) -> Finding | None:
    """More than ``limit`` batches in a row, each a near variant of the one before with the
    same answer (identical batches are :func:`repeat`'s business, not this one's)."""
    newest = history[-1]
    if _says_something(newest) is None:
        return None
    count = 1
    later = newest
    for entry in _ran(history):
        if _says_something(entry) is None or not is_near(entry, later):
            break
        if same_answers_across(entry.answers, later.answers) is not True:
            break
        count += 1
        later = entry
    if count <= limit:
        return None
    return Finding("near_repeat", count, newest, newest.names)


def unchanged_check(
    history: Sequence[HistoryEntry],
    limit: int,
    normalize: bool,
    unread_limit: int | None = None,
) -> Finding | None:
    """The newest batch — a check that fails — run more than ``limit`` times with
    state-changing batches between its runs, failing the same way each time: the changes
    are not moving it. A repeated action whose answer is a constant confirmation
    (``git checkout`` → "Updated 1 path") is not a failing check and never counts.

    Editor edits are judged by what they did (:mod:`loopfuse.detector.editors`): one that
    failed changed nothing (a run after nothing but failed edits is passed over). With
    ``unread_limit``, a successful edit of a file the check does not read (its command
    line or answer names a file of that name in another place, never the edited one: the
    edits land in a copy while the check runs the original) is weaker evidence, since
    the answer itself shows the agent where to look: runs after such edits only trip
    past ``unread_limit`` runs in all, while runs after changes the check reads (or
    may read: it names no file of that name) trip past ``limit``.
    """
    newest = history[-1]
    facts = _says_something(newest)
    if facts is None or not facts[0]:
        return None
    count = 1  # runs after changes the check reads (and the newest)
    runs = 1  # runs after any change (and the newest)
    read = False  # a change the check reads, since the later run
    unread = False  # a successful edit of a file the check does not read, since then
    failed = False  # an edit that failed (changed nothing), since then
    check_text: list[str | None] = []  # computed once, when an edit needs it
    for entry in _ran(history):
        if entry.key != newest.key:
            if not entry.eligible:
                change = _change(entry, newest, unread_limit is not None, check_text)
                read = read or change == "read"
                unread = unread or change == "unread"
                failed = failed or change == "failed"
            continue
        if same_answers(entry.answers, newest.answers, normalize) is not True:
            break  # its answer moved: progress
        if read or unread:
            runs += 1
            count += read
        elif not failed:
            break  # run again at once: a repeat, which is another signal's business
        read = unread = failed = False
    if count > limit:
        return Finding("no_progress", count, newest, newest.names)
    if unread_limit is not None and runs > unread_limit:
        return Finding("no_progress", runs, newest, newest.names)
    return None


def _change(
    entry: HistoryEntry, check: HistoryEntry, reach: bool, check_text: list[str | None]
) -> str:
    """What a state-changing batch did to the check: ``"read"`` (a change it reads, or
    one that cannot be seen through), ``"unread"`` (a successful edit of files it does
    not read; only with ``reach``) or ``"failed"`` (an edit that changed nothing)."""
    paths = entry.edits
    if paths is None:
        return "read"  # not only editor edits: a change this module cannot see through
    facts = entry.facts()
    if facts is not None and facts[0]:
        return "failed"
    if not reach:
        return "read"
    if not check_text:
        answer = check.answer_text()
        command = " ".join(_call_text(argument) for argument in check.args)
        check_text.append(None if answer is None else f"{command}\n{answer}")
    text = check_text[0]
    if text is None:
        return "read"  # an answer not known as text: every edit counts
    named = [mentions_file(text, path) for path in paths]
    if all(found is False for found in named):
        return "unread"  # the check names the file, in another place: it reads that one
    return "read"  # the file itself, or nothing to tell: the edit counts


def error_storm(history: Sequence[HistoryEntry], errors: int, calls: int) -> Finding | None:
    """At least ``errors`` of the last ``calls`` batches failed, the newest among them."""
    newest = history[-1]
    facts = newest.facts()
    if facts is None or not facts[0]:
        return None
    recent = [newest, *islice(_ran(history), calls - 1)]
    if len(recent) < calls:
        return None
    failed = 0
    for entry in recent:
        facts = entry.facts()
        failed += facts is not None and facts[0]
    if failed < errors:
        return None
    return Finding("error_storm", failed, newest, newest.names)
