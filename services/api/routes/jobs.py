"""The job endpoints of the API contract: POST /jobs, GET /jobs (a tenant's, newest first), GET, DELETE (cancel)
/jobs/{id}, its executions, and the retry and delete of a finished job."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.api.context import ApiContext, context
from services.api.http.errors import ApiError, SafeJSONResponse, error
from services.api.http.request_bodies import list_limit, path_job_id, read_json
from services.api.new_job import new_job_of, unknown_type
from services.api.routes.pages import Page, page_of, page_query, stream_jobs
from shared.job_requests import STATUS_VALUES
from shared.job_types.limits import waiting_for
from shared.jsonsafe import shorten
from shared.model import TERMINAL, Job, Status, utc_now
from shared.store.base import DuplicateJob, JobNotFound, NewJob
from shared.store.browse import JobQuery

log = logging.getLogger("jobsched.api")


async def create_job(request: Request) -> Response:
    api = context(request)
    new = await new_job_of(await read_json(request), len(await request.body()), api.known.defaults)
    if not await api.known.accepts(new.jobType):
        raise ApiError(400, unknown_type(new.jobType, api.known.names()))
    await api.schema.wait_ready()
    return await stored_job(api, new)


async def stored_job(api: ApiContext, new: NewJob) -> Response:
    """POST /jobs's answer once `new` is valid: 201 with the job, or 409 naming the holder of its key."""
    try:
        job = await api.slots.write(api.store.create, new)
    except DuplicateJob as exc:
        # The existing job's id lets a client that retried a create it could not see succeed fetch it.
        message = f"a job with idempotencyKey {shorten(exc.idempotency_key)!r} already exists"
        holder = await api.slots.read(api.store.get, exc.existing_id) if exc.existing_id else None
        if holder is not None and holder.status in TERMINAL:
            message += (
                f" ({'template' if holder.is_template else 'job'} {holder.id}, {holder.status.value}:"
                f" POST /jobs/{holder.id}/delete frees the key)"
            )
        return SafeJSONResponse({"error": message, "jobId": exc.existing_id}, status_code=409)
    api.stored([job])
    log.info("job created", extra={"action": "job_created", "jobId": job.id, "tenantId": job.tenantId})
    return SafeJSONResponse(job.to_wire(), status_code=201)


async def get_job(request: Request) -> Response:
    api = context(request)
    job_id = path_job_id(request)
    job = await api.slots.read(api.store.get, job_id)
    if job is None:
        raise JobNotFound(job_id)
    body = job.to_wire()
    if job.status is Status.PENDING and not job.is_template and job.scheduledAt <= utc_now():
        reason = await api.slots.read(_waiting_for, api, job)
        if reason is not None:
            body["waitingFor"] = reason
    return SafeJSONResponse(body)


def _waiting_for(api: ApiContext, job: Job) -> str | None:
    """The limit a due job waits for (shared/job_types/limits.py), for a type with limits."""
    limits = api.known.limits.of(job.jobType).effective
    return None if limits.empty else waiting_for(job, limits, api.store.in_flight_beside(job))


async def list_jobs(request: Request) -> Response:
    api = context(request)
    tenant = request.query_params.get("tenantId")
    if not tenant:
        return error(400, "tenantId is required")
    raw_status = request.query_params.get("status")
    if raw_status is not None and raw_status not in STATUS_VALUES:
        return error(400, f"unknown status {shorten(raw_status)!r}; one of {', '.join(STATUS_VALUES)}")
    status = Status(raw_status) if raw_status else None
    limit = list_limit(request.query_params.get("limit"))
    query = page_query(request.query_params, status, limit)

    def read_page(page: JobQuery) -> Page:
        return page_of(api.browser.page(tenant, page))

    return await stream_jobs(api.slots, read_page, query)


async def cancel_job(request: Request) -> Response:
    api = context(request)
    job = await api.slots.write(api.store.cancel, path_job_id(request))
    if job.status is not Status.CANCELLED:  # running: its executor stops it (accepted, not done)
        log.info("cancel requested", extra={"action": "cancel_requested", "jobId": job.id, "tenantId": job.tenantId})
        return SafeJSONResponse(job.to_wire(), status_code=202)
    log.info("job cancelled", extra={"action": "job_cancelled", "jobId": job.id, "tenantId": job.tenantId})
    return SafeJSONResponse(job.to_wire())


async def list_executions(request: Request) -> Response:
    api = context(request)
    job_id = path_job_id(request)
    if await api.slots.read(api.store.get, job_id) is None:
        raise JobNotFound(job_id)
    executions = await api.slots.read(api.store.list_executions, job_id)
    return SafeJSONResponse([e.to_wire() for e in executions])


async def delete_job(request: Request) -> Response:
    api = context(request)
    deleted = await api.slots.write(api.store.delete, path_job_id(request))
    job = deleted.job
    log.info(
        "job deleted",
        extra={"action": "job_deleted", "jobId": job.id, "tenantId": job.tenantId, "runsDeleted": deleted.runs},
    )
    return SafeJSONResponse(
        {
            "id": job.id,
            "idempotencyKey": job.idempotencyKey,
            "status": job.status.value,
            "deleted": True,
            "runsDeleted": deleted.runs,
        }
    )


async def retry_job(request: Request) -> Response:
    api = context(request)
    job = await api.slots.write(api.store.redrive, path_job_id(request))
    log.info("job re-driven", extra={"action": "job_redriven", "jobId": job.id, "tenantId": job.tenantId})
    return SafeJSONResponse(job.to_wire())


ROUTES = [
    Route("/jobs", create_job, methods=["POST"]),
    Route("/jobs", list_jobs, methods=["GET"]),
    Route("/jobs/{job_id}", get_job, methods=["GET"]),
    Route("/jobs/{job_id}", cancel_job, methods=["DELETE"]),
    Route("/jobs/{job_id}/executions", list_executions, methods=["GET"]),
    Route("/jobs/{job_id}/retry", retry_job, methods=["POST"]),
    Route("/jobs/{job_id}/delete", delete_job, methods=["POST"]),
]
