"""LoopfuseMiddleware in a real LangChain v1 agent (`create_agent`), driven by a scripted
chat model. The model is a fake (no network); LangChain, LangGraph and loopfuse are real."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

pytest.importorskip("langchain", reason="the langchain extra is not installed")

from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from dialect_rules import check_openai_chat
from loopfuse import ConfigError, GuardEvent
from loopfuse.detector import LoopDetected, LoopDetector
from loopfuse.integrations import MissingExtraError, _extras
from loopfuse.integrations._extras import install_command
from loopfuse.integrations.langchain import LoopfuseMiddleware


class ScriptedModel(BaseChatModel):
    """Calls ``bash`` with the command ``commands(turn)``; answers in prose once it has
    seen a loopfuse note, if ``heeds_notes``. Records every message list it was given."""

    seen: list[list[BaseMessage]] = []  # noqa: RUF012 - pydantic copies field defaults
    commands: Any = None
    heeds_notes: bool = False

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        turn = len(self.seen)
        noted = any("[loopfuse]" in str(m.content) for m in messages)
        command = self.commands(turn) if self.commands else "make"
        if command is None or (noted and self.heeds_notes):
            message = AIMessage(content=f"done after {turn} calls")
        else:
            call = {"name": "bash", "args": {"command": command}, "id": f"call_{turn}"}
            message = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=message)])


runs: list[str] = []


@tool
def bash(command: str) -> str:
    """Run a shell command."""
    runs.append(command)
    return "make: *** [all] Error 2" if command == "make" else f"ran {command}"


def agent_with(model: ScriptedModel, middleware: LoopfuseMiddleware) -> Any:
    runs.clear()
    return create_agent(model, tools=[bash], middleware=[middleware])


START = {"messages": [HumanMessage("Fix the build.")]}
LIMIT = {"recursion_limit": 60}


def test_end_stops_the_loop_with_a_message_explaining_why() -> None:
    model = ScriptedModel(seen=[])
    result = agent_with(model, LoopfuseMiddleware()).invoke(START, LIMIT)
    last = result["messages"][-1]
    assert isinstance(last, AIMessage)
    assert not last.tool_calls
    assert last.content.startswith("Loop detected: you called `bash` with the same arguments")
    calls = len(model.seen)
    assert 2 < calls < 10
    assert runs == ["make"] * calls  # stopped before the model call, after the last run


def test_error_raises_loop_detected() -> None:
    model = ScriptedModel(seen=[])
    with pytest.raises(LoopDetected) as caught:
        agent_with(model, LoopfuseMiddleware(exit_behavior="error")).invoke(START, LIMIT)
    assert caught.value.kind == "repeat"
    assert caught.value.count == len(model.seen) == len(runs)  # every call so far ran
    assert caught.value.signature.startswith("bash:")


def test_note_reaches_the_model_but_not_the_state() -> None:
    model = ScriptedModel(seen=[], heeds_notes=True)
    middleware = LoopfuseMiddleware(mode="note")
    result = agent_with(model, middleware).invoke(START, LIMIT)
    assert result["messages"][-1].content == f"done after {len(model.seen)} calls"
    note = model.seen[-1][-1]
    assert isinstance(note, HumanMessage)
    assert str(note.content).startswith("[loopfuse] Loop detected")
    assert isinstance(model.seen[-1][-2], ToolMessage)
    assert not any("[loopfuse]" in str(m.content) for m in result["messages"])
    assert middleware.last_decision is not None
    assert middleware.last_decision.kind == "repeat"


def test_warn_is_the_default_a_note_first_then_the_end() -> None:
    from langchain_core.messages import convert_to_openai_messages

    events: list[GuardEvent] = []
    model = ScriptedModel(seen=[])
    middleware = LoopfuseMiddleware(on_event=events.append)
    result = agent_with(model, middleware).invoke(START, LIMIT)
    last = result["messages"][-1]
    assert isinstance(last, AIMessage)
    assert last.content.endswith(
        "This loop went on after loopfuse's note about it, so it was stopped."
    )
    noted = [i for i, seen in enumerate(model.seen) if "[loopfuse]" in str(seen[-1].content)]
    assert noted == [len(model.seen) - 1]  # one model call saw the note: the last one
    assert isinstance(model.seen[-1][-1], HumanMessage)
    assert isinstance(model.seen[-1][-2], ToolMessage)
    check_openai_chat({"messages": convert_to_openai_messages(model.seen[-1])})
    assert not any("[loopfuse]" in str(m.content) for m in result["messages"][:-1])
    assert [(e.action, e.integration) for e in events if e.action != "request_forwarded"] == [
        ("loop_noted", "langchain"),
        ("loop_refused", "langchain"),
    ]
    assert [e.action for e in events].count("request_forwarded") == len(model.seen) - 1
    # A model that heeds the note finishes its task.
    heeding = ScriptedModel(seen=[], heeds_notes=True)
    result = agent_with(heeding, LoopfuseMiddleware()).invoke(START, LIMIT)
    assert result["messages"][-1].content == f"done after {len(heeding.seen)} calls"


def test_an_agent_making_progress_is_left_alone() -> None:
    model = ScriptedModel(seen=[], commands=lambda turn: None if turn > 12 else f"step {turn}")
    result = agent_with(model, LoopfuseMiddleware(exit_behavior="error")).invoke(START, LIMIT)
    assert result["messages"][-1].content == "done after 13 calls"
    assert len(runs) == 12


def test_async_agent() -> None:
    model = ScriptedModel(seen=[])
    agent = agent_with(model, LoopfuseMiddleware())
    result = asyncio.run(agent.ainvoke(START, LIMIT))
    assert result["messages"][-1].content.startswith("Loop detected")

    noting = ScriptedModel(seen=[], heeds_notes=True)
    agent = agent_with(noting, LoopfuseMiddleware(mode="note"))
    result = asyncio.run(agent.ainvoke(START, LIMIT))
    assert result["messages"][-1].content.startswith("done after")


def test_a_failing_guard_fails_open_or_ends_the_run_when_closed() -> None:
    class Broken:
        def scan(self, body: object) -> Any:
            raise RuntimeError("boom")

        scan_intent = scan  # the guard reads the parsed intent

    opened = LoopfuseMiddleware(detector=Broken())
    model = ScriptedModel(seen=[], commands=lambda turn: None if turn > 3 else "make")
    assert agent_with(model, opened).invoke(START, LIMIT)["messages"][-1].content == (
        "done after 4 calls"
    )
    assert opened.guard.internal_errors == 4
    closed = LoopfuseMiddleware(detector=Broken(), fail_closed=True)
    result = agent_with(ScriptedModel(seen=[]), closed).invoke(START, LIMIT)
    assert "the loop guard failed" in result["messages"][-1].content


def test_configuration() -> None:
    from loopfuse import DedupCache

    assert LoopfuseMiddleware().guard.breaker is None  # histories grow: no exact repeats
    with pytest.raises(ConfigError, match="exit_behavior"):
        LoopfuseMiddleware(exit_behavior="stop")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="mode='note'"):
        LoopfuseMiddleware(exit_behavior="note")  # type: ignore[arg-type]
    assert LoopfuseMiddleware().guard.mode == "warn"
    with pytest.raises(ConfigError, match="cache"):
        LoopfuseMiddleware(cache=DedupCache())


def test_a_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_extras, "find_spec", lambda name: None)
    with pytest.raises(MissingExtraError, match=re.escape(install_command("langchain"))):
        LoopfuseMiddleware()


class InventingModel(ScriptedModel):
    """Calls ``call(turn)`` — a ``(tool name, arguments)`` — every turn; ``None``: done."""

    call: Any = None

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        turn = len(self.seen)
        wanted = self.call(turn)
        if wanted is None:
            message = AIMessage(content=f"done after {turn} calls")
        else:
            name, arguments = wanted
            call = {"name": name, "args": arguments, "id": f"call_{turn}"}
            message = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=message)])


def _tool_answers(result: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


@pytest.mark.parametrize(
    "invent",
    [
        lambda turn: (f"hex_{turn}", {"value": turn}),  # a new name and arguments every lap
        lambda turn: ("hex", {"value": turn, "base": 16 + turn}),  # new arguments only
        lambda turn: (["hex", "to_hex", "hexify", "hex2"][turn % 4], {}),  # names in turn
    ],
    ids=["name-and-arguments", "arguments", "names"],
)
def test_a_model_calling_a_tool_that_does_not_exist_is_stopped_within_five_laps(
    invent: Any,
) -> None:
    model = InventingModel(seen=[], call=invent)
    result = agent_with(model, LoopfuseMiddleware()).invoke(START, LIMIT)  # mode: warn
    answers = _tool_answers(result)
    assert all(m.status == "error" and "is not a valid tool" in m.content for m in answers)
    assert len(answers) <= 5
    last = result["messages"][-1]
    assert isinstance(last, AIMessage)
    assert not last.tool_calls
    assert "failed with the same error" in last.content
    assert runs == []  # the one real tool was never called


def test_a_tool_message_with_status_error_is_an_error_whatever_its_text() -> None:
    from langchain_core.tools import ToolException

    @tool
    def quota(day: str, region: str) -> str:
        """Look the day's quota up."""
        raise ToolException("the quota for today is spent")  # no word of it says "error"

    quota.handle_tool_error = True  # LangChain answers with the text, status="error"
    days = ["mon", "tue", "wed", "thu", "fri", "sat", "sun", "today", "now", "later", "soon"]
    regions = ["eu", "us", "asia", "moon", "mars", "north", "south", "east", "west", "x", "y"]
    lookups = {turn: {"day": days[turn], "region": regions[turn]} for turn in range(11)}

    def run(middleware: LoopfuseMiddleware) -> dict[str, Any]:
        model = InventingModel(
            seen=[], call=lambda turn: None if turn > 10 else ("quota", lookups[turn])
        )
        return create_agent(model, tools=[quota], middleware=[middleware]).invoke(START, LIMIT)

    stopped = run(LoopfuseMiddleware())
    answers = _tool_answers(stopped)
    assert answers[0].status == "error"
    assert len(answers) <= 5
    assert "failed with the same error" in stopped["messages"][-1].content
    # the status is the only evidence: without reading flags the run goes on to its end
    unflagged = run(LoopfuseMiddleware(detector=LoopDetector(error_flags=False)))
    assert unflagged["messages"][-1].content == "done after 11 calls"


