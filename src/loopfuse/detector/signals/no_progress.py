"""``no_progress``: the same failing check run again after edits, failing the same way.

An agent re-runs the same failing test after edits that change nothing (docs/detector.md,
"Loops in the wild"): the edits are not moving the check. This signal counts the runs of
the newest batch — a check whose answer is an error — with state-changing batches
between them and the same answer each time, and trips past ``max_unchanged_checks`` of
them (``max_unread_edit_checks`` for runs after edits of files the check does not read).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from loopfuse.detector.editors import mentions_file
from loopfuse.detector.records import HistoryEntry, same_answers, signature_of
from loopfuse.detector.signals.base import AnswerSignal, Trip, call_text, ran, says_something
from loopfuse.detector.signals.wording import names_text, quoted

if TYPE_CHECKING:
    from loopfuse.detector.settings import DetectorSettings

__all__ = ["NO_PROGRESS", "NoProgress"]


class NoProgress(AnswerSignal):
    """The ``no_progress`` signal (threshold: ``max_unchanged_checks``)."""

    __slots__ = ()

    kind = "no_progress"
    setting = "max_unchanged_checks"
    per_lap = True

    def find(self, history: Sequence[HistoryEntry], settings: DetectorSettings) -> Trip | None:
        """The newest batch — a check that fails — run more than
        ``max_unchanged_checks`` times with state-changing batches between its runs,
        failing the same way each time: the changes are not moving it. A repeated action
        whose answer is a constant confirmation (``git checkout`` → "Updated 1 path") is
        not a failing check and never counts.

        Editor edits are judged by what they did (:mod:`loopfuse.detector.editors`): one
        that failed changed nothing (a run after nothing but failed edits is passed over).
        With ``max_unread_edit_checks``, a successful edit of a file the check does not
        read (its command line or answer names a file of that name in another place,
        never the edited one: the edits land in a copy while the check runs the original)
        is weaker evidence, since the answer itself shows the agent where to look: runs
        after such edits only trip past ``max_unread_edit_checks`` runs in all, while runs
        after changes the check reads (or may read: it names no file of that name) trip
        past ``max_unchanged_checks``.
        """
        limit = settings.max_unchanged_checks
        if limit is None:
            return None
        normalize = settings.normalize_answers
        unread_limit = settings.max_unread_edit_checks
        newest = history[-1]
        facts = says_something(newest)
        if facts is None or not facts[0]:
            return None
        count = 1  # runs after changes the check reads (and the newest)
        runs = 1  # runs after any change (and the newest)
        read = False  # a change the check reads, since the later run
        unread = False  # a successful edit of a file the check does not read, since then
        failed = False  # an edit that failed (changed nothing), since then
        check_text: list[str | None] = []  # computed once, when an edit needs it
        for entry in ran(history):
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
            return Trip(self, count, newest, newest.names)
        if unread_limit is not None and runs > unread_limit:
            return Trip(self, runs, newest, newest.names)
        return None

    def message(self, trip: Trip, detail: str | None, settings: DetectorSettings) -> str:
        """The message for a check (tests, a script) unchanged across the edits between
        its runs.

        >>> from loopfuse.detector import DetectorSettings
        >>> trip = Trip(NO_PROGRESS, 7, HistoryEntry("k", ("bash",), False), ("bash",))
        >>> NO_PROGRESS.message(trip, None, DetectorSettings())[:67]
        'Loop detected: you ran the same check (`bash`) 7 times with changes'
        """
        return (
            f"Loop detected: you ran the same check ({names_text(trip.names)}) {trip.count} "
            "times with changes in between, and it gave the same result every "
            f"time{quoted(detail)}. Your changes are not affecting it: re-read what it "
            "reports, question your assumption about the cause, or stop and say what is "
            "blocking you."
        )

    def signature(self, trip: Trip) -> str:
        """The check's batch signature."""
        return signature_of(trip.newest.key)


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
        command = " ".join(call_text(argument) for argument in check.args)
        check_text.append(None if answer is None else f"{command}\n{answer}")
    text = check_text[0]
    if text is None:
        return "read"  # an answer not known as text: every edit counts
    named = [mentions_file(text, path) for path in paths]
    if all(found is False for found in named):
        return "unread"  # the check names the file, in another place: it reads that one
    return "read"  # the file itself, or nothing to tell: the edit counts


NO_PROGRESS: Final = NoProgress()
