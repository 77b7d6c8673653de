"""``Loop``: what every guard says when it finds a loop, in one shape.

A loop found by the breaker (the same request again and again), by the detector (a
repeated batch, a cycle, the same error, stagnation, ...) or a refusal because a guard
failed closed is one :class:`Loop`. Everything that reports a loop holds one: the
detector's :class:`~loopfuse.detector.Verdict` and :class:`~loopfuse.detector.LoopDetected`,
the breaker's :class:`~loopfuse.LoopDecision` and :class:`~loopfuse.LoopBroken`, the
guard's :class:`~loopfuse.GuardDecision` and the :class:`~loopfuse.events.GuardEvent`
about it; so its fields have one name everywhere (``kind``, never ``code``).

>>> loop = Loop("repeat", "detector", signature="ls:1f", count=4, tool_names=("ls",))
>>> loop.kind, loop.guard, loop.count
('repeat', 'detector', 4)
>>> loop.count = 5
Traceback (most recent call last):
    ...
dataclasses.FrozenInstanceError: cannot assign to field 'count'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

__all__ = ["Loop"]


@dataclass(frozen=True, slots=True)
class Loop:
    """A loop one guard found.

    ``kind`` names the signal: ``"repeated_request"`` (the breaker), one of the
    detector's kinds (:data:`loopfuse.detector.KINDS`: ``"repeat"``, ``"cycle"``,
    ``"error_streak"``, ``"near_repeat"``, ``"no_progress"``, ``"error_storm"``,
    ``"stagnation"``), or ``"guard_failed"`` (a request refused because a guard failed
    and ``fail_closed`` is set). ``guard`` is the guard that spoke (``"breaker"``,
    ``"detector"``, ``"guard"``). ``signature`` names what repeated (a batch signature,
    ``answer:<hash>``, a request fingerprint in hex; ``""`` when nothing did);
    ``count`` how many times it happened (laps, for a cycle); ``tool_names`` the tools
    involved; ``message`` a sentence written for the model.
    """

    kind: str
    guard: str
    signature: str = ""
    count: int = 0
    tool_names: tuple[str, ...] = ()
    message: str = ""


class HoldsLoop:
    """What holds the :class:`Loop` it reports, as ``loop`` (``None``: no loop), reads
    the loop's fields off it here: the guard's decision and its events do.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Report(HoldsLoop):
    ...     loop: Loop | None = None
    >>> Report(Loop("cycle", "detector", "a>b", 2)).kind, Report().kind, Report().signature
    ('cycle', None, None)
    """

    __slots__ = ()

    if TYPE_CHECKING:

        @property
        def loop(self) -> Loop | None: ...

    @property
    def kind(self) -> str | None:
        """The loop's kind (``"repeated_request"``, ``"repeat"``, ``"guard_failed"``,
        ...), or ``None``."""
        return None if self.loop is None else self.loop.kind

    @property
    def message(self) -> str | None:
        """The loop's message for the model, or ``None``."""
        return None if self.loop is None else self.loop.message

    @property
    def signature(self) -> str | None:
        """What repeated (a batch signature, a request fingerprint in hex), or ``None``."""
        return None if self.loop is None or not self.loop.signature else self.loop.signature

    @property
    def count(self) -> int:
        """How often the loop went round (0 without one)."""
        return 0 if self.loop is None else self.loop.count

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The tools involved (``()`` without a loop)."""
        return () if self.loop is None else self.loop.tool_names