def test_the_error_status_reaches_the_detector_as_is_error() -> None:
    middleware = LoopfuseMiddleware(mode="note")
    messages = [
        HumanMessage("go"),
        AIMessage(content="", tool_calls=[{"name": "a", "args": {}, "id": "c1"}]),
        ToolMessage("fine", tool_call_id="c1"),
        AIMessage(content="", tool_calls=[{"name": "a", "args": {"n": 2}, "id": "c2"}]),
        ToolMessage("spent", tool_call_id="c2", status="error"),
    ]
    body, _ = middleware._body(messages, None)  # type: ignore[misc]
    tools = [m for m in body["messages"] if m["role"] == "tool"]
    assert [m.get("is_error") for m in tools] == [None, True]
    check_openai_chat(
        {"messages": [{k: v for k, v in m.items() if k != "is_error"} for m in body["messages"]]}
    )


# --- a LangGraph graph of your own: the model guarded in one line ---------------------


def own_graph(model: Any) -> Any:
    """A hand-written ReAct graph: the agent node calls ``model``, ToolNode runs bash."""
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    async def aagent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    from langchain_core.runnables import RunnableLambda

    graph = StateGraph(MessagesState)
    graph.add_node("agent", RunnableLambda(agent, afunc=aagent))
    graph.add_node("tools", ToolNode([bash]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "agent")
    runs.clear()
    return graph.compile()


def test_a_graph_of_your_own_is_guarded_by_one_line_a_note_then_the_end() -> None:
    scripted = ScriptedModel(seen=[])
    model = LoopfuseMiddleware().guarded(scripted.bind_tools([bash]))
    result = own_graph(model).invoke(START, LIMIT)
    last = result["messages"][-1]
    assert isinstance(last, AIMessage)
    assert not last.tool_calls
    assert last.content.endswith("so it was stopped.")
    noted = [seen for seen in scripted.seen if "[loopfuse]" in str(seen[-1].content)]
    assert len(noted) == 1  # the warn default: one call with a note, then the end
    assert noted[0] is scripted.seen[-1]
    assert runs == ["make"] * len(scripted.seen)
    assert not any("[loopfuse]" in str(m.content) for m in result["messages"][:-1])


def test_a_graph_of_your_own_async_and_with_error() -> None:
    scripted = ScriptedModel(seen=[])
    model = LoopfuseMiddleware(exit_behavior="error", mode="refuse").guarded(scripted)
    with pytest.raises(LoopDetected) as caught:
        asyncio.run(own_graph(model).ainvoke(START, LIMIT))
    assert caught.value.kind == "repeat"
    assert caught.value.count == len(scripted.seen) == len(runs)


def test_a_guarded_model_takes_what_the_model_takes() -> None:
    scripted = ScriptedModel(seen=[], commands=lambda turn: None)
    model = LoopfuseMiddleware().guarded(scripted)
    assert model.invoke("hi").content == "done after 1 calls"
    assert model.invoke([("user", "hi")]).content == "done after 2 calls"
    assert isinstance(scripted.seen[0][0], HumanMessage)


def test_a_chat_models_http_client_is_guarded_by_the_transport() -> None:
    """A chat model on the OpenAI SDK (langchain-openai's ChatOpenAI) takes an
    ``http_client``: GuardTransport under it refuses the loop the model's requests carry."""
    langchain_openai = pytest.importorskip("langchain_openai", reason="not installed")
    httpx2 = pytest.importorskip("httpx2")
    import json

    from fake_openai import completion, tool_call_message
    from loopfuse.integrations.httpx import GuardTransport

    sent: list[dict[str, Any]] = []

    def upstream(request: Any) -> Any:
        body = json.loads(request.content)
        sent.append(body)
        message = tool_call_message(len(sent), "bash", {"command": "make"})
        return httpx2.Response(200, json=completion(body["model"], len(sent), message))

    transport = GuardTransport(httpx2.MockTransport(upstream), breaker=None)
    chat = langchain_openai.ChatOpenAI(
        model="gpt-4o",
        api_key="sk-test",
        max_retries=0,
        http_client=httpx2.Client(transport=transport),
    )
    import openai

    with pytest.raises(openai.BadRequestError) as caught:
        create_agent(chat, tools=[bash]).invoke(START, LIMIT)
    assert caught.value.response.headers["x-loopfuse-refused"] == "repeat"
    assert "[loopfuse]" in json.dumps(sent[-1]["messages"][-1])  # noted first
