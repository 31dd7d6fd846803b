"""What a workflow schedule keeps of its steps (shared/schedules/workflow_runs.py): each run's steps are the steps
as validated when the schedule was made, runs of the template, due at the run's time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobsched.backoff import Backoff
from shared.cron import ScheduleError
from shared.model import Job, job_from_fields, run_key
from shared.schedules.workflow_runs import WORKFLOW_SCHEDULE, check_overlap, run_workflow, schedule_payload
from shared.store.base import NewJob, NewStep, NewWorkflow, RunSpec

T0 = datetime(2026, 12, 6, 2, 0, tzinfo=UTC)


def template(payload: dict[str, object]) -> Job:
    return job_from_fields(
        {
            "id": "a" * 24,
            "idempotencyKey": "nightly",
            "tenantId": "t",
            "jobType": WORKFLOW_SCHEDULE,
            "payload": payload,
            "status": "pending",
            "scheduledAt": T0,
            "createdAt": T0,
            "updatedAt": T0,
            "attempts": 0,
            "cron": "0 2 * * *",
        }
    )


def test_a_run_is_the_workflow_as_made_keyed_as_the_run_and_due_at_its_time() -> None:
    extract = NewJob("extract", "t", "extract", T0, payload={"day": 1}, priority=7, maxAttempts=5)
    load = NewJob(
        "load", "t", "load", T0, timeoutSeconds=2.5, concurrencyKey="db", onParentFailure="run", backoff=Backoff(3, 9)
    )
    made = NewWorkflow("t", "nightly", (NewStep("extract", extract), NewStep("load", load, ("extract",))), "etl")
    tpl = template(schedule_payload(made))
    jittered = T0 + timedelta(seconds=4)
    run = run_workflow(tpl, RunSpec(T0, scheduledAt=jittered))
    assert (run.tenantId, run.idempotencyKey, run.name) == ("t", run_key("nightly", T0), "etl")
    first, second = run.steps
    assert (first.name, first.after, second.name, second.after) == ("extract", (), "load", ("extract",))
    assert (first.job.jobType, first.job.payload, first.job.priority, first.job.maxAttempts) == (
        "extract",
        {"day": 1},
        7,
        5,
    )
    assert (second.job.timeoutSeconds, second.job.concurrencyKey, second.job.onParentFailure) == (2.5, "db", "run")
    assert second.job.backoff == Backoff(3, 9)
    assert {s.job.templateId for s in run.steps} == {tpl.id}
    assert {(s.job.plannedAt, s.job.scheduledAt) for s in run.steps} == {(T0, jittered)}
    assert run_workflow(tpl, RunSpec(T0, key="nightly-trigger-x")).idempotencyKey == "nightly-trigger-x"


def test_a_payload_that_holds_no_workflow_is_a_schedule_error() -> None:
    payloads: list[dict[str, object]] = [{}, {"steps": []}, {"steps": [{"name": "a"}]}, {"steps": "x"}]
    for payload in payloads:
        with pytest.raises(ScheduleError):
            run_workflow(template(payload), RunSpec(T0))


@pytest.mark.parametrize("overlap", ["buffer_one", "buffer_all", "cancel_other"])
def test_the_overlaps_that_hold_a_run_back_are_refused(overlap: str) -> None:
    with pytest.raises(ScheduleError, match="allow_all or skip"):
        check_overlap(overlap)
    check_overlap("skip")
    check_overlap(None)
