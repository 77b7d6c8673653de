"""Which read-only command lines *wait*, and whether a wait's answer says it is not over.

A wait on something already running is progress while it runs (issue 27 §2), however
often it is sent. Written as a shell command line, a wait is one of two shapes
(:func:`line_waits`), judged only once the line is known to read only
(:func:`~loopfuse.detector._shell_rules.line_is_read_only`):

- **a wait for time**: a line led by ``sleep N`` (after ``cd``), then what it reads once
  the time has passed: ``sleep 30 && tail -5 build.log``, ``sleep 60; cat out.txt``;
- **a wait for a condition**: a program whose own job is to wait until something
  happens, with or without a bound of its own (``kubectl wait … --timeout=60s``,
  ``kubectl rollout status``, ``gh run watch``, ``gh pr checks --watch``, ``docker wait``,
  ``docker compose wait``), or a ``while`` / ``until`` loop that sleeps until its
  condition holds (``until [ -f done ]; do sleep 5; done``), alone or bounded by
  ``timeout N``.

``timeout N`` around anything else (``timeout 60 tail -f log``) makes the line no wait:
such a command never ends by itself, so the bound running out is its normal end and
says nothing of what it watched.

A wait's answer says the thing waited on is **not over** (:func:`bound_ran_out`) when its
bound ran out before the condition held: ``timeout``'s exit status 124 as the harness
wrote it (``Process exited with code 124``, ``Exit code 124``, ``[The command completed
with exit code 124.]``, ``<returncode>124</returncode>``, ``Exit Code: 124``), or
``kubectl``'s ``timed out waiting for the condition``
(:data:`~loopfuse.harness.generic.DEFAULT_WAIT_BOUND_PHRASES`). Only a wait for a
condition can write either. A wait for time never says it is not over: it is progress
while its answers move, as any read-only poll, and a wait answered the same way again
is judged as any read-only call (``sleep 5 && cat missing.txt`` answering ``No such
file`` is a loop).

**Where it could misfire, and why it does not.** The rule reads the shell tool of every
harness (Claude Code's ``Bash`` and ``Monitor``, Codex's ``exec_command`` / ``shell``,
Gemini CLI's and Qwen Code's ``run_shell_command``, OpenHands' ``execute_bash``,
SWE-agent's and mini-swe-agent's ``bash``, LangChain's ``terminal``, the Agents SDK's
``shell``, any tool named a shell). It only ever makes the detector *later*: a wait that
is not over is not judged, a wait that is over is judged as the read-only call it was
before. So it cannot stop a healthy run, but two things: (1) a loop dressed as a wait, a
``kubectl wait`` on a deployment that never gets ready, runs to the bound,
``max_waits`` (120) waits in a row, then is refused: a documented bound, as for Codex's
polls; (2) a healthy stretch of more than ``max_waits`` waits in a row is refused: on
every population we have (the CLI sessions: 17 shell waits, at most 2 in a row; no
trajectory set has one) that never happens. A harness that wrote ``exit code 124`` for
a reason of its own would only make its condition waits later, never earlier; none we
read does (their own time-outs say ``timed out`` in words, which is no bound here: a
wait for time cut by the harness is a command that never finished, judged as a read).
Measured with ``benchmarks/corpus_eval.py --loso`` on the dev corpus, the calibration
set, the OpenHands half and the CLI sessions: every figure unchanged, every held-out
source at 0 healthy stopped (docs/detector.md).

Everything here reads attacker-controlled text: the line is read by the same linear
lexer as the read-only check (:mod:`._shell_lex`), at most
:data:`~loopfuse.detector._shell_rules.MAX_NESTING` ``bash -c`` levels deep; an answer is
read at its two ends only, a bounded amount each, with one pattern that cannot
backtrack.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from loopfuse.detector._shell_lex import simple_commands
from loopfuse.detector._shell_rules import (
    MAX_NESTING,
    command_words,
    program_name,
    sub_command,
    wrapped,
)
from loopfuse.harness.generic import DEFAULT_WAIT_BOUND_PHRASES, DEFAULT_WAITING_COMMANDS

__all__ = ["WAIT_HINTS", "bound_ran_out", "line_waits"]

WAIT_HINTS: Final = ("sleep", "wait", "watch", "rollout")
"""A line holding none of these words is no wait: settled by a few substring searches."""

_NO, _TIME, _CONDITION, _NOT_A_WAIT = 0, 1, 2, -1
_ASSIGNMENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_MOVES: Final = frozenset({"cd", "pushd", "popd"})  # may come before a leading sleep
_CONSTANT: Final = frozenset({"true", ":", "false"})  # a loop on these never ends by itself


def _waiting_table() -> dict[str, tuple[tuple[tuple[str, ...], str | None], ...]]:
    table: dict[str, list[tuple[tuple[str, ...], str | None]]] = {}
    for entry in DEFAULT_WAITING_COMMANDS:
        words, _, flag = entry.partition(" --")
        program, *sub = words.split()
        table.setdefault(program, []).append((tuple(sub), f"--{flag}" if flag else None))
    return {program: tuple(subs) for program, subs in table.items()}


_WAITING: Final = _waiting_table()
_LONGEST_SUB: Final = max(len(sub) for subs in _WAITING.values() for sub, _ in subs)


def line_waits(text: str) -> bool:
    """Whether a read-only command line waits: for time or for a condition.

    >>> line_waits("sleep 30 && tail -5 build.log"), line_waits("tail -5 build.log")
    (True, False)
    >>> line_waits("kubectl wait --for=condition=ready pod/web --timeout=60s")
    True
    >>> line_waits("until [ -f done ]; do sleep 5; done"), line_waits("timeout 60 tail -f log")
    (True, False)
    """
    return _line(text, 0) > _NO


def _line(text: str, depth: int) -> int:
    """``_TIME``, ``_CONDITION``, ``_NO`` or ``_NOT_A_WAIT`` (a bound around a command that
    never ends by itself) for one command line."""
    if depth > MAX_NESTING or not any(hint in text for hint in WAIT_HINTS):
        return _NO
    commands = simple_commands(text)
    if not commands:
        return _NO
    found = _NO
    leading = True  # no command but a cd has run yet
    loop: bool | None = None  # in a loop: whether its condition can end it
    loop_sleeps = False
    for argv in commands:
        opened = command_words(argv)
        if opened is None:
            return _NO
        if opened == len(argv) and argv:  # "done"
            if loop and loop_sleeps:
                found = _CONDITION
            loop, loop_sleeps = None, False
            leading = False
            continue
        words = _command(argv[opened:])
        if opened and any(word in ("while", "until") for word in argv[:opened]):
            loop = bool(words) and not (len(words) == 1 and words[0] in _CONSTANT)
            loop_sleeps = False
        kind = _one(words, depth)
        if kind == _NOT_A_WAIT:
            return _NOT_A_WAIT
        if kind == _CONDITION:
            found = _CONDITION
        elif kind == _TIME:
            if loop is not None:
                loop_sleeps = True
            elif leading and found == _NO:
                found = _TIME
        if not (words and program_name(words[0]) in _MOVES):
            leading = False
    return found


def _command(argv: Sequence[str]) -> list[str]:
    """The words of a simple command past its ``NAME=value`` assignments and ``!``."""
    start = 0
    while start < len(argv) and (argv[start] == "!" or _ASSIGNMENT.match(argv[start])):
        start += 1
    return list(argv[start:])


def _one(words: list[str], depth: int) -> int:
    """What one simple command is: a sleep (``_TIME``), a wait for a condition, a bound
    around something else (``_NOT_A_WAIT``) or anything else (``_NO``)."""
    bounded = False
    i = 0
    while i < len(words):
        program = program_name(words[i])
        if program == "sleep":
            return _NOT_A_WAIT if bounded else (_TIME if len(words) > i + 1 else _NO)
        subs = _WAITING.get(program)
        if subs is not None:
            args = words[i + 1 :]
            said = sub_command(program, args, _LONGEST_SUB)
            for sub, flag in subs:
                if tuple(said[: len(sub)]) == sub and (flag is None or _flag_on(args, flag)):
                    return _CONDITION
            return _NOT_A_WAIT if bounded else _NO
        inner = wrapped(words, i)
        if inner is None or isinstance(inner, bool):
            return _NOT_A_WAIT if bounded else _NO
        bounded = bounded or program == "timeout"
        if isinstance(inner, str):
            kind = _line(inner, depth + 1)
            if bounded and kind != _CONDITION:
                return _NOT_A_WAIT
            return kind
        i = inner
    return _NO


def _flag_on(args: list[str], flag: str) -> bool:
    """Whether ``flag`` is given and not switched off (``--watch``, not ``--watch=false``)."""
    for arg in args:
        if arg == flag:
            return True
        if arg.startswith(flag + "="):
            return arg[len(flag) + 1 :].lower() not in ("false", "0", "no")
    return False


_ENDS: Final = 512  # characters of each end of an answer read for a bound that ran out
# timeout's status as the harnesses write a command's exit: "Process exited with code 124",
# "Exit code: 124", "Exit code 124", "[The command completed with exit code 124.]",
# "Exit Code: 124", "<returncode>124</returncode>", {"exit_code": 124}.
_TIMED_OUT: Final = re.compile(
    r"(?:exit(?:ed with)?[ _]?code\"?[ \t]?[:=]?[ \t]?|<returncode>[ \t]?)124\b", re.IGNORECASE
)


def bound_ran_out(text: str) -> bool:
    """Whether the answer to a wait says its bound ran out before what it waited for
    happened: the thing waited on is not over.

    >>> bound_ran_out("Process exited with code 124\\nOutput:\\n")
    True
    >>> bound_ran_out("error: timed out waiting for the condition on deployments/web")
    True
    >>> bound_ran_out("cat: missing.txt: No such file or directory"), bound_ran_out("124 passed")
    (False, False)
    """
    if type(text) is not str:
        return False
    ends = text if len(text) <= 2 * _ENDS else text[:_ENDS] + "\n" + text[-_ENDS:]
    if "124" in ends and _TIMED_OUT.search(ends) is not None:
        return True
    return any(phrase in ends for phrase in DEFAULT_WAIT_BOUND_PHRASES)
