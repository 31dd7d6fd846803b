"""jobsched: jobs and schedules for Python applications.

The one import an application writes. Handlers are collected in a JobTypes and run by the executors, which
load the collection by name (`JOBSCHED_HANDLERS=myapp.jobs:jobs`); the Client enqueues them, typed:

    import jobsched

    jobs = jobsched.JobTypes()

    @jobs.handler("write-report", timeout=60)
    def write_report(payload: Report, ctx: jobsched.HandlerContext) -> None: ...

    with jobsched.Client("http://127.0.0.1:8080", tenant_id="acme") as client:
        client.enqueue(write_report, Report(day="2026-12-04"))

`jobsched.testing` runs a handler, or the whole product in-process, in a test; `jobsched.server` (the
`server` extra) runs the server from Python.
"""

from importlib.metadata import version
from typing import TYPE_CHECKING, Any

from jobsched.backoff import Backoff
from jobsched.handlers import BatchMember, BatchProgress, HandlerContext, HandlerError, JobType, JobTypes
from jobsched.limits import Limits, Rate
from jobsched.outcomes import Cancel, GiveUp, RetryAfter, Snooze
from jobsched.payloads import Payload, PayloadMismatch
from jobsched.schedules import Schedule

__version__ = version("jobsched")

if TYPE_CHECKING:
    from jobsched.client import (
        TERMINAL_STATUSES,
        Applied,
        AsyncClient,
        Backfilled,
        BadRequest,
        Batch,
        BatchCallback,
        BatchMembers,
        Client,
        Conflict,
        ConnectionFailed,
        DeadLetters,
        Deleted,
        DuplicateBatch,
        DuplicateJob,
        DuplicateWorkflow,
        Enqueued,
        Execution,
        Job,
        JobschedError,
        NotFound,
        PayloadTooLarge,
        Redriven,
        Retries,
        ServedType,
        ServerError,
        StepGroup,
        StepRef,
        TypeLimits,
        Unauthorized,
        Unavailable,
        WaitTimeout,
        Workflow,
        WorkflowBuilder,
        WorkflowStep,
        callback,
    )

__all__ = [
    "TERMINAL_STATUSES",
    "Applied",
    "AsyncClient",
    "Backfilled",
    "Backoff",
    "BadRequest",
    "Batch",
    "BatchCallback",
    "BatchMember",
    "BatchMembers",
    "BatchProgress",
    "Cancel",
    "Client",
    "Conflict",
    "ConnectionFailed",
    "DeadLetters",
    "Deleted",
    "DuplicateBatch",
    "DuplicateJob",
    "DuplicateWorkflow",
    "Enqueued",
    "Execution",
    "GiveUp",
    "HandlerContext",
    "HandlerError",
    "Job",
    "JobType",
    "JobTypes",
    "JobschedError",
    "Limits",
    "NotFound",
    "Payload",
    "PayloadMismatch",
    "PayloadTooLarge",
    "Rate",
    "Redriven",
    "Retries",
    "RetryAfter",
    "Schedule",
    "ServedType",
    "ServerError",
    "Snooze",
    "StepGroup",
    "StepRef",
    "TypeLimits",
    "Unauthorized",
    "Unavailable",
    "WaitTimeout",
    "Workflow",
    "WorkflowBuilder",
    "WorkflowStep",
    "__version__",
    "callback",
]

# The client's names are imported when first used: a server or executor process imports jobsched for its handlers
# and never loads the HTTP client and its models (httpx and pydantic, a tenth of a second of every start). Type
# checkers read the imports above instead, so that a misspelt name stays an error.
if not TYPE_CHECKING:
    _CLIENT_NAMES = frozenset(__all__) - frozenset(globals())

    def __getattr__(name: str) -> Any:
        if name not in _CLIENT_NAMES:
            raise AttributeError(f"module 'jobsched' has no attribute {name!r}")
        from jobsched import client

        value = getattr(client, name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *_CLIENT_NAMES})
