"""LangChain v1 agents: :class:`LoopfuseMiddleware` for ``langchain.agents.create_agent``.

Before each model call the middleware reads the agent's conversation (``AIMessage`` tool
calls, ``ToolMessage`` results, ``HumanMessage`` turns), converts it with LangChain's own
``convert_to_openai_messages`` and runs the same :class:`~loopfuse.Guard`
as every other integration (by default: the loop detector, no breaker, since an agent's
history grows with every turn and so never repeats a request word for word). When the
conversation ends in a loop, ``mode`` decides (default ``"warn"``): the first time, the
model is called with a note for it appended to *this* call's messages (never to the
agent's state); if the same loop goes on after the note, the run is stopped.
``mode="refuse"`` stops at once, ``mode="note"`` only ever notes. ``exit_behavior``
decides how a run stops:

- ``"end"`` (default): the model is not called; the run ends with an ``AIMessage``
  explaining why;
- ``"error"``: raise :class:`loopfuse.detector.LoopDetected` (``kind``, ``count``,
  ``signature``, ``tool_names``, and a ``message`` written for the model).

>>> from loopfuse.integrations.langchain import LoopfuseMiddleware
>>> from langchain.agents import create_agent  # doctest: +SKIP
>>> guarded = [LoopfuseMiddleware(exit_behavior="end")]  # doctest: +SKIP
>>> agent = create_agent("openai:gpt-5", tools=tools, middleware=guarded)  # doctest: +SKIP

A graph of your own (LangGraph ``StateGraph``, no ``create_agent``) calls its chat model
itself: :meth:`LoopfuseMiddleware.guarded` is the model checked the same way, one line
(``model = LoopfuseMiddleware().guarded(chat_model.bind_tools(tools))``). A chat model
on an OpenAI or Anthropic client can also be guarded at the HTTP level: its
``http_client`` on :class:`~loopfuse.integrations.httpx.GuardTransport`.

Without the extra the module still imports; creating the middleware raises
:class:`~loopfuse.integrations.MissingExtraError` naming ``pip install '.[langchain]'``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

from loopfuse.detector import LoopDetected
from loopfuse.errors import ConfigError
from loopfuse.guard import Guard, GuardDecision, RequestContext
from loopfuse.guard.guard import GuardOptions, GuardSettings, build_guard
from loopfuse.integrations._extras import require, stand_in

if TYPE_CHECKING:
    from langchain.agents.middleware import (  # noqa: F401  # AgentState: in the base class
        AgentMiddleware,
        AgentState,
        ModelRequest,
    )
    from langchain.agents.middleware.types import ModelCallResult, ModelResponse
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import Runnable, RunnableConfig
    from typing_extensions import Unpack
else:
    try:
        from langchain.agents.middleware import AgentMiddleware
    except ImportError:  # the class below still defines; creating one says what to install
        AgentMiddleware = stand_in("AgentMiddleware", package="langchain", extra="langchain")

__all__ = ["DEFAULT_MODE", "ExitBehavior", "LoopfuseMiddleware"]

ExitBehavior = Literal["end", "error"]
_EXIT_BEHAVIORS: Final = ("end", "error")

DEFAULT_MODE: Final = GuardSettings().mode  # the one default (warn), read, not repeated
"""The middleware's default ``mode``: a note first, a stop when the loop goes on. An
agent that heeds the note finishes its task; one that does not is stopped one model call
later than with ``"refuse"``. The note never enters the agent's state."""


