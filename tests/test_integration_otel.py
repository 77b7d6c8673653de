"""OpenTelemetryEvents, read back with the OpenTelemetry SDK's in-memory exporters."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="opentelemetry-sdk is not installed")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from loopfuse import DedupCache, Guard, GuardEvent, LoopBreaker, RequestContext
from loopfuse.integrations import MissingExtraError, _extras
from loopfuse.integrations._extras import install_command
from loopfuse.integrations.otel import OpenTelemetryEvents


class Telemetry:
    def __init__(self, **options: Any) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.metrics = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.metrics])
        self.callback = OpenTelemetryEvents(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **options
        )

    def counts(self) -> dict[tuple[str, str], int]:
        found: dict[tuple[str, str], int] = {}
        data = self.metrics.get_metrics_data()
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    assert metric.name == "loopfuse.guard.decisions"
                    for point in metric.data.data_points:
                        labels = point.attributes
                        found[(labels["loopfuse.guard"], labels["loopfuse.action"])] = point.value
        return found


def test_a_noted_then_refused_loop_is_two_guardrail_spans_and_two_counts() -> None:
    telemetry = Telemetry()
    breaker = LoopBreaker(max_repeats=1, clock=lambda: 0.0)
    guard = Guard(breaker=breaker, detector=None, mode="warn", on_event=telemetry.callback)
    body = {"model": "m", "messages": [{"role": "user", "content": "again?"}], "user": "u-1"}
    actions = [
        guard.check(body, RequestContext(path="/v1/chat/completions")).action for _ in range(3)
    ]
    assert actions == ["forward", "note", "refuse"]
    noted, refused = telemetry.spans.get_finished_spans()
    for span, verdict in ((noted, "modify"), (refused, "deny")):
        assert span.name == "apply_guardrail loopfuse"
        attributes = span.attributes
        assert attributes["gen_ai.operation.name"] == "apply_guardrail"
        assert attributes["gen_ai.guardrail.name"] == "loopfuse"
        assert attributes["gen_ai.guardrail.id"] == "loopfuse.breaker"
        assert attributes["gen_ai.guardrail.target.type"] == "llm_input"
        assert attributes["gen_ai.guardrail.decision.type"] == verdict
        assert attributes["gen_ai.guardrail.decision.reason"] == "repeated_request"
        assert "gen_ai.conversation.id" not in attributes  # an end user's id: opt-in only
        [event] = span.events
        assert event.name == "gen_ai.guardrail.result"
        assert event.attributes["gen_ai.guardrail.decision.type"] == verdict
        assert event.attributes["gen_ai.guardrail.explanation"].startswith("Loop detected")
    assert refused.attributes["loopfuse.count"] == 3
    assert telemetry.counts() == {
        ("guard", "request_forwarded"): 1,
        ("breaker", "loop_noted"): 1,
        ("breaker", "loop_refused"): 1,
    }


def test_cache_events_are_counted_not_traced_and_sessions_are_opt_in() -> None:
    telemetry = Telemetry(record_session=True)
    guard = Guard(breaker=None, detector=None, cache=DedupCache(), on_event=telemetry.callback)
    decision = guard.check({"model": "m", "messages": [{"role": "user", "content": "q"}]})
    for outcome in ("miss", "hit", "hit", "bypass"):
        guard.cache_event(decision, outcome)
    assert telemetry.spans.get_finished_spans() == ()
    assert telemetry.counts() == {
        ("guard", "request_forwarded"): 1,
        ("cache", "cache_miss"): 1,
        ("cache", "cache_hit"): 2,
        ("cache", "cache_bypass"): 1,
    }
    telemetry.callback(GuardEvent("loop_refused", "detector", "run-7", "cycle", 3, ("a", "b")))
    [span] = telemetry.spans.get_finished_spans()
    assert span.attributes["gen_ai.conversation.id"] == "run-7"
    assert span.attributes["loopfuse.tool_names"] == ("a", "b")


def test_the_span_is_a_child_of_the_current_span() -> None:
    telemetry = Telemetry()
    tracer = telemetry.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("chat gpt-4o") as parent:
        telemetry.callback(GuardEvent("loop_noted", "detector", kind="repeat", count=4))
    guardrail = next(s for s in telemetry.spans.get_finished_spans() if s.name.startswith("apply"))
    assert guardrail.parent is not None
    assert guardrail.parent.span_id == parent.get_span_context().span_id


def test_a_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_extras, "find_spec", lambda name: None)
    with pytest.raises(MissingExtraError, match=re.escape(install_command("otel"))):
        OpenTelemetryEvents()
