"""OpenAI Agents SDK: :class:`LoopfuseRunHooks`, run hooks that stop a looping agent.

``on_llm_start`` receives the instructions and the input items (Responses API format:
messages, ``function_call`` and ``function_call_output`` items) of every model call of a
run. The hooks run the same :class:`~loopfuse.Guard` as every other
integration on them and raise :class:`loopfuse.detector.LoopDetected` before a model
call that would be another lap of a loop. ``Runner.run`` then raises it to the caller
(``kind``, ``count``, ``signature``, ``tool_names``, and a ``message`` written for the
model).

A hook cannot change what the model is sent, so notes need the SDK's input filter too:
with ``mode="warn"`` (a note first, a stop when the loop goes on) or ``mode="note"``,
pass ``RunConfig(call_model_input_filter=hooks.input_filter)``; the filter then runs the
check, adds the note, or raises.

>>> from loopfuse.integrations.openai_agents import LoopfuseRunHooks
>>> from agents import Runner  # doctest: +SKIP
>>> result = await Runner.run(agent, "Fix the build.", hooks=LoopfuseRunHooks())  # doctest: +SKIP

Without the extra the module still imports; creating the hooks raises
:class:`~loopfuse.integrations.MissingExtraError` naming ``pip install '.[openai-agents]'``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, cast

from loopfuse.detector import LoopDetected
from loopfuse.errors import ConfigError
from loopfuse.guard import Guard, GuardDecision, RequestContext
from loopfuse.guard.guard import GuardOptions, build_guard
from loopfuse.integrations._extras import require, stand_in

if TYPE_CHECKING:
    from agents import Agent, RunContextWrapper, RunHooks, TResponseInputItem
    from agents.run_config import CallModelData, ModelInputData
    from typing_extensions import Unpack
else:
    try:
        from agents import RunHooks
    except ImportError:  # the class below still defines; creating one says what to install
        RunHooks = stand_in("RunHooks", package="openai-agents", extra="openai-agents")

__all__ = ["DEFAULT_MODE", "LoopfuseRunHooks", "SessionResolver"]

SessionResolver = Callable[["RunContextWrapper[Any]", "Agent[Any]"], "str | None"]
"""``(context, agent) -> session id`` for the breaker; ``None``: the guard's ``shared_session``."""

DEFAULT_MODE: Final = "refuse"
"""The hooks' default ``mode``: hooks alone cannot add a note to what the model is sent,
so by themselves they can only stop a run; ``"warn"`` needs the input filter as well."""

# Calls the input filter has checked, not yet seen by on_llm_start (which the SDK calls
# right after the filter, in the same context): on_llm_start leaves those alone.
_FILTERED: ContextVar[list[int] | None] = ContextVar("loopfuse_agents_filtered", default=None)
_PATH: Final = "/v1/responses"


