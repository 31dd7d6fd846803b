"""The store contract, on every implementation: cancellation, alone and racing claims and starts."""

from __future__ import annotations

import contextlib
from datetime import timedelta

import pytest
from bson import ObjectId

from shared.model import Outcome, Status, utc_now
from shared.store.base import (
    AttemptStart,
    AttemptTaken,
    JobNotFound,
    JobStore,
    TransitionRefused,
)
from tests.contract.conftest import Harness
from tests.contract.store_kit import (
    LEASE,
    RACE_TIMEOUT_S,
    hint,
    lockstep,
    new,
    queued,
    reload,
    result,
    running,
    together,
)
from tests.support import start_one


def test_cancel_a_pending_job_takes_its_next_attempt(store: JobStore) -> None:
    job = store.create(new())
    cancelled = store.cancel(job.id)
    assert cancelled.status is Status.CANCELLED
    assert reload(store, job) == cancelled
    [record] = store.list_executions(job.id)
    assert (record.id, record.attempt, record.outcome) == (f"{job.id}:1", 1, Outcome.CANCELLED)
    assert store.claim_due_jobs(utc_now(), 10, {"noop"}) == []


def test_a_cancelled_queued_job_never_starts(store: JobStore) -> None:
    job = queued(store)
    assert store.cancel(job.id).status is Status.CANCELLED
    for wake_up_hint in (hint(job), None):  # the executor holding its wake-up
        with pytest.raises(TransitionRefused) as refused:
            start_one(store, AttemptStart(job.id, job.jobType, "w1", utc_now() + LEASE, wake_up_hint))
        assert refused.value.job.status is Status.CANCELLED
    assert reload(store, job).status is Status.CANCELLED
    assert [e.outcome for e in store.list_executions(job.id)] == [Outcome.CANCELLED]


def test_cancel_after_a_failed_attempt_takes_the_following_attempt(store: JobStore) -> None:
    job = running(store)
    retried = store.finish_attempt(job, result(Outcome.FAILED, "boom"))
    assert retried is not None
    assert store.cancel(job.id).status is Status.CANCELLED
    assert [(e.attempt, e.outcome) for e in store.list_executions(job.id)] == [
        (1, Outcome.FAILED),
        (2, Outcome.CANCELLED),
    ]


def test_cancel_a_template_stops_its_schedule_without_an_attempt_record(store: JobStore) -> None:
    template = store.create(new(cron="* * * * *"))
    assert store.cancel(template.id).status is Status.CANCELLED
    assert store.list_executions(template.id) == []
    assert store.due_templates(utc_now() + timedelta(days=1), 10) == []


def test_cancel_refuses_unknown_and_finished_jobs(harness: Harness) -> None:
    """(Claimed and running jobs get a cancellation request: test_store_cancel_running.py.)"""
    store = harness.store
    for job_id in (str(ObjectId()), "not-an-id"):
        with pytest.raises(JobNotFound):
            store.cancel(job_id)
    done = running(store)
    store.finish_attempt(done, result(Outcome.SUCCEEDED))
    gone = store.create(new())
    store.cancel(gone.id)
    with pytest.raises(TransitionRefused) as refused:
        store.cancel(done.id)
    assert refused.value.job.status is Status.COMPLETED
    assert reload(store, done).status is Status.COMPLETED
    with pytest.raises(TransitionRefused):
        store.cancel(gone.id)


def test_cancel_racing_a_start_never_both_succeed(harness: Harness) -> None:
    """The cancel and an executor holding the job's wake-up race for attempt 1: exactly one gets it, and the
    job's state says who (decided by the insert of the attempt's record)."""
    for _ in range(30):
        harness.store.create(new())
    jobs = harness.store.claim_due_jobs(utc_now(), 100, {"noop"})
    assert len(jobs) == 30
    canceller, executor = harness.open(), harness.open()
    step = lockstep()

    def cancel_all() -> dict[str, bool]:
        won = {}
        for job in jobs:
            step.wait(RACE_TIMEOUT_S)
            try:
                won[job.id] = canceller.cancel(job.id).status is Status.CANCELLED
            except TransitionRefused:
                won[job.id] = False
        return won

    def start_all() -> dict[str, bool]:
        won = {}
        for i, job in enumerate(jobs):
            wake_up_hint = hint(job) if i % 2 else None  # both ways an executor starts
            step.wait(RACE_TIMEOUT_S)
            try:
                started = start_one(executor, AttemptStart(job.id, job.jobType, "w1", utc_now() + LEASE, wake_up_hint))
                won[job.id] = started.status is Status.RUNNING
            except (AttemptTaken, TransitionRefused):
                won[job.id] = False
        return won

    cancels, begins = together([cancel_all, start_all], step)
    assert isinstance(cancels, dict), cancels
    assert isinstance(begins, dict), begins
    for job in jobs:
        assert cancels[job.id] != begins[job.id], job.id
        current = reload(harness.store, job)
        [record] = harness.store.list_executions(job.id)
        if cancels[job.id]:
            assert (current.status, record.outcome) == (Status.CANCELLED, Outcome.CANCELLED)
        else:
            assert (current.status, record.outcome, current.claimedBy) == (Status.RUNNING, Outcome.RUNNING, "w1")


def test_cancel_racing_the_scheduler_claim_always_holds_the_attempt(harness: Harness) -> None:
    """A cancel that succeeded holds attempt 1, whatever the claim did meanwhile."""
    first_due = utc_now() - timedelta(hours=1)
    # Oldest first, so the scheduler's claim of round i goes for the job the cancel of round i goes for.
    ids = [harness.store.create(new(scheduledAt=first_due + timedelta(seconds=i))).id for i in range(60)]
    scheduler, api = harness.open(), harness.open()
    step = lockstep()

    def claim_all() -> int:
        claimed = 0
        for _ in ids:
            step.wait(RACE_TIMEOUT_S)
            claimed += len(scheduler.claim_due_jobs(utc_now(), 1, {"noop"}))
        return claimed

    def cancel_all() -> list[str]:
        cancelled = []
        for job_id in ids:
            step.wait(RACE_TIMEOUT_S)
            with contextlib.suppress(TransitionRefused):
                cancelled.append(api.cancel(job_id).id)
        return cancelled

    claimed, cancelled = together([claim_all, cancel_all], step)
    assert isinstance(cancelled, list), cancelled
    assert isinstance(claimed, int), claimed
    assert len(cancelled) == len(ids)  # pending and queued are both cancellable: every cancel must succeed
    for job_id in cancelled:
        [record] = harness.store.list_executions(job_id)
        assert (record.attempt, record.outcome) == (1, Outcome.CANCELLED)
        assert reload(harness.store, job_id).status is Status.CANCELLED
