"""`jobsched executor --type T` (or JOB_TYPE=T) / `python -m services.executor`: runs one job type's handlers."""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading

from confluent_kafka import KafkaException

from services.executor.declared_schedules import announcer_with_schedules
from services.executor.wiring import attempt_runner, executor, with_http_jobs
from shared.backends import backend_from_settings
from shared.bus.kafka import KafkaBus
from shared.cli import OneLineParser, one_line_errors
from shared.config import ConfigError, Settings
from shared.handlers.builtin import builtin_types
from shared.handlers.plugins import HANDLERS_VARIABLE, load_handlers_or_exit
from shared.metrics import serve_metrics
from shared.observability import configure_observability
from shared.runtime import connect_bus, on_termination

log = logging.getLogger("jobsched.executor")


@one_line_errors("jobsched executor")
def main() -> None:
    parser = OneLineParser(prog="jobsched executor")
    parser.add_argument(
        "--type", dest="job_type", default=os.environ.get("JOB_TYPE"), help="the job type to run (or JOB_TYPE)"
    )
    parser.add_argument(
        "--handlers", default=None, help=f"comma-separated handler modules to load (or {HANDLERS_VARIABLE})"
    )
    args = parser.parse_args()
    settings = Settings.from_env()
    # Opening asks nothing of the server yet: the http type signs with the secrets the backend keeps, and fills in
    # the credentials it keeps.
    backend = backend_from_settings(settings)
    registry = builtin_types(demo=settings.demo_job_types)
    load_handlers_or_exit(registry, args.handlers, os.environ, parser.prog)
    registry = with_http_jobs(registry, settings, backend)
    if not args.job_type or args.job_type not in registry:
        print(
            f"jobsched executor: unknown job type {args.job_type!r}; known types: {', '.join(registry.names())}",
            file=sys.stderr,
        )
        raise SystemExit(2)
    configure_observability(f"executor-{args.job_type}", settings)
    worker_id = os.environ.get("NODE_ID") or f"{socket.gethostname()}-{os.getpid()}"
    try:
        announcer = announcer_with_schedules(backend, worker_id, registry[args.job_type], settings)
    except ConfigError as exc:
        print(f"jobsched executor: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    store = backend.jobs
    bus = connect_bus(settings)
    attempts = attempt_runner(settings, backend, bus, registry, args.job_type, worker_id)
    stop = threading.Event()

    on_termination(stop.set)
    serve_metrics(settings.metrics_host, settings.metrics_port)
    ensure_topic(bus, args.job_type, stop)  # before subscribing: a missing topic is only re-checked slowly
    loop = executor(attempts, bus.subscribe(args.job_type), settings, backend, stop=stop, announcer=announcer)
    try:
        loop.run()
    finally:
        bus.close()
        store.close()


def ensure_topic(bus: KafkaBus, job_type: str, stop: threading.Event) -> None:
    """Create the type's topic if missing (the leader does too), waiting while Kafka is unreachable."""
    delay = 0.5
    while not stop.is_set():
        try:
            bus.ensure_topics([job_type])
            return
        except KafkaException as exc:
            log.warning("kafka unavailable, retrying", extra={"action": "kafka_unavailable", "error": repr(exc)})
            stop.wait(delay)
            delay = min(delay * 2, 10)


if __name__ == "__main__":
    main()
