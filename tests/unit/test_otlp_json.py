"""OTLP/HTTP JSON (shared/tracing/otlp_json.py): spans in OTLP's JSON mapping, and the exporter's settings from the
standard variables. (The e2e trace through a real receiver is tests/e2e/test_traces.py's.)"""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from shared.tracing.otlp_json import OtlpJsonExporter, encoded

pytestmark = pytest.mark.unit


def test_spans_are_encoded_in_otlp_s_json_mapping_grouped_by_resource_and_scope() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "jobsched-test"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    ours, theirs = provider.get_tracer("jobsched", "1.2.3"), provider.get_tracer("the-application")
    with ours.start_as_current_span("POST /jobs", kind=SpanKind.SERVER) as request:
        linked = request.get_span_context()
        span = ours.start_span(
            "job.run noop",
            kind=SpanKind.CONSUMER,
            links=[Link(linked)],
            attributes={"n": 7, "ok": True, "ratio": 0.5, "tags": ["a", "b"], "who": "acme"},
        )
        span.add_event("exception", {"exception.type": "ValueError"})
        span.set_status(Status(StatusCode.ERROR, "ValueError: no"))
        span.end()
        theirs.start_span("their own").end()

    body = json.loads(json.dumps(encoded(exporter.get_finished_spans())))
    (resource,) = body["resourceSpans"]
    assert {"key": "service.name", "value": {"stringValue": "jobsched-test"}} in resource["resource"]["attributes"]
    scopes = {s["scope"]["name"]: s for s in resource["scopeSpans"]}
    assert scopes["jobsched"]["scope"] == {"name": "jobsched", "version": "1.2.3"}
    assert [s["name"] for s in scopes["the-application"]["spans"]] == ["their own"]
    server, run = sorted(scopes["jobsched"]["spans"], key=lambda s: s["name"])
    assert (server["name"], server["kind"], "parentSpanId" in server) == ("POST /jobs", 2, False)
    assert run["kind"] == 5
    assert run["traceId"] == format(linked.trace_id, "032x")
    assert len(run["spanId"]) == 16
    assert run["parentSpanId"] == format(linked.span_id, "016x") == server["spanId"]
    assert int(run["startTimeUnixNano"]) <= int(run["endTimeUnixNano"])
    assert run["attributes"] == [
        {"key": "n", "value": {"intValue": "7"}},
        {"key": "ok", "value": {"boolValue": True}},
        {"key": "ratio", "value": {"doubleValue": 0.5}},
        {"key": "tags", "value": {"arrayValue": {"values": [{"stringValue": "a"}, {"stringValue": "b"}]}}},
        {"key": "who", "value": {"stringValue": "acme"}},
    ]
    assert run["links"] == [{"traceId": server["traceId"], "spanId": server["spanId"], "attributes": []}]
    assert [e["name"] for e in run["events"]] == ["exception"]
    assert run["status"] == {"code": 2, "message": "ValueError: no"}
    assert "status" not in server  # unset


def test_the_exporter_follows_the_standard_variables() -> None:
    assert OtlpJsonExporter({}).endpoint == "http://localhost:4318/v1/traces"
    assert OtlpJsonExporter({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}).endpoint == "http://c:4318/v1/traces"
    both = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t/x"}
    assert OtlpJsonExporter(both).endpoint == "http://t/x"
    exporter = OtlpJsonExporter({"OTEL_EXPORTER_OTLP_HEADERS": "api-key=s%3Dcret, x-team = ops,broken"})
    assert exporter._http.headers["api-key"] == "s=cret"
    assert exporter._http.headers["x-team"] == "ops"
    assert exporter._http.headers["content-type"] == "application/json"


def test_values_json_cannot_hold_as_they_are_never_make_the_batch_invalid() -> None:
    from shared.tracing.otlp_json import _value

    assert [_value(v) for v in (float("nan"), float("inf"), float("-inf"))] == [
        {"doubleValue": "NaN"},
        {"doubleValue": "Infinity"},
        {"doubleValue": "-Infinity"},
    ]
    assert _value(2**63) == {"stringValue": str(2**63)}
    assert _value(-(2**63)) == {"intValue": str(-(2**63))}
    assert _value([None, "a"]) == {"arrayValue": {"values": [{}, {"stringValue": "a"}]}}
    assert _value(b"\x00\xff") == {"bytesValue": "AP8="}
    json.dumps([_value(float("nan"))], allow_nan=False)  # valid JSON


@pytest.mark.parametrize(
    "environ",
    [
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"},
        {"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"},
    ],
)
def test_settings_the_exporter_cannot_follow_are_refused_at_start(environ: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="OTLP"):
        OtlpJsonExporter(environ)


def test_grpc_is_refused_rather_than_sent_json_to_a_grpc_port() -> None:
    from shared.tracing.spans import _exporter

    with pytest.raises(ValueError, match="grpc"):
        _exporter({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
