"""The schedule endpoints: pause, resume, trigger, backfill, PATCH, a template's runs, upcoming fire times and
a preview of any schedule. The decisions are shared/schedules' (the same as the scheduler's)."""

from __future__ import annotations

import logging
from datetime import datetime

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jobsched.schedules import DECLARED_IN_CODE
from services.api.context import context
from services.api.http.errors import ApiError, SafeJSONResponse
from services.api.http.request_bodies import checked, checked_payload, json_object, list_limit, path_job_id
from services.api.models.schedules import (
    BackfillRequest,
    EmptyRequest,
    PauseRequest,
    RunPatch,
    TemplatePatch,
    TriggerRequest,
)
from services.api.routes.pages import Page, page_of, stream_runs
from shared.cron import ScheduleError
from shared.model import Job, Status, format_time, utc_now
from shared.schedules.policy import Overlap
from shared.schedules.spec import MAX_PREVIEW, TemplateSpec
from shared.store.base import JobNotFound, TransitionRefused

log = logging.getLogger("jobsched.api")
DEFAULT_PREVIEW = 10


async def load(request: Request) -> Job:
    api = context(request)
    job_id = path_job_id(request)
    job = await api.slots.read(api.store.get, job_id)
    if job is None:
        raise JobNotFound(job_id)
    return job


async def pause(request: Request) -> Response:
    api = context(request)
    body = await checked(PauseRequest, await json_object(request, empty_ok=True))
    template = await load(request)
    await api.schema.wait_ready()
    job = await api.slots.write(api.schedules.pause, template, body.note, utc_now())
    log.info("template paused", extra={"action": "template_paused", "jobId": job.id, "tenantId": job.tenantId})
    return SafeJSONResponse(job.to_wire())


async def resume(request: Request) -> Response:
    api = context(request)
    await checked(EmptyRequest, await json_object(request, empty_ok=True))
    template = await load(request)
    await api.schema.wait_ready()
    job = await api.slots.write(api.schedules.resume, template, utc_now())
    log.info("template resumed", extra={"action": "template_resumed", "jobId": job.id, "tenantId": job.tenantId})
    return SafeJSONResponse(job.to_wire())


async def trigger(request: Request) -> Response:
    api = context(request)
    body = await checked(TriggerRequest, await json_object(request, empty_ok=True))
    template = await load(request)
    await checked_payload(template.jobType, body.payload)  # a run's own payload: checked as its template's was
    await api.schema.wait_ready()
    try:
        triggered = await api.slots.write(
            lambda: api.schedules.trigger(
                template,
                utc_now(),
                payload=body.payload,
                overlap=Overlap(body.overlap) if body.overlap else None,
                request_key=body.idempotencyKey,
            )
        )
    except ScheduleError as exc:  # an overlap the template cannot keep (a workflow schedule's)
        raise ApiError(400, str(exc)) from None
    run = triggered.run
    log.info("template triggered", extra={"action": "template_triggered", "jobId": template.id, "runId": run.id})
    return SafeJSONResponse(run.to_wire(), status_code=201 if triggered.created else 200)


async def backfill(request: Request) -> Response:
    api = context(request)
    body = await checked(BackfillRequest, await json_object(request))
    template = await load(request)
    await api.schema.wait_ready()
    overlap = Overlap(body.overlap) if body.overlap else None
    try:
        result = await api.slots.write(api.schedules.backfill, template, body.start, body.end, overlap)
    except ScheduleError as exc:
        raise ApiError(400, str(exc)) from None
    log.info(
        "template backfilled",
        extra={"action": "template_backfilled", "jobId": template.id, "counts": vars(result)},
    )
    return SafeJSONResponse(vars(result))


