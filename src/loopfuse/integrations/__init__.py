"""Integrations: loopfuse's guards in front of the LLM clients and frameworks people use.

Each integration lives in its own module and needs its own extra; importing this package
imports none of them (nor any third-party package):

==========================================  ==========================================
module                                      what, and its extra
==========================================  ==========================================
:mod:`loopfuse.integrations.httpx`          ``GuardTransport``/``AsyncGuardTransport``
                                            for OpenAI, Anthropic, Ollama and every SDK
                                            on an ``httpx2``/``httpx`` client:
                                            ``loopfuse[openai]``, ``[anthropic]``,
                                            ``[httpx]``, ``[ollama]``
:mod:`loopfuse.integrations.langchain`      ``LoopfuseMiddleware`` for LangChain v1
                                            ``create_agent``: ``loopfuse[langchain]``
:mod:`loopfuse.integrations.litellm`        ``LoopfuseHandler``, a LiteLLM
                                            ``CustomLogger`` (proxy and async SDK):
                                            ``loopfuse[litellm]``
:mod:`loopfuse.integrations.openai_agents`  ``LoopfuseRunHooks`` for the OpenAI Agents
                                            SDK: ``loopfuse[openai-agents]``
:mod:`loopfuse.integrations.otel`           ``OpenTelemetryEvents``, loopfuse's events
                                            as OpenTelemetry spans and counters:
                                            ``loopfuse[otel]``
==========================================  ==========================================

Every integration runs the same :class:`loopfuse.Guard` (breaker, detector, mode, cache
plan; :mod:`loopfuse.guard`) and only turns its :class:`~loopfuse.GuardDecision` into its
framework's terms. A missing extra raises :class:`MissingExtraError` (an
``ImportError``) naming the ``pip install`` command. :func:`loop_message` gets the clean
loop message out of any SDK's error.

>>> from loopfuse.integrations import loop_message
>>> from loopfuse.detector import LoopDetected
>>> loop_message(LoopDetected("Loop detected: stop.", signature="s", kind="repeat", count=3))
'Loop detected: stop.'
"""

from __future__ import annotations

from typing import Final

from loopfuse._api import lazy_exports
from loopfuse.integrations._extras import MissingExtraError
from loopfuse.integrations._messages import loop_message

__all__ = ["MissingExtraError", "loop_message"]

# The guard was the integrations' until issue 19 moved it to loopfuse.guard (and
# loopfuse): ``loopfuse.integrations.Guard`` still works, with a DeprecationWarning.
_MOVED: Final[dict[str, str]] = {
    "CacheUse": "loopfuse.guard.cache_plan",
    "DEFAULT": "loopfuse.guard",
    "Guard": "loopfuse.guard",
    "GuardDecision": "loopfuse.guard",
    "GuardOptions": "loopfuse.guard.guard",
    "Mode": "loopfuse.guard.guard",
    "ScanVerdict": "loopfuse.guard",
    "Scanner": "loopfuse.guard",
}

__getattr__ = lazy_exports(__name__, globals(), {}, _MOVED)


def __dir__() -> list[str]:
    """What ``dir()`` shows: the public API, not the imports and helpers."""
    from loopfuse._api import public_dir

    return public_dir(globals())
