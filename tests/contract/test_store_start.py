"""start_attempt (the executor's one call per wake-up) and the batched writes behind it, on every store.

The MongoDB store turns concurrent start_attempt/finish_attempt calls that carry a claim hint into bulk writes
(group commit); these tests drive it the way an executor does, with many threads at once, and check that
batching changes nothing a caller can see: one winner per attempt, exact skip reasons, complete records.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from functools import partial

import pytest
from bson import ObjectId

from shared.model import Job, Outcome, Status, utc_now
from shared.store.base import AttemptTaken, JobNotFound, JobStore, StartHint, TransitionRefused
from tests.contract.conftest import Harness
from tests.contract.test_store import LEASE, claim_one, new, queued, reload, result, together


def hint(job: Job) -> StartHint:
    """The hint a wake-up for `job` (as the scheduler claimed it) carries (SQLite has no claim tokens)."""
    return StartHint(job.claimToken or "no-claim", job.next_attempt)


def claimed_batch(store: JobStore, count: int, job_type: str = "noop") -> list[Job]:
    for i in range(count):
        store.create(new(jobType=job_type, priority=i % 3))
    return store.claim_due(utc_now(), count, {job_type})


@pytest.mark.parametrize("hinted", [True, False], ids=["claim-hint", "no-hint"])
def test_start_attempt_claims_the_attempt_and_runs_the_job(store: JobStore, hinted: bool) -> None:
    job = queued(store)
    lease = utc_now() + LEASE
    before = utc_now()
    started = store.start_attempt(job.id, job.jobType, "w1", lease, hint(job) if hinted else None)
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
    assert reload(store, job).status is Status.RUNNING
    [record] = store.list_executions(job.id)
    assert (record.id, record.outcome, record.worker) == (f"{job.id}:1", Outcome.RUNNING, "w1")


def test_start_attempt_names_why_it_refuses(store: JobStore) -> None:
    with pytest.raises(JobNotFound):
        store.start_attempt(str(ObjectId()), "noop", "w1", utc_now() + LEASE, StartHint("some-claim", 1))
    with pytest.raises(JobNotFound):
        store.start_attempt("not-an-id", "noop", "w1", utc_now() + LEASE, StartHint("some-claim", 1))
    pending = store.create(new(scheduledAt=utc_now() + timedelta(hours=1)))
    with pytest.raises(TransitionRefused) as refused:
        store.start_attempt(pending.id, "noop", "w1", utc_now() + LEASE)
    assert refused.value.job.status is Status.PENDING
    job = queued(store)
    with pytest.raises(TransitionRefused) as refused:  # a wake-up on the wrong type's topic
        store.start_attempt(job.id, "email", "w1", utc_now() + LEASE, hint(job))
    assert refused.value.job.jobType == "noop"
    assert reload(store, job).status is Status.QUEUED
    assert store.list_executions(job.id) == []  # the wrong executor gave its attempt record back
    store.start_attempt(job.id, "noop", "w1", utc_now() + LEASE, hint(job))
    with pytest.raises(TransitionRefused) as refused:  # a duplicate delivery after the start
        store.start_attempt(job.id, "noop", "w2", utc_now() + LEASE, hint(job))
    assert (refused.value.job.status, refused.value.job.claimedBy) == (Status.RUNNING, "w1")
    assert len(store.list_executions(job.id)) == 1


def test_a_stale_hint_still_starts_the_job_as_it_is_now(store: JobStore) -> None:
    """A wake-up from an earlier claim (the job was released and claimed again) starts the current attempt."""
    first = queued(store)
    store.release([first])
    claim_one(store, first)
    started = store.start_attempt(first.id, "noop", "w1", utc_now() + LEASE, hint(first))
    assert (started.status, started.attempts) == (Status.RUNNING, 0)
    assert [e.id for e in store.list_executions(first.id)] == [f"{first.id}:1"]


def test_a_cancelled_job_never_starts_even_with_its_claim_hint(store: JobStore) -> None:
    job = queued(store)
    store.cancel(job.id)
    with pytest.raises((AttemptTaken, TransitionRefused)):
        store.start_attempt(job.id, "noop", "w1", utc_now() + LEASE, hint(job))
    assert reload(store, job).status is Status.CANCELLED
    assert [e.outcome for e in store.list_executions(job.id)] == [Outcome.CANCELLED]


def test_duplicate_deliveries_of_a_claim_batch_start_each_job_exactly_once(harness: Harness) -> None:
    """Every job of a 24-job claim is delivered twice, to two executors (store instances), all at once."""
    jobs = claimed_batch(harness.store, 24)
    assert len(jobs) == 24
    stores = [harness.store, harness.open()]
    deliveries = [(j, copy) for j in jobs for copy in (0, 1)]
    calls: list[Callable[[], Job]] = [
        partial(stores[copy].start_attempt, j.id, "noop", f"w{copy}", utc_now() + LEASE, hint(j))
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
    started = together([partial(store.start_attempt, j.id, "noop", "w1", utc_now() + LEASE, hint(j)) for j in jobs])
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
    runs = [store.start_attempt(j.id, "noop", "w1", utc_now() + LEASE, hint(j)) for j in jobs]
    assert store.recover_attempt(runs[0], "executor lost") is not None
    finished = together([partial(store.finish_attempt, run, result(Outcome.SUCCEEDED)) for run in runs])
    assert finished[0] is None  # late: the attempt was already closed as lost
    assert reload(store, runs[0]).status is Status.PENDING
    assert [e.outcome for e in store.list_executions(runs[0].id)] == [Outcome.LOST]
    assert all(isinstance(f, Job) and f.status is Status.COMPLETED for f in finished[1:]), finished


def test_runs_that_become_due_later_are_claimed_when_due(store: JobStore) -> None:
    """Future runs sit in later due slots on MongoDB: a claim before they are due takes none, later claims
    take each one once it is due, however far ahead it was scheduled."""
    now = utc_now()
    soon = [store.create(new(jobType="later", scheduledAt=now + timedelta(seconds=s))) for s in (5, 6, 9)]
    far = store.create(new(jobType="later", scheduledAt=now + timedelta(hours=3)))
    assert store.claim_due(now, 100, {"later"}) == []
    assert [j.id for j in store.claim_due(now + timedelta(seconds=7), 100, {"later"})] == [j.id for j in soon[:2]]
    assert [j.id for j in store.claim_due(now + timedelta(seconds=10), 100, {"later"})] == [soon[2].id]
    assert store.claim_due(now + timedelta(minutes=1), 100, {"later"}) == []
    assert [j.id for j in store.claim_due(now + timedelta(hours=4), 100, {"later"})] == [far.id]
    retried = claim_one(store, store.create(new(jobType="later")))
    assert retried.status is Status.QUEUED


def test_a_claim_ahead_takes_jobs_due_within_the_lookahead_and_later_ones_for_now(store: JobStore) -> None:
    now = utc_now()
    soon = store.create(new(jobType="ahead", scheduledAt=now + timedelta(milliseconds=600)))
    store.create(new(jobType="ahead", scheduledAt=now + timedelta(seconds=5)))
    assert [j.id for j in store.claim_due(now, 100, {"ahead"}, due_by=now + timedelta(seconds=1))] == [soon.id]
    immediate = store.create(new(jobType="ahead", scheduledAt=utc_now()))  # written after the claim ahead
    later = now + timedelta(milliseconds=300)
    claimed = store.claim_due(later, 100, {"ahead"}, due_by=later + timedelta(seconds=1))
    assert [j.id for j in claimed] == [immediate.id]
    assert claimed[0].queuedAt == later  # queued when claimed, not at the horizon


def test_a_claim_with_an_earlier_clock_still_takes_jobs_released_since(store: JobStore) -> None:
    """The clock a claim is given may be older than the writes it must see (a released job)."""
    now = utc_now() - timedelta(seconds=2)  # older than every release below, by more than a due slot
    job = store.create(new(jobType="stale-clock"))
    for _ in range(3):
        [claimed] = store.claim_due(now, 10, {"stale-clock"})
        assert claimed.id == job.id
        store.release([claimed])


def test_a_deep_backlog_is_claimed_once_each_in_priority_order_over_many_claims(harness: Harness) -> None:
    """A backlog in passed slots (MongoDB: read once and kept by the claimer, claimed lane by lane): across
    many small claims every run is claimed exactly once, higher priorities first; a run cancelled meanwhile is
    never claimed and one written meanwhile is."""
    store = harness.store
    urgent = [store.create(new(jobType="backlog", priority=5)) for _ in range(30)]
    bulk = [store.create(new(jobType="backlog")) for _ in range(370)]
    harness.age_writes("backlog", seconds=30)
    claims = [store.claim_due(utc_now(), 20, {"backlog"})]
    cancelled = store.cancel(bulk[-1].id)
    late = store.create(new(jobType="backlog"))
    while claimed := store.claim_due(utc_now(), 20, {"backlog"}):
        claims.append(claimed)
    order = [job for claim in claims for job in claim]
    counts = Counter(job.id for job in order)
    assert set(counts) == {j.id for j in [*urgent, *bulk, late] if j.id != cancelled.id}
    assert set(counts.values()) == {1}
    assert [job.priority for job in order] == sorted((job.priority for job in order), reverse=True)
