"""A looping agent, replayed against LoopBreaker: where would loopfuse have stopped it?

Run: ``python examples/quickstart.py``. The agent below re-sends the same request (a
retry storm after a tool error) while a healthy agent makes progress beside it. The
breaker refuses the looping one at its 6th identical request inside 30 s and never
touches the healthy one. Time is a fake clock: the script runs instantly.
"""

from __future__ import annotations

import json

from loopfuse import LoopBreaker, intent


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def request(user_text: str, attempt: int) -> bytes:
    """The body an OpenAI-style client sends; ids and temperature vary per attempt."""
    return json.dumps(
        {
            "model": "gpt-4o",
            "temperature": 0.1 * attempt,  # volatile: not part of the intent
            "user": f"trace-{attempt}",  # volatile too
            "messages": [
                {"role": "system", "content": "You are a build agent."},
                {"role": "user", "content": user_text},
            ],
        }
    ).encode()


def main() -> int:
    clock = FakeClock()
    breaker = LoopBreaker(window=30, max_repeats=5, clock=clock)
    stopped_at = None
    healthy_refused = 0
    for step in range(1, 11):
        clock.now += 2.0  # one request every two seconds
        looping = breaker.check_request("looping-agent", request("Run the build again.", step))
        healthy = breaker.check_request("healthy-agent", request(f"Now fix file {step}.", step))
        healthy_refused += not healthy.allowed
        verdict = "allowed" if looping.allowed else "REFUSED"
        print(f"t={clock.now:4.0f}s  looping agent request {step:2d}: {verdict} "
              f"(seen {looping.repeats}x in window)")  # fmt: skip
        if not looping.allowed and stopped_at is None:
            stopped_at = step
            print(f"          -> {looping.message}")
    fp = intent.fingerprint(request("Run the build again.", 1), "/v1/chat/completions")
    print(f"\nintent fingerprint of the looping request: {fp:#018x}")
    print(
        f"looping agent stopped at request {stopped_at}; healthy agent refused {healthy_refused}x"
    )
    # The example is also a check: exit non-zero if the guard misbehaved.
    return 0 if stopped_at == 6 and healthy_refused == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
