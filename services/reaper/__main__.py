"""`jobsched reaper` / `python -m services.reaper`: returns stuck jobs every REAPER_INTERVAL."""

from __future__ import annotations

import threading

from services.reaper.sweeper import run
from shared.cli import one_line_errors
from shared.config import Settings
from shared.job_types.registries import type_registry_of
from shared.logging import configure_logging
from shared.metrics import serve_metrics
from shared.runtime import connect_store, on_termination


@one_line_errors("jobsched reaper")
def main() -> None:
    settings = Settings.from_env()
    configure_logging("reaper", settings.log_level, settings.log_format)
    store = connect_store(settings)
    stop = threading.Event()

    on_termination(stop.set)
    serve_metrics(settings.metrics_host, settings.metrics_port)
    run(
        store,
        interval=settings.reaper_interval,
        queued_timeout=settings.queued_timeout,
        stop=stop,
        job_types=type_registry_of(store),
        retention=settings.job_type_retention,
    )
    store.close()


if __name__ == "__main__":
    main()
