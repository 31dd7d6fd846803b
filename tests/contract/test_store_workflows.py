"""Workflows on every store (shared/workflows.py): stored whole with their steps' jobs, roots pending and the rest
waiting for their parents; a step released only once its parents completed; one idempotency key per tenant; read
with each step's status, listed newest first per tenant; the status follows the steps' jobs; the parents' results
read by step name."""

from __future__ import annotations

from dataclasses import replace

import pytest

from shared.model import Outcome, Status, utc_now
from shared.store.base import DuplicateWorkflow, JobStore, NewStep, NewWorkflow
from shared.workflows import WorkflowStatus
from tests.contract.store_kit import claim_one, new, reload, result, start, together


def diamond(key: str = "etl", tenant: str = "tenant-a") -> NewWorkflow:
    """extract → (left, right) → load, parents first."""

    def step(name: str, *after: str) -> NewStep:
        return NewStep(name, new(jobType=f"wf-{name}", tenantId=tenant), after)

    steps = (step("extract"), step("left", "extract"), step("right", "extract"), step("load", "left", "right"))
    return NewWorkflow(tenantId=tenant, idempotencyKey=key, steps=steps, name="nightly")


def run_step(store: JobStore, job_id: str, outcome: Outcome = Outcome.SUCCEEDED, returned: object = None) -> None:
    job = start(store, claim_one(store, reload(store, job_id)))
    assert store.finish_attempt(job, replace(result(outcome), result=returned, final=True)) is not None


def test_a_workflow_is_stored_with_its_roots_pending_and_the_rest_waiting(store: JobStore) -> None:
    view = store.create_workflow(diamond())
    workflow = view.workflow
    assert [s.name for s in workflow.steps] == ["extract", "left", "right", "load"]
    assert workflow.name == "nightly"
    assert view.status is WorkflowStatus.RUNNING
    jobs = {s.name: reload(store, s.jobId) for s in workflow.steps}
    assert {name: job.status for name, job in jobs.items()} == {
        "extract": Status.PENDING,
        "left": Status.WAITING,
        "right": Status.WAITING,
        "load": Status.WAITING,
    }
    assert {job.workflowId for job in jobs.values()} == {workflow.id}
    assert {name: job.step for name, job in jobs.items()} == {name: name for name in jobs}
    assert jobs["load"].dependsOn == [jobs["left"].id, jobs["right"].id]
    read = store.workflow(workflow.id.upper())
    assert read is not None
    assert read.workflow == workflow
    assert read.statuses == {job.id: job.status.value for job in jobs.values()}
    assert dict(read.counts) == {"pending": 1, "waiting": 3}
    assert store.workflow("not-an-id") is None


def test_steps_start_only_after_their_parents_completed_and_read_their_results_by_name(store: JobStore) -> None:
    steps = {s.name: s.jobId for s in store.create_workflow(diamond()).workflow.steps}
    run_step(store, steps["extract"], returned={"rows": 10})
    assert reload(store, steps["load"]).status is Status.WAITING
    run_step(store, steps["left"], returned={"half": 1})
    assert reload(store, steps["load"]).status is Status.WAITING  # right has not run
    run_step(store, steps["right"], returned={"half": 2})
    assert reload(store, steps["load"]).status is Status.PENDING
    parents = store.results_of([steps["left"], steps["right"]])
    assert {(r.step, r.result["half"]) for r in parents.values()} == {("left", 1), ("right", 2)}
    run_step(store, steps["load"])
    store.create_workflow(diamond("later"))
    finished = store.workflows("tenant-a", 10)
    assert [v.status for v in finished] == [WorkflowStatus.RUNNING, WorkflowStatus.SUCCEEDED]


