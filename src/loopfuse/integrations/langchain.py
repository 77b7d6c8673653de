"""LangChain v1 agents: :class:`LoopfuseMiddleware` for ``langchain.agents.create_agent``.

Before each model call the middleware reads the agent's conversation (``AIMessage`` tool
calls, ``ToolMessage`` results, ``HumanMessage`` turns), converts it with LangChain's own
``convert_to_openai_messages`` and runs the same :class:`~loopfuse.integrations.Guard`
as every other integration (by default: the loop detector, no breaker, since an agent's
history grows with every turn and so never repeats a request word for word). When the
conversation ends in a loop, ``exit_behavior`` decides:

- ``"end"`` (default): jump to the end of the run with an ``AIMessage`` explaining why;
- ``"error"``: raise :class:`loopfuse.detector.LoopDetected` (``kind``, ``count``,
  ``signature``, and a ``message`` written for the model);
- ``"note"``: call the model anyway, with a note for it appended to *this* call's
  messages (never to the agent's state).

>>> from loopfuse.integrations.langchain import LoopfuseMiddleware
>>> from langchain.agents import create_agent  # doctest: +SKIP
>>> guarded = [LoopfuseMiddleware(exit_behavior="end")]  # doctest: +SKIP
>>> agent = create_agent("openai:gpt-5", tools=tools, middleware=guarded)  # doctest: +SKIP

Without the extra the module still imports; creating the middleware raises
:class:`~loopfuse.integrations.MissingExtraError` naming ``pip install 'loopfuse[langchain]'``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from loopfuse.errors import ConfigError
from loopfuse.integrations._extras import require, stand_in
from loopfuse.integrations._guard import (
    Guard,
    GuardDecision,
    GuardOptions,
    build_guard,
    decision_message,
    loop_detected,
)

if TYPE_CHECKING:
    from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest
    from langchain.agents.middleware.types import ModelCallResult, ModelResponse
    from langgraph.runtime import Runtime
    from typing_extensions import Unpack
else:
    try:
        from langchain.agents.middleware import AgentMiddleware
    except ImportError:  # the class below still defines; creating one says what to install
        AgentMiddleware = stand_in("AgentMiddleware", package="langchain", extra="langchain")

__all__ = ["ExitBehavior", "LoopfuseMiddleware"]

ExitBehavior = Literal["end", "error", "note"]
_EXIT_BEHAVIORS: Final = ("end", "error", "note")

_Hook = TypeVar("_Hook", bound=Callable[..., Any])


def _can_jump_to_end(hook: _Hook) -> _Hook:
    """LangChain's ``hook_config(can_jump_to=["end"])``, when LangChain is installed."""
    try:
        from langchain.agents.middleware import hook_config
    except ImportError:
        return hook
    return hook_config(can_jump_to=["end"])(hook)


class LoopfuseMiddleware(AgentMiddleware["AgentState[Any]", Any, Any]):
    """Stops a LangChain v1 agent whose conversation ends in a tool-call loop.

    Args:
        guard: a :class:`~loopfuse.integrations.Guard` to share; or leave it out and pass
            its options (``detector``, ``breaker``, ``fail_closed``) here. Without a
            ``guard``, ``breaker`` defaults to ``None``; a breaker, when given, counts per
            LangGraph ``thread_id``. There is no ``cache`` here: answers are cached at the
            HTTP level (:mod:`loopfuse.integrations.httpx`).
        exit_behavior: ``"end"``, ``"error"`` or ``"note"`` (see the module docs).

    ``last_decision`` is the guard's decision of the latest check that found a loop.
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
        if exit_behavior not in _EXIT_BEHAVIORS:
            raise ConfigError(
                f"exit_behavior must be 'end', 'error' or 'note', not {exit_behavior!r}"
            )
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
        loop (or failed closed); ``None`` when the agent may go on."""
        from langchain_core.messages import convert_to_openai_messages

        try:
            body = {"messages": convert_to_openai_messages(list(messages))}
        except Exception as exc:  # a message LangChain cannot convert: fail open (or closed)
            decision = self.guard.failure(exc)
        else:
            session = _thread_id() if session_id is None else session_id
            decision = self.guard.check(body, session_id=session)
        if decision.action == "forward":
            return None
        self.last_decision = decision
        return decision

    @_can_jump_to_end
    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """End the run (``"end"``) or raise (``"error"``) when the conversation loops."""
        if self.exit_behavior == "note":
            return None  # the note is added to the model call itself: see wrap_model_call
        decision = self.check(state["messages"])
        if decision is None:
            return None
        if self.exit_behavior == "error":
            raise loop_detected(decision)
        from langchain_core.messages import AIMessage

        return {"jump_to": "end", "messages": [AIMessage(content=decision_message(decision))]}

    @_can_jump_to_end
    async def abefore_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """:meth:`before_model` for async agents (the check does no I/O)."""
        return self.before_model(state, runtime)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelCallResult[Any]:
        """In ``"note"`` mode, call the model with a note when the conversation loops."""
        return handler(self._noted(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult[Any]:
        """:meth:`wrap_model_call` for async agents."""
        return await handler(self._noted(request))

    def _noted(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        if self.exit_behavior != "note":
            return request
        decision = self.check(request.messages)
        if decision is None:
            return request
        from langchain_core.messages import HumanMessage

        note = HumanMessage(content=f"[loopfuse] {decision_message(decision)}")
        return request.override(messages=[*request.messages, note])


def _thread_id() -> str:
    """The LangGraph ``thread_id`` of the running graph, or ``"default"``."""
    try:
        from langgraph.config import get_config

        thread = (get_config().get("configurable") or {}).get("thread_id")
    except Exception:  # not inside a graph run, or no LangGraph: one shared session
        return "default"
    return "default" if thread is None else str(thread)
