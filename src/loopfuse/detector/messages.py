"""The model-facing messages of every signal: what repeated, how often, what to do.

A message is read by the model in place of the tool result (or as a note), so each says
what the agent repeated, how many times, and what would move it on.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

__all__ = [
    "cycle_message",
    "error_storm_message",
    "error_streak_message",
    "names_text",
    "near_repeat_message",
    "no_progress_message",
    "repeat_message",
]

_QUOTE_CHARS: Final = 160


def names_text(names: Iterable[str]) -> str:
    """Tool names for a message: unique, back-quoted, at most four.

    >>> names_text(["edit", "python", "edit"])
    '`edit`, `python`'
    """
    unique = list(dict.fromkeys(name or "<unnamed>" for name in names))
    return ", ".join(f"`{name}`" for name in unique[:4]) + (" …" if len(unique) > 4 else "")


_ADVICE: Final = (
    "Calling it again will not give a different answer: change the arguments, use a "
    "different tool, or stop and say what is blocking you."
)


def repeat_message(names: tuple[str, ...], count: int, *, same: bool, moved: bool) -> str:
    """The model-facing message for a refused repeat.

    ``same``: every answer in the streak repeated; ``moved``: the answers kept changing
    and the batch is refused only because it changes state and went past the ceiling.

    >>> repeat_message(("find_file",), 4, same=True, moved=False)[:78]
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


def cycle_message(names: tuple[str, ...], period: int, laps: int) -> str:
    """The model-facing message for a refused cycle.

    >>> cycle_message(("edit", "python"), 2, 3)[:64]
    'Loop detected: you are going round a cycle of 2 steps (`edit`, `'
    """
    return (
        f"Loop detected: you are going round a cycle of {period} steps ({names_text(names)}) "
        f"and this is lap {laps}; every lap got the same results as the lap before. Going "
        "round again will not change them: change the arguments, use a different tool, or "
        "stop and say what is blocking you."
    )


def _quoted(detail: str | None) -> str:
    """`` (`first line`)`` of an answer, clipped; empty when unknown."""
    if not detail:
        return ""
    line = next((part.strip() for part in detail.splitlines() if part.strip()), "")
    if not line:
        return ""
    if len(line) > _QUOTE_CHARS:
        line = line[: _QUOTE_CHARS - 1] + "…"
    return " (`" + line.replace("`", "'") + "`)"


def error_streak_message(names: tuple[str, ...], count: int, detail: str | None = None) -> str:
    """The message for the same error again and again, whatever the calls.

    >>> error_streak_message(("bash",), 4, "ModuleNotFoundError: No module named 'x'")[:74]
    'Loop detected: your last 4 tool calls (`bash`) all failed with the same er'
    """
    return (
        f"Loop detected: your last {count} tool calls ({names_text(names)}) all failed with "
        f"the same error{_quoted(detail)}, whatever you varied in them. Another variant of "
        "the same call will fail the same way: deal with the cause the error names first, "
        "try a different approach, or stop and say what is blocking you."
    )


def near_repeat_message(names: tuple[str, ...], count: int, detail: str | None = None) -> str:
    """The message for calls that differ only slightly and get the same answer.

    >>> near_repeat_message(("find",), 4)[:70]
    'Loop detected: you called `find` 4 times in a row with arguments that '
    """
    return (
        f"Loop detected: you called {names_text(names)} {count} times in a row with arguments "
        f"that differ only slightly, and got the same result each time{_quoted(detail)}. "
        "Small changes to the same call are not getting anywhere: try a different approach, "
        "or stop and say what is blocking you."
    )


def no_progress_message(names: tuple[str, ...], count: int, detail: str | None = None) -> str:
    """The message for a check (tests, a script) unchanged across the edits between its runs.

    >>> no_progress_message(("bash",), 7)[:67]
    'Loop detected: you ran the same check (`bash`) 7 times with changes'
    """
    return (
        f"Loop detected: you ran the same check ({names_text(names)}) {count} times with "
        f"changes in between, and it gave the same result every time{_quoted(detail)}. Your "
        "changes are not affecting it: re-read what it reports, question your assumption "
        "about the cause, or stop and say what is blocking you."
    )


def error_storm_message(errors: int, calls: int, detail: str | None = None) -> str:
    """The message for nearly every recent call failing.

    >>> error_storm_message(10, 12)[:56]
    'Loop detected: 10 of your last 12 tool calls failed (the'
    """
    return (
        f"Loop detected: {errors} of your last {calls} tool calls failed (the latest"
        f"{_quoted(detail) or ' with an error'}). Trying more variants is not working: "
        "check the environment and the cause of the errors, or stop and say what is "
        "blocking you."
    )
