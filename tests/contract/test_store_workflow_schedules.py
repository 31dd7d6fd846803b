"""Schedules that fire workflows (shared/schedules/workflow_runs.py), on every store: each fire time, trigger and
backfill writes one workflow keyed as the run, whose steps are runs of the template (its id, the fire time); a fire
time decided twice (a new leader) writes nothing more; `skip` waits for every step of the last run, a dead-lettered
step pauses a template with pauseOnFailure."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from bson import ObjectId

from shared.model import Job, Outcome, Status, run_key, utc_now
from shared.schedules.engine import ScheduleEngine, ScheduleRefused
from shared.schedules.policy import Action
from shared.schedules.workflow_runs import WORKFLOW_SCHEDULE, ForeignWorkflow, run_workflow, schedule_payload
from shared.store.base import JobStore, NewJob, NewStep, NewWorkflow, RunSpec
from shared.store.mongo import MongoJobStore
from shared.store.mongo import workflows as stored_workflows
from shared.store.workflow_plans import planned as workflow_plan
from shared.workflows import WorkflowStatus, WorkflowView
from tests.contract.store_kit import new, reload
from tests.contract.test_store_workflows import run_step

MINUTE = timedelta(minutes=1)


def nightly() -> NewWorkflow:
    """extract → (part-1, part-2) → load."""

    def step(name: str, *after: str) -> NewStep:
        return NewStep(name, new(jobType=f"wf-{name}", tenantId="t", maxAttempts=1), after)

    steps = (step("extract"), step("part-1", "extract"), step("part-2", "extract"), step("load", "part-1", "part-2"))
    return NewWorkflow(tenantId="t", idempotencyKey="nightly", steps=steps, name="etl")


def schedule(store: JobStore, **policy: object) -> Job:
    """An every-minute schedule of `nightly`, its cursor ten minutes back."""
    start = utc_now().replace(second=0, microsecond=0) - 10 * MINUTE
    return store.create(
        NewJob(
            idempotencyKey="nightly",
            tenantId="t",
            jobType=WORKFLOW_SCHEDULE,
            payload=schedule_payload(nightly()),
            cron="* * * * *",
            timezone="UTC",
            scheduledAt=start,
            createdAt=start - timedelta(hours=1),
            paused=False,
            **policy,  # type: ignore[arg-type]
        )
    )


def fired(store: JobStore, tpl: Job, planned: datetime) -> WorkflowView:
    """The workflow of the run for `planned`, read through its first step (a run of the template)."""
    [root] = [r for r in store.template_runs(tpl.id, None, 100) if r.plannedAt == planned and r.step == "extract"]
    assert root.workflowId is not None
    view = store.workflow(root.workflowId)
    assert view is not None
    return view


def test_each_fire_time_writes_one_workflow_whose_steps_are_runs_of_the_template(store: JobStore) -> None:
    tpl = schedule(store)
    planned = tpl.scheduledAt
    actions = ScheduleEngine(store).fire_due(tpl, planned + timedelta(seconds=1))
    assert actions[Action.SPAWNED] == 1
    view = fired(store, tpl, planned)
    assert (view.workflow.idempotencyKey, view.workflow.name) == (run_key("nightly", planned), "etl")
    assert [s.name for s in view.workflow.steps] == ["extract", "part-1", "part-2", "load"]
    jobs = {s.name: reload(store, s.jobId) for s in view.workflow.steps}
    assert {job.templateId for job in jobs.values()} == {tpl.id}
    assert {job.plannedAt for job in jobs.values()} == {planned}
    assert {job.scheduledAt for job in jobs.values()} == {planned}
    assert {name: job.status for name, job in jobs.items()} == {
        "extract": Status.PENDING,
        "part-1": Status.WAITING,
        "part-2": Status.WAITING,
        "load": Status.WAITING,
    }
    assert jobs["load"].dependsOn == [jobs["part-1"].id, jobs["part-2"].id]
    assert jobs["part-1"].maxAttempts == 1  # what the step asked for when the schedule was made
    moved = reload(store, tpl.id)
    assert moved.scheduledAt == planned + MINUTE  # the cursor moved past the fire time

    # A leader that decides the same fire time again (it took over before the cursor moved) writes nothing more.
    again = ScheduleEngine(store).fire_due(tpl, planned + timedelta(seconds=1))
    assert again[Action.SPAWNED] == 1
    assert len(store.template_runs(tpl.id, None, 100)) == 4
    assert fired(store, tpl, planned).workflow.id == view.workflow.id


def test_skip_waits_for_every_step_of_the_last_run(store: JobStore) -> None:
    tpl = schedule(store, overlap="skip")
    engine = ScheduleEngine(store)
    planned = tpl.scheduledAt
    engine.fire_due(tpl, planned)
    steps = {s.name: s.jobId for s in fired(store, tpl, planned).workflow.steps}
    run_step(store, steps["extract"])
    run_step(store, steps["part-1"])
    run_step(store, steps["part-2"])  # `load` is pending: the run is not over
    tpl = reload(store, tpl.id)
    assert engine.fire_due(tpl, tpl.scheduledAt)[Action.SKIPPED] == 1
    run_step(store, steps["load"])
    assert fired(store, tpl, planned).status is WorkflowStatus.SUCCEEDED
    tpl = reload(store, tpl.id)
    assert engine.fire_due(tpl, tpl.scheduledAt)[Action.SPAWNED] == 1


def test_a_dead_lettered_step_pauses_a_schedule_with_pause_on_failure(store: JobStore) -> None:
    tpl = schedule(store, pauseOnFailure=True)
    engine = ScheduleEngine(store)
    engine.fire_due(tpl, tpl.scheduledAt)
    steps = {s.name: s.jobId for s in fired(store, tpl, tpl.scheduledAt).workflow.steps}
    run_step(store, steps["extract"], Outcome.FAILED)  # one attempt allowed: dead-lettered
    assert reload(store, steps["load"]).status is Status.CANCELLED
    tpl = reload(store, tpl.id)
    assert engine.fire_due(tpl, tpl.scheduledAt + MINUTE) == {}
    assert reload(store, tpl.id).paused is True


def test_trigger_and_backfill_write_workflows_keyed_as_their_runs(store: JobStore) -> None:
    tpl = schedule(store)
    engine = ScheduleEngine(store)
    now = utc_now()
    triggered = engine.trigger(tpl, now, request_key="by-hand")
    assert triggered.created
    assert (triggered.run.step, triggered.run.templateId) == ("extract", tpl.id)
    assert triggered.run.workflowId is not None
    view = store.workflow(triggered.run.workflowId)
    assert view is not None
    assert view.workflow.idempotencyKey == "nightly-trigger-by-hand"
    retried = engine.trigger(tpl, now, request_key="by-hand")
    assert (retried.run.id, retried.created) == (triggered.run.id, False)

    start = tpl.scheduledAt - 5 * MINUTE
    backfilled = engine.backfill(tpl, start, start + 3 * MINUTE)
    assert (backfilled.spawned, backfilled.existing) == (3, 0)
    assert len({fired(store, tpl, start + n * MINUTE).workflow.id for n in range(3)}) == 3
    assert engine.backfill(tpl, start, start + 3 * MINUTE).existing == 3


def test_a_retried_trigger_gets_its_run_even_while_that_run_holds_a_skip(store: JobStore) -> None:
    tpl = schedule(store, overlap="skip")
    engine = ScheduleEngine(store)
    first = engine.trigger(tpl, utc_now(), request_key="deploy-42")
    retried = engine.trigger(tpl, utc_now(), request_key="deploy-42")
    assert (retried.run.id, retried.created) == (first.run.id, False)
    with pytest.raises(ScheduleRefused, match="overlap policy skip"):
        engine.trigger(tpl, utc_now(), request_key="deploy-43")


def test_a_run_key_another_workflow_holds_is_refused_to_a_request_and_left_by_the_scheduler(store: JobStore) -> None:
    tpl = schedule(store)
    engine = ScheduleEngine(store)
    planned = tpl.scheduledAt
    squatter = store.create_workflow(replace(nightly(), idempotencyKey=run_key("nightly", planned)))
    store.create_workflow(replace(nightly(), idempotencyKey="nightly-trigger-x"))
    with pytest.raises(ForeignWorkflow, match="not a run of this schedule"):
        engine.trigger(tpl, utc_now(), request_key="x")
    with pytest.raises(ForeignWorkflow):
        engine.backfill(tpl, planned, planned + MINUTE)
    # The scheduler leaves that fire time (logged) and goes on: the next one runs.
    assert engine.fire_due(tpl, planned + timedelta(seconds=1))[Action.SPAWNED] == 1
    assert store.template_runs(tpl.id, None, 100) == []
    later = reload(store, tpl.id)
    engine.fire_due(later, later.scheduledAt)
    assert fired(store, later, later.scheduledAt).workflow.id != squatter.workflow.id


def test_a_run_a_dead_leader_left_half_written_is_finished_by_the_next(mongo_store: MongoJobStore) -> None:
    """MongoDB writes a workflow in steps: a leader that died after two of a run's four steps left them held. The
    next decision of the schedule finishes that run (as a resend would) instead of skipping behind it until the
    reaper comes."""
    store = mongo_store
    tpl = schedule(store, overlap="skip")
    first = tpl.scheduledAt
    plan = workflow_plan(run_workflow(tpl, RunSpec(first)), str(ObjectId()), utc_now(), held=True)
    stored_workflows.records(store.database).insert_one(stored_workflows.record_document(plan.workflow))
    stored_workflows.write_steps(store.database, plan, utc_now(), plan.jobs[:2])
    assert {r.status for r in store.template_runs(tpl.id, None, 100)} == {Status.WAITING}

    actions = ScheduleEngine(store).fire_due(tpl, first + 5 * MINUTE)  # catch-up `latest`: one time decided
    view = store.workflow(plan.workflow.id)
    assert view is not None
    assert (view.status, dict(view.counts)) == (WorkflowStatus.RUNNING, {"pending": 1, "waiting": 3})
    assert actions[Action.SKIPPED] == 1  # the first run, now whole, holds the skip


def test_a_run_whose_first_step_aged_out_is_still_the_schedules_own(store: JobStore) -> None:
    tpl = schedule(store)
    engine = ScheduleEngine(store)
    planned = tpl.scheduledAt
    engine.fire_due(tpl, planned)
    view = fired(store, tpl, planned)
    run_step(store, view.workflow.steps[0].jobId)
    while store.delete_finished(Status.COMPLETED, utc_now() + timedelta(days=1), 500):
        pass  # retention took the completed first step; the others wait or run
    assert store.get(view.workflow.steps[0].jobId) is None
    backfilled = engine.backfill(tpl, planned, planned + MINUTE)
    assert (backfilled.spawned, backfilled.existing) == (0, 1)
