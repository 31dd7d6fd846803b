"""The HTTP API: create, read, list and cancel jobs; liveness, readiness and the OpenAPI document.

Errors are `{"error": message}` with a fitting status and never a stack trace (services/api/errors.py);
successful responses are the bare resource. Store calls are blocking pymongo/sqlite calls: they run in worker
threads, admitted by services/api/admission.py. Every request first meets services/api/limits.py.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Collection
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from services.api.admission import Admission
from services.api.bodies import list_limit, path_job_id, read_json
from services.api.console import console_routes
from services.api.docs import DOCS_HTML, openapi_document
from services.api.errors import ApiError, SafeJSONResponse, error, exception_handlers
from services.api.intake import new_job_of
from services.api.job_types import KnownTypes
from services.api.limits import ApiLimits, RequestLimits
from services.api.listing import Page, page_of, stream_jobs
from services.api.operator import guarded_browser, operator_routes, page_query
from services.api.probes import StorePing
from services.api.request_metrics import RequestMetrics
from services.api.same_origin import LOOPBACK_NAMES, SameOriginOnly
from services.api.schedules import schedule_routes
from services.api.schema_gate import SchemaGate
from services.api.schemas import STATUS_VALUES
from shared.handlers.builtin import builtin_types
from shared.jsonsafe import shorten
from shared.model import TERMINAL, Status, utc_now
from shared.store.base import DuplicateJob, JobNotFound, JobStore
from shared.store.browse import JobQuery
from shared.store.browsers import browser_for
from shared.store.type_registries import type_registry_of

if TYPE_CHECKING:
    from services.api.auth import ApiAuth

log = logging.getLogger("jobsched.api")


def create_app(
    store: JobStore,
    auth: ApiAuth | None = None,
    limits: ApiLimits | None = None,
    on_due_job: Callable[[], None] | None = None,
    due_within: timedelta = timedelta(0),
    known_types: KnownTypes | None = None,
    allowed_hosts: Collection[str] = LOOPBACK_NAMES,
    on_ready: Callable[[], None] | None = None,
) -> Starlette:
    """The API; with `auth` (AUTH=required) every route but the public ones needs a key, and the routes see
    the store only through the tenant guard of the request's key. `on_due_job` (a scheduler nudge) is called
    after a one-off job due within `due_within` from now (the scheduler's claim lookahead) was stored, so
    that it is claimed without waiting for the next tick. `known_types` says which job types it accepts (by
    default: this process's handlers and what executors announced in the store). Without `auth`, only requests
    for `allowed_hosts` are served and writes from other web origins are refused (same_origin.py). `on_ready` is
    called once the app has started, as the server begins to answer."""
    limits = limits or ApiLimits()
    browser = browser_for(store)
    known = known_types or KnownTypes(type_registry_of(store), local=builtin_types(demo=True))
    if auth is not None:
        store = auth.guard(store)
        browser = guarded_browser(browser)
    gate = SchemaGate(store)
    admission = Admission(
        write_slots=limits.store_slots,
        read_slots=limits.store_slots,
        wait_s=limits.store_wait_s,
        slots_per_sharer=limits.store_slots_per_key if auth is not None else None,
    )
    store_ping = StorePing(store.ping)

    async def create_job(request: Request) -> Response:
        new = await new_job_of(await read_json(request), len(await request.body()), known.max_attempts)
        if not await known.accepts(new.jobType):
            names = ", ".join(known.names())
            raise ApiError(400, f"jobType: unknown jobType {shorten(new.jobType)!r}; known types: {names}")
        await gate.wait_ready()
        try:
            job = await admission.write(store.create, new)
        except DuplicateJob as exc:
            # The existing job's id lets a client that retried a create it could not see succeed fetch it.
            message = f"a job with idempotencyKey {shorten(exc.idempotency_key)!r} already exists"
            holder = await admission.read(store.get, exc.existing_id) if exc.existing_id else None
            if holder is not None and holder.status in TERMINAL:
                message += (
                    f" ({'template' if holder.is_template else 'job'} {holder.id}, {holder.status.value}:"
                    f" POST /jobs/{holder.id}/delete frees the key)"
                )
            return SafeJSONResponse({"error": message, "jobId": exc.existing_id}, status_code=409)
        if on_due_job is not None and not job.is_template and job.scheduledAt <= utc_now() + due_within:
            on_due_job()
        log.info("job created", extra={"action": "job_created", "jobId": job.id, "tenantId": job.tenantId})
        return SafeJSONResponse(job.to_wire(), status_code=201)

    async def get_job(request: Request) -> Response:
        job_id = path_job_id(request)
        job = await admission.read(store.get, job_id)
        if job is None:
            raise JobNotFound(job_id)
        return SafeJSONResponse(job.to_wire())

    async def list_jobs(request: Request) -> Response:
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
            return page_of(browser.page(tenant, page))

        async def next_page(page: JobQuery) -> Page:
            return await admission.read(read_page, page)

        return await stream_jobs(next_page, query)

    async def cancel_job(request: Request) -> Response:
        job = await admission.write(store.cancel, path_job_id(request))
        if job.status is not Status.CANCELLED:  # running: its executor stops it (accepted, not done)
            log.info(
                "cancel requested", extra={"action": "cancel_requested", "jobId": job.id, "tenantId": job.tenantId}
            )
            return SafeJSONResponse(job.to_wire(), status_code=202)
        log.info("job cancelled", extra={"action": "job_cancelled", "jobId": job.id, "tenantId": job.tenantId})
        return SafeJSONResponse(job.to_wire())

    async def list_executions(request: Request) -> Response:
        job_id = path_job_id(request)
        if await admission.read(store.get, job_id) is None:
            raise JobNotFound(job_id)
        executions = await admission.read(store.list_executions, job_id)
        return SafeJSONResponse([e.to_wire() for e in executions])

    async def delete_job(request: Request) -> Response:
        deleted = await admission.write(store.delete, path_job_id(request))
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
        job = await admission.write(store.redrive, path_job_id(request))
        log.info("job re-driven", extra={"action": "job_redriven", "jobId": job.id, "tenantId": job.tenantId})
        return SafeJSONResponse(job.to_wire())

    async def list_job_types(request: Request) -> Response:
        return SafeJSONResponse(await known.listing())

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(request: Request) -> Response:
        if not gate.ready:
            return error(503, gate.problem or "store schema not ready yet")
        await store_ping.check()  # not admitted: an overloaded API is still ready
        return PlainTextResponse("ok")

    document = auth.document(openapi_document()) if auth else openapi_document()

    async def openapi(request: Request) -> Response:
        return SafeJSONResponse(document)

    async def docs(request: Request) -> Response:
        return HTMLResponse(DOCS_HTML)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        gate.start()
        if auth is not None:
            auth.start()
        known.start()
        if on_ready is not None:
            on_ready()
        yield
        await known.stop()
        await gate.stop()
        if auth is not None:
            await auth.stop()

    routes = [
        Route("/jobs", create_job, methods=["POST"]),
        Route("/jobs", list_jobs, methods=["GET"]),
        Route("/jobs/{job_id}", get_job, methods=["GET"]),
        Route("/jobs/{job_id}", cancel_job, methods=["DELETE"]),
        Route("/jobs/{job_id}/executions", list_executions, methods=["GET"]),
        Route("/jobs/{job_id}/retry", retry_job, methods=["POST"]),
        Route("/jobs/{job_id}/delete", delete_job, methods=["POST"]),
        Route("/job-types", list_job_types, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/docs", docs, methods=["GET"]),
        *operator_routes(store, browser, admission, known.names),
        *schedule_routes(store, gate, admission, known.max_attempts),
    ]
    if auth is not None:
        routes = auth.protect([*routes, *auth.routes()])
    # Files only, public like /docs: what the console shows comes from the routes above, with the user's key.
    served: list[BaseRoute] = [*routes, *console_routes()]
    middleware = [
        Middleware(RequestMetrics),
        Middleware(RequestLimits, limits=limits, sharer=auth.sharer if auth is not None else None),
    ]
    if auth is None:
        middleware.append(Middleware(SameOriginOnly, hosts=allowed_hosts))
    app = Starlette(routes=served, exception_handlers=exception_handlers(), lifespan=lifespan, middleware=middleware)
    # The router's redirect of `/jobs/` to `/jobs` is an absolute URL built from the Host header, which a shared
    # cache in front would keep and serve to everyone: a path with a trailing slash is a 404 instead.
    app.router.redirect_slashes = False
    return app
