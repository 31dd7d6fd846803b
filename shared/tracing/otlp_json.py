"""OTLP/HTTP with JSON bodies (`OTEL_EXPORTER_OTLP_PROTOCOL=http/json`), jobsched's default exporter.

OpenTelemetry's own OTLP/HTTP exporter encodes protobuf. With the protobuf runtime etcd3 pins (3.20, pure Python
on CPython 3.11) that costs about 1 ms of CPU per span, twice what a whole job costs the embedded mode; the same
span as OTLP's JSON costs tens of microseconds (docs/performance-log.md, issue 51). The OpenTelemetry
Collector, Jaeger and Tempo take both (a receiver that takes protobuf only: OTEL_EXPORTER_OTLP_PROTOCOL=
http/protobuf): the encoding is OTLP's JSON mapping of the same messages (ids in hex, 64-bit integers as strings,
enums as numbers).

The endpoint, headers, timeout, TLS and compression come from the standard variables
(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces; OTEL_EXPORTER_OTLP_[TRACES_]
HEADERS, TIMEOUT in milliseconds as the specification has it, CERTIFICATE, CLIENT_CERTIFICATE and CLIENT_KEY,
COMPRESSION gzip or none). A batch the receiver refuses for now (429, 502, 503, 504, its Retry-After kept to) or that
cannot be sent is tried again with jittered backoff within the timeout, then dropped: traces are never worth holding
a job up for. At the process's exit what is left gets one try each, all within CLOSING_S (spans.py).
"""

from __future__ import annotations

import base64
import gzip
import json
import logging
import math
import random
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
MAX_WAIT_S: Final = 8.0  # between tries of one batch (a Retry-After above it: the batch is dropped at its deadline)
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
        """Raises ValueError for settings it cannot follow (an endpoint that is no http(s) URL, a compression it
        does not know): tracing stays off, with a warning (shared/tracing.configure)."""
        traces = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or DEFAULT_ENDPOINT
        self.endpoint = traces or base.rstrip("/") + "/v1/traces"
        if not self.endpoint.startswith(("http://", "https://")):
            raise ValueError(f"the OTLP endpoint {self.endpoint!r} is no http:// or https:// URL")
        timeout = _setting(environ, "TIMEOUT")
        self._timeout_s = float(timeout) / 1000 if timeout else DEFAULT_TIMEOUT_S
        compression = (_setting(environ, "COMPRESSION") or "none").strip().lower()
        if compression not in ("none", "gzip"):
            raise ValueError(f"OTLP compression {compression!r}: only gzip or none")
        self._gzip = compression == "gzip"
        headers = {**_headers(_setting(environ, "HEADERS")), "content-type": "application/json"}
        if self._gzip:
            headers["content-encoding"] = "gzip"
        certificate, key = _setting(environ, "CLIENT_CERTIFICATE"), _setting(environ, "CLIENT_KEY")
        self._http = httpx.Client(
            headers=headers,
            verify=_setting(environ, "CERTIFICATE") or True,
            cert=(certificate, key) if certificate and key else certificate or None,
        )
        self._stopped = threading.Event()
        self._closing_by: float | None = None  # set by `closing`: the time every export left must end by

    def closing(self, within_s: float) -> None:
        """The process is exiting: what is left to export gets one try each, all of them within `within_s`, so
        that a collector that is down does not hold the exit for the retries of every batch still queued."""
        self._closing_by = time.monotonic() + within_s

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._stopped.is_set():
            return SpanExportResult.FAILURE
        body = json.dumps(encoded(spans), separators=(",", ":")).encode()
        if self._gzip:
            body = gzip.compress(body, compresslevel=5)
        deadline = time.monotonic() + self._timeout_s
        wait_s = 0.5
        while True:
            if self._closing_by is not None:
                deadline = min(deadline, self._closing_by)
            left_s = deadline - time.monotonic()
            if left_s <= 0:
                return self._dropped(spans, "no time left to send them")
            status, error, retry_after = self._post(body, left_s)
            if 200 <= status < 300:
                return SpanExportResult.SUCCESS
            if (status and status not in _RETRIED) or self._closing_by is not None:
                return self._dropped(spans, error)
            wait_s = min(retry_after or wait_s, MAX_WAIT_S) * random.uniform(0.8, 1.2)  # jitter: the spec's
            if time.monotonic() + wait_s > deadline:
                return self._dropped(spans, error)
            if self._stopped.wait(wait_s):
                return SpanExportResult.FAILURE
            wait_s *= 2

    def _post(self, body: bytes, timeout_s: float) -> tuple[int, str, float | None]:
        """The answer's status (0: none), the error to report, and the wait its Retry-After asks for."""
        try:
            response = self._http.post(self.endpoint, content=body, timeout=timeout_s)
        except Exception as exc:  # any failure to send (refused, reset, bad URL, TLS): tried again, then dropped
            return 0, repr(exc), None
        retry_after = response.headers.get("retry-after", "")
        return (
            response.status_code,
            f"HTTP {response.status_code}",
            float(retry_after) if _seconds(retry_after) else None,
        )

    @staticmethod
    def _dropped(spans: Sequence[ReadableSpan], error: str) -> SpanExportResult:
        log.warning("spans not exported", extra={"action": "spans_not_exported", "count": len(spans), "error": error})
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        self._stopped.set()
        self._http.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # every export is sent before it returns


def _seconds(text: str) -> bool:
    return text.isdigit() and int(text) <= MAX_WAIT_S


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
    """An AnyValue as OTLP's JSON writes it: a value JSON cannot hold as it is (NaN, an integer past int64) is
    written as proto3's JSON writes it, or as text, so that one attribute never makes the whole batch invalid."""
    if value is None:
        return {}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)} if -(2**63) <= value < 2**63 else {"stringValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value if math.isfinite(value) else _NOT_FINITE[str(value)]}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, bytes):
        return {"bytesValue": base64.b64encode(value).decode()}
    if isinstance(value, Sequence):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": str(value)}


_NOT_FINITE: Final = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
