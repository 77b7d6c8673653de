"""Probes of tests/test_reliability_stack.py: bodies nested near and far past the limits,
and a child-process runner that feeds them to one entry point inside small-stack threads.

Also the tool calls written as text (``written_probes``: every construct Python's parser
recurses on, as the arguments of a smolagents call; ``ENTRY`` is then ``written:NAME``).

Run as a script (``python stack_probe.py ENTRY MODE STACK_KIB``), it prints one JSON line
per probe, ``{"probe": name, "result": ...}``, and a first line ``{"started": name}``
before each probe, so that a probe that kills the process is named by the last line.
"""

from __future__ import annotations

import functools
import json
import sys
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from loopfuse import Guard, LoopBreaker, RequestContext, RequestKey, intent, scan
from loopfuse.cli.config import Settings
from loopfuse.cli.decisions import scan_source
from loopfuse.cli.readers import InputError, read_bytes
from loopfuse.dedup.request import request_material
from loopfuse.intent import _INTENT_DEPTH_SLACK, _json, _native
from loopfuse.intent._canonical import dumps
from loopfuse.intent._textdepth import STDLIB_SAFE_DEPTH

MAX_DEPTH = intent.MAX_DEPTH
PATH = "/v1/chat/completions"
# A request whose one content part holds the deep value: the envelope is 5 levels
# (body, messages, message, content, part), so at depth D the value nests D - 5.
ENVELOPE = 5
DEPTHS = {
    "under": MAX_DEPTH - 1,
    "at": MAX_DEPTH,
    "past": MAX_DEPTH + 1,
    "stdlib-at": STDLIB_SAFE_DEPTH,
    "stdlib-past": STDLIB_SAFE_DEPTH + 1,
    "far-past": 10_000,  # ten times the interpreter's recursion limit
}
SHAPES = ("objects", "arrays", "mixed")
MODES = ("c-orjson", "c-json", "py-orjson", "py-json")
ENTRIES = ("fingerprint", "extract_intent", "scan", "from_request", "cli")


def deep_value(shape: str, depth: int) -> bytes:
    """JSON text of a value nested ``depth`` containers deep (0: a bare number)."""
    opening = {"objects": [b'{"k":'], "arrays": [b"["], "mixed": [b'{"k":', b"["]}[shape]
    closing = {b'{"k":': b"}", b"[": b"]"}
    heads = [opening[i % len(opening)] for i in range(depth)]
    return b"".join(heads) + b"1" + b"".join(closing[head] for head in reversed(heads))


def body(shape: str, depth: int, nan: bool) -> bytes:
    """A chat request nested ``depth`` deep in all; ``nan`` makes its intent untrusted,
    so that even with orjson the careful (C or Python) writer writes it."""
    tail = b',"x":NaN}' if nan else b"}"
    content = b'[{"type":"x","v":' + deep_value(shape, depth - ENVELOPE) + b"}]"
    return b'{"messages":[{"role":"user","content":' + content + b"}]" + tail


def looping_body(shape: str, depth: int, nan: bool) -> bytes:
    """An agent that calls one tool four times with the same answer, its arguments a
    JSON string nested ``depth`` deep: parsed into the intent up to MAX_DEPTH, kept as
    a string past it, and a loop either way (``scan`` says so)."""
    arguments = json.dumps(deep_value(shape, depth).decode()).encode()
    call = b'{"id":"c","type":"function","function":{"name":"f","arguments":' + arguments
    result = b'{"role":"tool","tool_call_id":"c","content":"same"}'
    turn = b'{"role":"assistant","tool_calls":[' + call + b"}}]}," + result
    tail = b',"x":NaN}' if nan else b"}"
    return b'{"messages":[{"role":"user","content":"go"},' + b",".join([turn] * 4) + b"]" + tail


class Probe(NamedTuple):
    family: str  # "content", "arguments" or "json" (no request: the reproducer)
    depth: int  # how deep the body's JSON nests ("arguments": how deep the string does)
    body: bytes


def probes() -> dict[str, Probe]:
    """Every probe by name; the first is the reproducer of issue 12 (depth 253)."""
    reproducer = b'{"x": NaN, "k":' + b'{"k":' * 252 + b"1" + b"}" * 253
    out = {"issue-12": Probe("json", MAX_DEPTH - 1, reproducer)}
    for shape in SHAPES:
        for where, depth in DEPTHS.items():
            for nan in (True, False):
                suffix = f"{shape}-{where}{'-nan' if nan else ''}"
                out[f"content-{suffix}"] = Probe("content", depth, body(shape, depth, nan))
                looping = looping_body(shape, depth, nan)
                out[f"arguments-{suffix}"] = Probe("arguments", depth, looping)
    return out


