"""OpenTelemetry: :class:`OpenTelemetryEvents`, an ``on_event`` callback that turns loopfuse's
events into OpenTelemetry signals.

It follows the draft GenAI semantic conventions for guardrails: each decision of a guard
that did something (a loop noted or refused, the breaker tripped, a retry forgiven, a
failure, a junk input) is a span ``apply_guardrail loopfuse``
(``gen_ai.operation.name = "apply_guardrail"``, ``gen_ai.guardrail.*`` attributes)
carrying one ``gen_ai.guardrail.result`` event, a child of whatever span is current (the
LLM call's, when the client is instrumented). Every event, cache lookups and requests
let through (``request_forwarded``) included, adds 1 to the counter
``loopfuse.guard.decisions`` by ``loopfuse.guard`` and ``loopfuse.action``: so a refusal
rate has its denominator, without a span for every request that went on as it was. The
draft is not stable: the attribute names live in this module's constants, to follow it
in one place.

Sessions may be end users' ids: they are only recorded (``gen_ai.conversation.id``)
with ``record_session=True``.

Needs ``opentelemetry-api`` (``pip install '.[otel]'`` in a clone); an SDK and exporters are
yours to set up. Without the extra the module imports; creating the callback raises
:class:`~loopfuse.integrations.MissingExtraError`.

>>> from loopfuse.integrations.otel import OpenTelemetryEvents
>>> from loopfuse import Guard
>>> guard = Guard(on_event=OpenTelemetryEvents())  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from loopfuse.events import GuardEvent
from loopfuse.integrations._extras import require

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

__all__ = ["COUNTER", "EVENT_NAME", "SPAN_NAME", "OpenTelemetryEvents", "decision_type"]

SPAN_NAME: Final = "apply_guardrail loopfuse"
EVENT_NAME: Final = "gen_ai.guardrail.result"
COUNTER: Final = "loopfuse.guard.decisions"

OPERATION: Final = "gen_ai.operation.name"
GUARDRAIL_NAME: Final = "gen_ai.guardrail.name"
GUARDRAIL_ID: Final = "gen_ai.guardrail.id"
TARGET_TYPE: Final = "gen_ai.guardrail.target.type"
DECISION_TYPE: Final = "gen_ai.guardrail.decision.type"
DECISION_REASON: Final = "gen_ai.guardrail.decision.reason"
EXPLANATION: Final = "gen_ai.guardrail.explanation"
CONVERSATION_ID: Final = "gen_ai.conversation.id"

# Counted, not traced: cache lookups and requests let through are not guardrail verdicts.
_UNTRACED: Final = frozenset({"cache_hit", "cache_miss", "cache_bypass", "request_forwarded"})
_DECISIONS: Final = {
    "loop_refused": "deny",
    "breaker_tripped": "deny",
    "fail_closed": "deny",
    "loop_noted": "modify",
}


def decision_type(action: str) -> str:
    """The guardrail verdict of an event's action: ``deny`` (refused), ``modify`` (a note
    was added to the request) or ``allow`` (it went on as it was).

    >>> decision_type("loop_refused"), decision_type("loop_noted"), decision_type("fail_open")
    ('deny', 'modify', 'allow')
    >>> decision_type("request_forwarded")
    'allow'
    """
    return _DECISIONS.get(action, "allow")


class OpenTelemetryEvents:
    """An ``on_event`` callback that records each :class:`~loopfuse.events.GuardEvent`
    as OpenTelemetry spans, span events and a counter.

    Args:
        tracer_provider: where the spans go; default the global one.
        meter_provider: where the counter goes; default the global one.
        record_session: record the session id (``gen_ai.conversation.id``) on spans.
            Off by default: a session may be an end user's id.
    """

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        record_session: bool = False,
    ) -> None:
        require("opentelemetry", extra="otel", what="OpenTelemetryEvents")
        from opentelemetry import metrics, trace

        from loopfuse import __version__

        self._tracer = trace.get_tracer("loopfuse", __version__, tracer_provider=tracer_provider)
        meter = metrics.get_meter("loopfuse", __version__, meter_provider=meter_provider)
        self._decisions = meter.create_counter(
            COUNTER, unit="{decision}", description="Decisions of loopfuse's guards"
        )
        self.record_session = bool(record_session)

    def __call__(self, event: GuardEvent) -> None:
        labels: dict[str, str] = {"loopfuse.guard": event.guard, "loopfuse.action": event.action}
        if event.integration is not None:
            labels["loopfuse.integration"] = event.integration
        self._decisions.add(1, labels)
        if event.action in _UNTRACED:
            return
        from opentelemetry.trace import SpanKind

        verdict = {DECISION_TYPE: decision_type(event.action)}
        if event.kind is not None:
            verdict[DECISION_REASON] = event.kind
        attributes: dict[str, Any] = {
            OPERATION: "apply_guardrail",
            GUARDRAIL_NAME: "loopfuse",
            GUARDRAIL_ID: f"loopfuse.{event.guard}",
            TARGET_TYPE: "llm_input",
            **verdict,
            **labels,
            "loopfuse.count": event.count,
        }
        if event.tool_names:
            attributes["loopfuse.tool_names"] = list(event.tool_names)
        if event.signature is not None:
            attributes["loopfuse.signature"] = event.signature
        if self.record_session and event.session is not None:
            attributes[CONVERSATION_ID] = event.session
        result: dict[str, Any] = {**verdict, "loopfuse.count": event.count}
        if event.reason is not None:
            result[EXPLANATION] = event.reason
        span = self._tracer.start_span(SPAN_NAME, kind=SpanKind.INTERNAL, attributes=attributes)
        try:
            span.add_event(EVENT_NAME, attributes=result)
        finally:
            span.end()
