"""Cancelling a claimed or running job (the JobStore.cancel contract's request half), on SQLite and MongoDB.

The request marks the job; the executor's heartbeat finds it (cancel_requested) and stops the handler; the
attempt's one outcome is decided as every outcome is (the insert of the outcome on MongoDB, the compare-and-set
of the execution row on SQLite), and anything but a success that came first ends the job cancelled.
"""

from __future__ import annotations

from datetime import timedelta

from jobsched.backoff import Backoff
from shared.model import Job, Outcome, Status, utc_now
from shared.store.base import JobStore
from tests.contract.conftest import Harness
from tests.contract.store_kit import RACE_TIMEOUT_S, executor_or_reaper, lockstep, reload, result, running, together

NO_WAIT = Backoff(base_s=0.001, cap_s=0.001)


def test_a_running_job_gets_a_request_and_keeps_running(store: JobStore) -> None:
    job = running(store)
    other = running(store)
    requested = store.cancel(job.id)
    assert (requested.status, requested.cancelRequested, requested.attempts) == (Status.RUNNING, True, 0)
    assert reload(store, job) == requested
    assert store.cancel_requested([job, other]) == {job.id}
    assert store.cancel(job.id).cancelRequested is True  # asking twice is asking once
    assert reload(store, other).cancelRequested is None


def test_a_claimed_job_gets_a_request_too(harness: Harness) -> None:
    claimed = running(harness.store)
    harness.force_status(claimed.id, Status.CLAIMED)  # a start as earlier versions wrote it (claimed, then running)
    requested = harness.store.cancel(claimed.id)
    assert (requested.status, requested.cancelRequested) == (Status.CLAIMED, True)
    assert harness.store.cancel_requested([claimed]) == {claimed.id}


def test_a_cancelled_attempt_ends_the_job_cancelled(store: JobStore) -> None:
    job = running(store, maxAttempts=5)
    store.cancel(job.id)
    closed = store.finish_attempt(
        job.evolve(cancelRequested=True), result(Outcome.CANCELLED, "cancelled while running")
    )
    assert closed is not None
    assert (closed.status, closed.attempts, closed.lastError) == (Status.CANCELLED, 1, "cancelled while running")
    [record] = store.list_executions(job.id)
    assert record.outcome is Outcome.CANCELLED
    assert store.cancel_requested([job]) == {job.id} or closed.cancelRequested  # the flag stays on the job


def test_a_success_that_ignored_the_request_is_recorded(store: JobStore) -> None:
    job = running(store)
    store.cancel(job.id)
    closed = store.finish_attempt(job, result(Outcome.SUCCEEDED))  # the executor's copy predates the request
    assert closed is not None
    assert closed.status is Status.COMPLETED
    assert [e.outcome for e in store.list_executions(job.id)] == [Outcome.SUCCEEDED]


def test_a_failure_after_the_request_is_not_retried(store: JobStore) -> None:
    job = running(store, maxAttempts=5)
    store.cancel(job.id)
    closed = store.finish_attempt(job, result(Outcome.FAILED, "boom"))  # not knowing of the request
    assert closed is not None
    assert (closed.status, closed.attempts, closed.lastError) == (Status.CANCELLED, 1, "boom")


def test_a_lost_attempt_of_a_cancelled_job_ends_it_cancelled(store: JobStore) -> None:
    job = running(store, maxAttempts=5, lease_until=utc_now() - timedelta(seconds=1))
    store.cancel(job.id)
    [expired] = store.expired_attempts(utc_now(), 10)
    recovered = store.recover_attempt(expired, "lost")
    assert recovered is not None
    assert recovered.status is Status.CANCELLED
    assert [e.outcome for e in store.list_executions(job.id)] == [Outcome.LOST]


def test_the_jobs_backoff_spaces_the_retry(store: JobStore) -> None:
    slow = Backoff(base_s=60, cap_s=600)
    job = running(store, maxAttempts=5, backoff=slow)
    failed = result(Outcome.FAILED, "boom")
    closed = store.finish_attempt(job, failed)
    assert closed is not None
    assert closed.scheduledAt == failed.finishedAt + timedelta(seconds=120)
    lost = running(store, maxAttempts=5, lease_until=utc_now() - timedelta(seconds=1), backoff=slow)
    before = utc_now()
    recovered = store.recover_attempt(lost, "lost")
    assert recovered is not None
    assert before + timedelta(seconds=120) <= recovered.scheduledAt <= utc_now() + timedelta(seconds=120)


def test_cancelled_attempt_racing_the_reaper_has_one_outcome(harness: Harness) -> None:
    """The executor's `cancelled` and the reaper's `lost` race for each attempt of cancel-requested jobs: one
    decides it, and the job ends cancelled either way, moved once."""
    jobs = [running(harness.store, maxAttempts=5, lease_until=utc_now() - timedelta(seconds=1)) for _ in range(20)]
    for job in jobs:
        harness.store.cancel(job.id)
    executor, reaper = harness.open(), harness.open()
    executor_won = executor_or_reaper(
        jobs,
        lambda job: executor.finish_attempt(job.evolve(cancelRequested=True), result(Outcome.CANCELLED)),
        lambda job: reaper.recover_attempt(job.evolve(cancelRequested=True), "lost"),
    )
    for job, won in zip(jobs, executor_won, strict=True):
        current = reload(harness.store, job)
        [record] = harness.store.list_executions(job.id)
        assert (current.status, current.attempts) == (Status.CANCELLED, 1)
        assert record.outcome is (Outcome.CANCELLED if won else Outcome.LOST)


def test_a_request_racing_a_failed_attempt_still_cancels_the_job(harness: Harness) -> None:
    """DELETE lands while the attempt fails with budget left: whichever comes first, the job is not retried:
    the retry's update excludes a requested job atomically."""
    jobs = [running(harness.store, maxAttempts=5, backoff=NO_WAIT) for _ in range(20)]
    api, executor = harness.open(), harness.open()
    step = lockstep()
    retry_now = result(Outcome.FAILED, "boom")

    def request_all() -> list[Job]:
        done = []
        for job in jobs:
            step.wait(RACE_TIMEOUT_S)
            done.append(api.cancel(job.id))
        return done

    def fail_all() -> list[Job | None]:
        done = []
        for job in jobs:
            step.wait(RACE_TIMEOUT_S)
            done.append(executor.finish_attempt(job, retry_now))
        return done

    requested, closed = together([request_all, fail_all], step)
    assert isinstance(requested, list), requested
    assert isinstance(closed, list), closed
    for job, closed_job in zip(jobs, closed, strict=True):
        assert closed_job is not None, job.id  # the only closer: it always decides the outcome
        current = reload(harness.store, job)
        assert current.attempts == 1, job.id
        assert current.status is Status.CANCELLED, job.id
