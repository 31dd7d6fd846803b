"""`jobsched reaper` / `python -m services.reaper`: returns stuck jobs every REAPER_INTERVAL."""

from __future__ import annotations

import signal
import threading
from types import FrameType

from services.reaper.sweeper import run
from shared.config import Settings
from shared.logging import configure_logging
from shared.metrics import serve_metrics
from shared.store.mongo import MongoJobStore


def main() -> None:
    settings = Settings.from_env()
    configure_logging("reaper", settings.log_level)
    store = MongoJobStore.connect(
        settings.mongo_uri, settings.mongo_db, timeout_ms=int(settings.mongo_timeout.total_seconds() * 1000)
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    serve_metrics(settings.metrics_port)
    run(store, interval=settings.reaper_interval, queued_timeout=settings.queued_timeout, stop=stop)
    store.close()


if __name__ == "__main__":
    main()
