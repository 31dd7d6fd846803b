"""The HTTP API: create, read, list and cancel jobs; liveness, readiness and the OpenAPI document.

Errors are `{"error": message}` with a fitting status and never a stack trace; successful responses are the
bare resource. Store calls are blocking pymongo/sqlite calls, so they run in the thread pool.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.api.bodies import json_object, list_limit, path_job_id, validated
from services.api.console import console_mount
from services.api.docs import DOCS_HTML, openapi_document
from services.api.operator import guarded_browser, operator_routes, page_query
from services.api.schedules import schedule_routes
from services.api.schema_gate import SchemaGate
from services.api.schemas import STATUS_VALUES, JobRequest
from shared import metrics
from shared.cron import ScheduleError
from shared.model import Status, utc_now
from shared.schedules.engine import ScheduleRefused
from shared.store.base import DuplicateJob, JobNotFound, JobStore, StoreUnavailable, TransitionRefused
from shared.store.browse import browser_for

if TYPE_CHECKING:
    from services.api.auth import ApiAuth

log = logging.getLogger("jobsched.api")


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def create_app(
    store: JobStore,
    auth: ApiAuth | None = None,
    on_due_job: Callable[[], None] | None = None,
    due_within: timedelta = timedelta(0),
) -> Starlette:
    """The API; with `auth` (AUTH=required) every route but the public ones needs a key, and the routes see
    the store only through the tenant guard of the request's key. `on_due_job` (a scheduler nudge) is called
    after a one-off job due within `due_within` from now (the scheduler's claim lookahead) was stored, so
    that it is claimed without waiting for the next tick."""
    browser = browser_for(store)
    if auth is not None:
        store = auth.guard(store)
        browser = guarded_browser(browser)
    gate = SchemaGate(store)

    async def create_job(request: Request) -> Response:
        job_request = validated(JobRequest, await json_object(request))
        try:
            new = job_request.to_new_job(utc_now())
        except ScheduleError as exc:
            return error(400, str(exc))
        await gate.wait_ready()
        try:
            job = await run_in_threadpool(store.create, new)
        except DuplicateJob as exc:
            return error(409, str(exc))
        if on_due_job is not None and not job.is_template and job.scheduledAt <= utc_now() + due_within:
            on_due_job()
        log.info("job created", extra={"action": "job_created", "jobId": job.id, "tenantId": job.tenantId})
        return JSONResponse(job.to_wire(), status_code=201)

    async def get_job(request: Request) -> Response:
        job_id = path_job_id(request)
        job = await run_in_threadpool(store.get, job_id)
        if job is None:
            raise JobNotFound(job_id)
        return JSONResponse(job.to_wire())

    async def list_jobs(request: Request) -> Response:
        tenant = request.query_params.get("tenantId")
        if not tenant:
            return error(400, "tenantId is required")
        raw_status = request.query_params.get("status")
        if raw_status is not None and raw_status not in STATUS_VALUES:
            return error(400, f"unknown status {raw_status!r}; one of {', '.join(STATUS_VALUES)}")
        status = Status(raw_status) if raw_status else None
        limit = list_limit(request.query_params.get("limit"))
        jobs = await run_in_threadpool(browser.page, tenant, page_query(request.query_params, status, limit))
        return JSONResponse([j.to_wire() for j in jobs])

    async def cancel_job(request: Request) -> Response:
        job = await run_in_threadpool(store.cancel, path_job_id(request))
        log.info("job cancelled", extra={"action": "job_cancelled", "jobId": job.id, "tenantId": job.tenantId})
        return JSONResponse(job.to_wire())

    async def list_executions(request: Request) -> Response:
        job_id = path_job_id(request)
        if await run_in_threadpool(store.get, job_id) is None:
            raise JobNotFound(job_id)
        executions = await run_in_threadpool(store.list_executions, job_id)
        return JSONResponse([e.to_wire() for e in executions])

    async def retry_job(request: Request) -> Response:
        job = await run_in_threadpool(store.redrive, path_job_id(request))
        log.info("job re-driven", extra={"action": "job_redriven", "jobId": job.id, "tenantId": job.tenantId})
        return JSONResponse(job.to_wire())

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(request: Request) -> Response:
        if not gate.ready:
            return error(503, gate.problem or "store schema not ready yet")
        await run_in_threadpool(store.ping)
        return PlainTextResponse("ok")

    document = auth.document(openapi_document()) if auth else openapi_document()

    async def openapi(request: Request) -> Response:
        return JSONResponse(document)

    async def docs(request: Request) -> Response:
        return HTMLResponse(DOCS_HTML)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        gate.start()
        if auth is not None:
            auth.start()
        yield
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
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/docs", docs, methods=["GET"]),
        *operator_routes(store, browser),
        *schedule_routes(store, gate),
    ]
    if auth is not None:
        routes = auth.protect([*routes, *auth.routes()])
    # Files only, public like /docs: what the console shows comes from the routes above, with the user's key.
    served: list[BaseRoute] = [*routes, console_mount()]
    handlers: dict[Any, Callable[..., Any]] = {
        HTTPException: _http_error,
        JobNotFound: _status_error(404),
        TransitionRefused: _status_error(409),
        ScheduleRefused: _status_error(409),
        StoreUnavailable: _store_unavailable,
        Exception: _unexpected,
    }
    return Starlette(
        routes=served, exception_handlers=handlers, lifespan=lifespan, middleware=[Middleware(RequestMetrics)]
    )


class RequestMetrics:
    """Counts and times every request by route template (not raw path: ids would explode the label set)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._app(scope, receive, record_status)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", "unmatched")
            metrics.API_REQUESTS.labels(scope["method"], template, str(status)).inc()
            metrics.API_REQUEST_SECONDS.labels(scope["method"], template).observe(time.perf_counter() - started)


def _status_error(status: int) -> Callable[[Request, Exception], Awaitable[Response]]:
    """A store error that maps to one status; its message is already written for the client."""

    async def handle(request: Request, exc: Exception) -> Response:
        return error(status, str(exc))

    return handle


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error(exc.status_code, str(exc.detail))


async def _store_unavailable(request: Request, exc: Exception) -> Response:
    log.warning("store unavailable", extra={"action": "store_unavailable", "error": str(exc)})
    return error(503, "the job store is unavailable; retry later")


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error", extra={"action": "api_error", "path": request.url.path})
    return error(500, "internal error")
