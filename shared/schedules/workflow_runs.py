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

import logging
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Final

from jobsched.backoff import backoff_document, backoff_from_document
from shared.cron import ScheduleError
from shared.model import Job, Status, run_key
from shared.schedules.policy import Overlap
from shared.store.base import (
    DuplicateWorkflow,
    JobRefused,
    NewJob,
    NewStep,
    NewWorkflow,
    RunSpec,
    ScheduleStore,
    StoreError,
    StoreUnavailable,
)
from shared.workflows import WorkflowState, WorkflowView

log = logging.getLogger("jobsched.schedules")

WORKFLOW_SCHEDULE: Final = "jobsched.workflow"
OVERLAPS: Final = (Overlap.ALLOW_ALL.value, Overlap.SKIP.value)
# The fields of a step's job a schedule keeps, besides its type and payload (what a one-off job may set).
_KEPT: Final = ("priority", "maxAttempts", "timeoutSeconds", "concurrencyKey", "onParentFailure")
# A template's fields that a workflow schedule's steps hold instead (a PATCH of them would change nothing).
STEPS_FIX: Final = frozenset({"payload", "backoff", *_KEPT})


def is_workflow_schedule(template: Job) -> bool:
    return template.jobType == WORKFLOW_SCHEDULE


def check_overlap(overlap: str | None) -> None:
    """ScheduleError for an overlap a workflow schedule cannot keep (see the module's docstring)."""
    if overlap is not None and overlap not in OVERLAPS:
        raise ScheduleError(
            f"overlap: {overlap} holds a run back as one job; a workflow schedule takes allow_all or skip"
        )


def check_changes(changes: Iterable[str]) -> None:
    """ScheduleError for a change (PATCH) of what the schedule's steps fixed when it was made."""
    fixed = sorted(STEPS_FIX & set(changes))
    if fixed:
        raise ScheduleError(f"{fixed[0]}: a workflow schedule's steps keep their own; make a new schedule to change it")


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


def _step(template: Job, doc: dict[str, Any], due: datetime, run: RunSpec) -> NewStep:
    job = NewJob(
        idempotencyKey=str(doc["name"]),  # the store keys a step's job by its workflow (workflow_plans.step_key)
        tenantId=template.tenantId,
        jobType=str(doc["jobType"]),
        scheduledAt=due,
        payload=dict(doc["payload"]),
        backoff=backoff_from_document(doc["backoff"]) if "backoff" in doc else None,
        templateId=template.id,
        plannedAt=run.planned,
        traceparent=template.traceparent,  # as a run of a one-job template: its spans link to the template's
        **{name: doc[name] for name in _KEPT if name in doc},
    )
    return NewStep(str(doc["name"]), job, tuple(str(parent) for parent in doc.get("after", ())))


class ForeignWorkflow(StoreError):
    """A run's key is held by a workflow that is not a run of the schedule (made by hand under that key, or by an
    earlier schedule of the same key that was deleted)."""


class WorkflowRuns:
    """A workflow schedule's runs written to and read from a store (for shared/schedules/engine.py)."""

    def __init__(self, store: ScheduleStore) -> None:
        self._store = store

    def add(self, template: Job, runs: Sequence[RunSpec], *, refuse_foreign: bool) -> list[tuple[str, bool]]:
        """Each run written as a workflow by one store call: the id of its first step's job (a run of the template),
        and whether it is new (False: a retry after a crash, another leader, a retried backfill wrote it). A key
        another workflow holds raises ForeignWorkflow with `refuse_foreign` (a request's runs), else that fire time
        is logged and left (the scheduler's: one schedule must not stop the others); steps the store refuses raise
        ScheduleError."""
        added = []
        for run in runs:
            new = run_workflow(template, run)
            try:
                added.append((self._store.create_workflow(new).workflow.steps[0].jobId, True))
            except DuplicateWorkflow as exc:
                try:
                    root = self._own_root(template, self._store.workflow(exc.existing_id), new.idempotencyKey)
                except ForeignWorkflow as foreign:
                    if refuse_foreign:
                        raise
                    log.warning(str(foreign), extra={"action": "run_key_taken", "jobId": template.id})
                    root = exc.existing_id
                added.append((root, False))
            except JobRefused as exc:
                raise ScheduleError(f"a step of the workflow cannot be stored: {exc}") from None
        return added

    def earlier(self, template: Job, key: str) -> Job | None:
        """The first step's job of the run keyed `key`, when one was made (a retried trigger)."""
        view = self._store.workflow_by_key(template.tenantId, key)
        return None if view is None else self._store.get(self._own_root(template, view, key))

    def finish_half_written(self, template: Job, runs: Sequence[Job]) -> None:
        """Finish the workflows of `runs` (the template's runs that are not final) that a leader left half written
        (a store without transactions writes one in steps, its roots held `waiting` for nobody until the last): as
        a resend of its create does, rather than let it hold the schedule (`skip`) until the reaper gets to it."""
        held = {r.workflowId: r for r in runs if r.workflowId and r.status is Status.WAITING and not r.dependsOn}
        for workflow_id, root in held.items():
            view = self._store.workflow(workflow_id)
            if view is None or view.workflow.state not in (WorkflowState.CREATING, WorkflowState.RELEASING):
                continue
            assert root.plannedAt is not None  # every step of a schedule's run has its fire time
            run = RunSpec(root.plannedAt, key=view.workflow.idempotencyKey, scheduledAt=root.scheduledAt)
            try:
                self._store.create_workflow(run_workflow(template, run))
            except (DuplicateWorkflow, StoreUnavailable, JobRefused):
                continue  # finished meanwhile, being removed, or refused (its create removed it): the reaper's
            log.warning(
                "half-written run finished",
                extra={"action": "workflow_run_finished", "jobId": template.id, "workflowId": workflow_id},
            )

    def _own_root(self, template: Job, view: WorkflowView | None, key: str) -> str:
        """The id of the first step's job of `view`, when it is a run of `template` (told by a step whose job is
        left; a run whose every job retention deleted counts as one); ForeignWorkflow otherwise."""
        if view is None:  # removed between the create's refusal and this read: a resend decides
            raise StoreUnavailable("the run's workflow was removed as it was read; retry")
        first = view.workflow.steps[0].jobId
        left = next((step.jobId for step in view.workflow.steps if step.jobId in (view.statuses or {})), None)
        job = self._store.get(left) if left is not None else None
        if left is not None and (job is None or job.templateId != template.id):
            message = f"the run's key {key!r} is held by workflow {view.workflow.id}, not a run of this schedule"
            raise ForeignWorkflow(message)
        return first
