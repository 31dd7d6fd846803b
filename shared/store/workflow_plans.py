"""What a store writes for a new workflow (shared/workflows.py): its record and its steps' jobs, each step's job
keyed and linked to its parents' jobs by id, the same for every store."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from bson import ObjectId

from shared.model import Status
from shared.store import transitions
from shared.store.base import NewWorkflow
from shared.store.transitions import Fields
from shared.workflows import Workflow, WorkflowState, WorkflowStep


@dataclass(frozen=True)
class Plan:
    """What a store writes for a new workflow: its record, and its steps' jobs (each with its id), parents first."""

    workflow: Workflow
    jobs: list[Fields]

    @property
    def parents(self) -> set[str]:
        """The ids of the steps' jobs that some step waits for."""
        return {parent for job in self.jobs for parent in job.get("dependsOn", ())}


def step_key(workflow_id: str, step: str) -> str:
    """A step's job's idempotency key: its workflow's id makes it the workflow's alone."""
    return f"workflow-{workflow_id}-{step}"


def planned(
    new: NewWorkflow, workflow_id: str, now: datetime, *, held: bool, ids: Mapping[str, str] | None = None
) -> Plan:
    """The record and the steps' jobs of `new` under `workflow_id`, created `now`; with `held`, the roots wait too
    (released when every step is written) and the record is `creating`. Each step's job waits for its parents' jobs
    by id: fresh ones, or `ids` by step name (a resent create finishing the record written before)."""
    ids = ids or {step.name: str(ObjectId()) for step in new.steps}
    jobs: list[Fields] = []
    for step in new.steps:
        job = replace(
            step.job,
            tenantId=new.tenantId,
            idempotencyKey=step_key(workflow_id, step.name),
            dependsOn=[ids[parent] for parent in step.after] or None,
            workflowId=workflow_id,
            step=step.name,
        )
        fields = {"id": ids[step.name], **transitions.new_job(job, now)}
        if held:
            fields["status"] = Status.WAITING.value
        jobs.append(fields)
    workflow = Workflow(
        id=workflow_id,
        tenantId=new.tenantId,
        idempotencyKey=new.idempotencyKey,
        name=new.name,
        createdAt=transitions.stored_time(now),
        state=WorkflowState.CREATING if held else WorkflowState.RUNNING,
        steps=tuple(WorkflowStep(s.name, ids[s.name], s.job.jobType, s.after) for s in new.steps),
    )
    return Plan(workflow, jobs)
