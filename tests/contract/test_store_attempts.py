"""The store contract, on every implementation: starting attempts, their leases, their one outcome, re-drive."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from functools import partial

import pytest
from bson import ObjectId

from jobsched.backoff import retry_delay
from shared.model import Job, Outcome, Status, utc_now
from shared.store.base import (
    AttemptStart,
    AttemptTaken,
    JobNotFound,
    JobStore,
    TransitionRefused,
)
from shared.store.transitions import HISTORY_KEPT
from tests.contract.conftest import Harness
from tests.contract.store_kit import (
    LEASE,
    RACE_TIMEOUT_S,
    claim_one,
    hint,
    lockstep,
    new,
    queued,
    reload,
    result,
    running,
    start,
    together,
)
from tests.support import start_one


def test_a_second_start_of_the_same_attempt_is_refused(store: JobStore) -> None:
    job = queued(store)
    started = start(store, job, "w1")
    with pytest.raises(TransitionRefused):
        start(store, job, "w2")  # a duplicate delivery to another executor
    assert reload(store, job) == started
    assert len(store.list_executions(job.id)) == 1


def test_concurrent_starts_of_one_attempt_have_exactly_one_winner(harness: Harness) -> None:
    job = queued(harness.store)
    stores = [harness.store, harness.open()]
    outcomes = together([partial(start, stores[i % 2], job, f"w{i}") for i in range(8)])
    winners = [o for o in outcomes if isinstance(o, Job)]
    assert len(winners) == 1, outcomes
    # a loser either lost the record's insert or read the job after the winner had started it
    assert all(isinstance(o, (AttemptTaken, TransitionRefused)) for o in outcomes if not isinstance(o, Job)), outcomes
    [record] = harness.store.list_executions(job.id)
    assert record.worker == winners[0].claimedBy
    assert reload(harness.store, job).claimedBy == winners[0].claimedBy


@pytest.mark.parametrize("hinted", [True, False], ids=["claim-hint", "no-hint"])
def test_a_start_starts_only_a_queued_job(store: JobStore, hinted: bool) -> None:
    """queued → running is the transition (transitions.check_startable; never pending → running): a wake-up
    for a job that went back to pending meanwhile must not start it, and must leave its attempt free."""
    job = queued(store)
    store.release_claims([job])
    with pytest.raises(TransitionRefused):
        start_one(store, AttemptStart(job.id, job.jobType, "w1", utc_now() + LEASE, hint(job) if hinted else None))
    assert reload(store, job).status is Status.PENDING
    assert store.list_executions(job.id) == []
    again = claim_one(store, job)
    assert start(store, again, "w2").claimedBy == "w2"


def test_a_very_late_wake_up_never_reruns_its_attempt(store: JobStore) -> None:
    """A duplicate of attempt 1's wake-up arrives after attempt 1 failed and the job was claimed again: it
    starts the job as it is now (attempt 2), and attempt 1 keeps its one outcome."""
    job = running(store)
    store.finish_attempt(job, result(Outcome.FAILED, "boom"))
    requeued = claim_one(store, job, utc_now() + timedelta(hours=1))
    started = start_one(store, AttemptStart(job.id, job.jobType, "w2", utc_now() + LEASE, hint(job)))
    assert (started.status, started.attempts, started.claimedBy) == (Status.RUNNING, requeued.attempts, "w2")
    assert [(e.attempt, e.outcome) for e in store.list_executions(job.id)] == [
        (1, Outcome.FAILED),
        (2, Outcome.RUNNING),
    ]


def test_extend_leases_extends_the_lease_of_current_attempts_only(store: JobStore) -> None:
    now = utc_now()
    active = running(store, lease_until=now - timedelta(seconds=1))
    claimed = running(store, "w2", now - timedelta(seconds=1))
    stale = running(store, lease_until=now - timedelta(seconds=1))
    store.finish_attempt(stale, result(Outcome.FAILED, "boom"))  # now pending for attempt 2
    later = now + timedelta(minutes=10)
    store.extend_leases([active, claimed, stale], later)
    assert reload(store, active).leaseExpiresAt == later
    assert reload(store, claimed).leaseExpiresAt == later
    assert reload(store, stale).leaseExpiresAt == now - timedelta(seconds=1)
    assert store.expired_attempts(now, 10) == []
    store.extend_leases([], later)


# --- results --------------------------------------------------------------------------------------------


def test_success_completes_the_job_and_records_the_outcome(store: JobStore) -> None:
    job = running(store)
    done = store.finish_attempt(job, result(Outcome.SUCCEEDED, duration=timedelta(milliseconds=1500)))
    assert done is not None
    assert (done.status, done.attempts, done.lastError) == (Status.COMPLETED, 0, None)
    assert reload(store, job) == done
    [record] = store.list_executions(job.id)
    assert (record.outcome, record.error, record.durationMs) == (Outcome.SUCCEEDED, None, 1500.0)
    # updatedAt is when the completion was written: the handler's end, or a little later when the MongoDB
    # store wrote it together with other successes
    assert record.finishedAt is not None
    assert record.finishedAt <= done.updatedAt <= utc_now()


def test_failures_retry_with_backoff_then_dead_letter(store: JobStore) -> None:
    job = running(store, maxAttempts=2)
    first = result(Outcome.FAILED, "boom")
    retried = store.finish_attempt(job, first)
    assert retried is not None
    assert (retried.status, retried.attempts, retried.lastError) == (Status.PENDING, 1, "boom")
    assert retried.scheduledAt == first.finishedAt + retry_delay(1) == first.finishedAt + timedelta(seconds=2)
    assert store.claim_due_jobs(utc_now(), 10, {"noop"}) == []  # not due before its backoff
    again = claim_one(store, job, retried.scheduledAt)
    second = start(store, again, "w1", utc_now() + LEASE)
    dead = store.finish_attempt(second, result(Outcome.TIMEOUT))
    assert dead is not None
    assert (dead.status, dead.attempts, dead.lastError) == (Status.DLQ, 2, "timeout")
    assert dead.scheduledAt == retried.scheduledAt
    records = store.list_executions(job.id)
    assert [(r.id, r.outcome, r.error) for r in records] == [
        (f"{job.id}:1", Outcome.FAILED, "boom"),
        (f"{job.id}:2", Outcome.TIMEOUT, None),
    ]


def test_a_failed_attempt_keeps_its_traceback_and_the_job_its_one_line_error(store: JobStore) -> None:
    job = running(store, maxAttempts=2)
    trace = "Traceback (most recent call last):\n  File \"myapp/jobs.py\", line 12, in send\nKeyError: 'to'\n"
    retried = store.finish_attempt(job, replace(result(Outcome.FAILED, "KeyError: 'to'"), traceback=trace))
    assert retried is not None
    assert retried.lastError == "KeyError: 'to'"
    again = start(store, claim_one(store, job, retried.scheduledAt), "w1", utc_now() + LEASE)
    assert store.finish_attempt(again, result(Outcome.SUCCEEDED)) is not None
    records = store.list_executions(job.id)
    assert [(r.outcome, r.traceback) for r in records] == [(Outcome.FAILED, trace), (Outcome.SUCCEEDED, None)]
    assert records[0].to_wire()["traceback"] == trace
    assert "traceback" not in records[1].to_wire()


def test_an_attempt_has_one_outcome_and_late_results_change_nothing(store: JobStore) -> None:
    """Invariant 3."""
    job = running(store)
    done = store.finish_attempt(job, result(Outcome.SUCCEEDED))
    assert store.finish_attempt(job, result(Outcome.FAILED, "late")) is None
    assert store.recover_attempt(job, "lost") is None
    assert reload(store, job) == done
    assert [r.outcome for r in store.list_executions(job.id)] == [Outcome.SUCCEEDED]


def test_a_late_result_of_a_recovered_attempt_never_overwrites_the_next_one(store: JobStore) -> None:
    """Invariant 3: the reaper closed attempt 1 as lost, attempt 2 is running; attempt 1's result arrives."""
    job = running(store, lease_until=utc_now() - timedelta(seconds=1))
    recovered = store.recover_attempt(job, "lost")
    assert recovered is not None
    second = start(store, claim_one(store, job, recovered.scheduledAt), "w2", utc_now() + LEASE)
    assert store.finish_attempt(job, result(Outcome.SUCCEEDED)) is None
    assert reload(store, job) == second
    assert [r.outcome for r in store.list_executions(job.id)] == [Outcome.LOST, Outcome.RUNNING]


