"""Workflows: named steps, each an ordinary job, that wait for one another (`after`), written all or nothing under
one idempotency key (POST /workflows), read and cancelled as one.

A step is a job with `workflowId` and `step` set, waiting for its parents' jobs as any job with `dependsOn` does
(shared/store/dependencies.py): so a step starts only once its parents completed, a parent's failure cancels it
(or, under `run`, lets it run), and every rule of a job holds for it (priorities, limits, fairness, retries, the
reaper, retention). The workflow's record keeps its steps by name with their jobs' ids; its status is not stored
but read from its steps' jobs (one indexed query), so a step costs the store no write beyond its job's.

A store writes a workflow in one transaction where it has them (SQLite). One without (MongoDB) writes the record
first, `creating`, then the steps' jobs parents first with the roots held (`waiting` with no parent: nothing
releases them), then releases the roots and marks the record `running`: no step runs before every step is
written, a client's resend of the same request finishes a write a crash cut short, and the reaper finishes (all
steps written) or removes (some missing) a record left `creating` (store.settle_workflows).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from shared.model import TERMINAL, Status, format_time

# The steps one workflow may have: its record lists them all (a document of a few hundred KB at most), and
# reading its status reads them all. A fan-in wider than a step's MAX_PARENTS is a batch's.
MAX_STEPS: Final = 1000
# How long a workflow may stay being written before the reaper finishes or removes it: far longer than a create
# takes, so that it seldom meets one still under way (and a create it meets finds out: store/mongo/workflows.py).
CREATING_GRACE: Final = timedelta(minutes=5)


class WorkflowState(StrEnum):
    # A store without transactions (MongoDB) writes a workflow in steps (store/mongo/workflows.py): none runs
    # before it is `running`, but a root released while `releasing` (every step is written then).
    CREATING = "creating"  # its steps are being written
    RELEASING = "releasing"  # every step is written; its roots are being released
    REMOVING = "removing"  # left half written: what was written is being removed
    RUNNING = "running"  # every step is written; what each does is its job's status


class WorkflowStatus(StrEnum):
    """What a client reads: `running` while a step has not ended; then `succeeded` when every step completed,
    `failed` when one was dead-lettered, `cancelled` otherwise, read from the steps' jobs that retention left
    (it keeps dead letters longest by default, then cancelled jobs as long as completed ones)."""

    CREATING = "creating"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"  # every step's job was deleted by retention: how they ended is no longer known


@dataclass(frozen=True)
class WorkflowStep:
    name: str
    jobId: str
    jobType: str
    after: tuple[str, ...] = ()


@dataclass(frozen=True)
class Workflow:
    """A workflow's record. `id` is a 24-hex ObjectId string on every store."""

    id: str
    tenantId: str
    idempotencyKey: str
    name: str | None
    createdAt: datetime
    state: WorkflowState
    steps: tuple[WorkflowStep, ...]


@dataclass(frozen=True)
class WorkflowView:
    """A workflow as its steps' jobs are now: how many are in each status, and (for one workflow read alone)
    each step's job's status by job id. A step whose job was deleted (retention) is in neither."""

    workflow: Workflow
    counts: Mapping[str, int]
    statuses: Mapping[str, str] | None = None

    @property
    def status(self) -> WorkflowStatus:
        if self.workflow.state is not WorkflowState.RUNNING:
            return WorkflowStatus.CREATING
        if any(n and Status(status) not in TERMINAL for status, n in self.counts.items()):
            return WorkflowStatus.RUNNING
        if not any(self.counts.values()):
            return WorkflowStatus.EXPIRED
        if self.counts.get(Status.DLQ.value):
            return WorkflowStatus.FAILED
        if self.counts.get(Status.CANCELLED.value):
            return WorkflowStatus.CANCELLED
        return WorkflowStatus.SUCCEEDED

    @property
    def unfinished(self) -> list[WorkflowStep]:
        """The steps whose job has not ended, dependents before their parents (the order a cancel takes, so that a
        step that would run after a cancelled parent is cancelled first)."""
        statuses = self.statuses or {}
        ended = {s.value for s in TERMINAL}
        return [s for s in reversed(self.workflow.steps) if statuses.get(s.jobId, Status.COMPLETED.value) not in ended]

    def to_wire(self, with_steps: bool = True) -> dict[str, Any]:
        workflow = self.workflow
        wire: dict[str, Any] = {
            "id": workflow.id,
            "tenantId": workflow.tenantId,
            "idempotencyKey": workflow.idempotencyKey,
            "createdAt": format_time(workflow.createdAt),
            "status": self.status.value,
            "counts": dict(self.counts),
            "stepCount": len(workflow.steps),
        }
        if workflow.name is not None:
            wire["name"] = workflow.name
        if with_steps:
            statuses = self.statuses or {}
            wire["steps"] = [
                {"name": s.name, "jobId": s.jobId, "jobType": s.jobType, "after": list(s.after)}
                | ({"status": statuses[s.jobId]} if s.jobId in statuses else {})
                for s in workflow.steps
            ]
        return wire


def steps_document(steps: tuple[WorkflowStep, ...]) -> list[dict[str, Any]]:
    """A record's steps as a store keeps them (a JSON array, or a BSON one)."""
    return [{"name": s.name, "jobId": s.jobId, "jobType": s.jobType, "after": list(s.after)} for s in steps]


def steps_of(document: list[dict[str, Any]]) -> tuple[WorkflowStep, ...]:
    return tuple(WorkflowStep(d["name"], d["jobId"], d["jobType"], tuple(d.get("after") or ())) for d in document)
