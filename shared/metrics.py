"""Prometheus metrics of every binary, and the separate listener that serves /metrics and /healthz.

All metric objects live here so names and labels are defined once and documented in the README.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest

from shared.ports import listen

# api
API_REQUESTS = Counter("api_requests_total", "HTTP requests served by the API", ["method", "route", "status"])
API_REQUEST_SECONDS = Histogram(
    "api_request_duration_seconds",
    "HTTP request latency of the API",
    ["method", "route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
API_AUTH_DENIED = Counter(
    "api_auth_denied_total", "Requests refused by authentication or authorization (AUTH=required)", ["reason"]
)
API_RATE_LIMITED = Counter("api_rate_limited_total", "Requests refused by their API key's rate limit", ["tenant"])

# scheduler
SCHEDULER_TICK_SECONDS = Histogram(
    "scheduler_tick_duration_seconds",
    "Duration of one scheduler tick (claim + publish + templates)",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
SCHEDULER_JOBS_CLAIMED = Counter("scheduler_jobs_claimed_total", "Jobs moved pending → queued", ["job_type"])
SCHEDULER_DISPATCH_ERRORS = Counter(
    "scheduler_dispatch_errors_total", "Wake-ups not delivered to Kafka (job put back to pending)", ["job_type"]
)
SCHEDULER_CLAIMS_HELD = Counter(
    "scheduler_claims_held_total",
    "Claims that left due jobs of the type pending because its room was spent (DISPATCH_AHEAD, a limit) or their"
    " concurrency key's start rate had no start within reach",
    ["job_type"],
)
LIMIT_IN_USE = Gauge(
    "scheduler_limited_jobs_in_flight",
    "Jobs of a type with limits that are claimed, queued or running, as counted at the last claim",
    ["job_type"],
)
SCHEDULER_CRON_SPAWNED = Counter("scheduler_cron_runs_spawned_total", "Runs spawned from recurring templates")
SCHEDULER_SCHEDULE_ACTIONS = Counter(
    "scheduler_schedule_actions_total",
    "Fire times of templates by what became of them (spawned, buffered, skipped by overlap, missed by catch-up)",
    ["action"],
)
SCHEDULER_INVALID_TEMPLATES = Counter(
    "scheduler_invalid_templates_total", "Templates dead-lettered because their schedule no longer parses"
)
SCHEDULER_IS_LEADER = Gauge("scheduler_is_leader", "1 while this scheduler holds a trusted leadership term")
SCHEDULER_LEADER_TRANSITIONS = Counter(
    "scheduler_leader_transitions_total", "Leadership gained or lost by this scheduler", ["direction"]
)
SCHEDULER_WAITING_FOR_EXECUTOR = Gauge(
    "scheduler_jobs_waiting_for_executor",
    "Due pending jobs of a type that no live executor serves (they wait, unclaimed)",
    ["job_type"],
)
SCHEDULER_TICK_ERRORS = Counter("scheduler_tick_errors_total", "Ticks that failed (store or broker down)")

# executor
EXECUTOR_PROCESSED = Counter(
    "executor_jobs_processed_total", "Attempts finished, by job type and outcome", ["job_type", "result"]
)
EXECUTOR_HANDLER_SECONDS = Histogram(
    "executor_handler_duration_seconds",
    "Handler run time per attempt",
    ["job_type"],
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
EXECUTOR_START_LATENESS_SECONDS = Histogram(
    "executor_start_lateness_seconds",
    "How late an attempt started: handler start - the job's scheduledAt (retries count from their backoff)",
    ["job_type"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
EXECUTOR_STARTS_RATE_LIMITED = Counter(
    "executor_starts_rate_limited_total",
    "Starts refused because the job type's start rate had none left then (the job waited for its turn)",
    ["job_type"],
)
EXECUTOR_IN_FLIGHT = Gauge("executor_in_flight", "Attempts running now", ["job_type"])
EXECUTOR_SKIPPED = Counter(
    "executor_skipped_deliveries_total",
    "Deliveries acknowledged without running (duplicate, cancelled, finished, bad message, late result)",
    ["job_type", "reason"],
)
EXECUTOR_DEAD_LETTERED = Counter("executor_dead_lettered_total", "Jobs moved to the DLQ", ["job_type"])

# reaper
REAPER_RECOVERED = Counter("reaper_recovered_jobs_total", "Jobs returned by the reaper", ["sweep"])
REAPER_SWEEP_ERRORS = Counter("reaper_sweep_errors_total", "Sweeps that failed (retried on the next interval)")
RETENTION_DELETED = Counter(
    "retention_deleted_jobs_total", "Finished jobs (with their attempt records) deleted by age", ["status"]
)

# bus
BUS_PUBLISH_ERRORS = Counter("bus_publish_errors_total", "Best-effort publishes (events, DLQ) that failed", ["topic"])


class _Handler(BaseHTTPRequestHandler):
    health: Callable[[], bool] = staticmethod(lambda: True)

    def do_GET(self) -> None:
        if self.path == "/metrics":
            body, ctype, code = generate_latest(), CONTENT_TYPE_LATEST, 200
        elif self.path == "/healthz":
            ok = type(self).health()
            body, ctype, code = (b"ok" if ok else b"unhealthy"), "text/plain", 200 if ok else 503
        else:
            body, ctype, code = b"not found", "text/plain", 404
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return  # scrapes every few seconds would drown the logs


def serve_metrics(host: str, port: int, health: Callable[[], bool] = lambda: True) -> ThreadingHTTPServer:
    """Serve /metrics and /healthz on their own port in a daemon thread; port 0 picks a free one. ListenError
    (one line, naming the holder of a taken port) when the port cannot be had."""
    handler = type("MetricsHandler", (_Handler,), {"health": staticmethod(health)})
    server = ThreadingHTTPServer((host, port), handler, bind_and_activate=False)
    server.socket.close()
    server.socket = listen(host, port, "metrics", "METRICS_PORT")
    server.server_address = server.socket.getsockname()[:2]
    threading.Thread(target=server.serve_forever, daemon=True, name="metrics").start()
    return server
