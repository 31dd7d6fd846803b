"""The reaper's sweeps. Several reapers may run at once: a re-pend is idempotent, closing a lost attempt is
decided by inserting its one outcome, so only one reaper (or the executor) wins it, and a job deleted by age is
deleted once.

- queued longer than QUEUED_TIMEOUT → pending: the wake-up was lost (publish or consumer failure).
- running (or claimed, as earlier versions wrote) whose lease ran out (CLAIM_TIMEOUT after the start, extended
  by executor heartbeats) → the attempt is closed as `lost` and the job goes back to pending with attempts+1
  after its backoff (the one it was created with, as for a failure), or to dlq when its budget is spent: a job
  that crashes every executor ends in the DLQ instead of looping.
- finished longer than its status's retention → deleted with its attempt records (retention.py).
- the history's minute (shared/store/history.py): the jobs due and waiting and running, once a minute.
- a concurrency key's start-rate times that have fallen behind the clock → forgotten (they allow what no record
  allows), so keys that no longer start take no room.
- a parent that ended with waiting dependents a crash left unsettled (MongoDB store) → they are settled
  (store/mongo/dependencies.py), once the parent's mark is SETTLE_GRACE old.
- a workflow a crash left half written (MongoDB store) → finished, or removed when steps are missing
  (store/mongo/workflows.py), once CREATING_GRACE old.
- a sealed batch whose members have all ended and that was not fired (MongoDB store: a crash between a member's
  end and its batch's check) → fired (store/mongo/batches.py).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import timedelta

from services.reaper.retention import KEEP_FOREVER, Retention, delete_aged
from shared import metrics
from shared.config import Settings
from shared.job_types.announcements import JobTypeRegistry
from shared.model import utc_now
from shared.store.base import ReaperStore, StoreError
from shared.store.dependencies import SETTLE_GRACE
from shared.workflows import CREATING_GRACE

log = logging.getLogger("jobsched.reaper")
RECOVER_BATCH = 500
KEY_RATES_PRUNED_PER_SWEEP = 5000
PARENTS_SETTLED_PER_SWEEP = 500
WORKFLOWS_SETTLED_PER_SWEEP = 100
BATCHES_SETTLED_PER_SWEEP = 100
DEFAULT_RETENTION = Settings.job_type_retention


@dataclass
class SweepResult:
    requeued: int = 0
    recovered: int = 0
    deleted: int = 0


def sweep(
    store: ReaperStore,
    *,
    queued_timeout: timedelta,
    job_types: JobTypeRegistry | None = None,
    retention: timedelta = DEFAULT_RETENTION,
    jobs_kept: Retention = KEEP_FOREVER,
) -> SweepResult:
    """One pass. With `job_types`, announcements older than `retention` are forgotten. Finished jobs are kept as
    `jobs_kept` says."""
    now = utc_now()
    result = SweepResult(requeued=store.release_stale_claims(now - queued_timeout))
    if result.requeued:
        metrics.REAPER_RECOVERED.labels("queued").inc(result.requeued)
        log.warning("stale queued jobs back to pending", extra={"action": "reaped_queued", "count": result.requeued})
    if job_types is not None:
        job_types.forget(now - retention)
    for job in store.expired_attempts(now, RECOVER_BATCH):
        reason = f"attempt {job.next_attempt} lost: no result or heartbeat from {job.claimedBy} before its lease ended"
        recovered = store.recover_attempt(job, reason)
        if recovered is None:
            continue  # the executor finished it after all
        result.recovered += 1
        metrics.REAPER_RECOVERED.labels("claimed").inc()
        log.warning(
            "lost attempt recovered",
            extra={
                "action": "reaped_attempt",
                "jobId": job.id,
                "tenantId": job.tenantId,
                "attempt": job.next_attempt,
                "status": recovered.status.value,
            },
        )
    store.settle_dependents(now - SETTLE_GRACE, PARENTS_SETTLED_PER_SWEEP)
    store.settle_workflows(now - CREATING_GRACE, WORKFLOWS_SETTLED_PER_SWEEP)
    store.settle_batches(BATCHES_SETTLED_PER_SWEEP)
    result.deleted = sum(delete_aged(store, jobs_kept, now).values())
    store.prune_key_rates(now, KEY_RATES_PRUNED_PER_SWEEP)
    store.sample_backlog(now)
    return result


def run(
    store: ReaperStore,
    *,
    interval: timedelta,
    queued_timeout: timedelta,
    stop: threading.Event,
    job_types: JobTypeRegistry | None = None,
    retention: timedelta = DEFAULT_RETENTION,
    jobs_kept: Retention = KEEP_FOREVER,
) -> None:
    """Sweep every `interval` until `stop`; a failed sweep is retried on the next interval. Nothing a sweep meets
    ends the loop: a reaper that exits leaves every stuck job stuck, and its next sweep redoes what this one did
    not finish (each step is idempotent)."""
    while not stop.is_set():
        try:
            sweep(store, queued_timeout=queued_timeout, job_types=job_types, retention=retention, jobs_kept=jobs_kept)
        except StoreError as exc:  # the store down: expected, said in one line
            metrics.REAPER_SWEEP_ERRORS.inc()
            log.warning("sweep failed, retrying next interval", extra={"action": "sweep_failed", "error": str(exc)})
        except Exception:  # an error the store did not translate (a write refused), or a bug: with its traceback
            metrics.REAPER_SWEEP_ERRORS.inc()
            log.exception("sweep failed, retrying next interval", extra={"action": "sweep_failed"})
        stop.wait(interval.total_seconds())
