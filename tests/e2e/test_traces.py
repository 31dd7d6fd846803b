"""Traces (docs/operations.md#traces): an embedded node in this process, traced with an in-memory exporter, its
API reached over HTTP. A job's attempts continue the trace of the request that created it; the handler runs in
its attempt's span; a schedule's runs link to their template; the scheduler's claim links to the jobs it carries;
an HTTP job passes the trace on; log lines name the span. Without tracing, nothing of OpenTelemetry is imported."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from jobsched import HandlerContext, JobTypes, Payload
from jobsched.client import Client
from services.embedded import Embedded
from shared import tracing
from shared.config import Settings
from shared.logging import configure_logging
from shared.model import format_time, utc_now
from shared.tracing.spans import Tracing, traceparent_of
from tests.e2e.test_http_jobs import Receiver, Reply
from tests.support import wait_until

pytestmark = pytest.mark.e2e
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
CALLER = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"


def attrs(span: ReadableSpan | Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def parent_id(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


class Traced:
    """The spans this process ends, and a tracer of the same provider (what a handler's own calls use)."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("the-application")

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if s.name == name]

    def one(self, name: str, **attributes: Any) -> ReadableSpan:
        """The one span of that name and attributes, once it has ended."""

        def found() -> ReadableSpan | None:
            matching = [s for s in self.named(name) if all(attrs(s).get(k) == v for k, v in attributes.items())]
            assert len(matching) <= 1, matching
            return matching[0] if matching else None

        return wait_until(found, 10, f"the span {name} {attributes}")


def application(traced: Traced, seen: dict[str, Any], released: threading.Event) -> JobTypes:
    """The handlers; `released`: what the overrunning one waits for, set once the test is over."""
    handlers = JobTypes()

    @handlers.handler("plain", timeout=10)
    def plain(payload: Payload, ctx: HandlerContext) -> None:
        seen[ctx.job_id] = trace.get_current_span().get_span_context()
        with traced.tracer.start_as_current_span("plain's own call"):
            ctx.logger.info("calling out")
        if payload.get("fail"):
            raise ValueError("the card was declined")

    @handlers.handler("overrunning", timeout=1)
    def overrunning(payload: Payload, ctx: HandlerContext) -> None:
        released.wait(60)  # past its deadline: abandoned, its attempt closed as a timeout; ends with the test

    @handlers.handler("awaited", timeout=10)
    async def awaited(payload: Payload, ctx: HandlerContext) -> None:
        with traced.tracer.start_as_current_span("awaited's own call"):
            # The handler gives up the loop while its work runs on a thread: the span stays current across it.
            await asyncio.to_thread(ctx.logger.info, "calling out")
            seen[ctx.job_id] = trace.get_current_span().get_span_context()

    return handlers


@pytest.fixture
def traced() -> Iterator[Traced]:
    made = Traced()
    tracing.use(Tracing(made.provider))
    try:
        yield made
    finally:
        tracing.use(None)


@pytest.fixture
def seen() -> dict[str, Any]:
    return {}


@pytest.fixture
def node(traced: Traced, seen: dict[str, Any]) -> Iterator[Embedded]:
    settings = Settings(scheduler_tick=timedelta(milliseconds=50), auth="off", http_jobs_allow=("127.0.0.1",))
    released = threading.Event()
    handlers = application(traced, seen, released)
    with tempfile.TemporaryDirectory(prefix="jobsched-traces-") as directory:
        embedded = Embedded(Path(directory) / "jobs.db", settings=settings, handlers=handlers, port=0)
        try:
            with embedded:
                yield embedded
        finally:
            released.set()


def create(node: Embedded, body: dict[str, Any], traceparent: str | None = CALLER) -> dict[str, Any]:
    headers = {"traceparent": traceparent} if traceparent else {}
    due: dict[str, Any] = {} if "interval" in body else {"scheduledAt": format_time(utc_now())}
    body = {"tenantId": "acme", "idempotencyKey": uuid.uuid4().hex, **due, **body}
    response = httpx.post(f"{node.url}/jobs", json=body, headers=headers)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def finished(node: Embedded, job_id: str) -> str:
    with Client(node.url) as client:
        return client.wait(job_id, timeout=30).status


