"""A note belongs to the run it was written for (warn mode, no session).

Two runs of one agent on one prompt loop the same way. Each must get its own note
before it is refused, and a refusal must never say the loop "went on after loopfuse's
note" to a run that was never sent one. Through the real ``openai`` SDK and
``GuardTransport`` (the network replaced at the transport level), and ``Guard.check`` on
a dialect without call ids.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

openai = pytest.importorskip("openai", reason="the openai extra is not installed")
httpx2 = pytest.importorskip("httpx2", reason="httpx2 is not installed")

from loopfuse import Guard  # noqa: E402
from loopfuse.integrations.httpx import GuardTransport  # noqa: E402

IGNORED = "went on after loopfuse's note"
_ids = itertools.count(1)
NOTED: dict[str, int] = {}


def upstream(request: Any) -> Any:
    """A model stuck on one failing command; every call gets a fresh id, as providers do.
    Counts, per run (``x-run``), the requests that reached it with a note."""
    body = json.loads(request.content)
    if "[loopfuse]" in json.dumps(body["messages"][-1]):
        run = request.headers["x-run"]
        NOTED[run] = NOTED.get(run, 0) + 1
    call = {"name": "bash", "arguments": '{"command": "make"}'}
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": f"call_{next(_ids)}", "type": "function", "function": call}],
    }
    completion = {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": body["model"],
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
    }
    return httpx2.Response(200, json=completion)


class Run:
    """One agent run: its own conversation, the same prompt as every other run."""

    def __init__(self, client: Any) -> None:
        self.name = f"run-{next(_ids)}"
        self.client = client.with_options(default_headers={"x-run": self.name})
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]

    @property
    def noted(self) -> int:
        return NOTED.get(self.name, 0)

    def lap(self) -> None:
        completion = self.client.chat.completions.create(model="gpt-4o", messages=self.messages)
        message = completion.choices[0].message
        self.messages.append(message.model_dump(exclude_none=True))
        call = message.tool_calls[0]
        self.messages.append({"role": "tool", "tool_call_id": call.id, "content": "Error 2"})

    def until_refused(self, most: int = 12) -> str:
        for _ in range(most):
            try:
                self.lap()
            except openai.BadRequestError as refused:
                return str(refused.message)
        raise AssertionError("never refused")


def test_two_runs_of_one_prompt_each_get_their_own_note_first() -> None:
    transport = GuardTransport(httpx2.MockTransport(upstream), breaker=None)  # mode: warn
    client = openai.OpenAI(
        api_key="sk-test", max_retries=0, http_client=httpx2.Client(transport=transport)
    )
    first, second = Run(client), Run(client)
    refusal = first.until_refused()
    assert first.noted == 1
    assert IGNORED in refusal
    # The second run loops on the same call with the same answer, with no session.
    refusal = second.until_refused()
    assert second.noted == 1, "the second run was refused without a note of its own"
    assert IGNORED in refusal


def test_interleaved_runs_are_told_apart() -> None:
    transport = GuardTransport(httpx2.MockTransport(upstream), breaker=None)
    client = openai.OpenAI(
        api_key="sk-test", max_retries=0, http_client=httpx2.Client(transport=transport)
    )
    runs = [Run(client) for _ in range(3)]
    refusals: dict[int, str] = {}
    for _ in range(12):
        for number, run in enumerate(runs):
            if number in refusals:
                continue
            try:
                run.lap()
            except openai.BadRequestError as refused:
                refusals[number] = str(refused.message)
    assert sorted(refusals) == [0, 1, 2]
    assert [run.noted for run in runs] == [1, 1, 1]


def ollama(answers: list[str]) -> dict[str, Any]:
    """An Ollama body (no call ids): the same call, with these answers."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the build."}]
    call = {"function": {"name": "bash", "arguments": {"command": "make"}}}
    for answer in answers:
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append({"role": "tool", "content": answer})
    return {"model": "llama3", "messages": messages, "options": {"temperature": 0}}


def test_without_call_ids_a_run_is_known_by_its_history() -> None:
    guard = Guard(breaker=None, mode="warn")
    fresh = Guard(breaker=None)
    laps = next(n for n in range(1, 9) if fresh.check(ollama(["Error 2"] * n)).action != "forward")
    stuck = ["Error 2"] * laps
    assert guard.check(ollama(stuck)).action == "note"
    assert guard.check(ollama([*stuck, "Error 2"])).action == "refuse"
    # Another run that reached the same loop by another way: a note of its own first.
    other = ["building", *stuck]
    assert guard.check(ollama(other)).action == "note"
    refused = guard.check(ollama([*other, "Error 2"]))
    assert refused.action == "refuse"
    assert refused.message is not None
    assert IGNORED in refused.message
