"""smolagents' ``ToolCallingAgent`` through ``GuardTransport``: its history is text.

smolagents writes the calls it made into the conversation as prose (``Calling tools:
[{'id': ..., 'function': {...}}]`` from the assistant, ``Observation: ...`` or ``Call id:
...\\nError: ...`` from the user), so a body it sends holds no ``tool_calls`` at all.
``loopfuse.intent`` reads those turns as calls and answers; these tests run the real
smolagents package against a fake OpenAI server behind the real ``openai`` SDK, with
the network replaced at the transport level, and nothing of either package mocked.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

smolagents = pytest.importorskip("smolagents", reason="smolagents is not installed")
openai = pytest.importorskip("openai", reason="the openai extra is not installed")
httpx2 = pytest.importorskip("httpx2", reason="httpx2 is not installed")

from fake_openai import completion, tool_call_message  # noqa: E402
from loopfuse import scan  # noqa: E402
from loopfuse.integrations import loop_message  # noqa: E402
from loopfuse.integrations.httpx import GuardTransport  # noqa: E402
from written_bodies import native_body  # noqa: E402


class Model:
    """A fake OpenAI server: each request is answered with the next tool call of a script
    (the last one again and again when the script runs out), and recorded."""

    def __init__(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        self.calls = calls
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        body = json.loads(request.content)
        self.bodies.append(body)
        n = len(self.bodies)
        name, arguments = self.calls[min(n, len(self.calls)) - 1]
        message = tool_call_message(n, name, arguments)
        return httpx2.Response(200, json=completion(body["model"], n, message))


def refusal(error: BaseException) -> str:
    """The refusal loopfuse sent, read off the SDK error smolagents wraps (``from e``):
    what loopfuse wrote, never smolagents' own wording of the wrapper."""
    cause: BaseException | None = error
    while cause is not None:
        message = loop_message(cause)
        if message is not None:
            return message
        cause = cause.__cause__
    raise AssertionError(f"no loopfuse refusal behind {error!r}")


@smolagents.tool
def lookup(word: str) -> str:
    """Looks a word up in the dictionary.

    Args:
        word: the word to look up.
    """
    return f"{word}: a word ({len(word)} letters)"


def agent(model: Model, guarded: bool = True, **options: Any) -> Any:
    transport = httpx2.MockTransport(model)
    if guarded:
        transport = GuardTransport(transport, **options)
    llm = smolagents.OpenAIModel(
        model_id="gpt-4o",
        api_key="sk-test",
        client_kwargs={"http_client": httpx2.Client(transport=transport), "max_retries": 0},
    )
    return smolagents.ToolCallingAgent(tools=[lookup], model=llm, max_steps=12, verbosity_level=0)


def test_a_smolagents_loop_on_a_tool_that_does_not_exist_is_stopped() -> None:
    """The model calls ``hex`` (not a tool) again and again: twelve laps went by unseen
    when the history was read as user turns; now the guard notes it, then refuses."""
    model = Model([("hex", {"value": "255"})])
    run = agent(model, breaker=None)  # default mode: warn, then refuse
    with pytest.raises(smolagents.utils.AgentGenerationError) as stopped:
        run.run("Convert 255 to hex.")
    assert refusal(stopped.value).startswith("Loop detected: you called `hex`")
    assert "went on after loopfuse's note" in refusal(stopped.value)
    assert len(model.bodies) < 6  # stopped within five laps, not after twelve
    # The note reached the model before the refusal (warn mode).
    noted = [body for body in model.bodies if "[loopfuse]" in json.dumps(body)]
    assert noted
    # smolagents keeps no call for a failed step, only its error, in a user turn: the
    # calls were read from that text (the body holds no native tool calls).
    last = model.bodies[-1]
    assert not any(m.get("tool_calls") for m in last["messages"])
    assert json.dumps(last).count("Unknown tool hex") >= 3


def test_a_smolagents_loop_on_a_tool_that_answers_the_same_is_stopped() -> None:
    """A call that succeeds with the same answer every lap: written as ``Calling tools:``
    and ``Observation:`` turns."""
    model = Model([("lookup", {"word": "apple"})])
    run = agent(model, breaker=None)
    with pytest.raises(smolagents.utils.AgentGenerationError) as stopped:
        run.run("Look apple up.")
    assert refusal(stopped.value).startswith("Loop detected: you called `lookup`")
    assert len(model.bodies) < 8  # a healthy answer gets more laps than an error
    assert any("Calling tools:" in json.dumps(m) for m in model.bodies[-1]["messages"])


@pytest.mark.parametrize(
    ("call", "kind"),
    [(("hex", {"value": "255"}), "repeat"), (("lookup", {"word": "apple"}), "repeat")],
)
def test_text_written_laps_are_judged_as_native_tool_calls(
    call: tuple[str, dict[str, Any]], kind: str
) -> None:
    """An unguarded run's bodies, replayed: ``scan`` flags the same lap as it does for the
    same conversation written with native tool calls (the oracle: that conversation)."""
    model = Model([call])
    agent(model, guarded=False).run("Do it.")
    steps = model.bodies[:12]  # then smolagents' own summary call, a new user turn
    flagged = [n for n, body in enumerate(steps) if not scan(body).ok]
    assert flagged, "the loop was never seen"
    assert scan(steps[flagged[0]]).kind == kind
    native = [native_body(body) for body in steps]
    assert [n for n, body in enumerate(native) if not scan(body).ok] == flagged
