"""Errors that do not say "error": the flags results carry, and the answers agent
frameworks write for a call they could not run.

A tool result may say it failed without any of the words :func:`~loopfuse.detector.
answers.looks_like_error` looks for. Two kinds of evidence are read here, before any
text heuristic:

- **flags** (:func:`flagged_error`): an MCP ``CallToolResult`` whose JSON carries
  ``"isError": true``, in whatever dialect it travels (the Anthropic ``is_error`` and
  LangChain ``status="error"`` flags reach the detector as the canonical tool message's
  ``is_error``, see :mod:`loopfuse.intent`);
- **framework answers** (:func:`framework_error`): the text an agent framework puts in
  place of a tool's answer when the model called a tool that does not exist or passed
  arguments the tool does not take — LangChain / LangGraph ``ToolNode``, the OpenAI
  Agents SDK, Pydantic AI, smolagents, CrewAI, OpenHands, an MCP server, and the plain
  ``Tool 'x' not found``. Each framework declares its answers in its harness module
  (:attr:`loopfuse.harness.Harness.not_run`); they are read here for every harness
  (:func:`loopfuse.harness.not_run_answers`): the tool called does not exist, so no
  harness setting could name whose it is.

An answer to a call of a tool that does not exist names the invented tool, and some
frameworks echo the arguments back: :func:`normalize_framework_error` puts placeholders
in their place (``<tool>``, ``<args>``, ``<id>``), so that a model inventing a new name
or new arguments every lap gets *the same error* every lap, which is what
``error_streak`` and the error-aware repeat count.

A framework's answer is the whole answer (the framework wrote it instead of running
anything), so it is only looked for at its start — after a smolagents ``Call id:`` line
and an ``Error:`` label — and, for Pydantic AI and OpenHands, at its very end. That
keeps a ``grep`` hit or a log line quoting such a sentence from counting, and keeps the
cost a few prefix tests for most answers. Everything here reads attacker-controlled
text: it never raises, its regular expressions have no nested repetition and look at
:data:`FRAMEWORK_HEAD` characters at most, and :func:`flagged_error` parses JSON only
when a bounded text starts with ``{`` and holds ``isError``.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import TYPE_CHECKING, Final, NamedTuple

from loopfuse.detector._shell_waits import bound_ran_out
from loopfuse.harness import not_run_answers

if TYPE_CHECKING:
    from loopfuse.harness import CallReader

__all__ = [
    "FRAMEWORK_HEAD",
    "READ_EVERY_ERROR",
    "ErrorReading",
    "flagged_error",
    "framework_error",
    "normalize_framework_error",
]


class ErrorReading(NamedTuple):
    """Which evidence of a failure beyond the text heuristics a detector reads (its
    ``error_flags`` and ``framework_errors`` settings)."""

    flags: bool = True
    """The flags results carry: ``is_error`` (Anthropic, LangChain), MCP ``isError``."""
    frameworks: bool = True
    """The frameworks' answers to calls they could not run (:func:`framework_error`)."""
    harness: CallReader | None = None
    """The harnesses' own conventions (:mod:`loopfuse.harness`): what one answer of one
    of their tools says of its failure, read before the text heuristics."""

    def failed(self, name: str, text: str | None, flag: bool | None) -> bool | None:
        """What the evidence stronger than the text heuristics says of one answer of tool
        ``name``: its structured flag (``flag``: ``True`` failed, ``False`` succeeded),
        then its harness's conventions; ``None`` when neither says."""
        if self.flags and flag is not None:
            return flag
        if self.harness is not None and text is not None:
            return self.harness.failed(name, text)
        return None

    def still_running(self, name: str, text: str) -> bool:
        """Whether ``text``, one answer of tool ``name``, says the thing a wait waits on
        is not over: its harness's words, or a shell wait's bound that ran out
        (:func:`~loopfuse.detector._shell_waits.bound_ran_out`). Read for a wait only."""
        if self.harness is not None and self.harness.still_running(name, text):
            return True
        return bound_ran_out(text)

    def plain(self, name: str, text: str) -> str:
        """``text`` as the text heuristics read it: without its harness's own frame."""
        return text if self.harness is None else self.harness.unframed(name, text)

    def read(self, name: str, text: str, flag: bool | None) -> tuple[bool | None, str]:
        """:meth:`failed` and :meth:`plain` at once (what the detector asks of every
        answer): what the stronger evidence says, and the text the heuristics read."""
        if self.flags and flag is not None:
            return flag, text
        if self.harness is None:
            return None, text
        return self.harness.read(name, text)


READ_EVERY_ERROR: Final = ErrorReading()
"""The default: every flag and every framework answer is read."""

FRAMEWORK_HEAD: Final = 4096
"""Characters of an answer's start read for a framework's answer."""
_FLAG_TEXT: Final = 65_536  # a longer text is not parsed for an MCP flag
_ERROR_OBJECT: Final = ('{"error"', '{ "error"')
_TAIL: Final = 256  # characters of an answer's end read for a framework's closing line

_PLACEHOLDERS: Final = {"u": "<tool>", "a": "<args>", "i": "<id>"}


