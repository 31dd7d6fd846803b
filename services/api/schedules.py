"""The schedule endpoints: pause, resume, trigger, backfill, PATCH, a template's runs, upcoming fire times and
a preview of any schedule. The decisions are shared/schedules' (the same as the scheduler's)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.api.admission import Admission
from services.api.bodies import checked, json_object, list_limit, path_job_id
from services.api.errors import ApiError, SafeJSONResponse
from services.api.listing import Page, page_of, stream_runs
from services.api.schema_gate import SchemaGate
from services.api.schemas import MAX_TIMEOUT_S, JobPayload, OverlapName, Rfc3339, SchedulePolicy
from shared.cron import MAX_CRON_LENGTH, MAX_INTERVAL_LENGTH, MAX_TIMEZONE_LENGTH, ScheduleError
from shared.model import Job, Status, effective_max_attempts, format_time, utc_now
from shared.schedules.engine import ScheduleEngine
from shared.schedules.policy import Overlap
from shared.schedules.spec import MAX_PREVIEW, TemplateSpec
from shared.store import transitions
from shared.store.base import JobNotFound, JobStore, TransitionRefused

log = logging.getLogger("jobsched.api")
DEFAULT_PREVIEW = 10


class PauseRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    note: str | None = Field(default=None, max_length=2000, description="Why; shown as the template's pauseNote")


class EmptyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class TriggerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    payload: JobPayload | None = Field(default=None, description="This run's payload (default: the template's)")
    overlap: OverlapName | None = Field(default=None, description="Overrides the template's overlap policy")
    idempotencyKey: str | None = Field(
        default=None, min_length=1, max_length=256, description="A retried request with the same key gets the same run"
    )


class BackfillRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    start: Rfc3339 = Field(alias="from", description="First fire time included")
    end: Rfc3339 = Field(alias="to", description="Fire times before this")
    overlap: OverlapName | None = Field(default=None, description="Overrides the template's overlap policy")


class TemplatePatch(SchedulePolicy):
    """PATCH of a template: the schedule, what its runs copy, and the policy; null clears a bound."""

    cron: str | None = Field(default=None, max_length=MAX_CRON_LENGTH)
    interval: str | None = Field(default=None, max_length=MAX_INTERVAL_LENGTH)
    timezone: str | None = Field(default=None, max_length=MAX_TIMEZONE_LENGTH)
    payload: JobPayload | None = None
    priority: int | None = Field(default=None, ge=-(2**31), le=2**31 - 1)
    maxAttempts: int | None = Field(default=None, le=1000)
    timeoutSeconds: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S)

    @model_validator(mode="after")
    def _one_schedule(self) -> TemplatePatch:
        if self.cron is not None and self.interval is not None:
            raise ValueError("give at most one of cron and interval")
        return self

    def changes(self, template: Job, type_max_attempts: int | None = None) -> dict[str, Any]:
        """The stored fields this patch sets (UNSET: removed); `type_max_attempts`: the job type's default
        budget, what a null maxAttempts means (as on creation)."""
        given = {name: getattr(self, name) for name in self.model_fields_set}
        changes: dict[str, Any] = {}
        for name, value in given.items():
            if value is None and name in ("overlap", "catchup"):
                value = "allow_all" if name == "overlap" else "latest"
            elif value is None and name in ("cron", "interval", "payload", "priority"):
                raise ApiError(400, f"{name} cannot be null")
            changes[name] = transitions.UNSET if value is None else value
        if "maxAttempts" in given:  # null or not positive: the default, as on creation
            changes["maxAttempts"] = effective_max_attempts(given["maxAttempts"], type_max_attempts)
        if self.cron is not None:  # an interval template becomes a cron one
            changes["interval"] = transitions.UNSET
            changes.setdefault("timezone", template.timezone or "UTC")
        if self.interval is not None:
            if self.timezone is not None:
                raise ApiError(400, "timezone applies only to cron schedules")
            changes.update(cron=transitions.UNSET, timezone=transitions.UNSET)
        if self.timezone is not None and self.interval is None and not (self.cron or template.cron):
            raise ApiError(400, "timezone applies only to cron schedules")
        return changes


class RunPatch(BaseModel):
    """PATCH of a pending one-off job."""

    model_config = ConfigDict(extra="forbid", strict=True)
    scheduledAt: Rfc3339 | None = None
    priority: int | None = Field(default=None, ge=-(2**31), le=2**31 - 1)
    payload: JobPayload | None = None

    def changes(self, now: datetime) -> dict[str, Any]:
        changes: dict[str, Any] = {name: getattr(self, name) for name in self.model_fields_set}
        if any(value is None for value in changes.values()):
            raise ApiError(400, f"{', '.join(k for k, v in changes.items() if v is None)} cannot be null")
        if "scheduledAt" in changes:
            changes["scheduledAt"] = transitions.stored_time(changes["scheduledAt"])
        return {**changes, "updatedAt": now}


def schedule_routes(
    store: JobStore,
    gate: SchemaGate,
    admission: Admission,
    type_max_attempts: Callable[[str], int | None] = lambda _: None,
) -> list[Route]:
    """The schedule routes; `type_max_attempts` gives a job type's default attempt budget."""
    engine = ScheduleEngine(store)

    async def load(request: Request) -> Job:
        job_id = path_job_id(request)
        job = await admission.read(store.get, job_id)
        if job is None:
            raise JobNotFound(job_id)
        return job

    async def pause(request: Request) -> Response:
        body = await checked(PauseRequest, await json_object(request, empty_ok=True))
        template = await load(request)
        await gate.wait_ready()
        job = await admission.write(engine.pause, template, body.note, utc_now())
        log.info("template paused", extra={"action": "template_paused", "jobId": job.id, "tenantId": job.tenantId})
        return SafeJSONResponse(job.to_wire())

    async def resume(request: Request) -> Response:
        await checked(EmptyRequest, await json_object(request, empty_ok=True))
        template = await load(request)
        await gate.wait_ready()
        job = await admission.write(engine.resume, template, utc_now())
        log.info("template resumed", extra={"action": "template_resumed", "jobId": job.id, "tenantId": job.tenantId})
        return SafeJSONResponse(job.to_wire())

    async def trigger(request: Request) -> Response:
        body = await checked(TriggerRequest, await json_object(request, empty_ok=True))
        template = await load(request)
        await gate.wait_ready()
        triggered = await admission.write(
            lambda: engine.trigger(
                template,
                utc_now(),
                payload=body.payload,
                overlap=Overlap(body.overlap) if body.overlap else None,
                request_key=body.idempotencyKey,
            )
        )
        run = triggered.run
        log.info("template triggered", extra={"action": "template_triggered", "jobId": template.id, "runId": run.id})
        return SafeJSONResponse(run.to_wire(), status_code=201 if triggered.created else 200)

    async def backfill(request: Request) -> Response:
        body = await checked(BackfillRequest, await json_object(request))
        template = await load(request)
        await gate.wait_ready()
        overlap = Overlap(body.overlap) if body.overlap else None
        try:
            result = await admission.write(engine.backfill, template, body.start, body.end, overlap)
        except ScheduleError as exc:
            raise ApiError(400, str(exc)) from None
        log.info("template backfilled", extra={"action": "template_backfilled", "jobId": template.id, **vars(result)})
        return SafeJSONResponse(vars(result))

    async def patch(request: Request) -> Response:
        data = await json_object(request)
        job = await load(request)
        await gate.wait_ready()
        now = utc_now()
        if job.is_template:
            changes = (await checked(TemplatePatch, data)).changes(job, type_max_attempts(job.jobType))
            try:
                updated = await admission.write(engine.update_template, job, changes, now)
            except ScheduleError as exc:
                raise ApiError(400, str(exc)) from None
        else:
            run_changes = (await checked(RunPatch, data)).changes(now)
            if job.status is not Status.PENDING:
                raise TransitionRefused(job, "update")
            patched = await admission.write(store.update_pending, job, run_changes)
            if patched is None:  # claimed, cancelled or moved since it was read
                current = await admission.read(store.get, job.id)
                raise TransitionRefused(current or job, "update")
            updated = patched
        log.info("job updated", extra={"action": "job_updated", "jobId": job.id, "fields": sorted(data)})
        return SafeJSONResponse(updated.to_wire())

    async def runs(request: Request) -> Response:
        template = await load(request)
        limit = list_limit(request.query_params.get("limit"))

        def read_page(size: int, edge: Job | None) -> Page:
            return page_of(store.template_runs(template.id, None, size, edge))

        async def next_page(size: int, edge: Job | None) -> Page:
            return await admission.read(read_page, size, edge)

        return await stream_runs(next_page, limit)

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

    return [
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
