"""The spans jobsched makes, with OpenTelemetry (the `otel` extra): imported by shared/tracing only once tracing
is on. Names and attributes are listed in docs/operations.md#traces.

- The API: a SERVER span per request, `<METHOD> <route template>`, parented on the caller's context.
- The executor: a CONSUMER span per attempt, `job.run <jobType>`, parented on the context the job was created in
  (a template's run is linked to its template's instead: a schedule's runs are traces of their own, not one
  trace that grows for ever). The handler runs inside it, so what it calls with its own instrumentation nests.
- The scheduler: an INTERNAL span `jobs.claim` over a claim and the publishing of its wake-ups, linked to the
  contexts its jobs were created in; at most one a second (CLAIM_SPAN_EVERY_S), since a busy leader claims
  every few milliseconds.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from shared.model import Job, Outcome
from shared.tracing.otlp_json import OtlpJsonExporter

log = logging.getLogger("jobsched.tracing")
CLAIM_SPAN_EVERY_S: Final = 1.0
CLOSING_S: Final = 3.0  # what an exit gives the spans still queued
MAX_LINKS: Final = 128  # OpenTelemetry's default limit of links per span
_W3C: Final = TraceContextTextMapPropagator()
_FAILED: Final = frozenset({Outcome.FAILED, Outcome.TIMEOUT, Outcome.LOST})


def from_environment(service: str, environ: Mapping[str, str], *, exporting: bool) -> Tracing | None:
    """The application's tracer provider when it set one; else, when the OTEL_* variables ask for an exporter
    (`exporting`), a provider of our own, made global (so that a handler's own instrumentation exports with it),
    exporting as OTEL_TRACES_EXPORTER says (OTLP over HTTP by default, to OTEL_EXPORTER_OTLP_ENDPOINT), sampled as
    OTEL_TRACES_SAMPLER says (every trace by default); else None."""
    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider):
        return Tracing(current)
    if not exporting:
        return None
    named = environ.get("OTEL_SERVICE_NAME") or "service.name=" in environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    exporter = _exporter(environ)
    # Shut down by our own exit hook rather than the provider's: the exporter is told to hurry first.
    provider = TracerProvider(
        resource=Resource.create({} if named else {"service.name": service}), shutdown_on_exit=False
    )
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    atexit.register(_shut_down, provider, exporter)
    return Tracing(provider)


def _shut_down(provider: TracerProvider, exporter: SpanExporter) -> None:
    """At the process's exit: the spans still queued get one try each, within CLOSING_S in all (a collector that
    is down must not hold an exit past an orchestrator's grace period), then the provider stops."""
    if isinstance(exporter, OtlpJsonExporter):
        exporter.closing(CLOSING_S)
    provider.shutdown()  # type: ignore[no-untyped-call]  # the SDK does not annotate it


def _exporter(environ: Mapping[str, str]) -> SpanExporter:
    """The console's, or OTLP over HTTP: JSON unless OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL asks for protobuf
    (otlp_json.py says why). Raises ValueError for gRPC, which is not shipped: tracing stays off, with a warning."""
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "console":
        return ConsoleSpanExporter()
    protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or ""
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()  # endpoint, headers, timeout: from OTEL_EXPORTER_OTLP_* itself
    if protocol not in ("", "http/json"):
        raise ValueError(f"OTLP protocol {protocol!r} is not supported: http/json (the default) or http/protobuf")
    return OtlpJsonExporter(environ)


def traceparent_of(span: trace.Span) -> str | None:
    carrier: dict[str, str] = {}
    _W3C.inject(carrier, trace.set_span_in_context(span))
    return carrier.get("traceparent")


def _context_of(traceparent: str | None) -> otel_context.Context | None:
    return None if traceparent is None else _W3C.extract({"traceparent": traceparent})


def _span_context_of(traceparent: str | None) -> trace.SpanContext | None:
    found = _context_of(traceparent)
    if found is None:
        return None
    span_context = trace.get_current_span(found).get_span_context()
    return span_context if span_context.is_valid else None


class RequestSpan:
    """An API request's span, current while the request is served."""

    def __init__(self, span: trace.Span) -> None:
        self._span = span
        self._token = otel_context.attach(trace.set_span_in_context(span))
        self.traceparent = traceparent_of(span)

    def end(self, method: str, route: str, status: int) -> None:
        """`method` and `route` as the request metrics label them (bounded sets: never the raw path)."""
        span = self._span
        span.update_name(f"{method} {route}")
        span.set_attribute("http.route", route)
        span.set_attribute("http.response.status_code", status)
        if status >= 500:
            span.set_status(Status(StatusCode.ERROR))
        otel_context.detach(self._token)
        span.end()


class AttemptSpan:
    """An attempt's span: current on the thread that runs its handler between `enter` and `leave`; ended once,
    by whichever of the handler's return or its deadline comes first (`end`)."""

    def __init__(self, span: trace.Span) -> None:
        self._span = span
        self._ended = False
        self._lock = threading.Lock()

    def enter(self) -> object:
        return otel_context.attach(trace.set_span_in_context(self._span))

    def leave(self, token: object) -> None:
        otel_context.detach(token)

    def end(self, outcome: Outcome, error: str | None, exception: BaseException | None, stack: str | None) -> None:
        """`error` and `stack` as the attempt's record keeps them (bounded): a handler's exception may carry
        megabytes, and one span that large gets its whole batch refused by a collector."""
        with self._lock:
            if self._ended:
                return
            self._ended = True
        span = self._span
        span.set_attribute("jobsched.outcome", outcome.value)
        if exception is not None:
            kind = type(exception)
            span.add_event(
                "exception",
                {
                    "exception.type": f"{kind.__module__}.{kind.__qualname__}".removeprefix("builtins."),
                    "exception.message": error or "",
                    "exception.stacktrace": stack or "",
                },
            )
        if outcome in _FAILED:
            span.set_status(Status(StatusCode.ERROR, error))
        span.end()


class Tracing:
    """What jobsched's components trace with: one tracer of `provider`."""

    def __init__(self, provider: trace.TracerProvider) -> None:
        from jobsched import __version__

        self._tracer = provider.get_tracer("jobsched", __version__)
        self._claims_lock = threading.Lock()
        self._next_claim_span = 0.0

    # --- the API

    def request(self, method: str, headers: Sequence[tuple[bytes, bytes]]) -> RequestSpan:
        """A request's span, made current; `headers` as ASGI gives them (names in lower case)."""
        carrier = {name.decode("latin-1"): value.decode("latin-1") for name, value in headers}
        span = self._tracer.start_span(
            method,
            context=propagate.extract(carrier),
            kind=SpanKind.SERVER,
            attributes={"http.request.method": method},
        )
        return RequestSpan(span)

    # --- the executor

    def attempt(self, job: Job, attempt: int) -> AttemptSpan:
        run_of_template = job.templateId is not None
        linked = _span_context_of(job.traceparent) if run_of_template else None
        span = self._tracer.start_span(
            f"job.run {job.jobType}",
            context=otel_context.Context() if run_of_template else _context_of(job.traceparent),
            kind=SpanKind.CONSUMER,
            links=[Link(linked)] if linked is not None else None,
            attributes=_job_attributes(job, attempt),
        )
        return AttemptSpan(span)

    # --- the scheduler

    @contextmanager
    def claim(self, traceparents: Callable[[], Sequence[str | None]], started_ns: int) -> Iterator[None]:
        """A claim's span, from `started_ns` (time.time_ns()) to the end of what follows (its publishing), linked
        to its jobs' creating contexts (`traceparents`, asked for only when the span is made); none when a claim
        span was made less than CLAIM_SPAN_EVERY_S ago."""
        now = time.monotonic()
        with self._claims_lock:
            sampled = now >= self._next_claim_span
            if sampled:
                self._next_claim_span = now + CLAIM_SPAN_EVERY_S
        if not sampled:
            yield
            return
        carried = traceparents()
        links = [Link(found) for tp in carried[:MAX_LINKS] if (found := _span_context_of(tp)) is not None]
        attributes = {"jobsched.jobs": len(carried)}
        with self._tracer.start_as_current_span(
            "jobs.claim", context=otel_context.Context(), links=links, attributes=attributes, start_time=started_ns
        ):
            yield

    # --- any component

    def outgoing_headers(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        _W3C.inject(carrier)
        return carrier

    def log_ids(self, record: logging.LogRecord) -> None:
        span_context = trace.get_current_span().get_span_context()
        if span_context.is_valid:
            record.trace_id = format(span_context.trace_id, "032x")
            record.span_id = format(span_context.span_id, "016x")


def _job_attributes(job: Job, attempt: int) -> dict[str, Any]:
    """What an attempt's span says of it: jobsched's own names only (the messaging conventions' would repeat the
    type and the id, and each attribute costs every span its share: docs/performance-log.md, issue 51)."""
    attributes: dict[str, Any] = {
        "jobsched.job.id": job.id,
        "jobsched.job.type": job.jobType,
        "jobsched.tenant": job.tenantId,
        "jobsched.attempt": attempt,
    }
    for name, value in (("jobsched.template.id", job.templateId), ("jobsched.workflow.id", job.workflowId)):
        if value is not None:
            attributes[name] = value
    if job.batchId is not None or job.callbackOf is not None:
        attributes["jobsched.batch.id"] = job.batchId or job.callbackOf
    return attributes
