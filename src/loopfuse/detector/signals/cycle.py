"""``cycle``: A → B → A → B …, A → B → C → A → B → C …, with repeating answers.

A cycle of period ``p`` is seen at the newest batch ``n`` when the batches of the recent
history repeat with period ``p`` — ``key[i] == key[i - p]`` — over a *stretch* that ends
at ``n``, and each answer in the stretch equals the answer one lap earlier. A moving
answer ends the stretch: edit → run tests → edit → run tests is progress while the test
output changes. A lap made of one batch only is a repeat (:mod:`.repeat`), not a cycle.
Decided before a batch runs; ``max_cycle_period=None`` switches it off.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from loopfuse.detector.records import BatchRecord, HistoryEntry, LoopDetected, same_answers
from loopfuse.detector.signals.base import Refusal, Run, Signal
from loopfuse.detector.signals.wording import names_text

if TYPE_CHECKING:
    from loopfuse.detector.settings import DetectorSettings

__all__ = ["CYCLE", "Cycle", "CycleHit", "find_cycle"]


@dataclass(frozen=True, slots=True)
class CycleHit:
    """A cycle at the newest batch: its period, the laps counted, the entry a lap back."""

    period: int
    laps: int
    previous: HistoryEntry
    lap: tuple[HistoryEntry, ...]


def find_cycle(
    history: Sequence[HistoryEntry],
    max_period: int,
    limit: int,
    eligible_limit: int,
    normalize: bool,
) -> CycleHit | None:
    """The shortest cycle ending at ``history[-1]`` that has gone round too many laps.

    ``laps`` counts the occurrences of the newest batch's position in the stretch; it
    must exceed ``limit`` (``eligible_limit`` when every batch of the lap is read-only),
    and at least one whole lap must have come round again (A B A B, not A x A).

    >>> from loopfuse.detector import ToolCall, results_digest
    >>> def entry(key, answer):
    ...     e = HistoryEntry(key, (key,), False)
    ...     e.answers = answer and results_digest([ToolCall(key)], [answer])
    ...     return e
    >>> h = [entry("A", "a"), entry("B", "b"), entry("A", "a"), entry("B", "b"), entry("A", None)]
    >>> hit = find_cycle(h, 4, 2, 5, True)
    >>> hit.period, hit.laps
    (2, 3)
    >>> h[2].answers = results_digest([ToolCall("A")], ["a, changed"])  # progress
    >>> find_cycle(h, 4, 2, 5, True) is None
    True
    """
    n = len(history) - 1
    if n < 2:
        return None
    newest = history[n]
    key = newest.key
    for p in range(2, min(max_period, n) + 1):
        if history[n - p].key != key:
            continue
        lap = tuple(history[i] for i in range(n - p + 1, n + 1))
        if all(e.key == key for e in lap):
            continue  # a lap of one batch is a repeat, not a cycle
        j = n
        while j - p >= 0:
            earlier, later = history[j - p], history[j]
            if earlier.key != later.key:
                break
            # The newest batch has no answers yet; every other pair must repeat.
            if j != n and same_answers(earlier.answers, later.answers, normalize) is False:
                break
            j -= 1
        # The stretch is history[j - p + 1 : n + 1]; count the newest position's laps in it.
        laps = 1 + (n - j + p - 1) // p
        allowed = eligible_limit if all(e.eligible for e in lap) else limit
        if laps > allowed and n - j >= p:
            return CycleHit(period=p, laps=laps, previous=history[n - p], lap=lap)
    return None


class Cycle(Signal):
    """The ``cycle`` signal (threshold: ``max_cycle_period``, with ``max_cycle_laps``)."""

    __slots__ = ()

    kind = "cycle"
    setting = "max_cycle_period"
    unit = "laps"
    per_lap = True

    def judge(
        self,
        run: Run,
        record: BatchRecord,
        retry: LoopDetected | None,
        retry_lap_back: HistoryEntry | None,
    ) -> Refusal | None:
        """The refusal of the batch just admitted into ``run``, if any. ``retry`` is the
        previous batch's refusal when it was this cycle's and this batch is the same
        (``retry_lap_back``: its entry a lap back): a refused cycle batch asked for again
        at once is still that cycle (repeats stay refused by themselves: their strikes
        keep growing)."""
        settings = run.settings
        period = settings.max_cycle_period
        hit = None
        if period is not None:
            hit = find_cycle(
                run.history,
                period,
                settings.max_cycle_laps,
                settings.cycle_allowance,
                settings.normalize_answers,
            )
        if hit is not None:
            lap_back: HistoryEntry | None = hit.previous
            lap_names = tuple(name for e in hit.lap for name in e.names)
            period, laps = hit.period, hit.laps
        elif retry is not None:
            lap_back = retry_lap_back
            lap_names, period, laps = retry.tool_names, retry.period, retry.count + 1
        else:
            return None
        loop = self.loop(record.signature, laps, lap_names, self.message(lap_names, period, laps))
        return Refusal("cycle", LoopDetected.of(loop, period=period), lap_back)

    def reach(self, settings: DetectorSettings) -> int:
        """How far back (in batches) a batch identical to the final one makes a cycle
        through it possible: ``scan`` replays the history before the final run only
        then (0: cycles are off)."""
        return settings.max_cycle_period or 0

    def message(self, names: tuple[str, ...], period: int, laps: int) -> str:
        """The model-facing message for a refused cycle.

        >>> CYCLE.message(("edit", "python"), 2, 3)[:64]
        'Loop detected: you are going round a cycle of 2 steps (`edit`, `'
        """
        return (
            f"Loop detected: you are going round a cycle of {period} steps "
            f"({names_text(names)}) and this is lap {laps}; every lap got the same results as "
            "the lap before. Going round again will not change them: change the arguments, "
            "use a different tool, or stop and say what is blocking you."
        )


CYCLE: Final = Cycle()
