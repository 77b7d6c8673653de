"""LoopfuseRunHooks with the real OpenAI Agents SDK `Runner` and a scripted `Model`
(no network): the run ends in LoopDetected before the looping model call."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

agents = pytest.importorskip("agents", reason="the openai-agents extra is not installed")

from agents import Agent, RunConfig, Runner, function_tool  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import (  # noqa: E402
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from dialect_rules import check_responses  # noqa: E402
from loopfuse import ConfigError, DedupCache  # noqa: E402
from loopfuse.detector import LoopDetected  # noqa: E402
from loopfuse.integrations import MissingExtraError, _extras  # noqa: E402
from loopfuse.integrations._extras import install_command  # noqa: E402
from loopfuse.integrations.openai_agents import LoopfuseRunHooks, _plain  # noqa: E402

NO_TRACING = RunConfig(tracing_disabled=True)


class ScriptedModel(Model):
    """Calls ``bash`` with ``commands(turn)``; ``None`` means: answer in prose and stop."""

    def __init__(self, commands: Any = None) -> None:
        self.commands = commands or (lambda turn: "make")
        self.inputs: list[Any] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kw: Any
    ) -> Any:
        self.inputs.append(input)
        turn = len(self.inputs)
        command = self.commands(turn)
        if command is None:
            text = ResponseOutputText(type="output_text", text=f"done after {turn}", annotations=[])
            output: Any = ResponseOutputMessage(
                type="message", id=f"m{turn}", role="assistant", status="completed", content=[text]
            )
        else:
            output = ResponseFunctionToolCall(
                type="function_call",
                id=f"fc_{turn}",
                call_id=f"call_{turn}",
                name="bash",
                arguments=f'{{"command": "{command}"}}',
                status="completed",
            )
        return ModelResponse(output=[output], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


runs: list[str] = []


@function_tool
def bash(command: str) -> str:
    """Run a shell command."""
    runs.append(command)
    return "make: *** [all] Error 2" if command == "make" else f"ran {command}"


def run(model: ScriptedModel, hooks: LoopfuseRunHooks) -> Any:
    runs.clear()
    agent = Agent(name="builder", instructions="Fix builds.", model=model, tools=[bash])
    return asyncio.run(
        Runner.run(agent, "Fix the build.", hooks=hooks, max_turns=40, run_config=NO_TRACING)
    )


def test_a_looping_run_ends_in_loop_detected_before_the_next_model_call() -> None:
    model = ScriptedModel()
    hooks = LoopfuseRunHooks()
    with pytest.raises(LoopDetected) as caught:
        run(model, hooks)
    err = caught.value
    assert err.kind == "repeat"
    assert err.signature.startswith("bash:")
    assert err.message.startswith("Loop detected: you called `bash` with the same arguments")
    assert err.count == len(model.inputs) == len(runs)  # every call so far ran; no more
    assert len(model.inputs) > 2
    assert hooks.last_decision is not None
    assert hooks.last_decision.count == err.count


def test_a_run_making_progress_finishes() -> None:
    model = ScriptedModel(lambda turn: None if turn > 10 else f"step {turn}")
    result = run(model, LoopfuseRunHooks())
    assert result.final_output == "done after 11"
    assert len(runs) == 10


def test_a_failing_guard_fails_open_or_stops_the_run_when_closed() -> None:
    class Broken:
        def scan(self, body: object) -> Any:
            raise RuntimeError("boom")

        scan_intent = scan  # the guard reads the parsed intent

    model = ScriptedModel(lambda turn: None if turn > 6 else "make")
    hooks = LoopfuseRunHooks(detector=Broken())
    assert run(model, hooks).final_output == "done after 7"
    assert hooks.guard.internal_errors == 7
    with pytest.raises(LoopDetected) as caught:
        run(ScriptedModel(), LoopfuseRunHooks(detector=Broken(), fail_closed=True))
    assert caught.value.kind == "guard_failed"

    def resolver(context: Any, agent: Any) -> str:
        raise LookupError("no session")

    model = ScriptedModel(lambda turn: None if turn > 6 else "make")
    assert run(model, LoopfuseRunHooks(session_id=resolver)).final_output == "done after 7"


def test_warn_notes_through_the_input_filter_then_stops() -> None:
    model = ScriptedModel()
    hooks = LoopfuseRunHooks(mode="warn")
    runs.clear()
    agent = Agent(name="builder", instructions="Fix builds.", model=model, tools=[bash])
    config = RunConfig(tracing_disabled=True, call_model_input_filter=hooks.input_filter)
    with pytest.raises(LoopDetected) as caught:
        asyncio.run(
            Runner.run(agent, "Fix the build.", hooks=hooks, max_turns=40, run_config=config)
        )
    assert str(caught.value).endswith("so it was stopped.")
    seen = [json.dumps([_plain(item) for item in items]) for items in model.inputs]
    noted = [i for i, items in enumerate(seen) if "[loopfuse]" in items]
    assert noted == [len(model.inputs) - 1]  # the last model call had the note
    last = [_plain(item) for item in model.inputs[-1]]
    assert last[-1]["role"] == "user"
    assert last[-1]["content"].startswith("[loopfuse] Loop detected")
    check_responses({"input": last, "instructions": "Fix builds."})


def test_notes_without_the_input_filter_are_a_clear_error() -> None:
    with pytest.raises(ConfigError, match=r"call_model_input_filter=hooks\.input_filter"):
        run(ScriptedModel(), LoopfuseRunHooks(mode="warn"))


def test_configuration() -> None:
    with pytest.raises(ConfigError, match="cache"):
        LoopfuseRunHooks(cache=DedupCache())
    assert LoopfuseRunHooks().guard.mode == "refuse"  # hooks alone cannot add a note
    assert LoopfuseRunHooks().guard.breaker is None


def test_a_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_extras, "find_spec", lambda name: None)
    with pytest.raises(MissingExtraError, match=re.escape(install_command("openai-agents"))):
        LoopfuseRunHooks()


class InventingModel(ScriptedModel):
    """Calls a tool that does not exist, with a new name and new arguments every turn."""

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kw: Any
    ) -> Any:
        self.inputs.append(input)
        turn = len(self.inputs)
        output = ResponseFunctionToolCall(
            type="function_call",
            id=f"fc_{turn}",
            call_id=f"call_{turn}",
            name=f"hex_{turn}",
            arguments=json.dumps({"value": turn}),
            status="completed",
        )
        return ModelResponse(output=[output], usage=Usage(), response_id=None)


def test_a_model_calling_tools_that_do_not_exist_is_stopped_within_five_laps() -> None:
    """The SDK answers an unknown tool with "Tool 'hex_1' not found." (no word of error)."""
    model = InventingModel()
    agent = Agent(name="converter", instructions="Convert.", model=model, tools=[bash])
    config = RunConfig(tracing_disabled=True, tool_not_found_behavior="return_error_to_model")
    with pytest.raises(LoopDetected) as caught:
        asyncio.run(
            Runner.run(
                agent, "255 in hex?", hooks=LoopfuseRunHooks(), max_turns=30, run_config=config
            )
        )
    assert caught.value.kind == "error_streak"
    answers = [
        item["output"]
        for item in model.inputs[-1]
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    assert answers[0] == "Tool 'hex_1' not found."
    assert len(answers) <= 5