def test_finish_racing_recover_records_one_outcome_and_moves_the_job_once(harness: Harness) -> None:
    """The executor's result and the reaper's "lost" race for each attempt: one of them decides it (an
    insert on Mongo, a compare-and-set on SQLite), the job moves once, and it moves the winner's way."""
    jobs = [running(harness.store, lease_until=utc_now() - timedelta(seconds=1)) for _ in range(30)]
    executor, reaper = harness.open(), harness.open()
    step = lockstep()

    def finish_all() -> list[bool]:
        won = []
        for job in jobs:
            step.wait(RACE_TIMEOUT_S)
            won.append(executor.finish_attempt(job, result(Outcome.SUCCEEDED)) is not None)
        return won

    def recover_all() -> list[bool]:
        won = []
        for job in jobs:
            step.wait(RACE_TIMEOUT_S)
            won.append(reaper.recover_attempt(job, "lost") is not None)
        return won

    finished, recovered = together([finish_all, recover_all], step)
    assert isinstance(finished, list), finished
    assert isinstance(recovered, list), recovered
    for job, executor_won, reaper_won in zip(jobs, finished, recovered, strict=True):
        assert executor_won != reaper_won, job.id
        current = reload(harness.store, job)
        [record] = harness.store.list_executions(job.id)
        if executor_won:
            assert (current.status, current.attempts, record.outcome) == (Status.COMPLETED, 0, Outcome.SUCCEEDED)
        else:
            assert (current.status, current.attempts, record.outcome) == (Status.PENDING, 1, Outcome.LOST)


