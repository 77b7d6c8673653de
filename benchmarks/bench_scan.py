"""How much does ``scan`` cost next to ``json.loads`` of the same request body?

Usage: ``python benchmarks/bench_scan.py [--turns 200] [--repeat 50] [--profile]``

Builds a deterministic request body of ``--turns`` assistant turns, each calling one
tool and followed by its result (a coding agent's session: shell commands, file views,
test output; a few repeated batches so that answers really get compared), in the OpenAI
Chat and the Anthropic Messages dialects, plus one whose last quarter is a loop in
progress and one that ends on a failing command (so the detector also replays the
history window its answer-based signals read). Times, best of ``--repeat`` interleaved
rounds with ``time.perf_counter``:
``json.loads`` of the body (the baseline), ``extract_intent`` (the shared intent layer
``scan`` walks) and ``scan``, each as a ratio of the baseline. The target is ``scan`` <=
1.5x ``json.loads``.

``--turns`` is at least 24 (``MIN_TURNS``): the looping body's last quarter must be a loop
the default detector stops (6 repeats of one failing call), and each body's verdict is
checked before it is timed. ``--turns 24 --repeat 1`` is a smoke run (its figures noise).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import time
from collections.abc import Callable
from typing import Any

from loopfuse.detector import LoopDetector, scan
from loopfuse.intent import extract_intent, json_backend

MIN_TURNS = 24  # a last quarter of 6 turns: the default detector stops a loop that long

WORDS = (
    "def", "class", "return", "self", "value", "error", "import", "from", "None", "True",
    "False", "for", "in", "if", "else", "assert", "raise", "test", "file", "path", "line",
    "module", "config", "parser", "result", "output", "expected",
)  # fmt: skip


def _text(rng: random.Random, lines: int) -> str:
    return "\n".join(
        f"{rng.randint(1, 900)}:    "
        + " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))
        for _ in range(lines)
    )


def build_turns(
    turns: int, seed: int = 7, loop_tail: int = 0
) -> list[tuple[str, dict[str, Any], str, str]]:
    """(tool name, arguments, thought, result) per turn; every 25th turn repeats the last.

    With ``loop_tail``, the last ``loop_tail`` turns all repeat one failing command.
    """
    rng = random.Random(seed)
    out: list[tuple[str, dict[str, Any], str, str]] = []
    for i in range(turns):
        if i >= turns - loop_tail:
            out.append(("bash", {"command": "cd fastjson/"}, "Let me go there.", "no such dir"))
            continue
        if i % 25 == 24 and out:
            out.append(out[-1])  # a repeated batch with the same answer
            continue
        tool = rng.choice(["bash", "read_file", "edit_file", "grep"])
        args: dict[str, Any] = {"command": f"sed -n '{i},{i + 40}p' src/module_{i % 17}.py"}
        if tool == "edit_file":
            args = {"path": f"src/module_{i % 17}.py", "old": _text(rng, 2), "new": _text(rng, 3)}
        thought = " ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 40)))
        result = _text(rng, rng.randint(5, 45))
        out.append((tool, args, thought, result))
    return out


def openai_body(turns: list[tuple[str, dict[str, Any], str, str]]) -> bytes:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful software engineer."},
        {"role": "user", "content": "Fix the failing test in src/module_3.py."},
    ]
    for i, (tool, args, thought, result) in enumerate(turns):
        call_id = f"call_{i:04d}"
        messages.append(
            {
                "role": "assistant",
                "content": thought,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": tool, "arguments": json.dumps(args)},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
    return json.dumps({"model": "gpt-4o", "messages": messages, "temperature": 0}).encode()


def anthropic_body(turns: list[tuple[str, dict[str, Any], str, str]]) -> bytes:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    for i, (tool, args, thought, result) in enumerate(turns):
        tid = f"toolu_{i:04d}"
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": thought},
                    {"type": "tool_use", "id": tid, "name": tool, "input": args},
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": tid, "content": result}],
            }
        )
    body = {"model": "claude", "system": "You are careful.", "messages": messages}
    return json.dumps(body).encode()


def best_times(fns: list[Callable[[], object]], repeat: int) -> list[float]:
    """Best time of each function, measured in interleaved rounds so that drift in the
    machine's speed affects the baseline and the subject alike."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--turns", type=int, default=200, help=f"turns per body (default 200, at least {MIN_TURNS})"
    )
    parser.add_argument("--repeat", type=int, default=50, help="interleaved rounds, best kept")
    parser.add_argument("--profile", action="store_true", help="cProfile scan of the body")
    args = parser.parse_args(argv)
    if args.turns < MIN_TURNS or args.repeat < 1:
        parser.error(f"--turns must be at least {MIN_TURNS} and --repeat at least 1")
    turns = build_turns(args.turns)
    looping = build_turns(args.turns, loop_tail=args.turns // 4)
    # The last answer is an error: the answer-based signals could fire, so scan replays
    # the run's history window too (the dearest case short of a loop).
    failing = [
        *turns[:-1],
        ("bash", {"command": "pytest -q"}, "Run the tests.", "FAILED t.py::t - assert 1 == 2"),
    ]
    detector = LoopDetector()
    print(f"JSON backend of loopfuse.intent: {json_backend()}")
    print("| body | size | json.loads | extract_intent | scan | scan / json.loads |")
    print("|---|---|---|---|---|---|")
    bodies = (
        ("openai_chat", openai_body(turns), True),
        ("anthropic", anthropic_body(turns), True),
        (f"openai_chat, last {args.turns // 4} turns loop", openai_body(looping), False),
        ("openai_chat, ends on a failure", openai_body(failing), True),
    )
    for dialect, body, progressing in bodies:
        assert scan(body, detector=detector).ok is progressing
        base, intent, scanned = best_times(
            [
                lambda body=body: json.loads(body),
                lambda body=body: extract_intent(body),
                lambda body=body: scan(body, detector=detector),
            ],
            args.repeat,
        )
        print(
            f"| {dialect} | {len(body) / 1024:.0f} KiB, {args.turns} turns "
            f"| {base * 1e3:.2f} ms | {intent * 1e3:.2f} ms ({intent / base:.2f}x) "
            f"| {scanned * 1e3:.2f} ms | **{scanned / base:.2f}x** |"
        )
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(20):
                scan(body, detector=detector)
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(12)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
