"""No body crashes a thread with a small C stack (issue 12, section 1).

Threads get 128 KiB of stack on musl (Alpine) and wherever a server calls
``threading.stack_size``. Every public entry point that takes a request body is fed
bodies nested just under, at and past ``MAX_DEPTH``, at and past the depth the standard
library's parser is trusted with (``STDLIB_SAFE_DEPTH``), and 100,000 deep -- objects,
arrays and both mixed, with and without a NaN that makes the intent untrusted (so that
the careful writer, in C when it is built, writes it) -- inside 128 KiB threads, on
every path (C accelerator on and off, orjson and the standard library).

Each (entry point, path) runs in a child process (``stack_probe.py``): a crash fails
the test, naming the probe, instead of killing the run. The child's results must be
what the main thread computes, and what the documentation promises.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import stack_probe
from conftest import json_backend
from loopfuse import intent
from loopfuse.intent import _json, _native
from loopfuse.intent._textdepth import STDLIB_SAFE_DEPTH

HERE = Path(__file__).resolve().parent
PROBES = stack_probe.probes()
MODES = [m for m in stack_probe.MODES if (_native._BUILT or not m.startswith("c-"))]
MODES = [m for m in MODES if _json._orjson is not None or not m.endswith("orjson")]
RAW_TAG = b"loopfuse.request.raw/1".hex()
STACK_KIB = 128
CHILD_TIMEOUT = 300.0  # seconds; only reached when something hangs


@contextmanager
def mode(name: str) -> Iterator[None]:
    extension, backend = name.split("-")
    previous = _native.speedups is not None
    _native.set_c_extension(extension == "c")
    try:
        with json_backend(backend):
            yield
    finally:
        _native.set_c_extension(previous)


def run_child(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        check=False,
    )


def documented(entry: str, probe: stack_probe.Probe, result: object) -> None:
    """What the documentation promises for this body, whatever the stack."""
    past = probe.family == "content" and probe.depth > intent.MAX_DEPTH
    if entry == "fingerprint":
        raw = intent.fingerprint_canonical(intent.raw_bytes(probe.body), stack_probe.PATH)
        assert (result == raw) is past  # the raw-bytes fallback, exactly when too deep
    elif entry == "extract_intent":
        assert (result is None) is (past or probe.family == "json")
    elif entry == "scan":  # four identical calls with one answer: a loop at any depth
        assert result == ([False, "repeat"] if probe.family == "arguments" else [True, None])
    elif entry == "from_request":
        assert isinstance(result, list)
        assert (result[1] == RAW_TAG) is past
    else:
        assert entry == "cli"
        if probe.family == "json":
            expected = "InputError"
        elif past and probe.depth > STDLIB_SAFE_DEPTH:
            expected = "InputError"  # "JSON nested too deeply", never parsed
        else:
            expected = "Transcript"
        assert isinstance(result, list)
        assert result[0] == expected
        assert (result[1] == "probe.json: JSON nested too deeply") is (
            past and probe.depth > STDLIB_SAFE_DEPTH
        )
        assert (result[1] == "unparsed") is (past and probe.depth <= STDLIB_SAFE_DEPTH)


@pytest.mark.parametrize("path", MODES)
@pytest.mark.parametrize("entry", stack_probe.ENTRIES)
def test_every_entry_point_in_a_128_kib_thread(entry: str, path: str) -> None:
    done = run_child("stack_probe.py", entry, path, str(STACK_KIB))
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    started = [line["started"] for line in lines if "started" in line]
    assert done.returncode == 0, (
        f"the child died ({done.returncode}) in probe {started[-1] if started else None!r}: "
        f"{done.stderr[-2000:]}"
    )
    results = {line["probe"]: line["result"] for line in lines if "probe" in line}
    assert list(results) == list(PROBES)
    call = stack_probe.ENTRY[entry]
    with mode(path):
        for name, probe in PROBES.items():
            status, result = results[name]
            assert status == "ok", (name, result)  # no entry point raises on bytes
            expected = json.loads(json.dumps(call(probe.body)))  # the main thread's
            assert result == expected, name
            documented(entry, probe, result)


@pytest.mark.parametrize("path", MODES)
@pytest.mark.parametrize("entry", stack_probe.WRITTEN_ENTRIES)
def test_calls_written_as_text_in_a_128_kib_thread(entry: str, path: str) -> None:
    """Issue 30, finding 1: smolagents' calls written as text went to ``ast.literal_eval``,
    whose parser needs ~1.8 KB of C stack per level of any construct it recurses on: ~70
    brackets (or parentheses, signs, ``not``, ``lambda``, ...) killed a 128 KiB thread.
    Now every construct, at any depth, is read in constant stack; what the child gets is
    what the main thread gets, and a literal nested within ``MAX_DEPTH`` is still a call."""
    done = run_child("stack_probe.py", stack_probe.WRITTEN + entry, path, str(STACK_KIB))
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    started = [line["started"] for line in lines if "started" in line]
    assert done.returncode == 0, (
        f"the child died ({done.returncode}) in probe {started[-1] if started else None!r}: "
        f"{done.stderr[-2000:]}"
    )
    results = {line["probe"]: line["result"] for line in lines if "probe" in line}
    bodies = stack_probe.written_probes()
    assert list(results) == list(bodies)
    call = stack_probe.WRITTEN_ENTRY[entry]
    with mode(path):
        for name, data in bodies.items():
            status, result = results[name]
            assert status == "ok", (name, result)
            assert result == json.loads(json.dumps(call(data))), name
    if entry == "scan":  # the same call four times: a loop, when it is read as a call
        for literal in ("lists", "tuples", "dicts", "mixed"):
            assert results[f"{literal}-under"] == ["ok", [False, "repeat"]], literal
            assert results[f"{literal}-70"] == ["ok", [False, "repeat"]], literal


def test_the_probes_are_what_they_say() -> None:
    """The bodies are JSON, nested as named: counted by a walk of the parsed value up to
    the depth ``json.loads`` reaches on a big stack, by their brackets past it."""
    for name, probe in PROBES.items():
        text: str | bytes = probe.body
        if probe.family == "arguments":
            value = json.loads(probe.body)
            calls = [m for m in value["messages"] if m["role"] == "assistant"]
            assert len(calls) == 4, name
            text = calls[0]["tool_calls"][0]["function"]["arguments"]
        if probe.depth <= STDLIB_SAFE_DEPTH + 1:
            assert _depth(json.loads(text)) == probe.depth, name
        else:  # every bracket of these bodies opens a level
            data = text.encode() if isinstance(text, str) else text
            assert data.count(b"[") + data.count(b"{") == probe.depth, name


def _depth(value: object) -> int:
    """How deep dicts and lists nest in ``value`` (walked without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            node = list(node.values())
        if isinstance(node, list):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in node)
    return deepest


@pytest.mark.skipif(_native._BUILT is None, reason="C extension not built")
def test_the_c_walks_use_a_constant_stack() -> None:
    """1,000 levels (the most the C functions accept) in a 32 KiB thread, the smallest
    ``threading.stack_size`` allows: a recursive walk would need several hundred KiB."""
    script = textwrap.dedent(
        """
        import threading
        from loopfuse.intent import _speedups
        value = 1
        for i in range(1000):
            value = [value] if i % 2 else {"k": value, "n": float("nan")}
        threading.stack_size(32 * 1024)
        out = []
        def run():
            out.append(_speedups.dumps(value, 1000))
            out.append(_speedups.too_deep(value, 1000))
            out.append(_speedups.too_deep(value, 999))
            out.append(_speedups.dumps(value, 999))
        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
        print(len(out[0]), out[0][:12].decode(), out[1:])
        """
    )
    done = run_child("-c", script)
    assert done.returncode == 0, done.stderr[-2000:]
    # 500 objects of 15 bytes, 500 arrays of 2 and the innermost 1
    assert done.stdout.split() == ["8501", '[{"k":[{"k":', "[False,", "True,", "None]"]
