"""Run the shell classifier over every tool call of real trajectories and report.

Usage: ``python benchmarks/shell_eval.py [folder ...] [--samples N] [--seed S]``

Folders default to ``../shared/corpus`` and ``/tmp/calibration`` (``tar -xJf
../shared/calibration.tar.xz -C /tmp``); a missing folder is skipped, saying so. Reported:

- calls to shell tools (by name: ``bash``, ``shell``, …) and the share read-only;
- calls of text-action agents (SWE-agent 0.x and mini-swe-agent 1.x name each call after
  the command's first word, ``cat``, ``grep``, ``python``, with ``{"command": "<the
  action>"}``): the share the classifier would call read-only if applied to them too;
- the cost of one classification, uncached and cached (median and p99, microseconds);
- with ``--samples N``: N random commands of each class, to read by eye. They are printed
  only, never stored: the trajectories are for evaluation;
- with ``--worst``: the costliest shapes of line at the length limit (4,096 characters:
  thousands of short read-only commands, words, redirections), the least CPU time of
  ``--repeat`` runs each, against ``shlex.split`` of the same line in the same run (the standard
  library's shell lexer, which the classifier used before it had its own).

``--worst`` alone (no folders needed): ``python benchmarks/shell_eval.py --worst``.
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from loopfuse.detector.shell import MAX_COMMAND_LENGTH, ShellClassifier

REPO = Path(__file__).resolve().parent.parent
DEFAULT_FOLDERS = (REPO.parent / "shared" / "corpus", Path("/tmp/calibration"))


def _calls(folder: Path) -> list[tuple[str, str, object]]:
    """(agent of the file, tool name, parsed arguments) for every tool call."""
    calls = []
    for path in sorted(folder.glob("*.json")):
        run = json.loads(path.read_text(encoding="utf-8"))
        for message in run.get("messages", []):
            for call in message.get("tool_calls") or []:
                function = call.get("function", {})
                try:
                    arguments = json.loads(function.get("arguments", ""))
                except ValueError:
                    arguments = function.get("arguments")
                calls.append((path.name.split("_", 1)[0], function.get("name", ""), arguments))
    return calls


def _cost_us(classifier: ShellClassifier, commands: list[str], warm: bool = False) -> list[float]:
    costs = []
    for command in commands:
        if warm:
            classifier.is_read_only(command)  # the timed call below is a cache hit
        start = time.perf_counter_ns()
        classifier.is_read_only(command)
        costs.append((time.perf_counter_ns() - start) / 1000)
    return costs


def _percentiles(costs: list[float]) -> str:
    if not costs:
        return "n/a"
    ordered = sorted(costs)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return f"median {statistics.median(ordered):.1f} us, p99 {p99:.1f} us, max {ordered[-1]:.0f} us"


# Lines that are read all the way to their end (a refused command stops the reading), with
# as many commands, words or operators as the length limit allows.
WORST_SHAPES: dict[str, Callable[[int], str]] = {
    "commands 'ls;'": lambda n: "ls;" * (n // 3),
    "commands ':;'": lambda n: ":;" * (n // 2),
    "lines 'ls\\n'": lambda n: "ls\n" * (n // 3),
    "pipes 'ls|'": lambda n: "ls|" * ((n - 2) // 3) + "ls",
    "negations '! '": lambda n: "! " * (n // 2 - 1) + "ls",
    "words ' a'": lambda n: "ls" + " a" * (n // 2 - 1),
    "inputs ' <a'": lambda n: "ls" + " <a" * (n // 3 - 1),
    "duplications ' 2>&1'": lambda n: "ls" + " 2>&1" * (n // 5 - 1),
    "branch patterns": lambda n: "git branch --list" + " a" * ((n - 17) // 2),
    "find options": lambda n: "find ." + " -name x" * ((n - 6) // 8),
    "globs ' *.py'": lambda n: "ls" + " *.py" * ((n - 2) // 5),
    "variables ' $X'": lambda n: "cat" + ' "$X"' * ((n - 3) // 5),
}


def _best_ms(function: Callable[[], object], repeat: int) -> float:
    """The least CPU time of this process over ``repeat`` calls: time spent waiting for a
    core held by other work on the machine does not count."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time_ns()
        function()
        best = min(best, time.process_time_ns() - start)
    return best / 1e6