class LoopfuseMiddleware(AgentMiddleware["AgentState[Any]", Any, Any]):
    """Stops a LangChain v1 agent whose conversation ends in a tool-call loop.

    Args:
        guard: a :class:`~loopfuse.Guard` to share; or leave it out and pass
            its options (``detector``, ``breaker``, ``mode`` (default ``"warn"``),
            ``fail_closed``, ``on_event``) here. Without a ``guard``, ``breaker``
            defaults to ``None``; a breaker, when given, counts per LangGraph
            ``thread_id``. There is no ``cache`` here: answers are cached at the HTTP
            level (:mod:`loopfuse.integrations.httpx`).
        exit_behavior: how a run stops, ``"end"`` or ``"error"`` (see the module docs).

    ``last_decision`` is the guard's decision of the latest check that found a loop
    (its ``loop`` says which).
    """

    def __init__(
        self,
        guard: Guard | None = None,
        *,
        exit_behavior: ExitBehavior = "end",
        **options: Unpack[GuardOptions],
    ) -> None:
        require("langchain", extra="langchain", what="LoopfuseMiddleware")
        super().__init__()
        if exit_behavior == "note":  # type: ignore[comparison-overlap]  # the former API
            raise ConfigError("exit_behavior='note' is now mode='note' (or the default 'warn')")
        if exit_behavior not in _EXIT_BEHAVIORS:
            raise ConfigError(f"exit_behavior must be 'end' or 'error', not {exit_behavior!r}")
        if options.get("cache") is not None:
            raise ConfigError(
                "LoopfuseMiddleware does not cache answers: put the cache on the model's "
                "HTTP client (loopfuse.integrations.httpx.GuardTransport)"
            )
        if guard is None:
            options.setdefault("breaker", None)
        self.guard = build_guard(guard, options)
        self.exit_behavior: ExitBehavior = exit_behavior
        self.last_decision: GuardDecision | None = None

    def check(self, messages: Sequence[Any], session_id: str | None = None) -> GuardDecision | None:
        """The guard's decision on a conversation of LangChain messages when it found a
        loop (or failed closed); ``None`` when the agent may go on. Each call counts as
        one model call: in ``"warn"`` mode a second look at the same loop refuses it."""
        asked = self._body(messages, session_id)
        if isinstance(asked, GuardDecision):
            return self._seen(asked)
        body, session = asked
        return self._seen(self.guard.check(body, _context(session)))

    async def acheck(
        self, messages: Sequence[Any], session_id: str | None = None
    ) -> GuardDecision | None:
        """:meth:`check` for async agents: the breaker's store is awaited."""
        asked = self._body(messages, session_id)
        if isinstance(asked, GuardDecision):
            return self._seen(asked)
        body, session = asked
        return self._seen(await self.guard.acheck(body, _context(session)))

    def _body(
        self, messages: Sequence[Any], session_id: str | None
    ) -> tuple[dict[str, Any], str | None] | GuardDecision:
        from langchain_core.messages import convert_to_openai_messages

        try:
            listed = list(messages)
            converted = convert_to_openai_messages(listed)
            _carry_error_status(listed, converted)
            body = {"messages": converted}
        except Exception as exc:  # a message LangChain cannot convert: fail open (or closed)
            return self.guard.failure(exc, _IN_LANGCHAIN)
        return body, _thread_id() if session_id is None else session_id

    def _seen(self, decision: GuardDecision) -> GuardDecision | None:
        if decision.action == "forward":
            return None
        self.last_decision = decision
        return decision

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelCallResult[Any]:
        """Call the model (with a note, when the conversation loops), or stop the run."""
        decision = self.check(request.messages)
        if decision is None:
            return handler(request)
        if decision.refused:
            return self._stop(decision)
        return handler(_noted(request, decision))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult[Any]:
        """:meth:`wrap_model_call` for async agents (a shared store is awaited)."""
        decision = await self.acheck(request.messages)
        if decision is None:
            return await handler(request)
        if decision.refused:
            return self._stop(decision)
        return await handler(_noted(request, decision))

    def guarded(self, model: Runnable[Any, Any]) -> Runnable[Any, Any]:
        """``model``, checked before each call as the middleware checks an agent's: for a
        LangGraph graph of your own, which calls its chat model itself.

        ``model`` is a chat model, or one with its tools bound (``bind_tools``); the
        result is a ``Runnable`` taking what the model takes (a list of messages, a
        prompt value, a string), sync and async. A loop is noted in what the model is sent
        (never in the graph's state); when it goes on, the model is not called and the
        result is an ``AIMessage`` explaining why (no tool calls, so a
        ``tools_condition`` edge ends the run), or :class:`~loopfuse.detector.LoopDetected`
        is raised with ``exit_behavior="error"``. The breaker, when given, counts per
        LangGraph ``thread_id``.

        >>> from loopfuse.integrations.langchain import LoopfuseMiddleware
        >>> model = LoopfuseMiddleware().guarded(chat_model.bind_tools(tools))  # doctest: +SKIP
        """
        from langchain_core.runnables import RunnableLambda

        def call(value: Any, config: RunnableConfig) -> Any:
            messages = _messages_of(value)
            decision = self.check(messages)
            if decision is None:
                return model.invoke(value, config)
            if decision.refused:
                return self._stop(decision)
            return model.invoke(_with_note(messages, decision), config)

        async def acall(value: Any, config: RunnableConfig) -> Any:
            messages = _messages_of(value)
            decision = await self.acheck(messages)
            if decision is None:
                return await model.ainvoke(value, config)
            if decision.refused:
                return self._stop(decision)
            return await model.ainvoke(_with_note(messages, decision), config)

        name = getattr(model, "name", None) or type(model).__name__
        return RunnableLambda(call, afunc=acall, name=f"loopfuse({name})")

    def _stop(self, decision: GuardDecision) -> ModelCallResult[Any]:
        """End the run: an answer without tool calls (the agent loop ends on it), or raise."""
        assert decision.loop is not None  # every refusal is about a loop
        if self.exit_behavior == "error":
            raise LoopDetected.of(decision.loop)
        from langchain_core.messages import AIMessage

        return AIMessage(content=decision.loop.message)


