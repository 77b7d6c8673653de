"""What failure a batch's answers report, named so that two batches that failed the same
way share the name: what ``mode="warn"`` reads to tell that a note was ignored.

A note (``mode="warn"``) tells the model that its calls keep failing with some error and
that another variant of them will fail the same way. An agent that heeds it deals with
the cause, changes its approach or stops: its next calls do not fail that way. One that
gets the very failure the note quoted again, from the same tools, has done what the note
said not to, even when the loop's shape changed (another edit rejected for the same
syntax error, the same failing check after one more edit) and no signal has counted to
its threshold again: that note was ignored (issue 27). :func:`failure_of` gives the name
that tells it.

**The same failure** is read the way the detector reads a failure, strongest first:

- the lines of the answers that say what failed (:func:`~loopfuse.detector.answers.
  error_lines`: an exception line, ``error:``, a ``FAILED`` test, a rejected edit's
  banner), each normalised (:func:`~loopfuse.detector.answers.normalize_answer`: a
  shell's line number, a duration, a temp path do not make two failures differ), as a
  set, without the rest of the text: an answer that echoes what the call sent (an
  editor's preview of the rejected file, a log with timestamps) fails the same way as
  the one before it when its error lines are the same;
- a line that only gives an exit status (``[Command finished with exit code 1]``,
  ``<returncode>2</returncode>``, ``Process exited with code 1``) names no failure:
  every failing command of a harness prints one. Without any other error line, an answer
  is named by its whole normalised text (the detector's ``answers`` key: what
  ``error_streak`` calls the same error), which is also how an answer that is an error
  only by its structured flag or a framework's wording is named.

The tools that got it are part of the name: the note was about *those* calls.

Which harnesses it could misfire on, and why it does not. It only acts after a note,
in the conversation the note was written into, within the guard's ``warn_window``, and
only after a note given where ``mode="refuse"`` refuses (an early note's failure,
``note_early``, is not remembered), so a run it stops is one ``refuse`` stops earlier,
on every harness (``warn`` is never stricter than ``refuse``; on the corpus, the
calibration set, the OpenHands half and the CLI sessions no healthy or resolved run has
such a note). Within those runs, its coarsest names are a harness's fixed banner
for a whole class of failures: SWE-agent's ``Your proposed edit has introduced new
syntax error(s)`` (its error code line is not an error line), so any edit it rejects for
a syntax error after a note about rejected edits is the same failure; a test runner's
``FAILED (failures=1)`` alone. Exit-status lines, the banners every failing command of
OpenHands, mini-swe-agent, Codex and Gemini CLI ends with, are left out for that reason.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, NamedTuple

from blake3 import blake3

from loopfuse.detector.answers import error_lines, normalize_answer
from loopfuse.detector.errors import READ_EVERY_ERROR, ErrorReading
from loopfuse.detector.records import Answers
from loopfuse.detector.signals.wording import names_text, quoted
from loopfuse.detector.transcript import Batch, BatchAnswers, clip_text

__all__ = ["Failure", "failure_of", "failure_of_results"]

# An exit status, in the words shells, runners and harnesses print it: a line whose only
# error marker is one names no failure.
_STATUS: Final = re.compile(
    r"exit(?:ed)?(?: with)? (?:code|status)|return ?code|returncode", re.IGNORECASE
)
_LINE_CHARS: Final = 512  # an error line read for a name: longer ones are clipped


class Failure(NamedTuple):
    """The failure one batch's answers report: ``name`` (32 hex digits, equal for two
    batches of the same tools that failed the same way), the ``tools`` that got it and
    the ``line`` that says what failed, for a message (``None``: no error line)."""

    name: str
    tools: tuple[str, ...]
    line: str | None

    def again(self) -> str:
        """The message for a call that failed this way again after a note about it.

        >>> Failure("0" * 32, ("bash",), "ModuleNotFoundError: x").again()[:70]
        'Loop detected: your call to `bash` failed again the same way (`ModuleN'
        """
        return (
            f"Loop detected: your call to {names_text(self.tools)} failed again the same way"
            f"{quoted(self.line)} as the calls loopfuse's note was about. Another call like "
            "it will fail the same way: deal with the cause the error names first, try a "
            "different approach, or stop and say what is blocking you."
        )


def failure_of(answers: Answers) -> Failure | None:
    """The failure ``answers`` (one batch's, as a scan reads them) report; ``None`` when
    they are not an error, or are known only by a digest (no text to read).

    >>> from loopfuse.detector.transcript import Batch, BatchAnswers
    >>> def failed(command, answer):
    ...     batch = Batch([{"name": "bash", "arguments": {"command": command}}])
    ...     return failure_of(BatchAnswers(batch, [([answer], None)]))
    >>> a = failed("python a.py", "Traceback (most recent call last):\\nKeyError: 'a'\\n"
    ...            "[Command finished with exit code 1]")
    >>> b = failed("python b.py", "b.py ran\\nTraceback (most recent call last):\\n"
    ...            "KeyError: 'a'\\n[Command finished with exit code 1]")
    >>> a.name == b.name, a.line
    (True, "KeyError: 'a'")
    >>> c = failed("python c.py", "KeyError: 'b'\\n[Command finished with exit code 1]")
    >>> c.name == a.name, failed("ls", "a.py b.py")
    (False, None)
    """
    if not isinstance(answers, BatchAnswers) or not answers.facts[0]:
        return None
    named: set[str] = set()
    first: str | None = None
    reading = answers.reading
    for name, text in _texts(answers):
        for line in error_lines(reading.plain(name, text)):
            line = line[:_LINE_CHARS]
            if not error_lines(_STATUS.sub(" ", line)):
                continue  # only an exit status: every failing command prints one
            named.add(normalize_answer(line, frameworks=reading.frameworks))
            first = first or line
    tools = tuple(sorted(set(answers.batch.names)))
    material = "\n".join(sorted(named)) if named else "=" + answers.key()
    digest = blake3("\x00".join((*tools, material)).encode("utf-8", "surrogatepass"))
    return Failure(digest.hexdigest(16), tools, first)


def failure_of_results(
    tools: Sequence[str],
    answers: Sequence[object],
    errors: Sequence[bool | None] | None = None,
    reading: ErrorReading = READ_EVERY_ERROR,
) -> Failure | None:
    """The failure one batch's answers report, given as a live caller has them rather
    than read from a transcript: each call's tool name, its answer (text, or any JSON
    value) and, when known, whether it failed (``errors``, one per answer; ``None``:
    not said). The very name :func:`failure_of` gives the same answers in a transcript:
    they are read as one (``loopfuse hook`` keeps its answers so, and compares the
    failure a note came with to a later batch's with it).

    >>> a = failure_of_results(["Bash"], ["Exit code 1\\nKeyError: 'a'"], [True])
    >>> b = failure_of_results(["Bash"], ["b ran\\nKeyError: 'a'"], [True])
    >>> a.name == b.name, a.line, failure_of_results(["Bash"], ["a.py"], [False])
    (True, "KeyError: 'a'", None)
    """
    flags = list(errors) if errors is not None else [None] * len(answers)
    if not answers or len(tools) != len(answers) or len(flags) != len(answers):
        return None
    batch = Batch([{"name": name, "arguments": None} for name in tools])
    items: list[tuple[list[object], bool | None]] = []
    for answer, flag in zip(answers, flags, strict=True):
        # A text answer is one text part; any other JSON value one JSON part, as a
        # transcript's tool result canonically is.
        part = answer if type(answer) is str else {"type": "json", "value": answer}
        items.append(([part], flag if type(flag) is bool else None))
    return failure_of(BatchAnswers(batch, items, reading))


def _texts(answers: BatchAnswers) -> list[tuple[str, str]]:
    """Each answer's tool name and text, each part clipped to the windows the error
    checks read. A JSON object part is read by its string values (Gemini wraps a tool's
    output as ``{"output": ...}`` and a failure as ``{"error": ...}``): their lines are
    the tool's lines; other JSON says no line."""
    names = answers.batch.names
    out = []
    for k, (content, _) in enumerate(answers.items):
        texts: list[str] = []
        for part in content:
            if type(part) is dict and part.get("type") == "json":
                part = part.get("value")
            if type(part) is str:
                texts.append(clip_text(part))
            elif type(part) is dict:
                texts.extend(clip_text(v) for v in part.values() if type(v) is str)
        out.append((names[k] if k < len(names) else "", "\n".join(texts)))
    return out
