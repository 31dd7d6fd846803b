"""The errors the client raises: each carries the API's `error` message and the HTTP status."""

from __future__ import annotations

from typing import Any


class JobschedError(Exception):
    """An answer of the API that is not a success, or no answer at all (status None)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(f"{status}: {message}" if status is not None else message)
        self.message = message
        self.status = status


class BadRequest(JobschedError):
    """400: the request is malformed or names an unknown job type."""


class Unauthorized(JobschedError):
    """401 or 403: no key, an unknown key, or a key without the role."""


class NotFound(JobschedError):
    """404: no such job (or workflow)."""


class Conflict(JobschedError):
    """409: the job is not in a status that allows this (cancel a finished job, retry one not in the DLQ)."""


class DuplicateJob(Conflict):
    """409 on create: a job with this idempotency key exists; `job_id` is its id (fetch it with `get`)."""

    def __init__(self, message: str, job_id: str | None) -> None:
        super().__init__(message, 409)
        self.job_id = job_id


class DuplicateWorkflow(Conflict):
    """409 on submitting a workflow: one with this idempotency key exists; `workflow_id` is its id (fetch it with
    `get_workflow`)."""

    def __init__(self, message: str, workflow_id: str | None) -> None:
        super().__init__(message, 409)
        self.workflow_id = workflow_id


class DuplicateBatch(Conflict):
    """409 on creating a batch: one with this idempotency key exists; `batch_id` is its id (`get_batch`)."""

    def __init__(self, message: str, batch_id: str | None) -> None:
        super().__init__(message, 409)
        self.batch_id = batch_id


class PayloadTooLarge(JobschedError):
    """413: the payload is over the API's limit."""


class Unavailable(JobschedError):
    """503 (the job store is down) after every retry."""


class ServerError(JobschedError):
    """Any other status (a 5xx the API should never send)."""


class ConnectionFailed(JobschedError):
    """No answer (refused, reset, timed out) after every retry."""


class WaitTimeout(JobschedError):
    """`wait` gave up: the job did not reach one of the statuses in time. `job` is what it was last (for
    `wait_workflow`, the workflow)."""

    def __init__(self, message: str, job: Any) -> None:
        super().__init__(message)
        self.job = job


_BY_STATUS: dict[int, type[JobschedError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Unauthorized,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    503: Unavailable,
}


def error_for(status: int, body: Any) -> JobschedError:
    """The typed error of a non-2xx answer whose body is `body` (the parsed JSON, or None)."""
    message = body.get("error") if isinstance(body, dict) else None
    text = str(message) if message else f"HTTP {status}"
    if status == 409 and isinstance(body, dict) and "jobId" in body:
        job_id = body.get("jobId")
        return DuplicateJob(text, str(job_id) if job_id else None)
    if status == 409 and isinstance(body, dict) and "workflowId" in body:
        workflow_id = body.get("workflowId")
        return DuplicateWorkflow(text, str(workflow_id) if workflow_id else None)
    if status == 409 and isinstance(body, dict) and "batchId" in body:
        batch_id = body.get("batchId")
        return DuplicateBatch(text, str(batch_id) if batch_id else None)
    return _BY_STATUS.get(status, ServerError)(text, status)
