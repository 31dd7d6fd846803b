"""The store contract, on every implementation: the reaper's sweeps, and no job stranded by a failure between
two writes (invariant 1)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobsched.backoff import retry_delay
from shared.model import Outcome, Status, utc_now
from shared.store.base import (
    JobStore,
    StoreUnavailable,
)
from tests.contract.conftest import Harness
from tests.contract.store_kit import (
    LEASE,
    claim_one,
    drive_to_the_end,
    new,
    queued,
    reload,
    result,
    running,
    start,
)


def test_release_stale_claims_repends_only_jobs_queued_before_the_cutoff(store: JobStore) -> None:
    t0 = utc_now()
    stale = claim_one(store, store.create(new(jobType="a")), t0)
    fresh = claim_one(store, store.create(new(jobType="b")), t0 + timedelta(seconds=10))
    started = start(store, claim_one(store, store.create(new(jobType="c")), t0), "w1", t0 + LEASE)
    assert store.release_stale_claims(t0 + timedelta(seconds=5)) == 1
    back = reload(store, stale)
    assert (back.status, back.queuedAt, back.scheduledAt) == (Status.PENDING, None, stale.scheduledAt)
    assert reload(store, fresh) == fresh
    assert reload(store, started) == started
    assert store.release_stale_claims(t0 + timedelta(seconds=5)) == 0


def test_expired_attempts_are_claimed_or_running_jobs_past_their_lease(store: JobStore) -> None:
    now = utc_now()
    gone = [running(store, lease_until=now - timedelta(seconds=s)) for s in (1, 2)]
    gone.append(running(store, "w9", now - timedelta(seconds=3)))
    alive = running(store, lease_until=now + timedelta(minutes=1))
    queued(store)
    store.create(new())
    assert {j.id for j in store.expired_attempts(now, 10)} == {j.id for j in gone}
    assert len(store.expired_attempts(now, 2)) == 2
    later = {j.id for j in store.expired_attempts(now + timedelta(minutes=2), 10)}
    assert later == {j.id for j in gone} | {alive.id}


def test_recover_attempt_closes_it_as_lost_and_retries_or_dead_letters(store: JobStore) -> None:
    job = running(store, lease_until=utc_now() - timedelta(seconds=1))
    before = utc_now()
    recovered = store.recover_attempt(job, "no heartbeat")
    assert recovered is not None
    assert (recovered.status, recovered.attempts, recovered.lastError) == (Status.PENDING, 1, "no heartbeat")
    assert before + retry_delay(1) <= recovered.scheduledAt <= utc_now() + retry_delay(1)
    [record] = store.list_executions(job.id)
    assert (record.outcome, record.error, record.durationMs) == (Outcome.LOST, "no heartbeat", None)
    assert record.finishedAt == recovered.updatedAt
    assert store.recover_attempt(job, "again") is None
    assert store.expired_attempts(utc_now(), 10) == []
    # A job that kills every executor ends in the DLQ.
    fatal = running(store, maxAttempts=1, lease_until=utc_now() - timedelta(seconds=1))
    dead = store.recover_attempt(fatal, "killed it")
    assert dead is not None
    assert (dead.status, dead.attempts) == (Status.DLQ, 1)


# --- invariant 1 across a failure between two writes ----------------------------------------------------


def test_a_store_failure_inside_a_start_does_not_strand_the_job(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """Invariant 1: the executor's start fails (connection lost, disk error) after ownership of the
    attempt was decided but before the job was started. The job must still be run by someone, once the
    attempt's lease has run out (before that, its executor may still be writing). On MongoDB nothing but the
    attempt's record knows of it then: a later delivery of the job closes it, checking the record's lease
    against the real clock, so the lease here has run out already."""
    job = queued(harness.store)
    with harness.failing_next_job_update(monkeypatch), pytest.raises(StoreUnavailable):
        start(harness.store, job, "w1", utc_now() - timedelta(seconds=1))
    assert drive_to_the_end(harness.store, job).status is Status.COMPLETED


def test_a_store_failure_inside_finish_attempt_does_not_strand_the_job(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """Invariant 1: recording the result fails after the outcome was decided but before the job moved. The
    executor gives the job up to the reaper (AttemptRunner.record); the reaper must still bring it home."""
    job = running(harness.store)
    with harness.failing_next_job_update(monkeypatch), pytest.raises(StoreUnavailable):
        harness.store.finish_attempt(job, result(Outcome.SUCCEEDED))
    assert drive_to_the_end(harness.store, job).status is Status.COMPLETED


def test_a_start_that_failed_before_the_job_moved_leaves_it_startable(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Invariant 1: the write that starts an attempt fails (the database went away). Nothing of the attempt is
    left behind: the job stays queued, no reaper has anything to close, and the next delivery starts it. (Before
    issue 49 a MongoDB start inserted the attempt's record first and could stop before the job moved; starting is
    one guarded update of the job now, as it is one transaction on SQLite.)"""
    store = harness.store
    job = queued(store)
    with harness.failing_next_job_update(monkeypatch), pytest.raises(StoreUnavailable):
        start(store, job, "w1")
    assert reload(store, job).status is Status.QUEUED
    assert store.list_executions(job.id) == []
    assert store.expired_attempts(utc_now() + timedelta(hours=1), 10) == []
    started = start(store, job, "w2")
    assert (started.status, started.claimedBy, started.attempts) == (Status.RUNNING, "w2", 0)
