"""The workflow endpoints: POST /workflows (named steps, each a job, stored all or nothing under one idempotency
key; with `cron` or `interval`, a schedule firing it, answered as POST /jobs answers a template), GET /workflows (a
tenant's, newest first), GET /workflows/{id} (its status and each step's job), DELETE /workflows/{id} (its unfinished
steps cancelled). shared/workflows.py says what a workflow is."""

from __future__ import annotations

import logging
from typing import Final

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.api.context import context
from services.api.http.errors import ApiError, SafeJSONResponse
from services.api.http.request_bodies import list_limit, read_json
from services.api.models.workflows import new_workflow
from services.api.routes.jobs import stored_job
from shared import jsonsafe
from shared.model import Status, utc_now
from shared.store.base import ApiStore, DuplicateWorkflow, JobNotFound, NewJob, TransitionRefused, WorkflowNotFound
from shared.workflows import WorkflowStatus, WorkflowView

log = logging.getLogger("jobsched.api")
# A page of workflows reads their records whole (up to MAX_STEPS steps each): fewer than a page of jobs.
WORKFLOWS_PER_PAGE_MAX: Final = 200


async def create_workflow(request: Request) -> Response:
    api = context(request)
    data = await read_json(request)
    steps = data.get("steps") if isinstance(data, dict) else None
    named = [s.get("jobType") for s in steps if isinstance(s, dict)] if isinstance(steps, list) else []
    accepted = {t for t in {t for t in named if isinstance(t, str)} if await api.known.accepts(t)}
    new = await run_in_threadpool(new_workflow, data, api.known.defaults, accepted.__contains__)
    await api.schema.wait_ready()
    if isinstance(new, NewJob):  # with cron or interval: the template of a schedule firing the workflow
        return await stored_job(api, new)
    try:
        view = await api.slots.write(api.store.create_workflow, new)
    except DuplicateWorkflow as exc:
        message = f"a workflow with idempotencyKey {jsonsafe.shorten(exc.idempotency_key)!r} already exists"
        return SafeJSONResponse({"error": message, "workflowId": exc.existing_id}, status_code=409)
    log.info(
        "workflow created",
        extra={"action": "workflow_created", "workflowId": view.workflow.id, "tenantId": view.workflow.tenantId},
    )
    if api.on_due_job is not None and view.counts.get(Status.PENDING.value):
        due = min((s.job.scheduledAt for s in new.steps if not s.after), default=utc_now())
        if due <= utc_now() + api.due_within:
            api.on_due_job()
    return SafeJSONResponse(view.to_wire(), status_code=201)


async def list_workflows(request: Request) -> Response:
    api = context(request)
    tenant, limit, before = page_asked(request, "workflow")
    views = await api.slots.read(api.store.workflows, tenant, limit, before)
    return SafeJSONResponse([view.to_wire(with_steps=False) for view in views])


def page_asked(request: Request, what: str) -> tuple[str, int, str | None]:
    """A listing's tenant, page size and the id it starts after (of a `what`), from the query; a 400 for a
    missing tenant or a malformed id."""
    tenant = request.query_params.get("tenantId")
    if not tenant:
        raise ApiError(400, "tenantId is required")
    limit = min(list_limit(request.query_params.get("limit")), WORKFLOWS_PER_PAGE_MAX)
    before = request.query_params.get("before")
    return tenant, limit, None if before is None else object_id(before, what)


async def get_workflow(request: Request) -> Response:
    return SafeJSONResponse((await _read(request)).to_wire())


async def cancel_workflow(request: Request) -> Response:
    api = context(request)
    view = await _read(request)
    if view.status is WorkflowStatus.CREATING:  # its steps are not all written: a cancel would miss some
        raise ApiError(409, f"workflow {view.workflow.id} is being written; cancel it once it is running")
    requested = await api.slots.write(_cancel_steps, api.store, view)
    after = await api.slots.read(api.store.workflow, view.workflow.id) or view
    log.info(
        "workflow cancelled",
        extra={"action": "workflow_cancelled", "workflowId": view.workflow.id, "tenantId": view.workflow.tenantId},
    )
    return SafeJSONResponse(after.to_wire(), status_code=202 if requested else 200)


def _cancel_steps(store: ApiStore, view: WorkflowView) -> bool:
    """Cancel each unfinished step, dependents before their parents (so that none is released by a parent's
    cancellation under `run` before its own cancel); whether one was running (its cancel only requested)."""
    requested = False
    for step in view.unfinished:
        try:
            job = store.cancel(step.jobId)
        except (JobNotFound, TransitionRefused):
            continue  # ended (or was deleted) meanwhile
        requested |= job.status is not Status.CANCELLED
    return requested


async def _read(request: Request) -> WorkflowView:
    api = context(request)
    workflow_id = object_id(request.path_params["workflow_id"], "workflow")
    view = await api.slots.read(api.store.workflow, workflow_id)
    if view is None:
        raise WorkflowNotFound(workflow_id)
    return view


def object_id(raw: str, what: str) -> str:
    """A workflow's or a batch's id from the request, lowercased; a malformed one is a 400."""
    if len(raw) != 24 or any(c not in "0123456789abcdefABCDEF" for c in raw):
        raise ApiError(400, f"malformed {what} id {jsonsafe.shorten(raw)!r}: expected 24 hex characters")
    return raw.lower()


ROUTES = [
    Route("/workflows", create_workflow, methods=["POST"]),
    Route("/workflows", list_workflows, methods=["GET"]),
    Route("/workflows/{workflow_id}", get_workflow, methods=["GET"]),
    Route("/workflows/{workflow_id}", cancel_workflow, methods=["DELETE"]),
]