async def patch(request: Request) -> Response:
    api = context(request)
    data = await json_object(request)
    job = await load(request)
    await api.schema.wait_ready()
    now = utc_now()
    if job.is_template:
        if job.declaredBy is not None:
            where = f"the code of job type {job.jobType!r}" if job.declaredBy == DECLARED_IN_CODE else "a file"
            raise ApiError(
                409,
                f"schedule {job.idempotencyKey!r} is declared in {where}: change it there (pause, resume, trigger "
                "and backfill work here)",
            )
        template_patch = await checked(TemplatePatch, data)
        await checked_payload(job.jobType, template_patch.payload)  # what every later run copies
        changes = template_patch.changes(job, api.known.defaults(job.jobType))
        try:
            updated = await api.slots.write(api.schedules.update_template, job, changes, now)
        except ScheduleError as exc:
            raise ApiError(400, str(exc)) from None
    else:
        run_patch = await checked(RunPatch, data)
        await checked_payload(job.jobType, run_patch.payload)
        run_changes = run_patch.changes(now)
        if job.status is not Status.PENDING:
            raise TransitionRefused(job, "update")
        patched = await api.slots.write(api.store.update_if_unmoved, job, run_changes)
        if patched is None:  # claimed, cancelled or moved since it was read
            current = await api.slots.read(api.store.get, job.id)
            raise TransitionRefused(current or job, "update")
        updated = patched
    log.info("job updated", extra={"action": "job_updated", "jobId": job.id, "fields": sorted(data)})
    return SafeJSONResponse(updated.to_wire())


async def runs(request: Request) -> Response:
    api = context(request)
    template = await load(request)
    limit = list_limit(request.query_params.get("limit"))

    def read_page(size: int, edge: Job | None) -> Page:
        return page_of(api.store.template_runs(template.id, None, size, edge))

    return await stream_runs(api.slots, read_page, limit)


async def upcoming(request: Request) -> Response:
    count = preview_count(request)
    template = await load(request)
    if not template.is_template:
        raise ApiError(409, f"job {template.id} is not a recurring template")
    if template.status is not Status.PENDING or template.paused:
        return SafeJSONResponse([])  # ended, cancelled or paused: nothing will fire
    try:  # a cron search: off the event loop
        times = await run_in_threadpool(TemplateSpec.of(template).upcoming, template.scheduledAt, count)
    except ScheduleError as exc:
        raise ApiError(409, f"the template's schedule no longer parses: {exc}") from None
    return SafeJSONResponse([format_time(t) for t in times])


async def preview(request: Request) -> Response:
    count = preview_count(request)
    params = request.query_params
    try:  # parsing and searching a schedule: off the event loop
        times = await run_in_threadpool(
            preview_times, params.get("cron"), params.get("interval"), params.get("timezone"), count
        )
    except ScheduleError as exc:
        raise ApiError(400, str(exc)) from None
    return SafeJSONResponse([format_time(t) for t in times])


ROUTES = [
    Route("/jobs/{job_id}", patch, methods=["PATCH"]),
    Route("/jobs/{job_id}/pause", pause, methods=["POST"]),
    Route("/jobs/{job_id}/resume", resume, methods=["POST"]),
    Route("/jobs/{job_id}/trigger", trigger, methods=["POST"]),
    Route("/jobs/{job_id}/backfill", backfill, methods=["POST"]),
    Route("/jobs/{job_id}/runs", runs, methods=["GET"]),
    Route("/jobs/{job_id}/upcoming", upcoming, methods=["GET"]),
    Route("/schedules/preview", preview, methods=["GET"]),
]


def preview_times(cron: str | None, interval: str | None, timezone: str | None, count: int) -> list[datetime]:
    """The first `count` fire times after now of a schedule given by the query (an interval counts from now)."""
    now = utc_now()
    spec = TemplateSpec.build(cron=cron, interval=interval, timezone=timezone, created_at=now)
    first = spec.next_fire(now)
    return spec.upcoming(first, count) if first else []


def preview_count(request: Request) -> int:
    """`count`: 1 to 100, default 10; anything else is a 400 (unlike list limits, a preview is asked for)."""
    raw = request.query_params.get("count")
    if raw is None:
        return DEFAULT_PREVIEW
    if not (raw.isascii() and raw.isdigit() and len(raw.lstrip("0")) <= 3):  # int() takes "+5", "1_0", "٣"
        raise ApiError(400, f"count must be an integer from 1 to {MAX_PREVIEW}")
    count = int(raw)
    if not 1 <= count <= MAX_PREVIEW:
        raise ApiError(400, f"count must be from 1 to {MAX_PREVIEW}")
    return count
