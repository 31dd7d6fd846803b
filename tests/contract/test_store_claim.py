"""The store contract, on every implementation: the scheduler's claims and their release."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from functools import partial

from shared.model import Job, Outcome, Status, utc_now
from shared.store.base import (
    AttemptStart,
    AttemptTaken,
    JobStore,
    TransitionRefused,
)
from shared.store.fair_claims import Claimed
from tests.contract.conftest import CLAIM_ORDER, Harness
from tests.contract.store_kit import (
    LEASE,
    RACE_TIMEOUT_S,
    claim_one,
    hint,
    lockstep,
    new,
    reload,
    result,
    start,
    together,
)
from tests.support import start_one


def test_a_claims_wakeup_fields_are_its_jobs(store: JobStore) -> None:
    """What the scheduler publishes (Claim.claimed: read from the rows where a store can, without making jobs of
    them) is what the claimed jobs say, in claim order: a retried job's next attempt, each job's tenant."""
    retried = store.create(new(jobType="wakeup-fields", tenantId="t-1", priority=3, maxAttempts=3))
    [first] = store.claim_due_jobs(utc_now(), 10, {"wakeup-fields"})
    store.finish_attempt(start(store, first), result(Outcome.FAILED, "boom"))
    store.create(new(jobType="wakeup-fields", tenantId="t-2", priority=1))
    claim = store.claim_due_jobs(utc_now() + timedelta(days=7), 10, {"wakeup-fields"})  # past the retry's backoff
    claimed = claim.claimed()
    assert claimed == [Claimed.of(job) for job in claim]
    assert {c.tenantId: (c.id == retried.id, c.next_attempt) for c in claimed} == {"t-1": (True, 2), "t-2": (False, 1)}


def test_claim_due_claims_in_priority_then_time_order_and_never_twice(store: JobStore, line: dict[str, Job]) -> None:
    names = {job.id: name for name, job in line.items()}
    now = utc_now()
    first = store.claim_due_jobs(now, 2, {"noop"})
    second = store.claim_due_jobs(now, 2, {"noop"})
    assert [names[j.id] for j in first] == CLAIM_ORDER[:2]
    assert [names[j.id] for j in second] == CLAIM_ORDER[2:]
    assert store.claim_due_jobs(now, 2, {"noop"}) == []
    for job in [*first, *second]:
        assert (job.status, job.queuedAt) == (Status.QUEUED, now)
        assert reload(store, job) == job
    for name in ("template", "future", "other-type"):
        assert reload(store, line[name]).status is Status.PENDING


def test_claim_due_filters_by_job_types(store: JobStore, line: dict[str, Job]) -> None:
    assert store.claim_due_jobs(utc_now(), 10, set()) == []
    [other] = store.claim_due_jobs(utc_now(), 10, {"other", "unknown"})
    assert other.id == line["other-type"].id
    assert len(store.claim_due_jobs(utc_now(), 10, {"noop", "other"})) == len(CLAIM_ORDER)


def test_a_claim_for_other_job_types_finds_runs_the_claims_before_it_did_not_look_for(store: JobStore) -> None:
    # Whatever a claimer keeps between claims says nothing about types it was not asked for. Claiming "as of"
    # a few seconds ahead, as a claim a second or two after the write would.
    job = store.create(new(jobType="asked-second"))
    ahead = utc_now() + timedelta(seconds=5)
    assert store.claim_due_jobs(ahead, 10, {"asked-first"}) == []
    assert [j.id for j in store.claim_due_jobs(ahead, 10, {"asked-second"})] == [job.id]


def test_due_job_types_names_the_types_of_due_pending_runs_only(store: JobStore) -> None:
    now = utc_now()
    store.create(new(jobType="due"))
    store.create(new(jobType="later", scheduledAt=now + timedelta(hours=1)))
    store.create(new(jobType="template-only", cron="* * * * *"))
    claim_one(store, store.create(new(jobType="already-queued")))
    assert store.due_job_types(now) == {"due"}
    assert store.due_job_types(now + timedelta(hours=2)) == {"due", "later"}


def test_release_puts_queued_jobs_back_in_line_and_leaves_started_ones(store: JobStore) -> None:
    now = utc_now()
    a = store.create(new(priority=1, scheduledAt=now - timedelta(minutes=2)))
    b = store.create(new(priority=1, scheduledAt=now - timedelta(minutes=1)))
    c = store.create(new(priority=0))
    qa, qb, qc = store.claim_due_jobs(now, 10, {"noop"})
    begun = start(store, qc, "w1", now + LEASE)
    store.release_claims([qb, qa, qc])
    assert [(j.status, j.queuedAt) for j in (reload(store, a), reload(store, b))] == [(Status.PENDING, None)] * 2
    assert reload(store, c) == begun
    assert [j.id for j in store.claim_due_jobs(utc_now(), 10, {"noop"})] == [a.id, b.id]
    store.release_claims([])


def test_two_claimers_never_double_start_a_job(harness: Harness) -> None:
    """Two schedulers (separate store instances) claim overlapping batches while each one's executor starts,
    runs and finishes attempt 1 of what it won.

    A claim is a compare-and-set (SQLite: a transaction; MongoDB: a guarded update, atomic per document), so no
    job is won twice, every job's attempt 1 is started exactly once and every job completes."""
    jobs, batch_size = 120, 7
    ids = {harness.store.create(new(priority=i % 3)).id for i in range(jobs)}
    stores = [harness.open(), harness.open()]
    step = lockstep()
    rounds = -(-jobs // batch_size) + 1  # each round claims at least one batch, whoever wins it

    def claim_and_run(store: JobStore, worker: str) -> tuple[list[str], list[str], list[str]]:
        won: list[str] = []
        begun: list[str] = []
        finished: list[str] = []
        for _ in range(rounds):
            step.wait(RACE_TIMEOUT_S)
            for job in store.claim_due_jobs(utc_now(), batch_size, {"noop"}):
                won.append(job.id)
                try:
                    started = start_one(store, AttemptStart(job.id, job.jobType, worker, utc_now() + LEASE, hint(job)))
                except (AttemptTaken, TransitionRefused):
                    continue  # the other claimer's executor started it
                begun.append(job.id)
                if store.finish_attempt(started, result(Outcome.SUCCEEDED)):
                    finished.append(job.id)
        return won, begun, finished

    outcomes = together([partial(claim_and_run, s, f"w{i}") for i, s in enumerate(stores)], step)
    results = [o for o in outcomes if isinstance(o, tuple)]
    assert len(results) == 2, outcomes
    won = Counter(job_id for claimed, _, _ in results for job_id in claimed)
    begun = Counter(job_id for _, started, _ in results for job_id in started)
    finished = Counter(job_id for _, _, done in results for job_id in done)
    assert set(won) == ids
    assert set(begun) == ids
    assert max(begun.values()) == 1
    for job_id in ids:
        assert [e.attempt for e in harness.store.list_executions(job_id)] == [1]
    assert max(won.values()) == 1
    assert set(finished) == ids
    assert {reload(harness.store, job_id).status for job_id in ids} == {Status.COMPLETED}


def test_runs_that_become_due_later_are_claimed_when_due(store: JobStore) -> None:
    """A claim before future runs are due takes none, later claims take each one once it is due, however far
    ahead it was scheduled."""
    now = utc_now()
    soon = [store.create(new(jobType="later", scheduledAt=now + timedelta(seconds=s))) for s in (5, 6, 9)]
    far = store.create(new(jobType="later", scheduledAt=now + timedelta(hours=3)))
    assert store.claim_due_jobs(now, 100, {"later"}) == []
    assert [j.id for j in store.claim_due_jobs(now + timedelta(seconds=7), 100, {"later"})] == [j.id for j in soon[:2]]
    assert [j.id for j in store.claim_due_jobs(now + timedelta(seconds=10), 100, {"later"})] == [soon[2].id]
    assert store.claim_due_jobs(now + timedelta(minutes=1), 100, {"later"}) == []
    assert [j.id for j in store.claim_due_jobs(now + timedelta(hours=4), 100, {"later"})] == [far.id]
    retried = claim_one(store, store.create(new(jobType="later")))
    assert retried.status is Status.QUEUED


def test_a_claim_ahead_takes_jobs_due_within_the_lookahead_and_later_ones_for_now(store: JobStore) -> None:
    now = utc_now()
    soon = store.create(new(jobType="ahead", scheduledAt=now + timedelta(milliseconds=600)))
    store.create(new(jobType="ahead", scheduledAt=now + timedelta(seconds=5)))
    assert [j.id for j in store.claim_due_jobs(now, 100, {"ahead"}, due_by=now + timedelta(seconds=1))] == [soon.id]
    immediate = store.create(new(jobType="ahead", scheduledAt=utc_now()))  # written after the claim ahead
    later = now + timedelta(milliseconds=300)
    claimed = store.claim_due_jobs(later, 100, {"ahead"}, due_by=later + timedelta(seconds=1))
    assert [j.id for j in claimed] == [immediate.id]
    assert claimed[0].queuedAt == later  # queued when claimed, not at the horizon


def test_a_claim_with_an_earlier_clock_still_takes_jobs_released_since(store: JobStore) -> None:
    """The clock a claim is given may be older than the writes it must see (a released job)."""
    now = utc_now() - timedelta(seconds=2)  # older than every release below, by more than a due slot
    job = store.create(new(jobType="stale-clock"))
    for _ in range(3):
        [claimed] = store.claim_due_jobs(now, 10, {"stale-clock"})
        assert claimed.id == job.id
        store.release_claims([claimed])


def test_a_deep_backlog_is_claimed_once_each_in_priority_order_over_many_claims(store: JobStore) -> None:
    """Across many small claims of a backlog every run is claimed exactly once, higher priorities first; a run
    cancelled meanwhile is never claimed and one written meanwhile is."""
    urgent = [store.create(new(jobType="backlog", priority=5)) for _ in range(30)]
    bulk = [store.create(new(jobType="backlog")) for _ in range(370)]
    claims = [store.claim_due_jobs(utc_now(), 20, {"backlog"})]
    cancelled = store.cancel(bulk[-1].id)
    late = store.create(new(jobType="backlog"))
    while claimed := store.claim_due_jobs(utc_now(), 20, {"backlog"}):
        claims.append(claimed)
    order = [job for claim in claims for job in claim]
    counts = Counter(job.id for job in order)
    assert set(counts) == {j.id for j in [*urgent, *bulk, late] if j.id != cancelled.id}
    assert set(counts.values()) == {1}
    assert [job.priority for job in order] == sorted((job.priority for job in order), reverse=True)
