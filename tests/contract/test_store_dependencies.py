"""Jobs that wait for other jobs (dependsOn), on every store: a waiting job is never claimed before every parent has
completed; a parent that ends otherwise cancels it (or, under `run`, lets it run once all ended), down the graph;
its parents are jobs of its tenant; every way a parent ends settles it, however the ends and the create race."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from bson import ObjectId

from jobsched.handlers import ParentResult
from shared.model import Job, Outcome, Status, utc_now
from shared.store.base import AttemptFinish, DependencyRefused, JobStore
from tests.contract.store_kit import claim_one, lockstep, new, queued, reload, result, running, start, together


def claimable(store: JobStore, job_type: str) -> set[str]:
    return {job.id for job in store.claim_due_jobs(utc_now() + timedelta(days=1), 1000, {job_type})}


def complete(store: JobStore, job_type: str) -> None:
    """Run a job of `job_type` (its own type) to completion."""
    job = start(store, claim_one(store, store.create(new(jobType=job_type))))
    store.finish_attempt(job, result(Outcome.SUCCEEDED))


def test_a_job_waits_until_every_parent_has_completed(store: JobStore) -> None:
    first, second = running(store, jobType="first"), running(store, jobType="second")
    child = store.create(new(jobType="child", dependsOn=[first.id, second.id]))
    assert child.status is Status.WAITING
    assert child.dependsOn == [first.id, second.id]
    assert claimable(store, "child") == set()

    store.finish_attempt(first, result(Outcome.SUCCEEDED))
    assert reload(store, child).status is Status.WAITING
    assert claimable(store, "child") == set()

    done = store.finish_attempt(second, result(Outcome.SUCCEEDED))
    assert done is not None
    released = reload(store, child)
    assert released.status is Status.PENDING
    # Due from its release: the wait is no lateness of its own.
    assert released.scheduledAt >= done.updatedAt - timedelta(milliseconds=1)
    assert claimable(store, "child") == {child.id}


def test_a_job_whose_parents_have_completed_is_created_pending(store: JobStore) -> None:
    parent = store.finish_attempt(running(store, jobType="parent"), result(Outcome.SUCCEEDED))
    assert parent is not None
    child = store.create(new(jobType="child", dependsOn=[parent.id.upper()]))
    assert child.status is Status.PENDING
    assert child.dependsOn == [parent.id]
    assert claimable(store, "child") == {child.id}


def test_a_parent_that_fails_cancels_its_dependents_down_the_graph(store: JobStore) -> None:
    parent = running(store, jobType="parent", maxAttempts=1)
    child = store.create(new(jobType="child", dependsOn=[parent.id]))
    grandchild = store.create(new(jobType="grandchild", dependsOn=[child.id]))
    other = running(store, jobType="other")
    beside = store.create(new(jobType="beside", dependsOn=[other.id]))

    dead = store.finish_attempt(parent, result(Outcome.FAILED, "boom"))
    assert dead is not None
    assert dead.status is Status.DLQ
    for job, cause in ((child, parent), (grandchild, child)):
        cancelled = reload(store, job)
        assert cancelled.status is Status.CANCELLED
        why = f"parent job {cause.id} ended {'dlq' if cause is parent else 'cancelled'}"
        assert cancelled.lastError == why
        [attempt] = store.list_executions(job.id)
        assert (attempt.attempt, attempt.outcome, attempt.error) == (1, Outcome.CANCELLED, why)
    assert reload(store, beside).status is Status.WAITING  # another parent's dependent is not touched


def test_under_run_a_dependent_runs_once_every_parent_has_ended(store: JobStore) -> None:
    failing = running(store, jobType="failing", maxAttempts=1)
    slow = running(store, jobType="slow")
    child = store.create(new(jobType="child", dependsOn=[failing.id, slow.id], onParentFailure="run"))
    store.finish_attempt(failing, result(Outcome.FAILED, "boom"))
    assert reload(store, child).status is Status.WAITING
    store.finish_attempt(slow, result(Outcome.SUCCEEDED))
    assert reload(store, child).status is Status.PENDING


def test_cancelling_a_parent_cancels_its_dependents_and_a_waiting_job_cancels(store: JobStore) -> None:
    later = utc_now() + timedelta(hours=1)
    parent = store.create(new(jobType="parent", scheduledAt=later))
    child = store.create(new(jobType="child", dependsOn=[parent.id]))
    store.cancel(parent.id)
    assert reload(store, child).status is Status.CANCELLED

    waiting = store.create(new(jobType="child", dependsOn=[store.create(new(scheduledAt=later)).id]))
    cancelled = store.cancel(waiting.id)
    assert cancelled.status is Status.CANCELLED
    assert [e.outcome for e in store.list_executions(waiting.id)] == [Outcome.CANCELLED]


def test_a_lost_attempt_that_spends_the_budget_settles_dependents(store: JobStore) -> None:
    parent = running(store, jobType="parent", maxAttempts=1, lease_until=utc_now() - timedelta(seconds=1))
    child = store.create(new(jobType="child", dependsOn=[parent.id], onParentFailure="run"))
    [expired] = [job for job in store.expired_attempts(utc_now(), 100) if job.id == parent.id]
    recovered = store.recover_attempt(expired, "lost")
    assert recovered is not None
    assert recovered.status is Status.DLQ
    assert reload(store, child).status is Status.PENDING


def test_a_parent_re_driven_from_the_dlq_settles_under_run_what_still_waits_when_it_ends_again(
    store: JobStore,
) -> None:
    failing, slow = running(store, jobType="failing", maxAttempts=1), running(store, jobType="slow")
    child = store.create(new(jobType="child", dependsOn=[failing.id, slow.id], onParentFailure="run"))
    store.finish_attempt(failing, result(Outcome.FAILED, "boom"))
    store.settle_dependents(utc_now() + timedelta(minutes=5), 100)  # the sweep has come and gone meanwhile
    store.redrive(failing.id)
    store.finish_attempt(slow, result(Outcome.SUCCEEDED))
    assert reload(store, child).status is Status.WAITING  # the re-driven parent runs again: it is not ended
    store.finish_attempt(start(store, claim_one(store, reload(store, failing))), result(Outcome.SUCCEEDED))
    assert reload(store, child).status is Status.PENDING


def test_a_job_created_after_a_parent_failed_is_cancelled_at_once_whatever_its_other_parents(store: JobStore) -> None:
    failing, still_running = running(store, jobType="failing", maxAttempts=1), running(store, jobType="running")
    store.finish_attempt(failing, result(Outcome.FAILED, "boom"))
    parents = [still_running.id, still_running.id.upper(), failing.id]  # one of them named twice
    child = store.create(new(jobType="child", dependsOn=parents))
    assert child.status is Status.CANCELLED
    assert child.lastError == f"parent job {failing.id} ended dlq"


def test_a_parent_re_driven_after_its_dependent_was_created_holds_it_under_run(store: JobStore) -> None:
    failing, slow = running(store, jobType="failing", maxAttempts=1), running(store, jobType="slow")
    store.finish_attempt(failing, result(Outcome.FAILED, "boom"))
    child = store.create(new(jobType="child", dependsOn=[failing.id, slow.id], onParentFailure="run"))
    assert child.status is Status.WAITING  # for `slow` alone
    store.redrive(failing.id)
    store.finish_attempt(slow, result(Outcome.SUCCEEDED))
    assert reload(store, child).status is Status.WAITING  # the re-driven parent runs again: it is not ended
    store.finish_attempt(start(store, claim_one(store, reload(store, failing))), result(Outcome.SUCCEEDED))
    assert reload(store, child).status is Status.PENDING


def test_a_retried_parent_keeps_its_dependents_waiting(store: JobStore) -> None:
    parent = running(store, jobType="parent", maxAttempts=3)
    child = store.create(new(jobType="child", dependsOn=[parent.id]))
    retried = store.finish_attempt(parent, result(Outcome.FAILED, "once"))
    assert retried is not None
    assert retried.status is Status.PENDING
    assert reload(store, child).status is Status.WAITING


@pytest.mark.parametrize(
    "parent_of",
    [
        pytest.param(lambda store: str(ObjectId()), id="no-such-job"),
        pytest.param(lambda store: store.create(new(tenantId="tenant-b")).id, id="another-tenant"),
        pytest.param(lambda store: store.create(new(cron="0 3 * * *")).id, id="a-template"),
        pytest.param(lambda store: "not-an-id", id="not-an-id"),
    ],
)
def test_a_parent_must_be_a_one_off_job_of_the_tenant(store: JobStore, parent_of: object) -> None:
    assert callable(parent_of)
    parent = parent_of(store)
    good = store.create(new())
    with pytest.raises(DependencyRefused, match=f"dependsOn: job {parent.lower()} "):
        store.create(new("refused", dependsOn=[good.id, parent]))
    assert store.job_by_key("tenant-a", "refused") is None
    answers = store.create_many([new("refused"), new("kept", dependsOn=[good.id]), new("also", dependsOn=[parent])])
    assert [type(a).__name__ for a in answers] == ["Job", "Job", "DependencyRefused"]
    assert store.job_by_key("tenant-a", "also") is None
    kept = store.job_by_key("tenant-a", "kept")
    assert kept is not None
    assert kept.status is Status.WAITING


def test_a_parent_deleted_once_it_completed_counts_as_done_for_a_dependent_still_waiting(store: JobStore) -> None:
    """A parent's dependents are settled when it ends; one that still waits for another parent, when the first is
    deleted (by hand, or by retention days later), counts it as the completed parent it was."""
    first, second = running(store, jobType="first"), running(store, jobType="second")
    child = store.create(new(jobType="child", dependsOn=[first.id, second.id]))
    store.finish_attempt(first, result(Outcome.SUCCEEDED))
    store.delete(first.id)
    assert reload(store, child).status is Status.WAITING
    store.finish_attempt(second, result(Outcome.SUCCEEDED))
    assert reload(store, child).status is Status.PENDING


def test_a_parent_ending_while_its_dependent_is_created_never_strands_or_frees_it_early(store: JobStore) -> None:
    """Each round: a dependent created while its parent completes. Afterwards the dependent is pending (whichever
    went first), and never pending while its other parent is still running."""
    step = lockstep(3)
    rounds = 15
    guard = queued(store, jobType="guard")  # an open parent: every dependent must keep waiting for it
    parents = [running(store, jobType=f"p{n}") for n in range(rounds)]
    children: list[str] = []

    def finish_parents() -> None:
        for parent in parents:
            step.wait()
            store.finish_attempt(parent, result(Outcome.SUCCEEDED))

    def create_children() -> None:
        for n, parent in enumerate(parents):
            step.wait()
            children.append(store.create(new(f"child-{n}", jobType="child", dependsOn=[parent.id])).id)

    def create_guarded() -> None:
        for n, parent in enumerate(parents):
            step.wait()
            store.create(new(f"guarded-{n}", jobType="guarded", dependsOn=[parent.id, guard.id]))

    outcomes = together([finish_parents, create_children, create_guarded], step)
    assert [o for o in outcomes if isinstance(o, BaseException)] == []
    assert {reload(store, c).status for c in children} == {Status.PENDING}
    guarded = [store.job_by_key("tenant-a", f"guarded-{n}") for n in range(rounds)]
    assert {g.status for g in guarded if g is not None} == {Status.WAITING}
    assert None not in guarded


def test_a_dependent_reads_what_its_parents_returned(store: JobStore) -> None:
    returned, silent = running(store, jobType="returned"), running(store, jobType="silent")
    store.finish_attempt(returned, replace(result(Outcome.SUCCEEDED), result={"rows": 42}))
    store.finish_attempt(silent, result(Outcome.SUCCEEDED))
    missing = str(ObjectId())
    assert store.results_of([returned.id.upper(), silent.id, missing, "not-an-id"]) == {
        returned.id.upper(): ParentResult(None, {"rows": 42}),
        silent.id: ParentResult(None, None),
    }
    assert store.results_of([]) == {}


def test_a_closed_job_says_whether_others_waited_for_it(store: JobStore) -> None:
    """What lets its executor nudge the scheduler: one of those may be due now."""
    parent, lonely = running(store, jobType="parent"), running(store, jobType="lonely")
    store.create(new(jobType="child", dependsOn=[parent.id]))
    [closed_lonely, closed_parent] = store.finish_attempts(
        [AttemptFinish(lonely, result(Outcome.SUCCEEDED)), AttemptFinish(parent, result(Outcome.SUCCEEDED))]
    )
    assert isinstance(closed_lonely, Job)
    assert not closed_lonely.hasDependents
    assert isinstance(closed_parent, Job)
    assert closed_parent.hasDependents