class LoopfuseRunHooks(RunHooks[Any]):
    """``RunHooks`` whose ``on_llm_start`` raises ``LoopDetected`` before a looping call.

    Args:
        guard: a :class:`~loopfuse.Guard` to share; or leave it out and pass
            its options (``detector``, ``breaker``, ``mode`` (default ``"refuse"``),
            ``fail_closed``, ``on_event``) here. Without a ``guard``, ``breaker``
            defaults to ``None``: a run's input grows with every turn, so it never
            repeats a request word for word.
        session_id: ``session_id(context, agent)`` scopes a breaker and the notes.

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
        if session_id is not None and not callable(session_id):
            raise ConfigError("session_id must be a callable (context, agent) or None")
        if guard is None:
            options.setdefault("breaker", None)
            options.setdefault("mode", DEFAULT_MODE)
        self.guard = build_guard(guard, options)
        self.session_id = session_id
        self.last_decision: GuardDecision | None = None

    def check(
        self, system_prompt: str | None, input_items: list[Any], session_id: str | None = None
    ) -> GuardDecision | None:
        """The guard's decision on one model call when it found a loop; ``None`` when the
        call may go as it is."""
        body = _body(system_prompt, input_items)
        return self._seen(self.guard.check(body, _context(session_id)))

    async def acheck(
        self, system_prompt: str | None, input_items: list[Any], session_id: str | None = None
    ) -> GuardDecision | None:
        """:meth:`check` for the async hooks: the breaker's store is awaited."""
        body = _body(system_prompt, input_items)
        return self._seen(await self.guard.acheck(body, _context(session_id)))

    def _seen(self, decision: GuardDecision) -> GuardDecision | None:
        if decision.action == "forward":
            return None
        self.last_decision = decision
        return decision

    def input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """A ``RunConfig.call_model_input_filter`` that checks each model call: it adds the
        note (``"warn"``, ``"note"``) or raises :class:`loopfuse.detector.LoopDetected`.

        ``RunConfig(call_model_input_filter=hooks.input_filter)``; to chain a filter of
        your own, call this one on its result (or the other way round). With a breaker on
        an async store, use :meth:`ainput_filter`.
        """
        session = self._filtered(data)
        if isinstance(session, GuardDecision):
            return data.model_data
        model_data = data.model_data
        decision = self.check(model_data.instructions, list(model_data.input), session)
        return _filtered_input(model_data, decision)

    async def ainput_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """:meth:`input_filter` that awaits the breaker's store (the SDK awaits it)."""
        session = self._filtered(data)
        if isinstance(session, GuardDecision):
            return data.model_data
        model_data = data.model_data
        decision = await self.acheck(model_data.instructions, list(model_data.input), session)
        return _filtered_input(model_data, decision)

    def _filtered(self, data: CallModelData[Any]) -> str | GuardDecision | None:
        """Mark this model call as checked by the filter; its session."""
        pending = _FILTERED.get()
        if pending is None:
            pending = [0]
            _FILTERED.set(pending)
        pending[0] += 1
        return self._session(data.context, data.agent)

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        """Raise :class:`loopfuse.detector.LoopDetected` when this call would loop (unless
        :meth:`input_filter` has checked it already)."""
        pending = _FILTERED.get()
        if pending is not None and pending[0] > 0:
            pending[0] -= 1
            return
        if self.guard.mode != "refuse":
            raise ConfigError(
                f"LoopfuseRunHooks(mode={self.guard.mode!r}) adds notes through the input "
                "filter: run with RunConfig(call_model_input_filter=hooks.input_filter)"
            )
        session = self._session(context, agent)
        if isinstance(session, GuardDecision):
            return
        decision = await self.acheck(system_prompt, list(input_items), session)
        if decision is not None:
            raise _stopped(decision)

    def _session(self, context: Any, agent: Any) -> str | GuardDecision | None:
        """The session for the breaker; a resolver that raises fails open (the decision is
        returned) or, with ``fail_closed``, raises ``LoopDetected``."""
        if self.session_id is None:
            return None
        try:
            return self.session_id(context, agent)
        except Exception as exc:  # a resolver that raises fails open, like the guard
            failed = self.guard.failure(exc, _context(None))
            if failed.refused:
                self.last_decision = failed
                raise _stopped(failed) from exc
            return failed


def _context(session_id: str | None) -> RequestContext:
    return RequestContext(path=_PATH, session_id=session_id, integration="openai_agents")


def _stopped(decision: GuardDecision) -> LoopDetected:
    """The exception that stops the run for a refused ``decision``."""
    assert decision.loop is not None  # every refusal is about a loop
    return LoopDetected.of(decision.loop)


def _plain(item: object) -> object:
    """An input item as plain JSON data (the SDK may hand over pydantic models)."""
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        return dump(exclude_unset=True)
    return item


def _body(system_prompt: str | None, input_items: list[Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"input": [_plain(item) for item in input_items]}
    if system_prompt:
        body["instructions"] = system_prompt
    return body


def _filtered_input(model_data: Any, decision: GuardDecision | None) -> ModelInputData:
    """The model's input with the decision applied: as it was, noted, or refused."""
    from agents.run_config import ModelInputData

    if decision is None:
        return cast("ModelInputData", model_data)
    if decision.refused:
        raise _stopped(decision)
    # The note is one more input item, or more instructions: the SDK's own items
    # are handed back as they were, not as the plain data the guard read.
    noted = decision.value if isinstance(decision.value, dict) else {}
    items = list(model_data.input)
    added = noted.get("input")
    if isinstance(added, list) and len(added) == len(items) + 1:
        items.append(added[-1])
    instructions = noted.get("instructions", model_data.instructions)
    return ModelInputData(input=items, instructions=instructions)
