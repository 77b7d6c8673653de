"""``repeat``: the same batch (same tools and arguments, in any order) again and again.

Decided before a batch runs, from the run of identical batches that ends the history:
refused past ``max_strikes`` occurrences while their answers repeat (or are unknown); a
batch whose repeated answer is an error one repeat earlier (``error_aware``); read-only
batches get the read-only allowance (``max_observation_steps``), and a state-changing
(or costly) batch is refused past that *ceiling* even when every answer moved; a
``tool_limits`` cap replaces both for the tools it names. ``scan`` always replays the
final batch's run, so this signal can always trip.
"""

from __future__ import annotations

from typing import Final

from loopfuse.detector.records import BatchRecord, HistoryEntry, LoopDetected, answer_facts
from loopfuse.detector.signals.base import Refusal, Run, Signal
from loopfuse.detector.signals.wording import names_text

__all__ = ["REPEAT", "Repeat"]

_ADVICE: Final = (
    "Calling it again will not give a different answer: change the arguments, use a "
    "different tool, or stop and say what is blocking you."
)


class Repeat(Signal):
    """The ``repeat`` signal (threshold: ``max_strikes``)."""

    __slots__ = ()

    kind = "repeat"
    setting = "max_strikes"

    def judge(
        self, run: Run, entry: HistoryEntry, record: BatchRecord, answered: bool = True
    ) -> Refusal | None:
        """The refusal of the batch just admitted into ``run`` (its ``entry`` and
        ``record``), if any; sets ``record.rescued`` when it passed only because an
        answer moved. ``answered=False``: no answer of the run is known (its message
        then says nothing of them)."""
        settings = run.settings
        ceiling: int | None
        if entry.limit is not None:
            limit = ceiling = entry.limit
        elif settings.max_strikes is None or settings.allowance is None:
            return None
        else:
            limit = settings.allowance if entry.eligible else settings.max_strikes
            ceiling = None if entry.eligible else settings.ceiling
        last = run.last
        if settings.error_aware and last is not None and run.repeated:
            facts = answer_facts(last[1])
            if facts is not None and facts[0] and not facts[1]:
                limit = max(limit - 1, 0)  # the same error again: refused one repeat earlier
        total, strikes = run.total, run.strikes
        ceiling_hit = ceiling is not None and total > ceiling
        strikes_hit = strikes > limit
        if not (ceiling_hit or strikes_hit):
            record.rescued = total > limit
            return None
        # The ceiling wins: it stands whatever the batch's own answer turns out to be.
        count = total if ceiling_hit else strikes
        # "Got the same result" only when every answer seen in the streak repeated.
        same = strikes_hit and run.repeated >= max(1, strikes - 2)
        if answered:
            message = self.message(entry.names, count, same=same, moved=not strikes_hit)
        else:
            message = self.unanswered_message(entry.names, count)
        loop = self.loop(record.signature, count, entry.names, message)
        return Refusal("ceiling" if ceiling_hit else "strikes", LoopDetected.of(loop))

    def waited_too_long(self, run: Run, entry: HistoryEntry, record: BatchRecord) -> Refusal:
        """The refusal of a wait past ``max_waits`` waits in a row (each on something that
        still ran): the wait has a bound, however healthy each poll looked."""
        waits = getattr(run, "waits", run.total)
        message = (
            f"Loop detected: you have waited {waits} times in a row ({names_text(entry.names)}) "
            "on something that is still running. Stop waiting on it: check whether it is "
            "stuck, stop it, or stop and say what is blocking you."
        )
        loop = self.loop(record.signature, waits, entry.names, message)
        return Refusal("ceiling", LoopDetected.of(loop))

    def message(self, names: tuple[str, ...], count: int, *, same: bool, moved: bool) -> str:
        """The model-facing message for a refused repeat.

        ``same``: every answer in the streak repeated; ``moved``: the answers kept
        changing and the batch is refused only because it changes state and went past
        the ceiling.

        >>> REPEAT.message(("find_file",), 4, same=True, moved=False)[:78]
        'Loop detected: you called `find_file` with the same arguments 4 times in a row'
        """
        head = (
            f"Loop detected: you called {names_text(names)} with the same arguments "
            f"{count} times in a row"
        )
        if moved:
            return (
                head + ". Its results kept changing, but repeating the same call is not "
                "converging: stop repeating it and try a different approach, or stop and say "
                "what is blocking you."
            )
        if same:
            return head + " and got the same result each time. " + _ADVICE
        return head + ". " + _ADVICE

    def unanswered_message(self, names: tuple[str, ...], count: int) -> str:
        """The model-facing message for a repeat refused without any answer known: it
        claims nothing about the results.

        >>> REPEAT.unanswered_message(("bash",), 6)[:64]
        'Loop detected: you called `bash` with the same arguments 6 times'
        """
        return (
            f"Loop detected: you called {names_text(names)} with the same arguments "
            f"{count} times in a row. Repeating the same call is not converging: stop "
            "repeating it and try a different approach, or stop and say what is blocking you."
        )


REPEAT: Final = Repeat()
