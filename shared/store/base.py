"""The JobStore seam: every component's only way to read or change job state.

Methods are named after the transitions they make; each docstring is the contract that every
implementation (MongoDB, SQLite) must meet and that tests/contract checks. Ownership is decided by
inserts into unique keys (idempotency keys, attempt records), which are atomic on every store; conditional
updates move statuses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from shared.model import DEFAULT_PRIORITY, Job, Status


class StoreError(Exception):
    """Base of the errors a store raises on purpose."""


class StoreUnavailable(StoreError):
    """The database cannot be reached or timed out; the caller may retry later."""


class DuplicateJob(StoreError):
    def __init__(self, idempotency_key: str) -> None:
        super().__init__(f"a job with idempotencyKey {idempotency_key!r} already exists")
        self.idempotency_key = idempotency_key


class JobNotFound(StoreError):
    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id} not found")
        self.job_id = job_id


class TransitionRefused(StoreError):
    """The job is not in a status that allows the requested transition."""

    def __init__(self, job: Job, action: str) -> None:
        super().__init__(f"cannot {action} job {job.id}: it is {job.status.value}")
        self.job = job


@dataclass(frozen=True)
class NewJob:
    """What a client asks for; the store assigns id, status and timestamps."""

    idempotencyKey: str
    tenantId: str
    jobType: str
    scheduledAt: datetime
    payload: dict[str, Any] = field(default_factory=dict)
    priority: int = DEFAULT_PRIORITY
    maxAttempts: int = 3
    timeoutSeconds: float | None = None
    cron: str | None = None
    interval: str | None = None
    timezone: str | None = None
    templateId: str | None = None


class JobStore(Protocol):
    def ensure_schema(self) -> None:
        """Create collections/tables and indexes; idempotent, called at every start-up."""

    def close(self) -> None:
        """Release connections."""

    def ping(self) -> None:
        """Return if the store answers, raise StoreUnavailable otherwise."""

    def create(self, new: NewJob) -> Job:
        """Insert a pending job. Raise DuplicateJob if its idempotencyKey exists (atomic under races)."""

    def get(self, job_id: str) -> Job | None:
        """The job with this id, or None (also for an id that is not a valid ObjectId)."""

    def list_for_tenant(self, tenant_id: str, status: Status | None, limit: int) -> list[Job]:
        """A tenant's jobs, newest createdAt first, optionally one status only, at most `limit`."""

    def cancel(self, job_id: str) -> Job:
        """pending|queued → cancelled, and return the cancelled job.

        The cancellation takes the job's next attempt record first, so an executor that received the job's
        wake-up message can never start it, whichever of the two acts first. Raise JobNotFound, or
        TransitionRefused when the job has started or finished.
        """

    def claim_due(self, now: datetime, limit: int) -> list[Job]:
        """pending → queued for up to `limit` due one-off jobs (scheduledAt <= now), in claim order:
        priority desc, then scheduledAt asc. Templates are never claimed. Returns the jobs this call won."""