def test_an_attempt_continues_the_trace_of_the_request_that_created_its_job(
    node: Embedded, traced: Traced, seen: dict[str, Any]
) -> None:
    job = create(node, {"jobType": "plain", "payload": {}})
    assert finished(node, job["id"]) == "completed"

    request = traced.one("POST /jobs")
    assert request.kind is SpanKind.SERVER
    assert (format(request.context.trace_id, "032x"), format(parent_id(request), "016x")) == (
        CALLER_TRACE,
        CALLER_SPAN,
    )
    assert attrs(request)["http.response.status_code"] == 201
    assert job["traceparent"] == f"00-{CALLER_TRACE}-{format(request.context.span_id, '016x')}-01"

    attempt = traced.one("job.run plain", **{"jobsched.job.id": job["id"]})
    assert attempt.kind is SpanKind.CONSUMER
    assert parent_id(attempt) == request.context.span_id
    assert attempt.context.trace_id == request.context.trace_id
    assert {k: attrs(attempt)[k] for k in ("jobsched.job.type", "jobsched.tenant", "jobsched.attempt")} == {
        "jobsched.job.type": "plain",
        "jobsched.tenant": "acme",
        "jobsched.attempt": 1,
    }
    assert attrs(attempt)["jobsched.outcome"] == "succeeded"
    assert attempt.status.status_code is StatusCode.UNSET

    # The handler ran inside the attempt's span, and what it traced itself nests under it.
    assert seen[job["id"]].span_id == attempt.context.span_id
    own = traced.named("plain's own call")
    assert [parent_id(s) for s in own] == [attempt.context.span_id]


def test_an_async_handler_runs_inside_its_attempt_s_span(node: Embedded, traced: Traced, seen: dict[str, Any]) -> None:
    job = create(node, {"jobType": "awaited", "payload": {}})
    assert finished(node, job["id"]) == "completed"
    attempt = traced.one("job.run awaited", **{"jobsched.job.id": job["id"]})
    (own,) = traced.named("awaited's own call")
    assert parent_id(own) == attempt.context.span_id
    assert seen[job["id"]].span_id == own.context.span_id


def test_a_failed_attempt_records_its_exception_and_each_retry_is_a_span_of_the_same_trace(
    node: Embedded, traced: Traced
) -> None:
    job = create(node, {"jobType": "plain", "payload": {"fail": True}, "maxAttempts": 2})
    assert finished(node, job["id"]) == "dlq"
    first = traced.one("job.run plain", **{"jobsched.job.id": job["id"], "jobsched.attempt": 1})
    second = traced.one("job.run plain", **{"jobsched.job.id": job["id"], "jobsched.attempt": 2})
    for attempt in (first, second):
        assert attrs(attempt)["jobsched.outcome"] == "failed"
        assert attempt.status.status_code is StatusCode.ERROR
        assert attempt.status.description == "ValueError: the card was declined"
        (event,) = [e for e in attempt.events if e.name == "exception"]
        assert attrs(event)["exception.type"] == "ValueError"
        assert attrs(event)["exception.message"] == "ValueError: the card was declined"
        assert 'raise ValueError("the card was declined")' in attrs(event)["exception.stacktrace"]
        assert attempt.context.trace_id == int(CALLER_TRACE, 16)
    assert parent_id(first) == parent_id(second)  # both under the request that created the job


def test_an_attempt_past_its_deadline_ends_its_span_as_a_timeout(node: Embedded, traced: Traced) -> None:
    job = create(node, {"jobType": "overrunning", "payload": {}, "maxAttempts": 1})
    assert finished(node, job["id"]) == "dlq"
    attempt = traced.one("job.run overrunning", **{"jobsched.job.id": job["id"]})
    assert attrs(attempt)["jobsched.outcome"] == "timeout"
    assert attempt.status.status_code is StatusCode.ERROR


def test_a_schedule_s_runs_are_traces_of_their_own_linked_to_their_template(node: Embedded, traced: Traced) -> None:
    template = create(node, {"jobType": "plain", "payload": {}, "interval": "1s"})

    def a_run() -> ReadableSpan | None:
        runs = [s for s in traced.named("job.run plain") if attrs(s).get("jobsched.template.id") == template["id"]]
        return runs[0] if runs else None

    run = wait_until(a_run, 10, "a run's span")
    assert run.parent is None
    assert run.context.trace_id != int(CALLER_TRACE, 16)
    assert [traceparent_of(trace.NonRecordingSpan(link.context)) for link in run.links] == [template["traceparent"]]


