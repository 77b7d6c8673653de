"""What :class:`~loopfuse.breaker.LoopBreaker` decides about a request: data only,
public under :mod:`loopfuse.breaker`, whose name it carries (in reprs and pickles).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LoopDecision"]


@dataclass(frozen=True, slots=True)
class LoopDecision:
    """What :meth:`LoopBreaker.check` decided about one request.

    ``repeats`` counts the live samples with this fingerprint in the session's window,
    this request included. ``error`` is set when the guard failed internally and let
    the request through (fail-open) — or refused it, with ``fail_closed=True``.
    """

    __module__ = "loopfuse.breaker"  # its public home, as before it moved here

    allowed: bool
    repeats: int
    session_id: str
    fingerprint: int | None
    max_repeats: int
    window: float
    error: str | None = None

    @property
    def message(self) -> str:
        """A sentence a person or a model can act on."""
        if self.error is not None:
            verdict = "allowed" if self.allowed else "refused"
            return f"loopfuse: request {verdict} because the loop guard failed: {self.error}"
        if self.allowed:
            return f"loopfuse: request allowed ({self.repeats} of {self.max_repeats} in window)"
        # The one wording of a breaker refusal: the integrations hand it to the model too,
        # so it names no session (which may be an end user's id).
        return (
            f"Loop detected: this exact request has been sent {self.repeats} times within "
            f"{self.window:g}s (limit {self.max_repeats}). Sending it again unchanged will "
            "not give a different result: change the request or your approach, or stop "
            "and say what is blocking you."
        )
