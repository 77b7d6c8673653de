"""LiteLLM proxy: :class:`LoopfuseHandler`, a ``CustomLogger`` that refuses looping requests.

The proxy calls ``async_pre_call_hook`` before it routes a request. The handler runs the
same :class:`~loopfuse.integrations.Guard` as every other integration on the request's
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

>>> from loopfuse.integrations.litellm import LoopfuseHandler
>>> handler = LoopfuseHandler(mode="note")  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from loopfuse.breaker import LoopBreaker
from loopfuse.errors import ConfigError, LoopfuseError
from loopfuse.integrations._extras import require, stand_in
from loopfuse.integrations._guard import (
    Guard,
    GuardDecision,
    GuardOptions,
    build_guard,
    decision_message,
)

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

__all__ = ["GUARDED_CALL_TYPES", "LoopRefusedError", "LoopfuseHandler", "SessionResolver"]

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
)
_NOTED_FIELDS: Final = ("messages", "system", "input", "contents")

SessionResolver = Callable[[Mapping[str, Any], "UserAPIKeyAuth"], "str | None"]
"""``(data, user_api_key_dict) -> session id``; ``None`` falls back to the default."""


class LoopRefusedError(BadRequestError, LoopfuseError):
    """The 400 the proxy returns for a looping request (a ``litellm.BadRequestError``).

    ``type`` is ``"loop_detected"``, ``code`` the guard that spoke (``"repeat"``,
    ``"cycle"``, ``"stagnation"``, ``"repeated_request"``, ``"guard_failed"``),
    ``message`` loopfuse's message for the model and ``decision`` the whole
    :class:`~loopfuse.integrations.GuardDecision`.
    """

    def __init__(self, decision: GuardDecision, model: str = "") -> None:
        message = decision_message(decision)
        body = {"message": message, "type": "loop_detected", "param": None, "code": decision.code}
        super().__init__(message, model=model, llm_provider="loopfuse", body=body)
        self.message = message  # without LiteLLM's "litellm.BadRequestError: " prefix
        self.decision = decision

    def __str__(self) -> str:
        return self.message


class LoopfuseHandler(CustomLogger):
    """A LiteLLM ``CustomLogger`` whose ``async_pre_call_hook`` refuses looping requests.

    Args:
        guard: a :class:`~loopfuse.integrations.Guard` to share; or leave it out and pass
            its options (``breaker``, ``detector``, ``mode``, ``fail_closed``) here. There
            is no ``cache`` option: LiteLLM has its own response cache.
        session_id: ``session_id(data, user_api_key_dict)``; by default LiteLLM's own
            session id (``litellm_session_id``, set from the ``x-litellm-session-id``
            header), else ``metadata.session_id``, else the API key (its hash), so each
            key's requests are counted apart.
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

    async def async_pre_call_hook(
        self,
        user_api_key_dict: UserAPIKeyAuth,
        cache: DualCache,
        data: dict[str, Any],
        call_type: str,
    ) -> dict[str, Any] | None:
        """Refuse (raise :class:`LoopRefusedError`), note, or let ``data`` through."""
        if call_type not in self.call_types or not isinstance(data, dict):
            return None
        decision = self.check(data, user_api_key_dict)
        if decision.refused:
            model = data.get("model")
            raise LoopRefusedError(decision, model if isinstance(model, str) else "")
        if decision.action == "note" and isinstance(decision.value, dict):
            noted = decision.value
            return {**data, **{name: noted[name] for name in _NOTED_FIELDS if name in noted}}
        return None

    def check(self, data: Mapping[str, Any], user_api_key_dict: Any = None) -> GuardDecision:
        """The guard's decision on the LLM fields of the proxy's request ``data``."""
        try:
            body = {name: data[name] for name in _LLM_FIELDS if name in data}
            session = self._session(data, user_api_key_dict)
        except Exception as exc:  # a resolver that raises fails open, like the guard
            return self.guard.failure(exc)
        return self.guard.check(body, session_id=session, path=_route(data))

    def _session(self, data: Mapping[str, Any], user_api_key_dict: Any) -> str:
        if self.session_id is not None:
            chosen = self.session_id(data, user_api_key_dict)
            if chosen is not None:
                return str(chosen)
        metadata = data.get("metadata")
        for candidate in (
            data.get("litellm_session_id"),
            metadata.get("session_id") if isinstance(metadata, Mapping) else None,
        ):
            if isinstance(candidate, str) and candidate:
                return candidate
        token = getattr(user_api_key_dict, "token", None)
        return f"key:{token}" if isinstance(token, str) and token else "default"


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
