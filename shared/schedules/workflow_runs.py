"""Schedules that fire workflows ("every night at 2: extract, then 20 transforms side by side, then load").

Such a schedule is an ordinary template (POST /workflows with `cron` or `interval`) of the built-in type
`jobsched.workflow`, whose payload holds the workflow's steps as they were validated when it was made. Each run it
spawns (a fire time, a trigger, a backfill) is written as a workflow instead of a single job: keyed as that run would
be (`<templateKey>-run-<planned unix ns>`), so a repeated decision (a new leader, a retried backfill) writes it once,
and its steps' jobs carry the template's id and the fire time, so the one scheduling path (shared/schedules/engine.py)
applies every rule of a schedule to the workflow as a whole: catch-up, the `skip` overlap (a run is not final while
any of its steps is not), pause on failure (a step dead-lettered), remaining runs, the template's runs listing,
trigger and backfill.

What a step of such a workflow keeps of its type (its attempt budget, its backoff) is fixed when the schedule is
made, as a template's runs keep the template's. The overlaps that hold a run back (`buffer_one`, `buffer_all`, and
`cancel_other`, whose new run waits for the cancelled ones to end) keep it as one stored job in status `buffered`: a
workflow has no such single job, so they are refused for it.
"""

from __future__ import annotations

from typing import Any, Final

from jobsched.backoff import backoff_document, backoff_from_document
from shared.cron import ScheduleError
from shared.model import Job, run_key
from shared.schedules.policy import Overlap
from shared.store.base import NewJob, NewStep, NewWorkflow, RunSpec

WORKFLOW_SCHEDULE: Final = "jobsched.workflow"
OVERLAPS: Final = (Overlap.ALLOW_ALL.value, Overlap.SKIP.value)
# The fields of a step's job a schedule keeps, besides its type and payload (what a one-off job may set).
_KEPT: Final = ("priority", "maxAttempts", "timeoutSeconds", "concurrencyKey", "onParentFailure")


def is_workflow_schedule(template: Job) -> bool:
    return template.jobType == WORKFLOW_SCHEDULE


def check_overlap(overlap: str | None) -> None:
    """ScheduleError for an overlap a workflow schedule cannot keep (see the module's docstring)."""
    if overlap is not None and overlap not in OVERLAPS:
        raise ScheduleError(
            f"overlap: {overlap} holds a run back as one job; a workflow schedule takes allow_all or skip"
        )


def schedule_payload(new: NewWorkflow) -> dict[str, Any]:
    """The template's payload for the validated workflow `new`: its name and steps, parents first."""
    steps = {"steps": [_step_document(step) for step in new.steps]}
    return {"name": new.name, **steps} if new.name is not None else steps


def _step_document(step: NewStep) -> dict[str, Any]:
    job = step.job
    doc: dict[str, Any] = {"name": step.name, "jobType": job.jobType, "payload": job.payload}
    doc |= {name: value for name in _KEPT if (value := getattr(job, name)) is not None}
    if step.after:
        doc["after"] = list(step.after)
    if job.backoff is not None:
        doc["backoff"] = backoff_document(job.backoff)
    return doc


def run_workflow(template: Job, run: RunSpec) -> NewWorkflow:
    """The workflow a run of the schedule `template` is: keyed as the run, its steps due at the run's time. Raises
    ScheduleError when the template's payload holds no workflow (changed by hand in the database)."""
    key = run.key or run_key(template.idempotencyKey, run.planned)
    due = run.scheduledAt or run.planned
    try:
        steps = tuple(_step(template, doc, due, run) for doc in template.payload["steps"])
        name = template.payload.get("name")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ScheduleError(f"the workflow schedule's steps cannot be read: {exc!r}") from None
    if not steps:
        raise ScheduleError("the workflow schedule has no step")
    return NewWorkflow(tenantId=template.tenantId, idempotencyKey=key, steps=steps, name=name)


def _step(template: Job, doc: dict[str, Any], due: Any, run: RunSpec) -> NewStep:
    job = NewJob(
        idempotencyKey=str(doc["name"]),  # the store keys a step's job by its workflow (workflow_plans.step_key)
        tenantId=template.tenantId,
        jobType=str(doc["jobType"]),
        scheduledAt=due,
        payload=dict(doc["payload"]),
        backoff=backoff_from_document(doc["backoff"]) if "backoff" in doc else None,
        templateId=template.id,
        plannedAt=run.planned,
        **{name: doc[name] for name in _KEPT if name in doc},
    )
    return NewStep(str(doc["name"]), job, tuple(str(parent) for parent in doc.get("after", ())))
