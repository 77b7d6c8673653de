"""Cost of the guard's decision on one request, as ratios to ``json.loads``.

Run: ``python benchmarks/bench_guard.py [--rounds 15]`` (``--rounds 1``: a smoke run, its
figures noise). Every figure is measured in this run on this machine, round-robin
(``timing.py``); the baseline is ``json.loads`` of the same ~50 KB agent request
(``bodies.py``: system prompt, 20 tool turns, 15 tools, OpenAI Chat).

Rows: the guard with nothing on (the parse and the bookkeeping alone); the breaker alone,
a fresh session per request so that it never trips (the decision the issue's "1.42x"
means: target <= 1.3x, issue 19); the default guard (breaker and detector), without a
session and with a fresh one (and, no session, with ``note_early=False``: ``warn``'s note
where ``refuse`` refuses, so the detector scans with its own counts instead of the early
detector's: the cost of the early note); the same through ``GuardTransport`` on a mock transport;
and, for reference, the parse alone and the detector's ``scan_intent`` on an intent
parsed once and on one parsed afresh each time (what the guard does: see the last rows).
With ``on_event`` set, every decision builds one event; without, none is built.
Not a test: nothing here fails on a slow machine.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Callable

import httpx2

from bodies import agent_request_bytes
from loopfuse import Guard, RequestContext, intent
from loopfuse.dedup.request import IGNORED_PARAMS
from loopfuse.detector import LoopDetector
from loopfuse.integrations.httpx import GuardTransport
from timing import add_rounds, interleaved, report

PATH = "/v1/chat/completions"


def fresh_contexts() -> Callable[[], RequestContext]:
    """A new session per call, so that the breaker counts every request and never trips."""
    numbers = itertools.count()
    return lambda: RequestContext(path=PATH, session_id=f"run-{next(numbers)}")


def transport_requests(body: bytes) -> tuple[Callable[[], object], Callable[[], object]]:
    """One request (no session: the breaker counts none) through ``GuardTransport`` (the
    default guard) on a mock transport, and the same request to the mock alone."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json={"choices": [{"message": {"content": "ok"}}]})

    mock = httpx2.MockTransport(answer)
    transport = GuardTransport(mock, mode="refuse")
    url = "https://api.example/v1/chat/completions"
    headers = {"content-type": "application/json"}
    request = httpx2.Request("POST", url, content=body, headers=headers)
    return (lambda: transport.handle_request(request)), (lambda: mock.handle_request(request))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_rounds(parser)
    rounds = parser.parse_args(argv).rounds
    body = agent_request_bytes()
    print(f"python {sys.version.split()[0]}; body: {len(body):,} bytes; JSON backend: "
          f"{intent.json_backend()}")  # fmt: skip
    bare = Guard(breaker=None, detector=None)
    breaker_only = Guard(detector=None)
    default = Guard()
    late = Guard(note_early=False)  # warn's note where refuse refuses (before issue 27)
    watched = Guard(detector=None, on_event=lambda event: None)
    detector = LoopDetector()
    held = intent.analyse(body, ignore=IGNORED_PARAMS).parsed_intent
    plain = RequestContext(path=PATH)
    fresh, fresh_default, fresh_watched = fresh_contexts(), fresh_contexts(), fresh_contexts()
    guarded, unguarded = transport_requests(body)
    candidates: dict[str, Callable[[], object]] = {
        "json.loads (baseline)": lambda: json.loads(body),
        "Guard(breaker=None, detector=None).check": lambda: bare.check(body, plain),
        "Guard(detector=None).check, fresh session": lambda: breaker_only.check(body, fresh()),
        "  same, on_event set (one event a request)": lambda: watched.check(body, fresh_watched()),
        "Guard().check, no session": lambda: default.check(body, plain),
        "Guard().check, fresh session": lambda: default.check(body, fresh_default()),
        "  Guard(note_early=False).check, no session": lambda: late.check(body, plain),
        "GuardTransport(mock), no session": guarded,
        "  the mock transport alone (reference)": unguarded,
        "intent.analyse (reference: the one parse)": lambda: intent.analyse(
            body, ignore=IGNORED_PARAMS
        ),
        "scan_intent, an intent parsed once": lambda: detector.scan_intent(held),
        "analyse + scan_intent, parsed afresh": lambda: detector.scan_intent(
            intent.analyse(body, ignore=IGNORED_PARAMS).parsed_intent
        ),
    }
    report(interleaved(candidates, number=50, rounds=rounds), "json.loads (baseline)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