class _NotRun(NamedTuple):
    starts: tuple[str, ...]
    ends: tuple[str, ...]
    answer: re.Pattern[str]
    label: re.Pattern[str]


@cache
def _not_run() -> _NotRun:
    """What the frameworks answer in place of a tool's answer when they could not run a
    call, as each harness declares it (:attr:`loopfuse.harness.Harness.not_run`), read as
    one; compiled on first use (importing the detector imports no harness).

    ``starts``: how each framework's answers begin, a cheap filter; ``ends``: how some
    end (Pydantic AI's retry prompt, OpenHands' note); ``answer``: the alternatives, each
    starting with its own literal, so a failed match costs a few characters; its groups
    ``u…`` (the name of a tool that does not exist), ``a…`` (arguments echoed back),
    ``i…`` (a call id) each become a placeholder in the normal form; ``label``: what may
    come before such an answer (a smolagents ``Call id:`` line and ``Error:`` label,
    Pydantic AI's ``{"error": "..."}`` wrapper: the JSON wrapper first, the other matches
    ``""``)."""
    declared = not_run_answers()
    return _NotRun(
        declared.starts,
        declared.ends,
        re.compile(declared.pattern, re.MULTILINE),
        re.compile(declared.label),
    )


def _start(text: str) -> int:
    """Where a framework's answer would begin: past blanks, a smolagents ``Call id:``
    line and an ``Error:`` label alone on its line, or inside Pydantic AI's
    ``{"error": "..."}`` wrapper."""
    found = _not_run().label.match(text, 0, 512)
    return found.end() if found is not None else 0


def _match(text: str) -> re.Match[str] | None:
    at = _start(text)
    known = _not_run()
    if not text.startswith(known.starts, at):
        return None
    return known.answer.match(text, at, at + FRAMEWORK_HEAD)


def framework_error(text: str) -> bool:
    """Whether ``text`` is an agent framework's answer to a call it could not run: a
    tool that does not exist, arguments the tool does not take, a tool that raised.

    >>> framework_error("Tool 'hex' not found.")  # the OpenAI Agents SDK
    True
    >>> framework_error("Unknown tool name: 'hex'. Available tools: 'bash'\\n\\n"
    ...                 "Fix the errors and try again.")  # Pydantic AI
    True
    >>> framework_error('{"error": "the quota is spent"}')  # Pydantic AI, over OpenAI
    True
    >>> framework_error("Tool not found in the index, try another query")
    False
    """
    if type(text) is not str or not text:
        return False
    if _match(text) is not None:
        return True
    return text[-_TAIL:].rstrip().endswith(_not_run().ends) or _error_object(text)


def _error_object(text: str) -> bool:
    """Whether ``text`` is a JSON object holding only a non-empty ``"error"``: how Pydantic
    AI sends a failed or retried tool call where the provider has no error flag."""
    if len(text) > _FLAG_TEXT or not text.startswith(_ERROR_OBJECT, _start_of(text)):
        return False
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return type(value) is dict and len(value) == 1 and bool(value.get("error"))


def _start_of(text: str) -> int:
    """Where ``text`` starts past leading blanks (a bounded look)."""
    head = text[:64]
    return len(head) - len(head.lstrip())


def normalize_framework_error(text: str) -> str:
    """``text`` with the invented tool name, the echoed arguments and the call id of a
    framework's answer replaced by ``<tool>``, ``<args>`` and ``<id>``; any other text
    as it is.

    >>> normalize_framework_error("Error: hex_2 is not a valid tool, try one of [bash].")
    'Error: <tool> is not a valid tool, try one of [bash].'
    >>> normalize_framework_error("Tool 'a.b' not found.")
    'Tool <tool> not found.'
    >>> normalize_framework_error("3 passed")
    '3 passed'
    """
    if type(text) is not str:
        return text
    found = _match(text)
    if found is None or found.lastindex is None:
        return text
    spans = []
    for name, value in found.groupdict().items():
        if value is not None:
            spans.append((found.start(name), found.end(name), _PLACEHOLDERS[name[0]]))
    if not spans:
        return text
    out = []
    at = 0
    for start, end, placeholder in sorted(spans):
        out.append(text[at:start])
        out.append(placeholder)
        at = end
    out.append(text[at:])
    return "".join(out)


def flagged_error(answer: object) -> bool:
    """Whether ``answer`` — text, or a JSON value — is an MCP tool result that says it
    failed: an object whose ``isError`` is ``true``.

    >>> flagged_error('{"content": [{"type": "text", "text": "no"}], "isError": true}')
    True
    >>> flagged_error({"content": [], "isError": False}), flagged_error("isError: true")
    (False, False)
    """
    if type(answer) is dict:
        return answer.get("isError") is True
    if type(answer) is not str or len(answer) > _FLAG_TEXT or "isError" not in answer:
        return False  # one search in C settles nearly every answer (asked on every scan)
    if not answer.startswith("{", _start_of(answer)):
        return False
    try:
        value = json.loads(answer)
    except (ValueError, RecursionError):
        return False
    return type(value) is dict and value.get("isError") is True
