"""The schedule endpoints: pause, resume, trigger, backfill, PATCH, a template's runs, upcoming fire times and
a preview of any schedule. The decisions are shared/schedules' (the same as the scheduler's)."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from services.api.bodies import json_object, list_limit, path_job_id, validated
from services.api.schema_gate import SchemaGate
from services.api.schemas import MAX_TIMEOUT_S, JobPayload, OverlapName, Rfc3339, SchedulePolicy
from shared.cron import ScheduleError
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

    cron: str | None = None
    interval: str | None = None
    timezone: str | None = None
    payload: JobPayload | None = None
    priority: int | None = Field(default=None, ge=-(2**31), le=2**31 - 1)
    maxAttempts: int | None = Field(default=None, le=1000)
    timeoutSeconds: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S)

    @model_validator(mode="after")
    def _one_schedule(self) -> TemplatePatch:
        if self.cron is not None and self.interval is not None:
            raise ValueError("give at most one of cron and interval")
        return self

    def changes(self, template: Job) -> dict[str, Any]:
        """The stored fields this patch sets (UNSET: removed)."""
        given = {name: getattr(self, name) for name in self.model_fields_set}
        changes: dict[str, Any] = {}
        for name, value in given.items():
            if value is None and name in ("overlap", "catchup"):
                value = "allow_all" if name == "overlap" else "latest"
            elif value is None and name in ("cron", "interval", "payload", "priority"):
                raise HTTPException(400, f"{name} cannot be null")
            changes[name] = transitions.UNSET if value is None else value
        if "maxAttempts" in given:  # null or not positive: the default, as on creation
            changes["maxAttempts"] = effective_max_attempts(given["maxAttempts"])
        if self.cron is not None:  # an interval template becomes a cron one
            changes["interval"] = transitions.UNSET
            changes.setdefault("timezone", template.timezone or "UTC")
        if self.interval is not None:
            if self.timezone is not None:
                raise HTTPException(400, "timezone applies only to cron schedules")
            changes.update(cron=transitions.UNSET, timezone=transitions.UNSET)
        if self.timezone is not None and self.interval is None and not (self.cron or template.cron):
            raise HTTPException(400, "timezone applies only to cron schedules")
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
            raise HTTPException(400, f"{', '.join(k for k, v in changes.items() if v is None)} cannot be null")
        if "scheduledAt" in changes:
            changes["scheduledAt"] = transitions.stored_time(changes["scheduledAt"])
        return {**changes, "updatedAt": now}


def schedule_routes(store: JobStore, gate: SchemaGate) -> list[Route]:
    engine = ScheduleEngine(store)

    async def load(request: Request) -> Job:
        job_id = path_job_id(request)
        job = await run_in_threadpool(store.get, job_id)
        if job is None:
            raise JobNotFound(job_id)
        return job

    async def pause(request: Request) -> Response:
        body = validated(PauseRequest, await json_object(request, empty_ok=True))
        template = await load(request)
        await gate.wait_ready()
        job = await run_in_threadpool(engine.pause, template, body.note, utc_now())
        log.info("template paused", extra={"action": "template_paused", "jobId": job.id, "tenantId": job.tenantId})
        return JSONResponse(job.to_wire())

    async def resume(request: Request) -> Response:
        validated(EmptyRequest, await json_object(request, empty_ok=True))
        template = await load(request)
        await gate.wait_ready()
        job = await run_in_threadpool(engine.resume, template, utc_now())
        log.info("template resumed", extra={"action": "template_resumed", "jobId": job.id, "tenantId": job.tenantId})
        return JSONResponse(job.to_wire())

    async def trigger(request: Request) -> Response:
        body = validated(TriggerRequest, await json_object(request, empty_ok=True))
        template = await load(request)
        await gate.wait_ready()
        triggered = await run_in_threadpool(
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
        return JSONResponse(run.to_wire(), status_code=201 if triggered.created else 200)

    async def backfill(request: Request) -> Response:
        body = validated(BackfillRequest, await json_object(request))
        template = await load(request)
        await gate.wait_ready()
        overlap = Overlap(body.overlap) if body.overlap else None
        try:
            result = await run_in_threadpool(engine.backfill, template, body.start, body.end, overlap)
        except ScheduleError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        log.info("template backfilled", extra={"action": "template_backfilled", "jobId": template.id, **vars(result)})
        return JSONResponse(vars(result))

    async def patch(request: Request) -> Response:
        data = await json_object(request)
        job = await load(request)
        await gate.wait_ready()
        now = utc_now()
        if job.is_template:
            changes = validated(TemplatePatch, data).changes(job)
            try:
                updated = await run_in_threadpool(engine.update_template, job, changes, now)
            except ScheduleError as exc:
                return JSONResponse({"error": str(exc)}, status_code=400)
        else:
            run_changes = validated(RunPatch, data).changes(now)
            if job.status is not Status.PENDING:
                raise TransitionRefused(job, "update")
            patched = await run_in_threadpool(store.update_pending, job, run_changes)
            if patched is None:  # claimed, cancelled or moved since it was read
                current = await run_in_threadpool(store.get, job.id)
                raise TransitionRefused(current or job, "update")
            updated = patched
        log.info("job updated", extra={"action": "job_updated", "jobId": job.id, "fields": sorted(data)})
        return JSONResponse(updated.to_wire())

    async def runs(request: Request) -> Response:
        template = await load(request)
        limit = list_limit(request.query_params.get("limit"))
        found = await run_in_threadpool(store.template_runs, template.id, None, limit)
        return JSONResponse([j.to_wire() for j in found])

    async def upcoming(request: Request) -> Response:
        count = preview_count(request)
        template = await load(request)
        if not template.is_template:
            raise HTTPException(409, f"job {template.id} is not a recurring template")
        if template.status is not Status.PENDING or template.paused:
            return JSONResponse([])  # ended, cancelled or paused: nothing will fire
        try:
            times = TemplateSpec.of(template).upcoming(template.scheduledAt, count)
        except ScheduleError as exc:
            raise HTTPException(409, f"the template's schedule no longer parses: {exc}") from None
        return JSONResponse([format_time(t) for t in times])

    async def preview(request: Request) -> Response:
        count = preview_count(request)
        params = request.query_params
        now = utc_now()
        try:
            spec = TemplateSpec.build(
                cron=params.get("cron"),
                interval=params.get("interval"),
                timezone=params.get("timezone"),
                created_at=now,
            )
        except ScheduleError as exc:
            raise HTTPException(400, str(exc)) from None
        first = spec.next_fire(now)
        return JSONResponse([format_time(t) for t in spec.upcoming(first, count)] if first else [])

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


def preview_count(request: Request) -> int:
    """`count`: 1 to 100, default 10; anything else is a 400 (unlike list limits, a preview is asked for)."""
    raw = request.query_params.get("count")
    if raw is None:
        return DEFAULT_PREVIEW
    try:
        count = int(raw)
    except ValueError:
        raise HTTPException(400, f"count must be an integer from 1 to {MAX_PREVIEW}") from None
    if not 1 <= count <= MAX_PREVIEW:
        raise HTTPException(400, f"count must be from 1 to {MAX_PREVIEW}")
    return count
