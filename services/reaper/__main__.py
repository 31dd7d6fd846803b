"""`jobsched reaper` / `python -m services.reaper`: returns stuck jobs every REAPER_INTERVAL."""

from __future__ import annotations

import threading

from services.reaper.retention import Retention
from services.reaper.sweeper import run
from shared.backends import backend_from_settings
from shared.cli import one_line_errors
from shared.config import Settings
from shared.metrics import serve_metrics
from shared.observability import configure_observability
from shared.runtime import on_termination


@one_line_errors("jobsched reaper")
def main() -> None:
    settings = Settings.from_env()
    configure_observability("reaper", settings)
    backend = backend_from_settings(settings)
    store = backend.jobs
    stop = threading.Event()

    on_termination(stop.set)
    serve_metrics(settings.metrics_host, settings.metrics_port)
    run(
        store,
        interval=settings.reaper_interval,
        queued_timeout=settings.queued_timeout,
        stop=stop,
        job_types=backend.job_types,
        retention=settings.job_type_retention,
        jobs_kept=Retention.from_settings(settings),
    )
    store.close()


if __name__ == "__main__":
    main()
