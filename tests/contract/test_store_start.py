"""start_attempts (what an executor's poll found due, or one wake-up alone) and finish_attempt with its batch form
(finish_attempts: the outcomes finishing together), on every store.

The MongoDB store writes a batch's hinted starts and its successes as bulk writes; these tests drive the stores
as executors do, several at once, and check that batching changes nothing a caller can see: one winner per
attempt, exact skip reasons, complete records.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import partial

import pytest
from bson import ObjectId

from shared.model import Job, Outcome, Status, utc_now
from shared.store.base import (
    AttemptFinish,
    AttemptStart,
    AttemptTaken,
    JobNotFound,
    JobStore,
    StartHint,
    TransitionRefused,
)
from tests.contract.conftest import Harness
from tests.contract.store_kit import LEASE, claim_one, claimed_batch, hint, new, queued, reload, result, together
from tests.support import start_one


@pytest.mark.parametrize("hinted", [True, False], ids=["claim-hint", "no-hint"])
def test_a_start_claims_the_attempt_and_runs_the_job(store: JobStore, hinted: bool) -> None:
    job = queued(store)
    lease = utc_now() + LEASE
    before = utc_now()
    started = start_one(store, AttemptStart(job.id, job.jobType, "w1", lease, hint(job) if hinted else None))
    assert (started.id, started.status, started.claimedBy, started.leaseExpiresAt, started.attempts) == (
        job.id,
        Status.RUNNING,
        "w1",
        lease,
        0,
    )
    assert started.claimedAt is not None
    assert before <= started.claimedAt <= utc_now()
    assert started.payload == job.payload
    assert reload(store, job) == started
    [record] = store.list_executions(job.id)
    assert (record.id, record.jobId, record.attempt, record.outcome, record.worker) == (
        f"{job.id}:1",
        job.id,
        1,
        Outcome.RUNNING,
        "w1",
    )
    assert record.startedAt == started.claimedAt
    assert (record.finishedAt, record.error, record.durationMs) == (None, None, None)


def test_a_start_names_why_it_is_refused(store: JobStore) -> None:
    with pytest.raises(JobNotFound):
        start_one(store, AttemptStart(str(ObjectId()), "noop", "w1", utc_now() + LEASE, StartHint("some-claim", 1)))
    with pytest.raises(JobNotFound):
        start_one(store, AttemptStart("not-an-id", "noop", "w1", utc_now() + LEASE, StartHint("some-claim", 1)))
    pending = store.create(new(scheduledAt=utc_now() + timedelta(hours=1)))
    with pytest.raises(TransitionRefused) as refused:
        start_one(store, AttemptStart(pending.id, "noop", "w1", utc_now() + LEASE))
    assert refused.value.job.status is Status.PENDING
    job = queued(store)
    with pytest.raises(TransitionRefused) as refused:  # a wake-up on the wrong type's topic
        start_one(store, AttemptStart(job.id, "email", "w1", utc_now() + LEASE, hint(job)))
    assert refused.value.job.jobType == "noop"
    assert reload(store, job).status is Status.QUEUED
    assert store.list_executions(job.id) == []  # the wrong executor gave its attempt record back
    start_one(store, AttemptStart(job.id, "noop", "w1", utc_now() + LEASE, hint(job)))
    with pytest.raises(TransitionRefused) as refused:  # a duplicate delivery after the start
        start_one(store, AttemptStart(job.id, "noop", "w2", utc_now() + LEASE, hint(job)))
    assert (refused.value.job.status, refused.value.job.claimedBy) == (Status.RUNNING, "w1")
    assert len(store.list_executions(job.id)) == 1


def test_a_stale_hint_still_starts_the_job_as_it_is_now(store: JobStore) -> None:
    """A wake-up from an earlier claim (the job was released and claimed again) starts the current attempt."""
    first = queued(store)
    store.release_claims([first])
    claim_one(store, first)
    started = start_one(store, AttemptStart(first.id, "noop", "w1", utc_now() + LEASE, hint(first)))
    assert (started.status, started.attempts) == (Status.RUNNING, 0)
    assert [e.id for e in store.list_executions(first.id)] == [f"{first.id}:1"]


def test_a_cancelled_job_never_starts_even_with_its_claim_hint(store: JobStore) -> None:
    job = queued(store)
    store.cancel(job.id)
    with pytest.raises((AttemptTaken, TransitionRefused)):
        start_one(store, AttemptStart(job.id, "noop", "w1", utc_now() + LEASE, hint(job)))
    assert reload(store, job).status is Status.CANCELLED
    assert [e.outcome for e in store.list_executions(job.id)] == [Outcome.CANCELLED]


def test_duplicate_deliveries_of_a_claim_batch_start_each_job_exactly_once(harness: Harness) -> None:
    """Every job of a 24-job claim is delivered twice, to two executors (store instances), all at once."""
    jobs = claimed_batch(harness.store, 24)
    assert len(jobs) == 24
    stores = [harness.store, harness.open()]
    deliveries = [(j, copy) for j in jobs for copy in (0, 1)]
    calls: list[Callable[[], Job]] = [
        partial(start_one, stores[copy], AttemptStart(j.id, "noop", f"w{copy}", utc_now() + LEASE, hint(j)))
        for j, copy in deliveries
    ]
    outcomes = together(calls)
    for job in jobs:
        mine = [o for (j, _), o in zip(deliveries, outcomes, strict=True) if j.id == job.id]
        winners = [o for o in mine if isinstance(o, Job)]
        assert len(winners) == 1, mine
        assert all(isinstance(o, (AttemptTaken, TransitionRefused)) for o in mine if o is not winners[0]), mine
        [record] = harness.store.list_executions(job.id)
        assert record.worker == winners[0].claimedBy
        assert reload(harness.store, job).status is Status.RUNNING


def test_concurrent_results_complete_every_job_with_complete_records(store: JobStore) -> None:
    jobs = claimed_batch(store, 20)
    started = together(
        [partial(start_one, store, AttemptStart(j.id, "noop", "w1", utc_now() + LEASE, hint(j))) for j in jobs]
    )
    assert all(isinstance(s, Job) for s in started), started
    runs = [s for s in started if isinstance(s, Job)]
    outcomes = [Outcome.FAILED if i % 5 == 0 else Outcome.SUCCEEDED for i in range(len(runs))]
    finished = together(
        [
            partial(
                store.finish_attempt, run, result(o, "boom" if o is Outcome.FAILED else None, timedelta(milliseconds=7))
            )
            for run, o in zip(runs, outcomes, strict=True)
        ]
    )
    for run, outcome, after in zip(runs, outcomes, finished, strict=True):
        assert isinstance(after, Job), after
        expected = Status.COMPLETED if outcome is Outcome.SUCCEEDED else Status.PENDING
        assert after.status is expected
        assert reload(store, run).status is expected
        [record] = store.list_executions(run.id)
        assert record.outcome is outcome
        assert record.finishedAt is not None
        assert record.durationMs == 7.0
        assert record.error == (None if outcome is Outcome.SUCCEEDED else "boom")


def test_a_result_after_the_reaper_closed_the_attempt_changes_nothing_in_a_batch(store: JobStore) -> None:
    jobs = claimed_batch(store, 3)
    runs = [start_one(store, AttemptStart(j.id, "noop", "w1", utc_now() + LEASE, hint(j))) for j in jobs]
    assert store.recover_attempt(runs[0], "executor lost") is not None
    finished = together([partial(store.finish_attempt, run, result(Outcome.SUCCEEDED)) for run in runs])
    assert finished[0] is None  # late: the attempt was already closed as lost
    assert reload(store, runs[0]).status is Status.PENDING
    assert [e.outcome for e in store.list_executions(runs[0].id)] == [Outcome.LOST]
    assert all(isinstance(f, Job) and f.status is Status.COMPLETED for f in finished[1:]), finished


def test_one_batch_of_successes_leaves_an_attempt_closed_before_it_as_it_was(store: JobStore) -> None:
    """The successes of one finish_attempts call, one of whose attempts the reaper closed as lost first: that one
    answers None and stays lost; the others complete, each with its attempt in its history."""
    jobs = claimed_batch(store, 3)
    runs = [start_one(store, AttemptStart(j.id, "noop", "w1", utc_now() + LEASE, hint(j))) for j in jobs]
    assert store.recover_attempt(runs[1], "executor lost") is not None
    finished = store.finish_attempts([AttemptFinish(run, result(Outcome.SUCCEEDED)) for run in runs])
    assert finished[1] is None
    assert [f.status if isinstance(f, Job) else f for f in (finished[0], finished[2])] == [Status.COMPLETED] * 2
    assert reload(store, runs[1]).status is Status.PENDING
    assert [[e.outcome for e in store.list_executions(run.id)] for run in runs] == [
        [Outcome.SUCCEEDED],
        [Outcome.LOST],
        [Outcome.SUCCEEDED],
    ]


def test_start_attempts_answers_each_start_in_order_as_it_would_alone(store: JobStore) -> None:
    """One batch of an executor's poll: hinted and unhinted starts, an unknown job, one not due, one of another
    type and the same wake-up twice. Each start gets its own answer, in order; none spoils the others."""
    first, second, other_type = [*claimed_batch(store, 2), queued(store, jobType="email")]
    pending = store.create(new(scheduledAt=utc_now() + timedelta(hours=1)))
    lease = utc_now() + LEASE
    starts = [
        AttemptStart(first.id, "noop", "w1", lease, hint(first)),
        AttemptStart(str(ObjectId()), "noop", "w1", lease, StartHint("some-claim", 1)),
        AttemptStart(pending.id, "noop", "w1", lease),
        AttemptStart(other_type.id, "noop", "w1", lease, hint(other_type)),
        AttemptStart(second.id, "noop", "w1", lease),
        AttemptStart(first.id, "noop", "w2", lease, hint(first)),
    ]
    answers = store.start_attempts(starts)
    assert len(answers) == len(starts)
    started_first, unknown, not_due, wrong_type, started_second, duplicate = answers
    for job, started in ((first, started_first), (second, started_second)):
        assert isinstance(started, Job), started
        assert (started.id, started.status, started.claimedBy, started.leaseExpiresAt) == (
            job.id,
            Status.RUNNING,
            "w1",
            lease,
        )
        assert reload(store, job) == started
        [open_attempt] = store.list_executions(job.id)
        assert (open_attempt.attempt, open_attempt.worker, open_attempt.startedAt) == (1, "w1", started.claimedAt)
        assert open_attempt.outcome is Outcome.RUNNING  # the enum, as a record's outcome reads back
    assert isinstance(unknown, JobNotFound)
    assert isinstance(not_due, TransitionRefused)
    assert not_due.job.status is Status.PENDING
    assert isinstance(wrong_type, TransitionRefused)
    assert wrong_type.job.jobType == "email"
    assert reload(store, other_type).status is Status.QUEUED
    assert store.list_executions(other_type.id) == []
    assert isinstance(duplicate, (AttemptTaken, TransitionRefused))


def test_finish_attempts_answers_each_outcome_in_order_as_finish_attempt_would(store: JobStore) -> None:
    jobs = claimed_batch(store, 4)
    runs = [start_one(store, AttemptStart(j.id, "noop", "w1", utc_now() + LEASE, hint(j))) for j in jobs]
    assert store.recover_attempt(runs[3], "executor lost") is not None
    outcomes = [Outcome.SUCCEEDED, Outcome.FAILED, Outcome.SUCCEEDED, Outcome.SUCCEEDED]
    finishes = [
        AttemptFinish(run, result(o, "boom" if o is Outcome.FAILED else None))
        for run, o in zip(runs, outcomes, strict=True)
    ]
    answers = store.finish_attempts(finishes)
    assert [a.status if isinstance(a, Job) else a for a in answers] == [
        Status.COMPLETED,
        Status.PENDING,
        Status.COMPLETED,
        None,  # late: the reaper closed that attempt as lost first
    ]
    assert [reload(store, run).status for run in runs] == [
        Status.COMPLETED,
        Status.PENDING,
        Status.COMPLETED,
        Status.PENDING,
    ]
    assert [[e.outcome for e in store.list_executions(run.id)] for run in runs] == [
        [Outcome.SUCCEEDED],
        [Outcome.FAILED],
        [Outcome.SUCCEEDED],
        [Outcome.LOST],
    ]
    assert store.finish_attempts([]) == []


def test_a_second_closing_of_one_attempt_in_a_batch_changes_nothing(store: JobStore) -> None:
    """Two outcomes of one attempt in one batch (a timeout's and the handler's own): the first decides it."""
    [job] = claimed_batch(store, 1)
    run = start_one(store, AttemptStart(job.id, "noop", "w1", utc_now() + LEASE, hint(job)))
    answers = store.finish_attempts(
        [AttemptFinish(run, result(Outcome.TIMEOUT, "timed out")), AttemptFinish(run, result(Outcome.SUCCEEDED))]
    )
    assert [a.status if isinstance(a, Job) else a for a in answers] == [Status.PENDING, None]
    assert [(e.outcome, e.error) for e in store.list_executions(run.id)] == [(Outcome.TIMEOUT, "timed out")]
    assert (reload(store, run).status, reload(store, run).attempts) == (Status.PENDING, 1)
