"""A Python client for the jobsched API, blocking (Client) and asyncio (AsyncClient).

from jobsched import Client

with Client("http://127.0.0.1:8080", tenant_id="tenant-a") as client:
    job = client.create("send-email", {"to": "a@example.com"})
    done = client.wait(job.id)
"""

from jobsched.client._batch_calls import BatchCallback, callback
from jobsched.client._calls import Retries
from jobsched.client.aio import AsyncClient
from jobsched.client.errors import (
    BadRequest,
    Conflict,
    ConnectionFailed,
    DuplicateBatch,
    DuplicateJob,
    DuplicateWorkflow,
    JobschedError,
    NotFound,
    PayloadTooLarge,
    ServerError,
    Unauthorized,
    Unavailable,
    WaitTimeout,
)
from jobsched.client.models import (
    TERMINAL_STATUSES,
    Applied,
    Backfilled,
    Batch,
    BatchMembers,
    Credential,
    DeadLetters,
    Deleted,
    Enqueued,
    Execution,
    Job,
    Progress,
    Redriven,
    ServedType,
    SigningSecret,
    TypeLimits,
    Workflow,
    WorkflowStep,
)
from jobsched.client.sync import Client
from jobsched.client.workflows import StepGroup, StepOptions, StepRef, WorkflowBuilder

__all__ = [
    "TERMINAL_STATUSES",
    "Applied",
    "AsyncClient",
    "Backfilled",
    "BadRequest",
    "Batch",
    "BatchCallback",
    "BatchMembers",
    "Client",
    "Conflict",
    "ConnectionFailed",
    "Credential",
    "DeadLetters",
    "Deleted",
    "DuplicateBatch",
    "DuplicateJob",
    "DuplicateWorkflow",
    "Enqueued",
    "Execution",
    "Job",
    "JobschedError",
    "NotFound",
    "PayloadTooLarge",
    "Progress",
    "Redriven",
    "Retries",
    "ServedType",
    "ServerError",
    "SigningSecret",
    "StepGroup",
    "StepOptions",
    "StepRef",
    "TypeLimits",
    "Unauthorized",
    "Unavailable",
    "WaitTimeout",
    "Workflow",
    "WorkflowBuilder",
    "WorkflowStep",
    "callback",
]