def test_the_scheduler_s_claim_links_to_the_jobs_it_carries(node: Embedded, traced: Traced) -> None:
    job = create(node, {"jobType": "plain", "payload": {}})
    assert finished(node, job["id"]) == "completed"
    claims = wait_until(lambda: traced.named("jobs.claim") or None, 10, "a claim's span")
    linked = {traceparent_of(trace.NonRecordingSpan(link.context)) for claim in claims for link in claim.links}
    assert job["traceparent"] in linked
    assert all(claim.parent is None and attrs(claim)["jobsched.jobs"] >= 1 for claim in claims)


def test_an_http_job_sends_its_attempt_s_trace_context_to_its_target(node: Embedded, traced: Traced) -> None:
    receiver = Receiver()
    try:
        receiver.script["/hook"] = [Reply(200)]
        stale = {"TraceParent": "00-stale-stale-00", "tracestate": "vendor=stale"}
        payload = {"url": receiver.url("/hook"), "method": "POST", "headers": stale}
        job = create(node, {"jobType": "http", "payload": payload})
        assert finished(node, job["id"]) == "completed"
        attempt = traced.one("job.run http", **{"jobsched.job.id": job["id"]})
        (sent,) = receiver.requests_to("/hook")
        sent_headers = {k.lower(): v for k, v in sent.headers.items()}
        assert sent_headers["traceparent"] == traceparent_of(trace.NonRecordingSpan(attempt.context))
        assert [k for k in sent.headers if k.lower() == "traceparent"] == ["traceparent"]
        assert "tracestate" not in sent_headers
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()


def test_the_client_sends_the_application_s_current_span(node: Embedded, traced: Traced) -> None:
    with traced.tracer.start_as_current_span("the application's request") as span, Client(node.url) as client:
        job = client.create("plain", {}, tenant_id="acme")
    request = traced.one("POST /jobs")
    assert parent_id(request) == span.get_span_context().span_id
    assert job.traceparent == traceparent_of(trace.NonRecordingSpan(request.context))


def test_without_tracing_a_caller_s_valid_traceparent_is_kept_as_it_came(node: Embedded, traced: Traced) -> None:
    tracing.use(None)
    assert create(node, {"jobType": "plain", "payload": {}})["traceparent"] == CALLER
    assert "traceparent" not in create(node, {"jobType": "plain", "payload": {}}, traceparent="00-zz-bad-01")
    zeros = f"00-{'0' * 32}-{CALLER_SPAN}-01"
    assert "traceparent" not in create(node, {"jobType": "plain", "payload": {}}, traceparent=zeros)
    assert traced.named("POST /jobs") == []


def test_a_log_line_written_in_a_span_names_it(traced: Traced) -> None:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        configure_logging("test", log_format="json")
        (handler,) = root.handlers
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    outside = logging.LogRecord("jobsched.test", logging.INFO, __file__, 1, "outside", None, None)
    handler.filter(outside)  # the handler's filters are what add the ids (LogIds), here with no span current
    record = logging.LogRecord("jobsched.test", logging.INFO, __file__, 1, "inside", None, None)
    with traced.tracer.start_as_current_span("some work") as span:
        handler.filter(record)
    line = handler.format(record)
    context = span.get_span_context()
    assert f'"trace_id": "{context.trace_id:032x}"' in line
    assert f'"span_id": "{context.span_id:016x}"' in line
    assert "trace_id" not in handler.format(outside)


def test_a_server_that_does_not_trace_imports_nothing_of_opentelemetry() -> None:
    program = """
import sys
from shared import tracing
import services.api.app, services.embedded.node, services.executor.executor, services.scheduler.dispatcher
import jobsched.client
assert tracing.configure("api", {"OTEL_SERVICE_NAME": "x"}) is None
loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
assert loaded == [], loaded
import jobsched.client._calls
assert jobsched.client._calls.trace_headers() is None
# A library that imports the API alone, no provider set, no OTEL_*: still off, and the SDK is not loaded.
import opentelemetry.trace
assert tracing.configure("api", {}) is None
assert not any(m.startswith("opentelemetry.sdk") for m in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("environ", "configured"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, False),
    ],
)
def test_the_otel_variables_say_whether_a_process_exports_traces(environ: dict[str, str], configured: bool) -> None:
    assert tracing.exporting_configured(environ) is configured
