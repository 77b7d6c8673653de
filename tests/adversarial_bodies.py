"""Request bodies shaped to cost the most per byte on the request path (issue 22).

Each shape takes a size (roughly the body's length in bytes) and a salt (put in every
answer and argument, so that no cache of an earlier call makes a later one cheap):

- many parallel tool calls in one turn, in every dialect, results in order, reversed,
  and without ids or names (linking a result to its call);
- tool answers made of one long run of a character the answer patterns repeat on
  (blanks before a last character, ``a:\\`` repeated, ``failed`` repeated, separators
  after ``pid``, digits, hex);
- many identical calls with long answers that differ (the detector replays the run and
  compares every answer);
- nesting as deep as :data:`loopfuse.intent.MAX_DEPTH` allows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from loopfuse import intent

Shape = Callable[[int, str], bytes]


def _dumps(value: object) -> bytes:
    return json.dumps(value).encode()


def _parallel(dialect: str, order: str = "in order") -> Shape:
    def body(size: int, salt: str) -> bytes:
        calls = max(1, size // 140)
        answered = list(range(calls))
        if order == "reversed":
            answered.reverse()
        names = [f"tool{k % 3}" for k in range(calls)]
        if dialect == "openai_chat":
            turn = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{k}",
                        "type": "function",
                        "function": {"name": names[k], "arguments": f'{{"k": "{salt}{k}"}}'},
                    }
                    for k in range(calls)
                ],
            }
            results = [
                {"role": "tool", "tool_call_id": f"call_{k}", "content": f"ok {k}"}
                for k in answered
            ]
            return _dumps(
                {"model": "m", "messages": [{"role": "user", "content": salt}, turn, *results]}
            )
        if dialect == "ollama":
            turn = {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"function": {"name": names[k], "arguments": {"k": f"{salt}{k}"}}}
                    for k in range(calls)
                ],
            }
            # Named results out of order, then unnamed ones: the order is broken.
            results = [
                {"role": "tool", "content": f"ok {k}", **({"tool_name": names[k]} if k % 2 else {})}
                for k in answered
            ]
            return _dumps(
                {"model": "m", "messages": [{"role": "user", "content": salt}, turn, *results]}
            )
        if dialect == "anthropic":
            turn = {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": f"toolu_{k}",
                        "name": names[k],
                        "input": {"k": f"{salt}{k}"},
                    }
                    for k in range(calls)
                ],
            }
            answers = [
                {"type": "tool_result", "tool_use_id": f"toolu_{k}", "content": f"ok {k}"}
                for k in answered
            ]
            return _dumps(
                {
                    "system": "s",
                    "messages": [
                        {"role": "user", "content": salt},
                        turn,
                        {"role": "user", "content": answers},
                    ],
                }
            )
        if dialect == "gemini":
            model = {
                "role": "model",
                "parts": [
                    {"functionCall": {"name": names[k], "args": {"k": f"{salt}{k}"}}}
                    for k in range(calls)
                ],
            }
            answers = [
                {"functionResponse": {"name": names[k], "response": {"r": k}}} for k in answered
            ]
            return _dumps(
                {
                    "contents": [
                        {"role": "user", "parts": [{"text": salt}]},
                        model,
                        {"role": "user", "parts": answers},
                    ]
                }
            )
        items: list[dict[str, Any]] = [{"role": "user", "content": salt}]
        items += [
            {
                "type": "function_call",
                "call_id": f"fc_{k}",
                "name": names[k],
                "arguments": f'{{"k": "{salt}{k}"}}',
            }
            for k in range(calls)
        ]
        items += [
            {"type": "function_call_output", "call_id": f"fc_{k}", "output": f"ok {k}"}
            for k in answered
        ]
        return _dumps({"model": "m", "input": items})

    return body


def _answers(make: Callable[[int], str], batches: int = 3, length: int = 0) -> Shape:
    """``batches`` turns of one call whose answer is ``make(length)``: the detector reads
    every answer of the run (the calls are the same). With ``length``, as many turns
    as the size holds, each answer that long."""

    def body(size: int, salt: str) -> bytes:
        turns = max(1, size // (length + 200)) if length else batches
        answer_length = length or max(1, size // batches - 200)
        messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
        for n in range(turns):
            call = {
                "id": f"c{n}",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"cmd": "make"}'},
            }
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            answer = make(answer_length) + f" {salt}{n}"
            messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": answer})
        return _dumps({"model": "m", "messages": messages})

    return body


def _repeat(unit: str, head: str = "", tail: str = "x") -> Callable[[int], str]:
    return lambda length: head + unit * max(1, (length - len(head) - len(tail)) // len(unit)) + tail


def _deep(size: int, salt: str) -> bytes:
    """Arguments and content nested as deep as the parser takes, over and over."""
    depth = intent.MAX_DEPTH - 8
    nested = "[" * depth + json.dumps(salt) + "]" * depth
    messages: list[Any] = [{"role": "user", "content": "go"}]
    turns = max(1, size // (2 * len(nested) + 150))
    for n in range(turns):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "f", "arguments": nested}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": json.loads(nested)})
    return _dumps({"model": "m", "messages": messages})


SHAPES: dict[str, Shape] = {
    "parallel openai_chat": _parallel("openai_chat"),
    "parallel openai_chat reversed": _parallel("openai_chat", "reversed"),
    "parallel ollama": _parallel("ollama"),
    "parallel ollama reversed": _parallel("ollama", "reversed"),
    "parallel anthropic": _parallel("anthropic", "reversed"),
    "parallel gemini": _parallel("gemini", "reversed"),
    "parallel responses": _parallel("openai_responses", "reversed"),
    "blanks then x": _answers(_repeat(" ")),
    "tabs and blanks then y": _answers(_repeat("\t ", tail="y")),
    "drive letters": _answers(_repeat("a:\\", tail="")),
    "drive letters after a temp folder": _answers(_repeat("a:\\", head="\\tmp\\ ", tail="")),
    "failed banner": _answers(_repeat("failed ", head="= ")),
    "pid separators": _answers(_repeat(":", head="pid ")),
    "exit code blanks": _answers(_repeat(" ", head="exit code")),
    "digits": _answers(_repeat("1", tail="x")),
    "hex": _answers(_repeat("f", head="0x", tail="g")),
    "newlines": _answers(_repeat("\n", tail="error: x")),
    "error lines": _answers(_repeat("E: x\n", tail="")),
    # Answers as long as the windows an answer is normalised in, all different.
    "many noisy answers": _answers(
        _repeat("log 12:00:01 pid 7 took 3ms in /tmp/tmpab12cd9x - 0x1f\n", tail=""),
        length=5000,
    ),
    "deep nesting": _deep,
}
