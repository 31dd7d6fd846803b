"""Progress reports of running attempts (HandlerContext.report_progress): a handler may report as often as it
likes; only the last report of each attempt is kept here, and the heartbeat writes those once a beat, so a
handler that reports in a tight loop costs the store one write per beat, and one that never reports none. A
report is only turned into JSON text when it is made (a snapshot, whatever the handler changes afterwards); the
checks of what a store can keep wait for the beat, which sees only the last one."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from jobsched.outcomes import MAX_PROGRESS_BYTES
from services.executor.attempt_results import json_text, kept_text
from shared.model import Job, utc_now
from shared.store.base import ProgressReport


class _AttemptProgress:
    """One running attempt's reports: the last one not written yet, and whether a refused one was logged."""

    def __init__(self, job: Job, logger: logging.LoggerAdapter[logging.Logger], owner: ProgressReports) -> None:
        self.job = job
        self._logger = logger
        self._owner = owner
        self._warned = False

    def report(self, value: Any) -> None:
        text, why = json_text(value, "progress")
        if text is None:
            self.refused(why)
            return
        self._owner.hold(self, text)

    def refused(self, why: str | None) -> None:
        """Progress is for watching, it never fails the work: a report a store cannot keep is dropped, and
        logged once for the attempt."""
        if not self._warned:
            self._warned = True
            self._logger.warning(why, extra={"action": "progress_not_kept"})


class ProgressReports:
    def __init__(self) -> None:
        self._unwritten: dict[str, tuple[_AttemptProgress, str, datetime]] = {}  # by job id
        self._lock = threading.Lock()

    def reporter(self, job: Job, logger: logging.LoggerAdapter[logging.Logger]) -> Callable[[Any], None]:
        """ctx.on_progress for `job`'s attempt."""
        return _AttemptProgress(job, logger, self).report

    def hold(self, attempt: _AttemptProgress, text: str) -> None:
        """The attempt's last report, until the heartbeat takes it."""
        report = (attempt, text, utc_now())
        with self._lock:
            self._unwritten[attempt.job.id] = report

    def forget(self, job: Job) -> None:
        """The attempt ended here: a report not written yet no longer can be (its result says the rest)."""
        with self._lock:
            self._unwritten.pop(job.id, None)

    def take(self) -> list[ProgressReport]:
        """The reports made since the last call, the last of each attempt, each one a store can keep."""
        with self._lock:
            taken, self._unwritten = self._unwritten, {}
        reports = []
        for attempt, text, at in taken.values():
            value, why = kept_text(text, MAX_PROGRESS_BYTES, "progress")
            if why is not None:
                attempt.refused(why)
            else:
                reports.append(ProgressReport(attempt.job, value, at))
        return reports