def _noted(request: ModelRequest[Any], decision: GuardDecision) -> ModelRequest[Any]:
    """``request`` carrying the note (:func:`_with_note`)."""
    return request.override(messages=_with_note(request.messages, decision))


def _messages_of(value: Any) -> list[BaseMessage]:
    """The messages of what a chat model is given: a prompt value, a string, a list."""
    from langchain_core.messages import convert_to_messages
    from langchain_core.prompt_values import PromptValue

    if isinstance(value, PromptValue):
        return value.to_messages()
    if isinstance(value, str):
        from langchain_core.messages import HumanMessage

        return [HumanMessage(value)]
    return convert_to_messages(value)


def _with_note(messages: Sequence[Any], decision: GuardDecision) -> list[Any]:
    """``messages`` with the note as the latest human text: appended to the last
    ``HumanMessage``, or a new one after a tool result (LangChain's provider adapters put
    it in the same user turn as the tool results where the provider wants that)."""
    from langchain_core.messages import HumanMessage

    note = f"[loopfuse] {decision.message}"
    messages = list(messages)
    last = messages[-1] if messages else None
    if isinstance(last, HumanMessage) and isinstance(last.content, str):
        merged = f"{last.content}\n\n{note}" if last.content else note
        messages[-1] = last.model_copy(update={"content": merged})
    elif isinstance(last, HumanMessage) and isinstance(last.content, list):
        parts = [*last.content, {"type": "text", "text": note}]
        messages[-1] = last.model_copy(update={"content": parts})
    else:
        messages.append(HumanMessage(content=note))
    return messages


def _context(session: str | None) -> RequestContext:
    return RequestContext(session_id=session, integration="langchain")


_IN_LANGCHAIN: Final = _context(None)


def _carry_error_status(messages: list[Any], converted: list[Any]) -> None:
    """Mark the converted tool messages whose ``ToolMessage`` has ``status="error"`` with
    ``is_error: true``, which the detector reads as a failed call whatever the text says.

    ``convert_to_openai_messages`` drops the status. LangGraph's ``ToolNode`` sets it on
    the answer to a tool that does not exist, invalid arguments and a tool that raised
    (``handle_tool_errors``); a tool raising ``ToolException`` with ``handle_tool_error``
    sets it too. The converted tool messages are matched to the originals by
    ``tool_call_id``, in order (a conversion may add or merge other messages).
    """
    failed: dict[str, list[bool]] = {}
    for message in messages:
        if getattr(message, "type", None) == "tool":
            call_id = getattr(message, "tool_call_id", None)
            if isinstance(call_id, str):
                failed.setdefault(call_id, []).append(getattr(message, "status", None) == "error")
    if not any(any(flags) for flags in failed.values()):
        return  # the common case: nothing failed, nothing to mark
    taken: dict[str, int] = {}
    for message in converted:
        if not isinstance(message, dict) or message.get("role") != "tool":
            continue
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or call_id not in failed:
            continue
        flags = failed[call_id]
        k = taken.get(call_id, 0)
        taken[call_id] = k + 1
        if k < len(flags) and flags[k]:
            message["is_error"] = True


def _thread_id() -> str | None:
    """The LangGraph ``thread_id`` of the running graph, or ``None`` (no breaker session:
    the guard falls back to its ``shared_session``)."""
    try:
        from langgraph.config import get_config

        thread = (get_config().get("configurable") or {}).get("thread_id")
    except Exception:  # not inside a graph run, or no LangGraph
        return None
    return None if thread is None else str(thread)
