"""`jobsched scheduler` / `python -m services.scheduler`: elected dispatcher of due jobs."""

from __future__ import annotations

import os
import socket

from services.scheduler.dispatcher import Dispatcher, DispatcherFactory
from services.scheduler.scheduler import Scheduler
from shared.backends import backend_from_settings
from shared.cli import one_line_errors
from shared.config import Settings
from shared.election.etcd import EtcdElector
from shared.handlers.builtin import builtin_types
from shared.job_types.served import ServedTypes
from shared.metrics import serve_metrics
from shared.nudge import NudgeListener
from shared.observability import configure_observability
from shared.runtime import connect_bus, on_termination


@one_line_errors("jobsched scheduler")
def main(make_dispatcher: DispatcherFactory = Dispatcher.from_settings) -> None:
    """`make_dispatcher` is how the benchmarks' baseline swaps in the original claims (loadtest/reference.py)."""
    settings = Settings.from_env()
    configure_observability("scheduler", settings)
    node_id = os.environ.get("NODE_ID") or f"{socket.gethostname()}-{os.getpid()}"
    backend = backend_from_settings(settings)
    store = backend.jobs
    bus = connect_bus(settings)
    elector = EtcdElector(
        settings.etcd_endpoints, settings.election_key, node_id, ttl_s=int(settings.lease_ttl.total_seconds())
    )
    # The types this process knows of; what is claimed is what live executors announce (ServedTypes).
    job_types = sorted({*builtin_types(demo=settings.demo_job_types).names(), *settings.job_types})
    served = ServedTypes(backend.job_types, job_types, retention=settings.job_type_retention)
    dispatcher = make_dispatcher(store, bus, served, settings)
    scheduler = Scheduler(elector, dispatcher, bus, job_types, tick_s=settings.scheduler_tick.total_seconds())

    on_termination(scheduler.request_stop)
    serve_metrics(settings.metrics_host, settings.metrics_port)
    listener = NudgeListener(settings.nudge_listen, scheduler.nudge) if settings.nudge_listen else None
    try:
        scheduler.run()
    finally:
        if listener is not None:
            listener.close()
        bus.close()
        store.close()


if __name__ == "__main__":
    main()