def test_list_executions_oldest_first(store: JobStore) -> None:
    job = running(store)
    store.finish_attempt(job, result(Outcome.FAILED, "one"))
    second = start(store, claim_one(store, job, utc_now() + timedelta(hours=1)))
    store.finish_attempt(second, result(Outcome.SUCCEEDED))
    assert [(e.attempt, e.outcome) for e in store.list_executions(job.id)] == [
        (1, Outcome.FAILED),
        (2, Outcome.SUCCEEDED),
    ]
    assert store.list_executions(str(ObjectId())) == []


def test_redrive_gives_a_fresh_budget(store: JobStore) -> None:
    job = running(store, maxAttempts=1)
    store.finish_attempt(job, result(Outcome.FAILED, "boom"))
    assert reload(store, job).status is Status.DLQ
    before = utc_now()
    again = store.redrive(job.id)
    assert (again.status, again.attempts, again.attemptBase, again.lastError) == (Status.PENDING, 1, 1, "boom")
    assert before <= again.scheduledAt <= utc_now()
    assert reload(store, job) == again
    second = start(store, claim_one(store, job), "w1", utc_now() + LEASE)
    final = store.finish_attempt(second, result(Outcome.FAILED, "boom"))
    assert final is not None
    assert (final.status, final.attempts) == (Status.DLQ, 2)
    assert [e.id for e in store.list_executions(job.id)] == [f"{job.id}:1", f"{job.id}:2"]


def test_redrive_refuses_anything_but_a_dead_lettered_run(store: JobStore) -> None:
    for job_id in (str(ObjectId()), "not-an-id"):
        with pytest.raises(JobNotFound):
            store.redrive(job_id)
    pending = store.create(new())
    with pytest.raises(TransitionRefused):
        store.redrive(pending.id)
    template = store.create(new(cron="* * * * *"))
    store.dead_letter_template(template, "bad cron")
    with pytest.raises(TransitionRefused) as refused:
        store.redrive(template.id)
    assert refused.value.job.status is Status.DLQ
    assert reload(store, template).status is Status.DLQ


def test_a_job_lists_its_last_attempts_only(store: JobStore) -> None:
    """A job keeps its last HISTORY_KEPT attempts: one retried more often lists its newest, and the first listed
    number says how many went before."""
    job = store.create(new(maxAttempts=HISTORY_KEPT + 10))
    failures = HISTORY_KEPT + 5
    for _ in range(failures):
        [claimed] = store.claim_due_jobs(utc_now() + timedelta(days=1), 1, {job.jobType})
        assert store.finish_attempt(start(store, claimed), result(Outcome.FAILED, "boom")) is not None
    listed = store.list_executions(job.id)
    assert [e.attempt for e in listed] == list(range(failures - HISTORY_KEPT + 1, failures + 1))
    assert {(e.outcome, e.error) for e in listed} == {(Outcome.FAILED, "boom")}
    assert reload(store, job).attempts == failures