def worst_lines(repeat: int) -> None:
    """Print the cost of the costliest shapes of line at the length limit."""
    uncached = ShellClassifier(cache_size=0)
    print(f"worst lines at {MAX_COMMAND_LENGTH} characters (least CPU time of {repeat} runs):")
    print("| shape | answer | classifier ms | shlex.split ms | ratio |")
    print("|---|---|---|---|---|")
    worst = ("", 0.0)
    for name, shape in WORST_SHAPES.items():
        line = shape(MAX_COMMAND_LENGTH)
        assert len(line) <= MAX_COMMAND_LENGTH, name
        ms = _best_ms(lambda line=line: uncached.is_read_only(line), repeat)
        base = _best_ms(lambda line=line: shlex.split(line), repeat)
        answer = uncached.is_read_only(line)
        print(f"| {name} | {answer} | {ms:.2f} | {base:.2f} | {ms / base:.2f} |")
        worst = max(worst, (name, ms), key=lambda pair: pair[1])
    print(f"worst: {worst[0]} {worst[1]:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, default=list(DEFAULT_FOLDERS))
    parser.add_argument("--samples", type=int, default=0)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--worst", action="store_true", help="time the costliest lines")
    parser.add_argument("--repeat", type=int, default=20)
    options = parser.parse_args()
    if options.worst:
        worst_lines(options.repeat)
        if not any(folder.is_dir() for folder in options.folders):
            return
    calls = []
    for folder in options.folders:
        if folder.is_dir():
            calls += _calls(folder)
        else:
            print(f"skipped {folder}: not a folder")
    shells = ShellClassifier()
    shell_commands: list[str | None] = []
    text_actions: list[str] = []
    for _agent, name, arguments in calls:
        if shells.is_shell_tool(name):
            shell_commands.append(shells.command_of(arguments))
        elif isinstance(arguments, dict) and isinstance(arguments.get("command"), str):
            text_actions.append(arguments["command"])
    readable = [command for command in shell_commands if command is not None]
    read_only = [command for command in readable if shells.is_read_only(command)]
    print(f"tool calls: {len(calls)}; shell tools by name: {len(shell_commands)}")
    print(f"  with a command line: {len(readable)}; read-only: {len(read_only)}", end="")
    print(f" ({len(read_only) / max(1, len(shell_commands)):.1%} of shell calls)")
    text_read_only = [command for command in text_actions if shells.is_read_only(command)]
    print(f"text actions named after their first word: {len(text_actions)}; ", end="")
    print(
        f"read-only: {len(text_read_only)} ({len(text_read_only) / max(1, len(text_actions)):.1%})"
    )
    commands = readable + text_actions
    uncached = ShellClassifier(cache_size=0)
    print(f"cost uncached ({len(commands)} commands): {_percentiles(_cost_us(uncached, commands))}")
    print(f"cost cached: {_percentiles(_cost_us(shells, commands, warm=True))}")
    total_chars = sum(len(command) for command in commands)
    start = time.perf_counter()
    for command in commands:
        uncached.is_read_only(command)
    per_kib = (time.perf_counter() - start) * 1e6 / max(1, total_chars / 1024)
    print(f"uncached throughput: {per_kib:.0f} us per KiB of command text")
    if options.samples:
        rng = random.Random(options.seed)
        state_changing = [command for command in commands if not shells.is_read_only(command)]
        for label, pool in (("read-only", read_only + text_read_only), ("other", state_changing)):
            print(f"\n--- {options.samples} random {label} commands")
            for command in rng.sample(pool, min(options.samples, len(pool))):
                print(repr(command[:300]))


if __name__ == "__main__":
    main()
