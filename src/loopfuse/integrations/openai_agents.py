"""OpenAI Agents SDK: :class:`LoopfuseRunHooks`, run hooks that stop a looping agent.

``on_llm_start`` receives the instructions and the input items (Responses API format:
messages, ``function_call`` and ``function_call_output`` items) of every model call of a
run. The hooks run the same :class:`~loopfuse.integrations.Guard` as every other
integration on them and raise :class:`loopfuse.detector.LoopDetected` before a model
call that would be another lap of a loop. ``Runner.run`` then raises it to the caller
(``kind``, ``count``, ``signature``, and a ``message`` written for the model).

>>> from loopfuse.integrations.openai_agents import LoopfuseRunHooks
>>> from agents import Runner  # doctest: +SKIP
>>> result = await Runner.run(agent, "Fix the build.", hooks=LoopfuseRunHooks())  # doctest: +SKIP

Without the extra the module still imports; creating the hooks raises
:class:`~loopfuse.integrations.MissingExtraError` naming ``pip install 'loopfuse[openai-agents]'``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from loopfuse.errors import ConfigError
from loopfuse.integrations._extras import require, stand_in
from loopfuse.integrations._guard import (
    Guard,
    GuardDecision,
    GuardOptions,
    build_guard,
    loop_detected,
)

if TYPE_CHECKING:
    from agents import Agent, RunContextWrapper, RunHooks, TResponseInputItem
    from typing_extensions import Unpack
else:
    try:
        from agents import RunHooks
    except ImportError:  # the class below still defines; creating one says what to install
        RunHooks = stand_in("RunHooks", package="openai-agents", extra="openai-agents")

__all__ = ["LoopfuseRunHooks", "SessionResolver"]

SessionResolver = Callable[["RunContextWrapper[Any]", "Agent[Any]"], "str | None"]
"""``(context, agent) -> session id`` for the breaker; ``None`` means ``"default"``."""


class LoopfuseRunHooks(RunHooks[Any]):
    """``RunHooks`` whose ``on_llm_start`` raises ``LoopDetected`` before a looping call.

    Args:
        guard: a :class:`~loopfuse.integrations.Guard` to share; or leave it out and pass
            its options (``detector``, ``breaker``, ``fail_closed``) here. Without a
            ``guard``, ``breaker`` defaults to ``None``: a run's input grows with every
            turn, so it never repeats a request word for word.
        session_id: ``session_id(context, agent)`` scopes a breaker (default ``"default"``).

    Subclass it to add your own hooks; call ``super().on_llm_start(...)`` to keep the check.
    ``last_decision`` is the guard's decision of the latest check that found a loop.
    """

    def __init__(
        self,
        guard: Guard | None = None,
        *,
        session_id: SessionResolver | None = None,
        **options: Unpack[GuardOptions],
    ) -> None:
        require("agents", extra="openai-agents", what="LoopfuseRunHooks")
        super().__init__()
        if options.get("cache") is not None:
            raise ConfigError(
                "LoopfuseRunHooks does not cache answers: put the cache on the model's HTTP "
                "client (loopfuse.integrations.httpx.GuardTransport)"
            )
        if options.get("mode", "refuse") != "refuse":
            raise ConfigError("LoopfuseRunHooks can only refuse: a hook cannot change the input")
        if session_id is not None and not callable(session_id):
            raise ConfigError("session_id must be a callable (context, agent) or None")
        if guard is None:
            options.setdefault("breaker", None)
        self.guard = build_guard(guard, options)
        self.session_id = session_id
        self.last_decision: GuardDecision | None = None

    def check(
        self, system_prompt: str | None, input_items: list[Any], session_id: str = "default"
    ) -> GuardDecision | None:
        """The guard's decision on one model call when it found a loop; ``None`` when the
        call may go."""
        body: dict[str, Any] = {"input": [_plain(item) for item in input_items]}
        if system_prompt:
            body["instructions"] = system_prompt
        decision = self.guard.check(body, session_id=session_id, path="/v1/responses")
        if decision.action == "forward":
            return None
        self.last_decision = decision
        return decision

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        """Raise :class:`loopfuse.detector.LoopDetected` when this call would loop."""
        try:
            session = self.session_id(context, agent) if self.session_id else None
        except Exception as exc:  # a resolver that raises fails open, like the guard
            failed = self.guard.failure(exc)
            if failed.refused:
                self.last_decision = failed
                raise loop_detected(failed) from exc
            return
        decision = self.check(system_prompt, list(input_items), session or "default")
        if decision is not None:
            raise loop_detected(decision)


def _plain(item: object) -> object:
    """An input item as plain JSON data (the SDK may hand over pydantic models)."""
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        return dump(exclude_unset=True)
    return item
