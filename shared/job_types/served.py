"""Which job types the leader claims: those with a live executor, as announced in the store (executors may run
handler modules the scheduler never imports). Jobs of other types stay pending rather than being queued for
nobody and re-pended by the reaper over and over; how many wait is the gauge
`scheduler_jobs_waiting_for_executor{job_type}`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from datetime import datetime, timedelta

from shared import metrics
from shared.job_types.announcements import JobTypeRegistry
from shared.model import utc_now
from shared.store.base import StoreError

log = logging.getLogger("jobsched.scheduler")
REFRESH_S = 1.0  # how stale the leader's view of live executors may be: a new executor waits at most this long
WAITING_CHECK_S = 30.0  # the waiting-jobs gauge: one count per type without an executor, this often


class ServedTypes:
    def __init__(
        self,
        registry: JobTypeRegistry,
        known: Collection[str],
        *,
        retention: timedelta,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._registry = registry
        self._configured = frozenset(known)
        self._retention = retention
        self._monotonic = monotonic
        self._live: frozenset[str] = frozenset()
        self._known = self._configured
        self._next_refresh = 0.0
        self._next_waiting_check = 0.0
        self._reported: set[str] = set()

    @property
    def registry(self) -> JobTypeRegistry:
        return self._registry

    @property
    def retention(self) -> timedelta:
        return self._retention

    def live(self) -> frozenset[str]:
        """The types with at least one live executor (re-read at most every REFRESH_S; on a store error the
        last answer stands)."""
        if self._monotonic() >= self._next_refresh:
            self._next_refresh = self._monotonic() + REFRESH_S
            now = utc_now()
            try:
                infos = self._registry.job_types(now, now - self._retention)
            except StoreError as exc:
                log.warning("job types not read", extra={"action": "job_types_unavailable", "error": str(exc)})
                return self._live
            live = frozenset(i.name for i in infos if i.executors > 0)
            for gained in sorted(live - self._live):
                log.info("executor live", extra={"action": "job_type_live", "jobType": gained})
            for lost in sorted(self._live - live):
                log.warning("no live executor", extra={"action": "job_type_unserved", "jobType": lost})
            self._live = live
            self._known = self._configured | {i.name for i in infos}
        return self._live

    def report_waiting(self, now: datetime, also: Collection[str] = ()) -> None:
        """Update the waiting-jobs gauge of every known type without a live executor (and of `also`: types of
        due jobs nobody announced), at most every WAITING_CHECK_S; types served again drop to 0."""
        if self._monotonic() < self._next_waiting_check and not set(also) - self._reported:
            return
        self._next_waiting_check = self._monotonic() + WAITING_CHECK_S
        live = self.live()
        for job_type in sorted((self._known | set(also) | self._reported) - live):
            count = self._registry.waiting_runs(now, job_type)
            metrics.SCHEDULER_WAITING_FOR_EXECUTOR.labels(job_type).set(count)
            if count:
                self._reported.add(job_type)
        for job_type in sorted(self._reported & live):
            metrics.SCHEDULER_WAITING_FOR_EXECUTOR.labels(job_type).set(0)
            self._reported.discard(job_type)