# --- tool calls written as text (issue 30, finding 1) ---------------------------------
# smolagents writes its calls as the str() of a Python list; every construct Python's
# parser recurses on, nested past what a 128 KiB thread held when that text went to
# ast.literal_eval (~70 levels), as the arguments of a call.
CONSTRUCTS: dict[str, Callable[[int], str]] = {
    "lists": lambda n: "[" * n + "1" + "]" * n,
    "parentheses": lambda n: "(" * n + "1" + ")" * n,
    "tuples": lambda n: "(" * n + "1" + ",)" * n,
    "dicts": lambda n: "{'k': " * n + "1" + "}" * n,
    "sets": lambda n: "{" * n + "1" + "}" * n,
    "mixed": lambda n: "[(" * (n // 2) + "'s'" + ",)]" * (n // 2),
    "unary-minus": lambda n: "-" * n + "1",
    "not": lambda n: "not " * n + "1",
    "attributes": lambda n: "a" + ".b" * n,
    "lambda": lambda n: "lambda: " * n + "1",
    "conditional": lambda n: "1 if 1 else " * n + "1",
    "power": lambda n: "2**" * n + "2",
    "calls": lambda n: "f(" * n + ")" * n,
    "subscripts": lambda n: "a" + "[0]" * n,
}
WRITTEN_DEPTHS = {"70": 70, "under": MAX_DEPTH - 8, "far-past": 10_000}
WRITTEN = "written:"  # the prefix of an entry run on these probes (``written:scan``)
WRITTEN_ENTRIES = ("fingerprint", "check_request", "from_request", "scan", "guard_check")


def written_body(arguments: str) -> bytes:
    """A smolagents run (calls written as text) calling one tool five times with the same
    answer, then a sixth time (``scan``: a repeat), ``arguments`` written as its arguments."""
    call = (
        "Calling tools:\n[{'id': 'call_1', 'type': 'function', 'function': "
        f"{{'name': 'lookup', 'arguments': {arguments}}}}}]"
    )
    messages: list[dict[str, str]] = [{"role": "user", "content": "New task:\nLook it up."}]
    for _ in range(5):
        messages.append({"role": "assistant", "content": call})
        messages.append({"role": "user", "content": "Observation:\nsame"})
    messages.append({"role": "assistant", "content": call})
    return json.dumps({"model": "m", "messages": messages}).encode()


def written_probes() -> dict[str, bytes]:
    return {
        f"{name}-{where}": written_body(make(depth))
        for name, make in CONSTRUCTS.items()
        for where, depth in WRITTEN_DEPTHS.items()
    }


def _guard_check(data: bytes) -> object:
    decision = Guard().check(data, RequestContext(path=PATH))
    return [decision.action, decision.kind]


WRITTEN_ENTRY: dict[str, Callable[[bytes], object]] = {
    "fingerprint": lambda data: intent.fingerprint(data, PATH),
    "check_request": lambda data: (
        LoopBreaker(clock=lambda: 0.0).check_request("s", data, PATH).fingerprint
    ),
    "from_request": lambda data: RequestKey.from_request(data, PATH).value,
    "scan": lambda data: [scan(data).ok, scan(data).kind],
    "guard_check": _guard_check,
}


def set_mode(mode: str) -> None:
    """``c-orjson``: the C accelerator and orjson; ``py-json``: neither; and so on."""
    extension, backend = mode.split("-")
    if extension == "c" and _native._BUILT is None:
        raise SystemExit(f"mode {mode}: the C extension is not built")
    _native.set_c_extension(extension == "c")
    _json._set_backend(backend)


def _cli(data: bytes) -> object:
    try:
        source = read_bytes("probe.json", data)
    except InputError as error:
        return ["InputError", str(error)]
    # The reader keeps file formats; the dialect is what the scan of it found.
    return [type(source).__name__, scan_source(source, Settings())[0].dialect]


def _extract(data: bytes) -> object:
    found = intent.extract_intent(data)
    if found is None:
        return None
    # An intent may nest a little deeper than MAX_DEPTH (its writer allows for that).
    return intent.fingerprint_canonical(dumps(found, MAX_DEPTH + _INTENT_DEPTH_SLACK))


def _from_request(data: bytes) -> object:
    return [RequestKey.from_request(data, PATH).value, request_material(data, PATH)[:22].hex()]


ENTRY: dict[str, Callable[[bytes], object]] = {
    "fingerprint": lambda data: intent.fingerprint(data, PATH),
    "extract_intent": _extract,
    "scan": lambda data: [scan(data).ok, scan(data).kind],
    "from_request": _from_request,
    "cli": _cli,
}


def in_thread(fn: Callable[[], object], stack_kib: int) -> object:
    """``fn()`` in a new thread with ``stack_kib`` KiB of stack; its result or error."""
    threading.stack_size(stack_kib * 1024)
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(["ok", fn()])
        except BaseException as error:  # reported, not raised: the parent compares
            box.append(["raised", type(error).__name__])

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return box[0]


def main(entry: str, mode: str, stack_kib: int) -> None:
    set_mode(mode)
    if entry.startswith(WRITTEN):
        call, bodies = WRITTEN_ENTRY[entry.removeprefix(WRITTEN)], written_probes()
    else:
        call, bodies = ENTRY[entry], {name: probe.body for name, probe in probes().items()}
    for name, data in bodies.items():
        print(json.dumps({"started": name}), flush=True)
        result = in_thread(functools.partial(call, data), stack_kib)
        print(json.dumps({"probe": name, "result": result}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
