"""Batches on every store (shared/batches.py): members added in several calls, a seal, callbacks held until the
last member ends, then onComplete released and onSuccess released or cancelled; progress counted by status;
members' results read in pages; one batch per key and tenant; a sealed batch takes no member."""

from __future__ import annotations

from dataclasses import replace

import pytest
from bson import ObjectId

from shared.batches import BatchStatus, MemberResult
from shared.model import Outcome, Status
from shared.store.base import (
    BatchNotFound,
    BatchSealed,
    DuplicateBatch,
    JobRefused,
    JobStore,
    NewBatch,
)
from tests.contract.store_kit import claim_one, new, reload, result, start

MEMBER_TYPE = "member"


def batch(store: JobStore, key: str = "run-1", **fields: object) -> str:
    made = store.create_batch(
        NewBatch(
            "tenant-a",
            key,
            name="invoices",
            onComplete=new(jobType="on-complete"),
            onSuccess=new(jobType="on-success"),
            **fields,
        )
    )
    return made.batch.id


def members(store: JobStore, batch_id: str, count: int, **fields: object) -> list[str]:
    # Each of a type of its own: `end` claims its member alone.
    news = [new(jobType=f"{MEMBER_TYPE}-{ObjectId()}", **fields) for _ in range(count)]  # type: ignore[arg-type]
    made = store.add_to_batch(batch_id, news)
    assert all(not isinstance(m, Exception) for m in made), made
    return [m.id for m in made]  # type: ignore[union-attr]


def end(store: JobStore, job_id: str, outcome: Outcome = Outcome.SUCCEEDED, returned: object = None) -> None:
    job = start(store, claim_one(store, reload(store, job_id)))
    assert store.finish_attempt(job, replace(result(outcome), result=returned, final=True)) is not None


def callbacks(store: JobStore, batch_id: str) -> tuple[Status, Status]:
    view = store.batch(batch_id)
    assert view is not None
    assert view.batch.onComplete is not None
    assert view.batch.onSuccess is not None
    return reload(store, view.batch.onComplete).status, reload(store, view.batch.onSuccess).status


def test_the_callbacks_wait_for_the_seal_and_the_last_member(store: JobStore) -> None:
    batch_id = batch(store)
    first = members(store, batch_id, 3)
    second = members(store, batch_id, 2)
    for job_id in first:
        end(store, job_id, returned={"paid": job_id})
    assert callbacks(store, batch_id) == (Status.WAITING, Status.WAITING)  # not sealed: more may come
    sealed = store.seal_batch(batch_id)
    assert sealed.status is BatchStatus.RUNNING
    assert (sealed.total, dict(sealed.counts)) == (5, {"completed": 3, "pending": 2})
    end(store, second[0])
    assert callbacks(store, batch_id) == (Status.WAITING, Status.WAITING)
    end(store, second[1])
    assert callbacks(store, batch_id) == (Status.PENDING, Status.PENDING)
    done = store.batch(batch_id)
    assert done is not None
    assert (done.status, done.batch.firedAt is not None) == (BatchStatus.SUCCEEDED, True)
    with pytest.raises(BatchSealed):
        store.add_to_batch(batch_id, [new(jobType=MEMBER_TYPE)])
    assert store.seal_batch(batch_id).batch.firedAt == done.batch.firedAt  # sealed again: nothing changes


def test_a_member_that_did_not_complete_cancels_on_success_and_still_fires_on_complete(store: JobStore) -> None:
    batch_id = batch(store)
    [paid, declined, withdrawn] = members(store, batch_id, 3)
    store.seal_batch(batch_id)
    end(store, paid)
    end(store, declined, Outcome.FAILED)
    assert reload(store, declined).status is Status.DLQ
    store.cancel(withdrawn)  # the last member's end is a cancellation
    assert callbacks(store, batch_id) == (Status.PENDING, Status.CANCELLED)
    view = store.batch(batch_id)
    assert view is not None
    assert view.status is BatchStatus.FAILED
    assert view.batch.onSuccess is not None
    on_success = reload(store, view.batch.onSuccess)
    assert on_success.lastError == f"batch {batch_id}: 2 of 3 members did not complete"
    assert [e.outcome for e in store.list_executions(on_success.id)] == [Outcome.CANCELLED]


