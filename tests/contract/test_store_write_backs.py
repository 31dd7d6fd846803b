"""The MongoDB store on a server whose updates are not atomic: a stale whole-document write-back must never
lose a job or undo an attempt's outcome (invariants 1 and 3)."""

from __future__ import annotations

from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from bson import ObjectId
from pymongo.database import Database
from pymongo.errors import AutoReconnect

from shared.model import Job, Outcome, Status, utc_now
from shared.store.base import (
    AttemptTaken,
    StartHint,
    StoreUnavailable,
)
from shared.store.mongo import MongoJobStore
from tests.contract.conftest import Harness
from tests.contract.store_kit import (
    LEASE,
    drive_to_the_end,
    new,
    queued,
    reload,
    result,
    running,
    start,
    together,
)


@pytest.mark.integration
def test_an_attempt_hidden_by_a_write_back_is_still_recovered(mongo_harness: Harness) -> None:
    """Invariant 1 on a server without atomic updates: an executor started attempt 1 and stopped, then an
    overlapping claim's (or the reaper's re-pend's) whole-document write-back put the job back to `queued`.
    Observed in test_two_claimers_never_double_start_a_job on FerretDB (a few jobs in some runs); reproduced
    here deterministically. A new delivery finds the attempt taken, so the job must still be run by someone."""
    harness = mongo_harness  # unreachable on SQLite: a claim never writes a job it did not win
    job = queued(harness.store)
    start(harness.store, job, "w1")
    harness.force_status(job.id, Status.QUEUED)  # the stale claimer's write-back
    with pytest.raises(AttemptTaken):
        start(harness.store, job, "w2")
    assert drive_to_the_end(harness.store, job).status is Status.COMPLETED


@pytest.mark.integration
def test_a_finished_attempt_undone_by_a_write_back_is_healed_from_the_ledger(
    mongo_harness: Harness, mongo_db: Database[dict[str, object]]
) -> None:
    """Seen in the chaos test on FerretDB: the reaper's re-pend (update_many) read the job while it was queued
    and wrote it back after the executor had completed attempt 1, so the job was queued at attempts 0 again.
    Every new delivery finds attempt 1 taken; the decided outcome in the ledger must be re-applied."""
    store = mongo_harness.store
    job = running(store)
    assert store.finish_attempt(job, result(Outcome.SUCCEEDED)) is not None
    mongo_db["jobs"].update_one({"_id": ObjectId(job.id)}, {"$set": {"status": "queued"}})  # the stale write-back
    stale = reload(store, job)
    assert (stale.status, stale.attempts) == (Status.QUEUED, 0)
    with pytest.raises(AttemptTaken):
        start(store, stale, "w2")
    assert reload(store, job).status is Status.COMPLETED
    assert [e.outcome for e in store.list_executions(job.id)] == [Outcome.SUCCEEDED]


@pytest.mark.integration
def test_leases_are_held_only_by_attempts_in_an_executors_hands(
    mongo_harness: Harness, mongo_db: Database[dict[str, object]]
) -> None:
    """MongoDB: an attempt's lease document exists from its start to its close, batched or one by one, so the
    reaper reads live attempts only; the history of a success that did not rewrite its record is complete."""
    store = mongo_harness.store
    for _ in range(6):
        store.create(new(jobType="leased"))
    jobs = store.claim_due_jobs(utc_now(), 10, {"leased"})
    started = together(
        [
            partial(store.start_attempt, j.id, "leased", "w1", utc_now() + LEASE, StartHint(j.claimToken or "", 1))
            for j in jobs
        ]
    )
    runs = [s for s in started if isinstance(s, Job)]
    assert len(runs) == 6, started
    assert {str(d["_id"]) for d in mongo_db["attempt_leases"].find({})} == {f"{j.id}:1" for j in jobs}
    outcomes = [Outcome.FAILED, *[Outcome.SUCCEEDED] * 5]
    together(
        [
            partial(store.finish_attempt, r, result(o, duration=timedelta(milliseconds=3)))
            for r, o in zip(runs, outcomes, strict=True)
        ]
    )
    assert mongo_db["attempt_leases"].count_documents({}) == 0
    for run, outcome in zip(runs, outcomes, strict=True):
        [record] = store.list_executions(run.id)
        assert (record.outcome, record.durationMs, record.worker) == (outcome, 3.0, "w1")
        assert record.startedAt is not None
        assert record.finishedAt is not None


@pytest.mark.integration
def test_an_attempt_whose_executor_stopped_before_its_lease_is_closed_by_a_later_delivery(
    mongo_harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Invariant 1: the executor inserted the attempt's record and stopped before its lease was written (and so
    before the job was claimed). No reaper sees such an attempt; a later delivery closes it as lost, once the
    record's first lease has run out (before that, its owner may still be writing)."""
    store = mongo_harness.store
    assert isinstance(store, MongoJobStore)
    job, ahead = queued(store), queued(store)
    leases = store._leases

    class StoppedBeforeTheLease:
        """The leases collection, except that inserting one loses the connection, and so does the attempt's
        give-back that would follow in a live executor: a stopped one writes nothing more."""

        def __getattr__(self, name: str) -> Any:
            return getattr(leases, name)

        def insert_many(self, *args: Any, **kwargs: Any) -> Any:
            raise AutoReconnect("executor stopped (injected)")

        def delete_one(self, *args: Any, **kwargs: Any) -> Any:
            raise AutoReconnect("executor stopped (injected)")

    with monkeypatch.context() as patch:
        patch.setattr(store, "_leases", StoppedBeforeTheLease())
        for stopped, lease_until in ((job, utc_now() - timedelta(seconds=1)), (ahead, utc_now() + LEASE)):
            with pytest.raises(StoreUnavailable):
                start(store, stopped, "w1", lease_until)
    assert store.expired_attempts(utc_now() + timedelta(hours=1), 10) == []
    with pytest.raises(AttemptTaken):
        start(store, ahead, "w2")
    assert (reload(store, ahead).status, [e.outcome for e in store.list_executions(ahead.id)]) == (
        Status.QUEUED,
        [Outcome.RUNNING],
    )
    with pytest.raises(AttemptTaken):
        start(store, job, "w2")
    healed = reload(store, job)
    assert (healed.status, healed.attempts) == (Status.PENDING, 1)
    assert [e.outcome for e in store.list_executions(job.id)] == [Outcome.LOST]
    assert drive_to_the_end(store, job).status is Status.COMPLETED


@pytest.mark.integration
def test_a_lease_left_behind_by_a_finished_attempt_is_cleared_by_the_reaper_without_a_change(
    mongo_harness: Harness, mongo_db: Database[dict[str, object]]
) -> None:
    """A close that stopped before deleting its lease: the reaper finds the lease once it runs out, finds the
    outcome decided, and only removes the lease."""
    store = mongo_harness.store
    job = running(store)
    done = store.finish_attempt(job, result(Outcome.SUCCEEDED))
    assert done is not None
    assert done.status is Status.COMPLETED
    lease = {"_id": f"{job.id}:1", "jobId": job.id, "attempt": 1, "worker": "w1", "leaseExpiresAt": utc_now()}
    mongo_db["attempt_leases"].insert_one(lease)
    [expired] = store.expired_attempts(utc_now() + timedelta(seconds=1), 10)
    assert (expired.id, expired.next_attempt) == (job.id, 1)
    assert store.recover_attempt(expired, "lost") is None
    assert mongo_db["attempt_leases"].count_documents({}) == 0
    assert reload(store, job).status is Status.COMPLETED
    assert [e.outcome for e in store.list_executions(job.id)] == [Outcome.SUCCEEDED]
