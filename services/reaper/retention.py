"""Retention: finished jobs, with their attempt records, are deleted once they have been finished longer than
their status's retention (RETAIN_COMPLETED, RETAIN_CANCELLED, RETAIN_DLQ), so that a store that runs for years
holds what it did lately, not everything it ever did.

Each reaper sweep deletes in batches of RETENTION_BATCH jobs, one short write each (the executors' writes get
their turns between them), up to MAX_BATCHES_PER_SWEEP batches a status; what is left waits for the next sweep.
Templates are never deleted by age (a finished template goes with a delete of its own); their runs are, so a
template's history reaches back as far as the retention of its runs' statuses. A workflow's or a batch's record goes
once none of its jobs is left.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from shared import metrics
from shared.config import Settings
from shared.model import Status
from shared.store.base import ReaperStore

log = logging.getLogger("jobsched.reaper")
RETENTION_BATCH: Final = 500
MAX_BATCHES_PER_SWEEP: Final = 100


@dataclass(frozen=True)
class Retention:
    """How long each final status is kept; None: forever."""

    completed: timedelta | None = None
    cancelled: timedelta | None = None
    dlq: timedelta | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> Retention:
        return cls(settings.retain_completed, settings.retain_cancelled, settings.retain_dlq)

    def ages(self) -> dict[Status, timedelta]:
        kept = {Status.COMPLETED: self.completed, Status.CANCELLED: self.cancelled, Status.DLQ: self.dlq}
        return {status: age for status, age in kept.items() if age is not None}


KEEP_FOREVER: Final = Retention()


def delete_aged(store: ReaperStore, retention: Retention, now: datetime) -> dict[Status, int]:
    """One sweep's deletions: per status, the jobs deleted."""
    deleted: dict[Status, int] = {}
    for status, age in retention.ages().items():
        total = 0
        for _ in range(MAX_BATCHES_PER_SWEEP):
            count = store.delete_finished(status, now - age, RETENTION_BATCH)
            total += count
            if count < RETENTION_BATCH:
                break
        deleted[status] = total
        if total:
            metrics.RETENTION_DELETED.labels(status.value).inc(total)
            log.info(
                "finished jobs deleted by age",
                extra={"action": "retention_deleted", "status": status.value, "count": total, "olderThan": str(age)},
            )
    if deleted:
        delete_emptied_records(store, now - min(retention.ages().values()))
    return deleted


def delete_emptied_records(store: ReaperStore, created_before: datetime) -> int:
    """The workflows' and batches' records none of whose jobs is left (retention deleted them), among those created
    before `created_before` (none younger can have aged out): RETENTION_BATCH of each looked at a call, up to
    MAX_BATCHES_PER_SWEEP calls while there are more to look at."""
    count = 0
    for _ in range(MAX_BATCHES_PER_SWEEP):
        deleted, more = store.delete_emptied_groups(created_before, RETENTION_BATCH)
        count += deleted
        if not more:
            break
    if count:
        log.info("emptied workflow and batch records deleted", extra={"action": "retention_records", "count": count})
    return count
