"""The HTTP API: create, read, list and cancel jobs; liveness, readiness and the OpenAPI document.

Errors are `{"error": message}` with a fitting status and never a stack trace; successful responses are the
bare resource. Store calls are blocking pymongo/sqlite calls, so they run in the thread pool.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.api.console import console_mount
from services.api.docs import DOCS_HTML, openapi_document
from services.api.operator import guarded_browser, operator_routes, page_query
from services.api.schema_gate import SchemaGate
from services.api.schemas import STATUS_VALUES, JobRequest, PayloadTooLarge
from shared import metrics
from shared.cron import ScheduleError
from shared.model import Status, utc_now
from shared.store.base import DuplicateJob, JobNotFound, JobStore, StoreUnavailable, TransitionRefused
from shared.store.browse import browser_for

if TYPE_CHECKING:
    from services.api.auth import ApiAuth

log = logging.getLogger("jobsched.api")

LIST_LIMIT_DEFAULT = 100
LIST_LIMIT_MAX = 5000
# The payload limit is 256 KiB; the rest of a job is small, so a body past this is too large whatever it is.
MAX_BODY_BYTES = 512 * 1024


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def list_limit(raw: str | None) -> int:
    """Default 100, cap 5000; invalid or non-positive falls back to the default (reference contract)."""
    try:
        value = int(raw) if raw is not None else LIST_LIMIT_DEFAULT
    except ValueError:
        return LIST_LIMIT_DEFAULT
    return LIST_LIMIT_DEFAULT if value <= 0 else min(value, LIST_LIMIT_MAX)


def describe(exc: ValidationError) -> str:
    parts = []
    for item in exc.errors(include_url=False):
        where = ".".join(str(p) for p in item["loc"])
        message = str(item["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)


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
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            return error(413, f"request body is {len(body)} bytes; the limit is {MAX_BODY_BYTES}")
        try:
            data: Any = json.loads(body, parse_constant=_reject_constant)
        except (ValueError, UnicodeDecodeError) as exc:
            return error(400, f"malformed JSON: {exc}")
        if not isinstance(data, dict):
            return error(400, "the body must be a JSON object")
        try:
            job_request = JobRequest.model_validate(data)
            new = job_request.to_new_job(utc_now())
        except ValidationError as exc:
            if any(isinstance(e.get("ctx", {}).get("error"), PayloadTooLarge) for e in exc.errors()):
                return error(413, describe(exc))
            return error(400, describe(exc))
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
    ]
    if auth is not None:
        routes = auth.protect([*routes, *auth.routes()])
    # Files only, public like /docs: what the console shows comes from the routes above, with the user's key.
    served: list[BaseRoute] = [*routes, console_mount()]
    handlers: dict[Any, Callable[..., Any]] = {
        HTTPException: _http_error,
        JobNotFound: _status_error(404),
        TransitionRefused: _status_error(409),
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


def _reject_constant(name: str) -> Any:
    """NaN and Infinity are not JSON (RFC 8259) although Python's parser takes them."""
    raise ValueError(f"{name} is not valid JSON")


def path_job_id(request: Request) -> str:
    """The `{job_id}` of the path; a malformed one is a 400 (the reference: 24 hex characters)."""
    job_id: str = request.path_params["job_id"]
    if len(job_id) != 24 or any(c not in "0123456789abcdefABCDEF" for c in job_id):
        raise HTTPException(400, f"malformed job id {job_id!r}: expected 24 hex characters")
    return job_id


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
