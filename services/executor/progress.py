"""Progress reports of running attempts (HandlerContext.report_progress): a handler may report as often as it
likes; only the last report of each attempt is kept here, and the heartbeat writes those once a beat, so a
handler that reports in a tight loop costs the store one write per beat, and one that never reports none."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from jobsched.outcomes import MAX_PROGRESS_BYTES
from services.executor.attempt_results import kept_json
from shared.model import Job, utc_now
from shared.store.base import ProgressReport


class ProgressReports:
    def __init__(self) -> None:
        self._unwritten: dict[str, ProgressReport] = {}
        self._lock = threading.Lock()

    def reporter(self, job: Job, logger: logging.LoggerAdapter[logging.Logger]) -> Callable[[Any], None]:
        """ctx.on_progress for `job`'s attempt. A report the store cannot keep (not JSON, too large) is dropped
        and logged once for the attempt: progress is for watching, it never fails the work."""
        warned = threading.Event()

        def report(value: Any) -> None:
            kept, why = kept_json(value, MAX_PROGRESS_BYTES, "progress")
            if why is not None:
                if not warned.is_set():
                    warned.set()
                    logger.warning(why, extra={"action": "progress_not_kept"})
                return
            with self._lock:
                self._unwritten[job.id] = ProgressReport(job, kept, utc_now())

        return report

    def forget(self, job: Job) -> None:
        """The attempt ended here: a report not written yet no longer can be (its result says the rest)."""
        with self._lock:
            self._unwritten.pop(job.id, None)

    def take(self) -> list[ProgressReport]:
        """The reports made since the last call, the last of each attempt."""
        with self._lock:
            reports, self._unwritten = list(self._unwritten.values()), {}
        return reports
