"""OTLP/HTTP with JSON bodies (`OTEL_EXPORTER_OTLP_PROTOCOL=http/json`), jobsched's default exporter.

OpenTelemetry's own OTLP/HTTP exporter encodes protobuf. With the protobuf runtime etcd3 pins (3.20, pure Python
on CPython 3.11) that costs about 1 ms of CPU per span, twice what a whole job costs the embedded mode; the same
span as OTLP's JSON costs tens of microseconds (docs/performance-log.md, issue 51). Every OTLP/HTTP receiver
(the Collector, Jaeger, Tempo) takes both: the encoding is OTLP's JSON mapping of the same messages (ids in hex,
64-bit integers as strings, enums as numbers).

The endpoint, headers and timeout come from the standard variables (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else
OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces; OTEL_EXPORTER_OTLP_[TRACES_]HEADERS; OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT
in milliseconds). A batch the receiver refuses for now (429, 502, 503, 504) or that cannot be sent is tried again
with backoff within the timeout, then dropped: traces are never worth holding a job up for.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import unquote

import httpx
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.util.types import Attributes

log = logging.getLogger("jobsched.tracing")
DEFAULT_ENDPOINT: Final = "http://localhost:4318"
DEFAULT_TIMEOUT_S: Final = 10.0
_RETRIED: Final = frozenset({429, 502, 503, 504})


def _setting(environ: Mapping[str, str], name: str) -> str | None:
    """OTEL_EXPORTER_OTLP_TRACES_<name>, else OTEL_EXPORTER_OTLP_<name>."""
    return environ.get(f"OTEL_EXPORTER_OTLP_TRACES_{name}") or environ.get(f"OTEL_EXPORTER_OTLP_{name}")


def _headers(text: str | None) -> dict[str, str]:
    """`key1=value1,key2=value2`, each part URL-encoded (the OTLP exporter's format)."""
    headers: dict[str, str] = {}
    for part in (text or "").split(","):
        name, _, value = part.partition("=")
        if name.strip() and value.strip():
            headers[unquote(name.strip()).lower()] = unquote(value.strip())
    return headers


class OtlpJsonExporter(SpanExporter):
    """Spans as OTLP/HTTP JSON, one POST per batch (BatchSpanProcessor's thread calls `export`)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        traces = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or DEFAULT_ENDPOINT
        self.endpoint = traces or base.rstrip("/") + "/v1/traces"
        timeout = _setting(environ, "TIMEOUT")
        self._timeout_s = float(timeout) / 1000 if timeout else DEFAULT_TIMEOUT_S
        headers = {**_headers(_setting(environ, "HEADERS")), "content-type": "application/json"}
        self._http = httpx.Client(headers=headers, timeout=self._timeout_s)
        self._stopped = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._stopped.is_set():
            return SpanExportResult.FAILURE
        body = json.dumps(encoded(spans), separators=(",", ":")).encode()
        deadline = time.monotonic() + self._timeout_s
        wait_s = 0.5
        while True:
            try:
                status = self._http.post(self.endpoint, content=body).status_code
            except httpx.HTTPError as exc:
                status, error = 0, str(exc)
            else:
                error = f"HTTP {status}"
                if 200 <= status < 300:
                    return SpanExportResult.SUCCESS
            if (status and status not in _RETRIED) or time.monotonic() + wait_s > deadline:
                log.warning(
                    "spans not exported",
                    extra={"action": "spans_not_exported", "count": len(spans), "error": error},
                )
                return SpanExportResult.FAILURE
            if self._stopped.wait(wait_s):
                return SpanExportResult.FAILURE
            wait_s *= 2

    def shutdown(self) -> None:
        self._stopped.set()
        self._http.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # every export is sent before it returns


def encoded(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """An ExportTraceServiceRequest in OTLP's JSON mapping: spans grouped by resource, then by scope."""
    resources: dict[int, tuple[Any, dict[tuple[str, str | None], list[dict[str, Any]]]]] = {}
    for span in spans:
        resource = span.resource
        _, scopes = resources.setdefault(id(resource), (resource, {}))
        scope = span.instrumentation_scope
        key = (scope.name, scope.version) if scope is not None else ("", None)
        scopes.setdefault(key, []).append(_span(span))
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes(resource.attributes)},
                "scopeSpans": [
                    {"scope": {"name": name, **({"version": version} if version else {})}, "spans": encoded_spans}
                    for (name, version), encoded_spans in scopes.items()
                ],
            }
            for resource, scopes in resources.values()
        ]
    }


def _span(span: ReadableSpan) -> dict[str, Any]:
    context = span.context
    assert context is not None  # a span the SDK ended has its context
    out: dict[str, Any] = {
        "traceId": format(context.trace_id, "032x"),
        "spanId": format(context.span_id, "016x"),
        "name": span.name,
        "kind": span.kind.value + 1,  # OTLP counts from SPAN_KIND_UNSPECIFIED = 0
        "startTimeUnixNano": str(span.start_time),
        "endTimeUnixNano": str(span.end_time),
        "attributes": _attributes(span.attributes),
        "flags": 0x100 | int(context.trace_flags),  # bit 8: whether the parent is remote is known
    }
    if span.parent is not None:
        out["parentSpanId"] = format(span.parent.span_id, "016x")
        out["flags"] |= 0x200 if span.parent.is_remote else 0
    if span.events:
        out["events"] = [
            {"timeUnixNano": str(e.timestamp), "name": e.name, "attributes": _attributes(e.attributes)}
            for e in span.events
        ]
    if span.links:
        out["links"] = [
            {
                "traceId": format(link.context.trace_id, "032x"),
                "spanId": format(link.context.span_id, "016x"),
                "attributes": _attributes(link.attributes),
            }
            for link in span.links
        ]
    if span.status.status_code.value:
        out["status"] = {"code": span.status.status_code.value, "message": span.status.description or ""}
    return out


def _attributes(attributes: Attributes) -> list[dict[str, Any]]:
    if not attributes:
        return []
    # Strings first, without a call: most attributes are (ids, names), and this runs for each of every span's.
    return [
        {"key": key, "value": {"stringValue": value} if type(value) is str else _value(value)}
        for key, value in attributes.items()
    ]


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, Sequence):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": str(value)}
