"""The OTLP/HTTP JSON exporter (shared/tracing/otlp_json.py) against a receiver on loopback that answers as a
collector under load does: Retry-After kept to, one try each once the process is exiting, gzip bodies, and an
address nobody listens on tried until the timeout."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from shared.tracing.otlp_json import OtlpJsonExporter

pytestmark = pytest.mark.integration


class Collector:
    """Answers POST /v1/traces with the statuses scripted, in turn (the last one repeats); keeps what it got."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, dict[str, str]]] = [(200, {})]
        self.got: list[tuple[float, dict[str, str], bytes]] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                collector.got.append((time.monotonic(), {k.lower(): v for k, v in self.headers.items()}, body))
                answers = collector.answers
                status, headers = answers.pop(0) if len(answers) > 1 else answers[0]
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def collector() -> Iterator[Collector]:
    made = Collector()
    yield made
    made.server.shutdown()
    made.server.server_close()


def spans(count: int = 3) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    for n in range(count):
        provider.get_tracer("t").start_span(f"span {n}").end()
    return list(exporter.get_finished_spans())


def test_a_batch_refused_for_now_is_sent_again_after_the_retry_after(collector: Collector) -> None:
    collector.answers = [(503, {"Retry-After": "1"}), (200, {})]
    exporter = OtlpJsonExporter({"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint})
    assert exporter.export(spans()) is SpanExportResult.SUCCESS
    (first, _, body), (second, _, again) = collector.got
    assert second - first >= 0.75  # Retry-After 1 s, jittered by at most a fifth
    assert body == again
    assert len(json.loads(body)["resourceSpans"][0]["scopeSpans"][0]["spans"]) == 3


def test_a_batch_the_collector_refuses_for_good_is_dropped_at_once(collector: Collector) -> None:
    collector.answers = [(400, {})]
    exporter = OtlpJsonExporter({"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint})
    assert exporter.export(spans()) is SpanExportResult.FAILURE
    assert len(collector.got) == 1


def test_once_the_process_is_exiting_each_batch_gets_one_try(collector: Collector) -> None:
    collector.answers = [(503, {"Retry-After": "1"})]
    exporter = OtlpJsonExporter({"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint})
    exporter.closing(5)
    assert exporter.export(spans()) is SpanExportResult.FAILURE
    assert exporter.export(spans()) is SpanExportResult.FAILURE
    assert len(collector.got) == 2


def test_an_address_nobody_listens_on_is_tried_until_the_timeout_then_the_batch_is_dropped() -> None:
    with socket.socket() as sock:  # a port taken, then freed: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    exporter = OtlpJsonExporter(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}", "OTEL_EXPORTER_OTLP_TIMEOUT": "1500"}
    )
    started = time.monotonic()
    assert exporter.export(spans()) is SpanExportResult.FAILURE
    assert time.monotonic() - started >= 0.4  # tried again after a wait, not given up at the first refusal


def test_gzip_and_headers_are_sent_as_the_variables_say(collector: Collector) -> None:
    exporter = OtlpJsonExporter(
        {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{collector.endpoint}/v1/traces",
            "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "authorization=Bearer%20s3cret",
        }
    )
    assert exporter.export(spans(1)) is SpanExportResult.SUCCESS
    ((_, headers, body),) = collector.got
    assert (headers["content-encoding"], headers["authorization"]) == ("gzip", "Bearer s3cret")
    assert json.loads(gzip.decompress(body))["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["name"] == "span 0"
