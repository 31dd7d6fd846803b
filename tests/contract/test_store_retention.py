"""The store contract, on every implementation: retention deletes finished jobs by age, oldest first, with
their attempt records, never a template and never a job that moved on; the reaper's sweep does it in batches."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from services.reaper import retention
from services.reaper.retention import Retention, delete_aged
from shared import metrics
from shared.model import Job, Outcome, Status, utc_now
from shared.store.base import AttemptFinish, AttemptStart, JobStore, RunSpec
from tests.contract.store_kit import LEASE, new, reload, result, running
from tests.support import start_one


def finished(store: JobStore, count: int, outcome: Outcome, **fields: Any) -> list[Job]:
    """`count` jobs of a type of their own, run once to `outcome` (one attempt: FAILED dead-letters them)."""
    job_type = f"aged-{outcome.value}-{count}"
    store.create_many([new(jobType=job_type, maxAttempts=1, **fields) for _ in range(count)])
    claimed = store.claim_due_jobs(utc_now(), count, {job_type})
    lease = utc_now() + LEASE
    started = store.start_attempts([AttemptStart(j.id, j.jobType, "w1", lease) for j in claimed])
    done = store.finish_attempts([AttemptFinish(j, result(outcome)) for j in started if isinstance(j, Job)])
    assert all(isinstance(j, Job) for j in done)
    return [j for j in done if isinstance(j, Job)]


def later() -> datetime:
    return utc_now() + timedelta(seconds=1)


def test_finished_jobs_go_by_age_with_their_records_and_free_their_keys(store: JobStore) -> None:
    before = utc_now() - timedelta(seconds=1)
    [done] = finished(store, 1, Outcome.SUCCEEDED, idempotencyKey="report-1")
    [dead] = finished(store, 1, Outcome.FAILED)
    cancelled = store.cancel(store.create(new(scheduledAt=utc_now() + timedelta(hours=1))).id)
    pending = store.create(new(scheduledAt=utc_now() + timedelta(hours=1)))
    underway = running(store)
    assert store.delete_finished(Status.COMPLETED, before, 10) == 0  # finished after the cutoff: kept
    assert store.delete_finished(Status.COMPLETED, later(), 10) == 1
    assert store.get(done.id) is None
    assert store.list_executions(done.id) == []
    assert store.create(new("report-1")).id != done.id  # the key is free again
    assert store.get(dead.id) is not None  # another status: its own retention
    assert store.delete_finished(Status.DLQ, later(), 10) == 1
    assert store.delete_finished(Status.CANCELLED, later(), 10) == 1
    assert [store.get(j.id) for j in (dead, cancelled)] == [None, None]
    assert [reload(store, j).status for j in (pending, underway)] == [Status.PENDING, Status.RUNNING]
    with pytest.raises(ValueError, match="pending"):
        store.delete_finished(Status.PENDING, later(), 10)


def test_oldest_first_and_at_most_the_limit(store: JobStore) -> None:
    store.create_many([new(jobType="aged-in-order", maxAttempts=1) for _ in range(5)])
    claimed = store.claim_due_jobs(utc_now(), 5, {"aged-in-order"})
    for job in [claimed[i] for i in (4, 0, 3, 1, 2)]:  # finished in another order than claimed
        started = start_one(store, AttemptStart(job.id, job.jobType, "w1", utc_now() + LEASE))
        store.finish_attempt(started, result(Outcome.SUCCEEDED))
        finished_at = reload(store, job).updatedAt
        while utc_now() <= finished_at:  # the next one finishes at a later millisecond
            pass
    oldest_first = sorted(claimed, key=lambda j: reload(store, j).updatedAt)
    assert [j.id for j in oldest_first] == [claimed[i].id for i in (4, 0, 3, 1, 2)]
    third_finished = reload(store, oldest_first[2]).updatedAt
    assert store.delete_finished(Status.COMPLETED, later(), 2) == 2
    assert [store.get(j.id) is None for j in oldest_first] == [True, True, False, False, False]
    assert store.delete_finished(Status.COMPLETED, later(), 0) == 0
    assert store.delete_finished(Status.COMPLETED, third_finished, 10) == 0  # strictly before the cutoff
    assert store.delete_finished(Status.COMPLETED, third_finished + timedelta(milliseconds=1), 10) == 1
    assert store.delete_finished(Status.COMPLETED, later(), 10) == 2


def test_a_template_stays_and_its_runs_go(store: JobStore) -> None:
    template = store.create(new("nightly", cron="0 2 * * *"))
    [(run_id, _)] = store.add_runs(template, [RunSpec(utc_now() - timedelta(days=1))])
    [run] = [j for j in store.claim_due_jobs(utc_now(), 10, {"noop"}) if j.id == run_id]
    started = start_one(store, AttemptStart(run.id, run.jobType, "w1", utc_now() + LEASE))
    store.finish_attempt(started, result(Outcome.SUCCEEDED))
    store.cancel(template.id)
    assert store.delete_finished(Status.COMPLETED, later(), 10) == 1
    assert store.delete_finished(Status.CANCELLED, later(), 10) == 0
    assert reload(store, template.id).status is Status.CANCELLED
    assert store.get(run_id) is None
    assert store.template_runs(template.id, None, 10) == []


def test_a_dead_letter_re_driven_is_not_deleted(store: JobStore) -> None:
    [dead] = finished(store, 1, Outcome.FAILED)
    store.redrive(dead.id)
    assert store.delete_finished(Status.DLQ, later(), 10) == 0
    assert reload(store, dead).status is Status.PENDING


def test_the_sweep_deletes_in_batches_and_counts_them(store: JobStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retention, "RETENTION_BATCH", 7)
    finished(store, 23, Outcome.SUCCEEDED)
    [dead] = finished(store, 1, Outcome.FAILED)
    counted = metrics.RETENTION_DELETED.labels(Status.COMPLETED.value)
    before = counted._value.get()
    keep_dlq_forever = Retention(completed=timedelta(0), cancelled=timedelta(0))
    assert delete_aged(store, keep_dlq_forever, later()) == {Status.COMPLETED: 23, Status.CANCELLED: 0}
    assert counted._value.get() - before == 23
    assert store.get(dead.id) is not None
    assert delete_aged(store, Retention(completed=timedelta(days=7)), later()) == {Status.COMPLETED: 0}


def test_a_workflows_or_batchs_record_goes_once_retention_took_all_its_jobs(store: JobStore) -> None:
    """A record is deleted when none of its jobs is left (the steps' jobs; a fired batch's members and callbacks),
    never while one is: a step still open, a callback not run, a batch still open."""
    from tests.contract.test_store_batches import batch, end, members
    from tests.contract.test_store_workflows import diamond, run_step

    done = store.create_workflow(diamond("done")).workflow
    for step in done.steps:
        run_step(store, step.jobId)
    open_one = store.create_workflow(diamond("open")).workflow
    fired = batch(store, "fired")
    for member in members(store, fired, 2):
        end(store, member)
    store.seal_batch(fired)
    open_batch = batch(store, "still-open")
    future = utc_now() + timedelta(days=1)
    assert store.delete_emptied_groups(future, 100) == (0, False)  # every record still has its jobs

    while store.delete_finished(Status.COMPLETED, future, 500):
        pass
    view = store.batch(fired)
    assert view is not None
    assert view.batch.onComplete is not None
    assert view.batch.onSuccess is not None
    assert reload(store, view.batch.onComplete).status is Status.PENDING  # its callbacks have not run: kept
    assert store.delete_emptied_groups(future, 100) == (1, False)  # the finished workflow only
    assert store.workflow(done.id) is None
    assert store.workflow(open_one.id) is not None

    end(store, view.batch.onComplete)
    end(store, view.batch.onSuccess)
    while store.delete_finished(Status.COMPLETED, future, 500):
        pass
    assert store.delete_emptied_groups(utc_now() - timedelta(days=1), 100) == (0, False)  # all created since
    assert store.delete_emptied_groups(future, 100) == (1, False)
    assert store.batch(fired) is None
    assert store.batch(open_batch) is not None  # not fired: members may still come
