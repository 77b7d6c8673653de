"""LiteLLM proxy: :class:`LoopfuseHandler`, a ``CustomLogger`` that refuses looping requests.

The proxy calls ``async_pre_call_hook`` before it routes a request. The handler runs the
same :class:`~loopfuse.Guard` as every other integration on the request's
LLM fields and, when the request is a lap of a loop, raises :class:`LoopRefusedError`:
a ``litellm.BadRequestError`` (status 400, ``type`` ``"loop_detected"``, ``code`` the
guard that spoke), which the proxy returns to the client as an HTTP 400 with loopfuse's
message, not as a 500. With ``mode="note"`` the request goes on with a note for the
model instead.

In the proxy's ``config.yaml`` (the ready-made ``proxy_handler`` reads
``LOOP_WINDOW_SECS`` and ``LOOP_MAX_REPEATS`` for its breaker)::

    litellm_settings:
      callbacks: loopfuse.integrations.litellm.proxy_handler

or, to configure it, a ``custom_callbacks.py`` beside ``config.yaml`` holding
``proxy_handler_instance = LoopfuseHandler(...)`` and
``callbacks: custom_callbacks.proxy_handler_instance``.

LiteLLM's sync SDK calls (``litellm.completion``) run no hook that can stop a request;
:meth:`LoopfuseHandler.guarded` is the one line that guards them.

>>> from loopfuse.integrations.litellm import LoopfuseHandler
>>> handler = LoopfuseHandler(mode="note")  # doctest: +SKIP
>>> completion = handler.guarded(litellm.completion)  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import inspect
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, ParamSpec, TypeVar, cast

from loopfuse.breaker import LoopBreaker
from loopfuse.errors import ConfigError, LoopfuseError
from loopfuse.guard import Guard, GuardDecision, RequestContext
from loopfuse.guard.guard import GuardOptions, GuardSettings, build_guard
from loopfuse.guard.memory import TimedRecords
from loopfuse.guard.request import first_text
from loopfuse.integrations._extras import require, stand_in

if TYPE_CHECKING:
    from litellm.caching.dual_cache import DualCache
    from litellm.exceptions import BadRequestError
    from litellm.integrations.custom_logger import CustomLogger
    from litellm.proxy._types import UserAPIKeyAuth
    from typing_extensions import Unpack
else:
    try:
        from litellm.exceptions import BadRequestError
        from litellm.integrations.custom_logger import CustomLogger
    except ImportError:  # the classes below still define; creating one says what to install
        BadRequestError = stand_in("BadRequestError", package="litellm", extra="litellm")
        CustomLogger = stand_in("CustomLogger", package="litellm", extra="litellm")

__all__ = [
    "DEFAULT_MODE",
    "GUARDED_CALL_TYPES",
    "LoopRefusedError",
    "LoopfuseHandler",
    "SessionResolver",
]

DEFAULT_MODE: Final = GuardSettings().mode  # the one default (warn), read, not repeated
"""The handler's default ``mode``: a note first, a refusal when the loop goes on. The
proxy serves clients it cannot see; a note lets a capable model leave the loop without
its client having to handle an error, and the refusal follows if it does not."""

GUARDED_CALL_TYPES: Final = frozenset(
    {
        "completion",
        "acompletion",
        "anthropic_messages",
        "aanthropic_messages",
        "responses",
        "aresponses",
        "generate_content",
        "agenerate_content",
        "generate_content_stream",
        "agenerate_content_stream",
    }
)
"""The LiteLLM call types checked: chat, Anthropic messages, Responses, Gemini content."""

# The request fields that make up an LLM request as loopfuse reads it; LiteLLM adds
# its own (metadata, proxy_server_request, ...) that are none of the guard's business.
_LLM_FIELDS: Final = (
    "model",
    "messages",
    "system",
    "input",
    "instructions",
    "contents",
    "systemInstruction",
    "tools",
    "functions",
    "stream",
    "seed",
    "n",
    "generationConfig",
)
_IN_LITELLM: Final = RequestContext(integration="litellm")

_P = ParamSpec("_P")
_R = TypeVar("_R")

SessionResolver = Callable[[Mapping[str, Any], "UserAPIKeyAuth | None"], "str | None"]
"""``(data, user_api_key_dict) -> session id``; ``None`` falls back to the end user.
``user_api_key_dict`` is ``None`` on the SDK path (no proxy, no key)."""


class LoopRefusedError(BadRequestError, LoopfuseError):
    """The 400 the proxy returns for a looping request (a ``litellm.BadRequestError``).

    ``kind`` is the loop's kind (``"repeat"``, ``"cycle"``, ``"stagnation"``,
    ``"repeated_request"``, ``"guard_failed"``), ``message`` loopfuse's message for the
    model and ``decision`` the whole :class:`~loopfuse.GuardDecision`. On the wire it is
    an OpenAI error body: ``type`` ``"loop_detected"``, ``code`` the kind (so the
    exception's ``type`` and ``code``, which LiteLLM reads off that body, say the same).
    """

    def __init__(self, decision: GuardDecision, model: str = "") -> None:
        message = decision.message or ""
        body = {"message": message, "type": "loop_detected", "param": None, "code": decision.kind}
        super().__init__(message, model=model, llm_provider="loopfuse", body=body)
        self.message = message  # without LiteLLM's "litellm.BadRequestError: " prefix
        self.decision = decision

    @property
    def kind(self) -> str | None:
        """The loop's kind (``decision.kind``)."""
        return self.decision.kind

    def __str__(self) -> str:
        return self.message


class LoopfuseHandler(CustomLogger):
    """A LiteLLM ``CustomLogger`` that notes or refuses looping requests.

    Registered in the proxy's ``callbacks``, or in ``litellm.callbacks`` for the SDK's
    async calls (``litellm.acompletion``, ``aresponses``, ``anthropic_messages``, ...).
    LiteLLM's sync SDK calls (``litellm.completion``) run no hook that can stop a request:
    guard them with :meth:`guarded` (``completion = handler.guarded(litellm.completion)``);
    registered in ``litellm.callbacks``, the handler logs an error the first time it sees
    an unguarded one.

    Args:
        guard: a :class:`~loopfuse.Guard` to share; or leave it out and pass
            its options (``breaker``, ``detector``, ``mode`` (default ``"warn"``),
            ``shared_session``, ``fail_closed``, ``on_event``) here. There is no
            ``cache`` option: LiteLLM has its own response cache.
        session_id: ``session_id(data, user_api_key_dict)``, tried after LiteLLM's own
            session id (``litellm_session_id``, from the ``x-litellm-session-id`` header)
            and ``metadata.session_id``; then the end user (LiteLLM's resolved customer
            id, the body's ``user``, ``litellm_metadata.user``, ``metadata.user_id``,
            ``safety_identifier``); then the guard's ``shared_session``. A request with
            none of them is not counted by the breaker.
        call_types: the LiteLLM call types to check (default :data:`GUARDED_CALL_TYPES`).
    """

    def __init__(
        self,
        guard: Guard | None = None,
        *,
        session_id: SessionResolver | None = None,
        call_types: frozenset[str] = GUARDED_CALL_TYPES,
        **options: Unpack[GuardOptions],
    ) -> None:
        require("litellm", extra="litellm", what="LoopfuseHandler")
        super().__init__()
        if options.get("cache") is not None:
            raise ConfigError("LoopfuseHandler does not cache answers: use LiteLLM's cache")
        if session_id is not None and not callable(session_id):
            raise ConfigError("session_id must be a callable (data, user_api_key_dict) or None")
        self.guard = build_guard(guard, options)
        self.session_id = session_id
        self.call_types = frozenset(call_types)
        # The decision of each LiteLLM call (by litellm_call_id): the proxy's hook and the
        # SDK's deployment hook both see a proxied call, and LiteLLM's own retries re-run
        # the deployment hook; a call is checked once, and its outcome reported.
        self._decided: TimedRecords[str, GuardDecision] = TimedRecords(10_000, 600.0)
        self.unguarded_calls = 0
        """Sync SDK calls seen that no hook could check (see :meth:`log_pre_api_call`)."""

    async def async_pre_call_hook(
        self,
        user_api_key_dict: UserAPIKeyAuth,
        cache: DualCache,
        data: dict[str, Any],
        call_type: str,
    ) -> dict[str, Any] | None:
        """The proxy's hook: refuse (raise :class:`LoopRefusedError`), note, or pass."""
        return await self._gate(data, call_type, user_api_key_dict)

    async def async_pre_call_deployment_hook(
        self, kwargs: dict[str, Any], call_type: Any
    ) -> dict[str, Any] | None:
        """The SDK's hook (``litellm.acompletion`` and the other async calls)."""
        name = getattr(call_type, "value", call_type)
        return await self._gate(kwargs, name if isinstance(name, str) else "", None)

    async def _gate(self, data: Any, call_type: str, key: Any) -> dict[str, Any] | None:
        if call_type not in self.call_types or not isinstance(data, dict):
            return None
        call_id = data.get("litellm_call_id")
        if isinstance(call_id, str) and self._decided.get(call_id, self.guard.clock()) is not None:
            return None  # checked already: a proxied call, or a retry of this call
        decision = await self.acheck(data, key)
        if isinstance(call_id, str) and decision.action != "refuse":
            self._decided.put(call_id, decision, self.guard.clock())
        if decision.refused:
            model = data.get("model")
            raise LoopRefusedError(decision, model if isinstance(model, str) else "")
        if decision.action == "note":
            return _noted(data, decision)
        return None

    def guarded(self, call: Callable[_P, _R]) -> Callable[_P, _R]:
        """``call``, one of LiteLLM's sync SDK calls, checked before each run.

        LiteLLM's sync calls (``litellm.completion``, ``litellm.responses``,
        ``litellm.anthropic_messages``, ...) run no hook that can stop a request, so the
        handler in ``litellm.callbacks`` cannot guard them. This is the one line that
        does: ``completion = handler.guarded(litellm.completion)``, then call
        ``completion(...)`` as you called ``litellm.completion(...)``. Each call is checked
        as the async hooks check theirs: it goes on, goes on with a note for the model
        (in the messages it sends), or raises :class:`LoopRefusedError` without reaching
        the provider; its outcome is reported, so a retry after a failure is not a repeat.
        It carries a ``litellm_call_id`` (its own, or a fresh one) that tells the handler,
        when it is also registered, that the call was checked.

        Raises:
            ConfigError: ``call`` is not a sync LiteLLM call of a checked kind
                (:data:`GUARDED_CALL_TYPES`, ``call_types``).
        """
        call_type = getattr(call, "__name__", None)
        if not callable(call) or call_type not in self.call_types:
            kinds = ", ".join(sorted(self.call_types))
            raise ConfigError(
                f"guarded() takes a LiteLLM call of a checked kind ({kinds}), not {call!r}"
            )
        if inspect.iscoroutinefunction(call):
            raise ConfigError(
                f"{call_type} is async: register the handler in litellm.callbacks instead "
                "(its deployment hook checks every async call)"
            )
        signature = inspect.signature(call)
        if any(
            p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL) for p in signature.parameters.values()
        ):
            raise ConfigError(f"guarded() needs every argument of {call_type} by name")
        run = cast(Callable[..., _R], call)

        @functools.wraps(call)
        def checked(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            data: dict[str, Any] = {}
            for name, value in signature.bind_partial(*args, **kwargs).arguments.items():
                if signature.parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
                    data.update(value)
                else:
                    data[name] = value
            call_id = data.setdefault("litellm_call_id", str(uuid.uuid4()))
            decision = self.check(data)
            if decision.refused:
                model = data.get("model")
                raise LoopRefusedError(decision, model if isinstance(model, str) else "")
            if decision.action == "note":
                data = _noted(data, decision)
            if isinstance(call_id, str):
                self._decided.put(call_id, decision, self.guard.clock())
            try:
                result = run(**data)
            except Exception as exc:
                self._report(data, getattr(exc, "status_code", None), exc)
                raise
            self._report(data, 200, None)
            return result

        return checked

    def check(self, data: Mapping[str, Any], user_api_key_dict: Any = None) -> GuardDecision:
        """The guard's decision on the LLM fields of a LiteLLM request ``data``."""
        asked = self._question(data, user_api_key_dict)
        if isinstance(asked, GuardDecision):
            return asked
        body, context = asked
        return self.guard.check(body, context)

    async def acheck(self, data: Mapping[str, Any], user_api_key_dict: Any = None) -> GuardDecision:
        """:meth:`check` for the async hooks: the breaker's store is awaited, so the proxy's
        event loop never waits for it."""
        asked = self._question(data, user_api_key_dict)
        if isinstance(asked, GuardDecision):
            return asked
        body, context = asked
        return await self.guard.acheck(body, context)

    def _question(
        self, data: Mapping[str, Any], user_api_key_dict: Any
    ) -> tuple[dict[str, Any], RequestContext] | GuardDecision:
        """The body to check and what the guard is told about it, or the decision when
        resolving them failed."""
        try:
            body = {name: data[name] for name in _LLM_FIELDS if name in data}
            session, junk = self._session(data, user_api_key_dict)
        except Exception as exc:  # a resolver that raises fails open, like the guard
            return self.guard.failure(exc, _IN_LITELLM)
        self.guard.input_fallback(junk, "litellm")
        return body, RequestContext(path=_route(data), session_id=session, integration="litellm")

    def _session(
        self, data: Mapping[str, Any], user_api_key_dict: Any
    ) -> tuple[str | None, list[str]]:
        metadata = data.get("metadata")
        metadata = metadata if isinstance(metadata, Mapping) else {}
        for candidate in (data.get("litellm_session_id"), metadata.get("session_id")):
            if isinstance(candidate, str) and candidate:
                return candidate, []
        if self.session_id is not None:
            chosen = self.session_id(data, user_api_key_dict)
            if chosen is not None:
                return str(chosen), []
        # LiteLLM's own order (its get_end_user_id_from_request_body: `user` before
        # `safety_identifier`, unlike the guard's OpenAI rule), so that the session is the
        # customer LiteLLM itself bills and rate-limits, on the proxy and the SDK alike.
        litellm_metadata = data.get("litellm_metadata")
        users = (
            ("end_user_id", getattr(user_api_key_dict, "end_user_id", None)),
            ("user", data.get("user")),
            (
                "litellm_metadata.user",
                litellm_metadata.get("user") if isinstance(litellm_metadata, Mapping) else None,
            ),
            ("metadata.user_id", metadata.get("user_id")),
            ("safety_identifier", data.get("safety_identifier")),
        )
        return first_text(users)

    async def async_post_call_success_hook(
        self, data: dict[str, Any], user_api_key_dict: UserAPIKeyAuth, response: Any
    ) -> Any:
        """The proxy answered the call: an identical request is now a repeat."""
        self._report(data, 200, None)

    async def async_post_call_failure_hook(
        self,
        request_data: dict[str, Any],
        original_exception: Exception,
        user_api_key_dict: UserAPIKeyAuth,
        traceback_str: str | None = None,
    ) -> Any:
        """The call failed: an identical request after it is a retry, not a repeat."""
        self._report(
            request_data, getattr(original_exception, "status_code", None), original_exception
        )

    async def async_post_call_success_deployment_hook(
        self, request_data: dict[str, Any], response: Any, call_type: Any
    ) -> Any:
        """The SDK's call was answered (see :meth:`async_post_call_success_hook`)."""
        self._report(request_data, 200, None)
        return None

    async def async_post_call_failure_deployment_hook(
        self,
        request_data: Mapping[str, object],
        exception: Exception,
        call_type: Any,
        fallback_depth: int | None = None,
    ) -> None:
        """The SDK's call failed (see :meth:`async_post_call_failure_hook`)."""
        self._report(request_data, getattr(exception, "status_code", None), exception)

    def _report(self, data: Mapping[str, Any], status: object, error: Exception | None) -> None:
        call_id = data.get("litellm_call_id") if isinstance(data, Mapping) else None
        decision = self._decided.pop(call_id) if isinstance(call_id, str) else None
        if decision is None or isinstance(error, LoopRefusedError):
            return
        code = status if isinstance(status, int) else None
        self.guard.outcome(decision, code, error=error if code is None else None)

    def log_pre_api_call(self, model: Any, messages: Any, kwargs: Any) -> None:
        """Says so, once, when a guarded kind of call reaches its provider unchecked: a
        sync SDK call (``litellm.completion``), which runs no hook that could stop it."""
        details = kwargs if isinstance(kwargs, Mapping) else {}
        call_id, call_type = details.get("litellm_call_id"), details.get("call_type")
        if call_type not in self.call_types or not isinstance(call_id, str):
            return
        if self._decided.get(call_id, self.guard.clock()) is not None:
            return
        self.unguarded_calls += 1
        if self.unguarded_calls == 1:  # said once, loudly; counted every time
            reason = (
                f"LoopfuseHandler cannot guard LiteLLM's sync {call_type!r} call: LiteLLM runs "
                f"no hook that can stop it. Call it through the handler: {call_type} = "
                f"handler.guarded(litellm.{call_type}); or use the async call or the proxy."
            )
            self.guard.internal_error(RuntimeError(reason), "litellm")


def _noted(data: dict[str, Any], decision: GuardDecision) -> dict[str, Any]:
    """``data`` carrying the note: every field the note changed (the dialect copies only
    what it writes into: the conversation, or its system prompt, instructions, system
    instruction)."""
    noted = decision.value
    if not isinstance(noted, dict):
        return data
    return {**data, **{k: v for k, v in noted.items() if data.get(k) is not v}}


def _route(data: Mapping[str, Any]) -> str:
    """The path the client called (it picks the error shape for notes and refusals)."""
    request = data.get("proxy_server_request")
    url = request.get("url") if isinstance(request, Mapping) else None
    if not isinstance(url, str):
        return ""
    from urllib.parse import urlsplit

    return urlsplit(url).path


def __getattr__(name: str) -> Any:
    # ``proxy_handler`` is built on first use, so that importing this module never needs
    # LiteLLM and never reads the environment.
    if name == "proxy_handler":
        handler = LoopfuseHandler(breaker=LoopBreaker.from_env())
        globals()["proxy_handler"] = handler
        return handler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