def test_sealing_a_batch_whose_members_all_ended_fires_it_at_once(store: JobStore) -> None:
    empty, done = batch(store, "empty"), batch(store, "done")
    for job_id in members(store, done, 2):
        end(store, job_id)
    assert store.seal_batch(empty).status is BatchStatus.SUCCEEDED
    assert callbacks(store, empty) == (Status.PENDING, Status.PENDING)
    store.seal_batch(done)
    assert callbacks(store, done) == (Status.PENDING, Status.PENDING)


def test_a_callback_reads_every_members_result_in_pages(store: JobStore) -> None:
    batch_id = batch(store)
    made = members(store, batch_id, 7)
    for n, job_id in enumerate(made):
        end(store, job_id, Outcome.FAILED if n == 3 else Outcome.SUCCEEDED, returned={"n": n})
    read: list[MemberResult] = []
    page = store.batch_members(batch_id, None, 3)
    while page:
        read += page
        page = store.batch_members(batch_id, page[-1], 3)
    assert sorted(m.jobId for m in read) == sorted(made)
    assert {m.jobId: (m.status, m.result) for m in read}[made[0]] == ("completed", {"n": 0})
    assert {m.status for m in read} == {"completed", "dlq"}


def test_one_batch_per_key_and_tenant_and_members_of_its_tenant_only(store: JobStore) -> None:
    batch_id = batch(store, "same")
    with pytest.raises(DuplicateBatch) as taken:
        batch(store, "same")
    assert taken.value.existing_id == batch_id
    [mine, theirs] = store.add_to_batch(batch_id, [new(jobType=MEMBER_TYPE), new(tenantId="tenant-b")])
    assert not isinstance(mine, Exception)
    assert mine.batchId == batch_id
    assert isinstance(theirs, JobRefused)
    with pytest.raises(BatchNotFound):
        store.add_to_batch("0123456789abcdef01234567", [new()])
    with pytest.raises(BatchNotFound):
        store.seal_batch("not-an-id")
    assert store.batch("not-an-id") is None
    listed = store.batches("tenant-a", 10)
    assert [(v.batch.id, v.total) for v in listed] == [(batch_id, 1)]


def test_a_member_that_waits_for_a_job_still_counts(store: JobStore) -> None:
    root = store.create(new(jobType="root"))
    batch_id = batch(store)
    [waiting] = members(store, batch_id, 1, dependsOn=[root.id])
    store.seal_batch(batch_id)
    end(store, root.id, Outcome.FAILED)  # its parent's failure cancels the member: the batch's last one
    assert reload(store, waiting).status is Status.CANCELLED
    assert callbacks(store, batch_id) == (Status.PENDING, Status.CANCELLED)


def test_a_failed_member_deleted_before_the_firing_still_fails_the_batch(store: JobStore) -> None:
    batch_id = batch(store)
    [failing, last] = members(store, batch_id, 2)
    end(store, failing, Outcome.FAILED)
    store.delete(failing)  # by hand, or retention: the batch's record still counts it
    store.seal_batch(batch_id)
    end(store, last)
    assert callbacks(store, batch_id) == (Status.PENDING, Status.CANCELLED)
    view = store.batch(batch_id)
    assert view is not None
    assert (view.status, view.batch.failures, dict(view.counts)) == (BatchStatus.FAILED, 1, {"completed": 1})


def test_a_failed_member_re_driven_before_the_firing_may_still_succeed(store: JobStore) -> None:
    batch_id = batch(store)
    [flaky, steady] = members(store, batch_id, 2)
    end(store, flaky, Outcome.FAILED)
    store.redrive(flaky)
    store.seal_batch(batch_id)
    end(store, steady)
    assert callbacks(store, batch_id) == (Status.WAITING, Status.WAITING)  # the re-driven member runs again
    end(store, flaky)
    assert callbacks(store, batch_id) == (Status.PENDING, Status.PENDING)
    view = store.batch(batch_id)
    assert view is not None
    assert (view.status, view.batch.failures) == (BatchStatus.SUCCEEDED, 0)


def test_a_recurring_template_is_no_member(store: JobStore) -> None:
    batch_id = batch(store)
    [template] = store.add_to_batch(batch_id, [new(cron="0 * * * *", scheduledAt=None)])
    assert isinstance(template, JobRefused)
    assert "one-off job" in str(template)
