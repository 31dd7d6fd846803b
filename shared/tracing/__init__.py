"""Traces (OpenTelemetry, docs/operations.md#traces): off unless configured, and then the one thing every
component asks about them.

Tracing is on in a process when the standard variables ask for an exporter (OTEL_EXPORTER_OTLP_ENDPOINT,
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_TRACES_EXPORTER=otlp|console; OTEL_SDK_DISABLED=true turns it off),
or when the application that runs an embedded node has set a tracer provider of its own. Everything else here
answers at once when it is off: `active()` is None, and nothing of OpenTelemetry is imported. What does import it
is shared/tracing/spans.py, loaded only once tracing is on, so that a server without the `otel` extra, and
every process that does not trace, pays nothing.

One thing is kept whether or not this process traces: the W3C `traceparent` a job was created in (the API's
request span, else the caller's header), so that an executor that traces parents its attempts on it.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Final, Protocol

if TYPE_CHECKING:
    from shared.model import Job, Outcome
    from shared.tracing.spans import Tracing

log = logging.getLogger("jobsched.tracing")

# Version 00 of W3C Trace Context, as it must be sent: lower-case hex, ids not all zeros (checked apart).
_TRACEPARENT: Final = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")
_EXPORTERS: Final = frozenset({"otlp", "console"})

# The traceparent of the request being served: the API's span, else the caller's own (set by the API's
# middleware, read when a request's jobs are made: JobRequest.to_new_job).
_request_traceparent: ContextVar[str | None] = ContextVar("request_traceparent", default=None)
_active: Tracing | None = None


def valid_traceparent(value: str | None) -> str | None:
    """`value` when it is a traceparent a job may keep (version 00, non-zero ids), else None: a caller's header
    is kept only in that form, so that what a job stores is always 55 characters of hex and dashes."""
    if value is None:
        return None
    found = _TRACEPARENT.fullmatch(value)
    if found is None or found[1] == "0" * 32 or found[2] == "0" * 16:
        return None
    return value


def request_traceparent() -> str | None:
    """The trace context the jobs made now are created in (None outside a request, or without one)."""
    return _request_traceparent.get()


def set_request_traceparent(value: str | None) -> object:
    """Set for the rest of the current request; the token is for `reset_request_traceparent`."""
    return _request_traceparent.set(value)


def reset_request_traceparent(token: object) -> None:
    _request_traceparent.reset(token)  # type: ignore[arg-type]


def active() -> Tracing | None:
    """This process's tracing, or None when it is off."""
    return _active


def outgoing_headers() -> dict[str, str]:
    """The headers that carry the current span to a call out of the process (an HTTP job's request): empty when
    tracing is off or no span is current."""
    return {} if _active is None else _active.outgoing_headers()


def exporting_configured(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the OTEL_* variables ask this process to export traces."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter in _EXPORTERS
    return bool(environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def configure(service: str, environ: Mapping[str, str] = os.environ) -> Tracing | None:
    """Turn tracing on in this process when it is asked for (see the module's docstring); `service` names the
    process in its traces unless OTEL_SERVICE_NAME does. Idempotent. Asked for without the `otel` extra
    installed: a warning, and no tracing (a platform may set OTEL_* for every process it runs)."""
    global _active
    if _active is not None:
        return _active
    try:
        if not (exporting_configured(environ) or _application_provider_set()):
            return None
        from shared.tracing import spans

        _active = spans.from_environment(f"jobsched-{service}", environ, exporting=exporting_configured(environ))
    except Exception as exc:  # not installed, or OTEL_* it cannot follow (a propagator it does not know...)
        log.warning(
            "traces asked for but off: pip install 'jobsched[otel]', and check the OTEL_* variables",
            extra={"action": "tracing_unavailable", "error": repr(exc)},
        )
        return None
    if _active is not None:
        log.info("tracing on", extra={"action": "tracing_on", "service": service})
    return _active


def _application_provider_set() -> bool:
    """Whether the application set a tracer provider of its own, read from the OpenTelemetry API it already
    imported, importing nothing, and without get_tracer_provider(): that one would load OTEL_PYTHON_TRACER_PROVIDER's
    provider, and so turn tracing on (or fail) for a library that imported the API alone."""
    api = sys.modules.get("opentelemetry.trace")
    return api is not None and getattr(api, "_TRACER_PROVIDER", None) is not None


def use(tracing: Tracing | None) -> None:
    """Trace with `tracing` from now on (None: off): for an application that builds its own, and for tests."""
    global _active
    _active = tracing


class AttemptSpan(Protocol):
    """An attempt's span as the executor sees it (spans.AttemptSpan when tracing is on)."""

    def enter(self) -> object: ...
    def leave(self, token: object) -> None: ...
    def end(self, outcome: Outcome, error: str | None, exception: BaseException | None, stack: str | None) -> None: ...


class _NoSpan:
    def enter(self) -> object:
        return None

    def leave(self, token: object) -> None:
        pass

    def end(self, outcome: Outcome, error: str | None, exception: BaseException | None, stack: str | None) -> None:
        pass


NO_SPAN: Final = _NoSpan()


def attempt_span(job: Job, attempt: int) -> AttemptSpan:
    """The span of a job's attempt about to run (NO_SPAN when tracing is off, or when an application's tracer
    provider fails: the attempt runs all the same)."""
    if _active is None:
        return NO_SPAN
    try:
        return _active.attempt(job, attempt)
    except Exception:
        log.exception("no span for an attempt", extra={"action": "tracing_error", "jobId": job.id})
        return NO_SPAN


class LogIds(logging.Filter):
    """Adds `trace_id` and `span_id` to a log record made while a span is current (nothing when tracing is off):
    every handler of configure_logging has it, whichever of logging and tracing is configured first."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _active is not None:
            _active.log_ids(record)
        return True
