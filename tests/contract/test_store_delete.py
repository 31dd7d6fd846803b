"""The store contract, on every implementation: deleting finished jobs and templates frees their keys."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest

from shared.model import Outcome, Status, utc_now
from shared.store.base import (
    ActiveRuns,
    Deleted,
    DuplicateJob,
    JobNotFound,
    JobStore,
    RunSpec,
    TransitionRefused,
)
from tests.contract.store_kit import lockstep, new, queued, reload, result, running, start, together


def completed(store: JobStore, key: str) -> str:
    job = running(store, idempotencyKey=key)
    store.finish_attempt(job, result(Outcome.SUCCEEDED))
    assert reload(store, job.id).status is Status.COMPLETED
    return job.id


def test_a_completed_job_goes_with_its_records_and_its_key_is_free(store: JobStore) -> None:
    job_id = completed(store, "report-1")
    assert len(store.list_executions(job_id)) == 1
    deleted = store.delete(job_id)
    assert (deleted.job.id, deleted.job.status, deleted.runs) == (job_id, Status.COMPLETED, 0)
    assert store.get(job_id) is None
    assert store.list_executions(job_id) == []
    again = store.create(new("report-1"))  # the key is free again
    assert again.id != job_id
    with pytest.raises(JobNotFound):
        store.delete(job_id)


def test_a_cancelled_or_dead_lettered_job_can_be_deleted(store: JobStore) -> None:
    cancelled = store.cancel(store.create(new("c")).id)
    dead = running(store, idempotencyKey="d", maxAttempts=1)
    store.finish_attempt(dead, result(Outcome.FAILED, "boom"))
    assert reload(store, dead.id).status is Status.DLQ
    assert store.delete(cancelled.id).job.status is Status.CANCELLED
    assert store.delete(dead.id).job.status is Status.DLQ
    assert store.get(cancelled.id) is None
    assert store.get(dead.id) is None


def test_a_job_underway_is_refused_and_kept(store: JobStore) -> None:
    pending = store.create(new("p", scheduledAt=utc_now() + timedelta(hours=1)))
    claimed = queued(store, idempotencyKey="q")
    busy = running(store, idempotencyKey="r")
    for job in (pending, claimed, busy):
        with pytest.raises(TransitionRefused, match="cannot delete"):
            store.delete(job.id)
        assert reload(store, job.id).status is job.status
    store.finish_attempt(busy, result(Outcome.SUCCEEDED))  # its attempt still closes
    assert reload(store, busy.id).status is Status.COMPLETED


def test_a_template_goes_with_every_run_and_its_key_is_free_for_a_new_one(store: JobStore) -> None:
    template = store.create(new("nightly", cron="0 2 * * *"))
    planned = [datetime(2030, 1, d, 2, tzinfo=UTC) for d in (1, 2, 3)]
    runs = [run_id for run_id, _ in store.add_runs(template, [RunSpec(p) for p in planned])]
    first = start(store, store.claim_due_jobs(planned[0], 1, {"noop"})[0])
    store.finish_attempt(first, result(Outcome.SUCCEEDED))
    store.cancel(template.id)
    with pytest.raises(ActiveRuns, match="2 of its runs have not finished"):
        store.delete(template.id)
    assert reload(store, template.id).status is Status.CANCELLED
    assert {r.id for r in store.template_runs(template.id, None, 10)} == set(runs)  # nothing removed
    for run_id in runs[1:]:
        store.cancel(run_id)

    deleted = store.delete(template.id)
    assert (deleted.job.id, deleted.runs) == (template.id, 3)
    assert [store.get(i) for i in [template.id, *runs]] == [None] * 4
    assert store.list_executions(runs[0]) == []
    # The same key makes a new template whose runs for the same fire times are new too (run keys derive from it).
    again = store.create(new("nightly", cron="0 2 * * *"))
    assert [created for _, created in store.add_runs(again, [RunSpec(p) for p in planned])] == [True] * 3


def test_a_template_not_finished_is_refused(store: JobStore) -> None:
    template = store.create(new("hourly", interval="1h", scheduledAt=utc_now() + timedelta(hours=1)))
    with pytest.raises(TransitionRefused, match="cannot delete"):
        store.delete(template.id)
    assert reload(store, template.id).status is Status.PENDING


def test_a_duplicate_names_the_job_that_holds_the_key(store: JobStore) -> None:
    held = store.cancel(store.create(new("held")).id)
    with pytest.raises(DuplicateJob) as duplicate:
        store.create(new("held"))
    assert duplicate.value.existing_id == held.id


def test_a_delete_racing_a_retry_either_deletes_or_is_refused(store: JobStore) -> None:
    for round_ in range(10):
        dead = running(store, idempotencyKey=f"dead-{round_}", maxAttempts=1)
        store.finish_attempt(dead, result(Outcome.FAILED, "boom"))
        calls: list[Callable[[], object]] = [partial(store.delete, dead.id), partial(store.redrive, dead.id)]
        deleted, redriven = together(calls, lockstep())
        left = store.get(dead.id)
        if isinstance(deleted, Deleted):  # deleted first: the retry found nothing, or came too late
            assert left is None
            assert isinstance(redriven, JobNotFound | TransitionRefused)
        else:  # re-driven first: the job is pending again and was kept
            assert isinstance(deleted, TransitionRefused)
            assert left is not None
            assert left.status is Status.PENDING