def test_a_failed_step_cancels_what_waits_on_it_and_the_workflow_fails(store: JobStore) -> None:
    steps = {s.name: s.jobId for s in store.create_workflow(diamond()).workflow.steps}
    run_step(store, steps["extract"])
    run_step(store, steps["left"], Outcome.FAILED)
    load = reload(store, steps["load"])
    assert load.status is Status.CANCELLED
    assert load.lastError == f"parent job {steps['left']} ended dlq"
    view = store.workflow(reload(store, steps["left"]).workflowId or "")
    assert view is not None
    assert view.status is WorkflowStatus.RUNNING
    assert [s.name for s in view.unfinished] == ["right"]
    run_step(store, steps["right"])
    view = store.workflow(view.workflow.id)
    assert view is not None
    assert view.status is WorkflowStatus.FAILED
    assert dict(view.counts) == {"completed": 2, "dlq": 1, "cancelled": 1}


def test_one_workflow_per_key_and_tenant_even_when_created_together(store: JobStore) -> None:
    answers = together([lambda: store.create_workflow(diamond("same")) for _ in range(4)])
    made = [a for a in answers if not isinstance(a, BaseException)]
    refused = [a for a in answers if isinstance(a, DuplicateWorkflow)]
    # A create that finds the key's workflow still being written (a store that writes in steps) finishes it and
    # answers it, as a resend does; one that finds it written is refused naming it. Either way, one workflow.
    assert len(made) + len(refused) == 4, answers
    [workflow_id] = {m.workflow.id for m in made} | {r.existing_id for r in refused}
    assert [v.workflow.id for v in store.workflows("tenant-a", 10)] == [workflow_id]
    assert [j.id for j in store.claim_due_jobs(utc_now(), 100, {"wf-extract"})] == [
        store.workflow(workflow_id).workflow.steps[0].jobId  # type: ignore[union-attr]
    ]  # the only root written: the other creates stored nothing
    other = store.create_workflow(diamond("same", tenant="tenant-b"))  # another tenant's key is no conflict
    assert other.workflow.id != workflow_id


def test_workflows_are_listed_newest_first_by_tenant_in_pages(store: JobStore) -> None:
    made = [store.create_workflow(diamond(f"w{n}")).workflow.id for n in range(5)]
    store.create_workflow(diamond("elsewhere", tenant="tenant-b"))
    first = store.workflows("tenant-a", 2)
    assert [v.workflow.id for v in first] == made[::-1][:2]
    rest = store.workflows("tenant-a", 10, before=first[-1].workflow.id)
    assert [v.workflow.id for v in rest] == made[::-1][2:]
    assert all(dict(v.counts) == {"pending": 1, "waiting": 3} for v in first + rest)
    assert store.workflows("tenant-c", 10) == []


def test_a_cancelled_step_is_an_ended_step(store: JobStore) -> None:
    view = store.create_workflow(diamond())
    for step in view.unfinished:  # dependents first: each cancel finds its step still waiting or pending
        assert store.cancel(step.jobId).status is Status.CANCELLED
    after = store.workflow(view.workflow.id)
    assert after is not None
    assert after.status is WorkflowStatus.CANCELLED
    assert after.unfinished == []
    for step in view.workflow.steps[1:]:  # retention deletes finished jobs: the status reads what is left
        store.delete(step.jobId)
    assert store.workflow(view.workflow.id).status is WorkflowStatus.CANCELLED  # type: ignore[union-attr]
    store.delete(view.workflow.steps[0].jobId)
    gone = store.workflow(view.workflow.id)
    assert gone is not None
    assert (gone.status, dict(gone.counts), gone.statuses) == (WorkflowStatus.EXPIRED, {}, {})


@pytest.mark.parametrize("steps", [1, 300])
def test_a_wide_workflow_is_stored_whole(store: JobStore, steps: int) -> None:
    root = NewStep("root", new(jobType="wf-root"))
    fan = tuple(NewStep(f"part-{n}", new(jobType="wf-part"), ("root",)) for n in range(steps))
    view = store.create_workflow(NewWorkflow("tenant-a", "wide", (root, *fan)))
    assert len(view.workflow.steps) == steps + 1
    assert dict(view.counts) == {"pending": 1, "waiting": steps}
    run_step(store, view.workflow.steps[0].jobId)
    released = store.workflow(view.workflow.id)
    assert released is not None
    assert dict(released.counts) == {"completed": 1, "pending": steps}
