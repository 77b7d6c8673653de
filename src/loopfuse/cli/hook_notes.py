"""What ``loopfuse hook`` remembers, in warn mode, of the note it gave: the failure the
noted calls got, so that a later batch whose calls failed again that very way is refused
(the note was ignored, issue 27), as the integrations' ``Guard`` and ``loopfuse scan``
decide (docs/detector.md, "A note ignored"; :mod:`loopfuse.detector.failures`).

The hook decides on a batch before it runs, and its note reaches the model with the
noted batch's answers: the failure the note came with is *that batch's*. The hook that
opens the next batch is the first to see those answers (as the after-hooks kept them,
before it digests them for the detector): it names their failure and keeps the name.
Every later hook that opens a batch names the failure of the batch before it the same
way, with the same function the library's guard uses
(:func:`~loopfuse.detector.failures.failure_of_results`, which reads the answers as
:func:`~loopfuse.detector.failures.failure_of` reads them in a transcript): the same
name (the same tools, the same error lines normalised) means the calls failed again the
way the note said they would, and the batch about to run is refused, where the guard
refuses the request that batch would have come from.

Bounded, as the rest of the session's state (:mod:`loopfuse.cli.hook_state`): one
noted failure per session (warn mode notes a session once per window: any loop within
it at the detector's counts is refused, and one only its early twin finds is noted again,
keeping the first note's failure), kept as the noted batch's id, the loop's key and count, when
it was noted and a 32-hex-digit name; forgotten with its note, :data:`WARN_WINDOW
<loopfuse.cli.hook.WARN_WINDOW>` after it, and at the user's next prompt. A damaged one
makes the file a fresh start, as any damage does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from loopfuse.cli.hook_state import MAX_LOOP_KEY, SessionState

if TYPE_CHECKING:
    from loopfuse.detector.errors import ErrorReading
    from loopfuse.detector.failures import Failure

__all__ = ["FailedAgain", "failed_again", "note_given"]


class FailedAgain(NamedTuple):
    """A batch whose calls failed again the way the noted calls did: the noted loop's
    key (``kind:signature``) and count (``times``), and the failure they got again."""

    loop: str
    times: int
    failure: Failure

    @property
    def kind(self) -> str:
        """The noted loop's kind (the refusal keeps it: the loop goes on)."""
        return self.loop.partition(":")[0]


def note_given(state: SessionState, batch: object, loop: str, count: int, now: float) -> None:
    """Remember that warn mode noted the loop ``loop`` (its ``kind:signature``, found
    ``count`` times) on the batch ``batch`` at ``now``: the failure its calls get is
    read once their answers are in (:func:`failed_again`)."""
    if len(loop) > MAX_LOOP_KEY:
        state.failure = None  # never a state load would not read back
        return
    state.failure = {"batch": batch, "loop": loop, "count": count, "at": now, "name": None}


def failed_again(
    state: SessionState,
    batches: list[list[list[object]]],
    now: float,
    window: float,
    reading: ErrorReading,
) -> FailedAgain | None:
    """Whether the newest of the session's ``batches`` (its call events, by batch)
    failed again as the batch that got warn mode's note did, within ``window`` seconds
    of the note. Run by the hook that opens a batch, before the answers are digested;
    reads the noted batch's failure first when it is not yet known (its answers came in
    since), and forgets a note too old, or one whose calls did not fail."""
    kept = state.failure
    if kept is None:
        return None
    at = kept["at"]
    if not isinstance(at, int | float) or abs(now - at) >= window:
        state.failure = None  # forgotten with its note
        return None
    name = kept["name"]
    if name is None:
        noted = [calls for calls in batches if calls and calls[0][6] == kept["batch"]]
        failure = _failure(state, noted[0], reading) if noted else None
        if failure is None:
            state.failure = None  # its calls did not fail: nothing to fail again
        else:
            kept["name"] = failure.name
        return None
    if not batches or batches[-1][0][6] == kept["batch"]:
        return None
    failure = _failure(state, batches[-1], reading)
    if failure is None or failure.name != name:
        return None
    count = kept["count"]
    return FailedAgain(str(kept["loop"]), count if isinstance(count, int) else 0, failure)


def _failure(
    state: SessionState, calls: list[list[object]], reading: ErrorReading
) -> Failure | None:
    """The failure the answers of ``calls`` report, as the after-hooks kept them (text
    or a JSON value, with the CLI's failure flag); ``None`` when they report none, or
    are known only by a digest (the batch was digested: no text to read)."""
    from loopfuse.detector.failures import failure_of_results

    names = {str(call[1]): str(call[2]) for call in calls}
    tools: list[str] = []
    answers: list[object] = []
    errors: list[bool | None] = []
    for event in state.events:
        if event[0] != "answer" or len(event) != 3 or event[1] not in names:
            continue
        kept = event[2]
        if not isinstance(kept, dict):
            return None  # a digest: the batch's text is gone
        error = kept.get("error")
        tools.append(names[str(event[1])])
        answers.append(kept.get("answer"))
        errors.append(error if isinstance(error, bool) else None)
    try:
        return failure_of_results(tools, answers, errors, reading)
    except (ValueError, TypeError, RecursionError):  # an answer it cannot read: no failure
        return None
