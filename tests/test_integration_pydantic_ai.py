"""Pydantic AI agents through ``AsyncGuardTransport``: ``OpenAIProvider(http_client=...)``.

The real ``pydantic_ai`` package and the real ``openai`` SDK, with the network replaced
at the transport level by a fake OpenAI server; nothing of either package is mocked.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pydantic_ai = pytest.importorskip("pydantic_ai", reason="pydantic-ai is not installed")
httpx2 = pytest.importorskip("httpx2", reason="httpx2 is not installed")

from pydantic_ai.exceptions import ModelHTTPError  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402

from fake_openai import completion, tool_call_message  # noqa: E402
from loopfuse.integrations import loop_message  # noqa: E402
from loopfuse.integrations.httpx import AsyncGuardTransport  # noqa: E402


class Model:
    """A fake OpenAI server answering with the next call of a script (then text)."""

    def __init__(self, words: list[str], *, forever: bool = False) -> None:
        self.words = words
        self.forever = forever
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        body = json.loads(request.content)
        self.bodies.append(body)
        n = len(self.bodies)
        return httpx2.Response(200, json=completion(body["model"], n, self.message(n)))

    def message(self, n: int) -> dict[str, Any]:
        """The model's answer to the ``n``-th request."""
        if n <= len(self.words) or self.forever:
            word = self.words[min(n, len(self.words)) - 1]
            return tool_call_message(n, "lookup", {"word": word})
        return {"role": "assistant", "content": "All looked up."}


def agent(model: Model, **options: Any) -> Any:
    transport = AsyncGuardTransport(httpx2.MockTransport(model), **options)
    provider = OpenAIProvider(
        api_key="sk-test", http_client=httpx2.AsyncClient(transport=transport)
    )
    run = pydantic_ai.Agent(OpenAIChatModel("gpt-4o", provider=provider))

    @run.tool_plain
    def lookup(word: str) -> str:
        """Looks a word up in the dictionary."""
        return f"{word}: a word"

    return run


def test_a_pydantic_ai_agent_in_a_loop_is_stopped() -> None:
    model = Model(["apple"], forever=True)
    with pytest.raises(ModelHTTPError) as stopped:
        agent(model, breaker=None).run_sync("Look apple up.")  # default mode: warn
    assert stopped.value.status_code == 400
    message = loop_message(stopped.value)
    assert message is not None
    assert message.startswith("Loop detected: you called `lookup` with the same arguments")
    assert len(model.bodies) < 10
    assert any("[loopfuse]" in json.dumps(body) for body in model.bodies)  # noted first


def test_a_pydantic_ai_agent_making_progress_finishes() -> None:
    words = ["apple", "banana", "cherry", "damson", "elder"]
    model = Model(words)
    result = agent(model, breaker=None, mode="refuse").run_sync("Look these up.")
    assert result.output == "All looked up."
    assert len(model.bodies) == len(words) + 1


class Inventing(Model):
    """A fake OpenAI server whose model calls a tool that does not exist, with a new name
    and new arguments every turn."""

    def message(self, n: int) -> dict[str, Any]:
        return tool_call_message(n, f"hex_{n}", {"value": n})


def test_a_pydantic_ai_agent_calling_tools_that_do_not_exist_is_stopped() -> None:
    """Pydantic AI answers each with {"error": "Unknown tool name: 'hex_1'. ..."}."""
    model = Inventing([])
    with pytest.raises(ModelHTTPError) as stopped:  # default mode: warn
        agent(model, breaker=None).run_sync("255 in hex?")
    message = loop_message(stopped.value)
    assert message is not None
    assert "failed with the same error" in message
    answers = [m for m in model.bodies[-1]["messages"] if m["role"] == "tool"]
    assert "Unknown tool name: 'hex_1'" in answers[0]["content"]
    assert len(model.bodies) <= 6  # five calls ran; the sixth request was refused
