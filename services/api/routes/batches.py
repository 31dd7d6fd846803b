"""The batch endpoints: POST /batches (a batch, its callbacks, optionally its first members and its seal), POST
/batches/{id}/jobs (more members, each answered as POST /jobs/batch answers it), POST /batches/{id}/seal, GET
/batches/{id} (its progress), GET /batches/{id}/jobs (its members, by status then id), GET /batches (a tenant's,
newest first). shared/batches.py says what a batch is."""

from __future__ import annotations

import logging
from functools import partial
from typing import Any, Final

from bson import ObjectId
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.api.context import ApiContext, context
from services.api.http.errors import ApiError, SafeJSONResponse
from services.api.http.request_bodies import list_limit, read_json, validated
from services.api.models.batches import BatchRequest, callback_job
from services.api.new_job import unknown_type
from services.api.routes.job_batch import batch_counts, batch_result, checked_jobs
from services.api.routes.workflows import object_id, page_asked
from shared import jsonsafe
from shared.batches import MAX_ADDED, BatchView, MemberResult
from shared.model import Status
from shared.store.base import BatchNotFound, DuplicateBatch, NewBatch

log = logging.getLogger("jobsched.api")
STATUSES: Final = frozenset(status.value for status in Status)
MEMBERS_PER_PAGE_MAX: Final = 1000


async def create_batch(request: Request) -> Response:
    api = context(request)
    data = await read_json(request)
    if not isinstance(data, dict):
        raise ApiError(400, "the body must be a JSON object")
    request_ = validated(BatchRequest, data)
    callbacks = {}
    for name, raw in (("onComplete", request_.onComplete), ("onSuccess", request_.onSuccess)):
        if raw is not None:
            job = await run_in_threadpool(callback_job, name, raw, request_.tenantId, api.known.defaults)
            if not await api.known.accepts(job.jobType):
                raise ApiError(400, f"{name}: {unknown_type(job.jobType, api.known.names())}")
            callbacks[name] = job
    new = NewBatch(request_.tenantId, request_.idempotencyKey, request_.name, **callbacks)
    await api.schema.wait_ready()
    try:
        view = await api.slots.write(api.store.create_batch, new)
    except DuplicateBatch as exc:
        message = f"a batch with idempotencyKey {jsonsafe.shorten(exc.idempotency_key)!r} already exists"
        return SafeJSONResponse({"error": message, "batchId": exc.existing_id}, status_code=409)
    log.info("batch created", extra={"action": "batch_created", "batchId": view.batch.id, "tenantId": new.tenantId})
    body: dict[str, Any] = {}
    if request_.jobs:
        body = await _added(api, view, request_.jobs)
    # Sealed only when every member asked for is in it: a refused one can be sent again, to an open batch.
    if request_.seal and not body.get("refused"):
        view = await api.slots.write(api.store.seal_batch, view.batch.id)
    elif request_.jobs:
        view = await _read(api, view.batch.id)
    return SafeJSONResponse(view.to_wire() | body, status_code=201)


async def add_jobs(request: Request) -> Response:
    api = context(request)
    view = await _read(api, object_id(request.path_params["batch_id"], "batch"))
    data = await read_json(request)
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(data, dict) or set(data) - {"jobs"} or not isinstance(jobs, list) or not jobs:
        raise ApiError(400, 'the body must be {"jobs": [...]}: a non-empty array of jobs (each a POST /jobs body)')
    if len(jobs) > MAX_ADDED:
        raise ApiError(400, f"jobs: {len(jobs)} jobs; a request adds at most {MAX_ADDED}")
    return SafeJSONResponse(await _added(api, view, jobs))


async def _added(api: ApiContext, view: BatchView, jobs: list[Any]) -> dict[str, Any]:
    """The members `jobs` added to the batch (of its tenant unless one names its own: refused), each answered as
    POST /jobs/batch answers a job; dependsOnKeys is the batch endpoint's, not a member's."""
    results, news = await checked_jobs(api, jobs, view.batch.tenantId)
    callbacks = {view.batch.onComplete, view.batch.onSuccess} - {None}
    for i, (new, keys) in list(news.items()):
        if keys:
            results[i] = {"status": 400, "error": "dependsOnKeys: a member waits for jobs by id (dependsOn)"}
            del news[i]
        elif callbacks & {parent.lower() for parent in new.dependsOn or ()}:
            results[i] = {"status": 400, "error": "dependsOn: a member cannot wait for its own batch's callback"}
            del news[i]
    if news:
        await api.schema.wait_ready()
        answers = await api.slots.write(api.store.add_to_batch, view.batch.id, [new for new, _ in news.values()])
        for i, answer in zip(news, answers, strict=True):
            results[i] = batch_result(answer)
        api.stored(answers)
    final = [r for r in results if r is not None]
    return {**batch_counts(final), "results": final}


async def seal_batch(request: Request) -> Response:
    api = context(request)
    batch_id = object_id(request.path_params["batch_id"], "batch")
    await _read(api, batch_id)  # another tenant's batch is none
    view = await api.slots.write(api.store.seal_batch, batch_id)
    log.info(
        "batch sealed", extra={"action": "batch_sealed", "batchId": view.batch.id, "tenantId": view.batch.tenantId}
    )
    return SafeJSONResponse(view.to_wire())


async def get_batch(request: Request) -> Response:
    api = context(request)
    return SafeJSONResponse((await _read(api, object_id(request.path_params["batch_id"], "batch"))).to_wire())


async def list_members(request: Request) -> Response:
    """A page of the batch's members (`jobId`, `status`), by status then id, of one status if `status` is given;
    `next` is the cursor of the following page (`after`), null after the last."""
    api = context(request)
    batch_id = object_id(request.path_params["batch_id"], "batch")
    query = request.query_params
    status = _member_status(query.get("status"))
    limit = min(list_limit(query.get("limit")), MEMBERS_PER_PAGE_MAX)
    after = _cursor(query["after"]) if "after" in query else None
    if status is not None and after is not None and after.status != status:
        raise ApiError(400, f"after: a cursor of the {after.status} members, not of the {status} ones")
    read = partial(api.store.batch_members, status=status, results=False)
    page = await api.slots.read(read, batch_id, after, limit + 1)
    if not page:
        await _read(api, batch_id)  # a batch of none (also another tenant's: a 404) or a page past the last
    more = len(page) > limit
    page = page[:limit]
    body = {
        "jobs": [{"jobId": m.jobId, "status": m.status} for m in page],
        "next": f"{page[-1].status}.{page[-1].jobId}" if more else None,
    }
    return SafeJSONResponse(body)


def _member_status(raw: str | None) -> str | None:
    if raw is None:
        return None
    if raw not in STATUSES:
        raise ApiError(400, f"status: {jsonsafe.shorten(raw)!r} is not a job status ({', '.join(sorted(STATUSES))})")
    return raw


def _cursor(raw: str) -> MemberResult:
    """A members page's `after`: the `next` of the page before (the last member's status and id)."""
    status, _, job_id = raw.partition(".")
    if status not in STATUSES or not ObjectId.is_valid(job_id) or len(job_id) != 24:
        raise ApiError(400, "after: not a cursor of this listing (send the `next` of the page before)")
    return MemberResult(job_id.lower(), status, None)


async def list_batches(request: Request) -> Response:
    api = context(request)
    tenant, limit, before = page_asked(request, "batch")
    views = await api.slots.read(api.store.batches, tenant, limit, before)
    return SafeJSONResponse([view.to_wire() for view in views])


async def _read(api: ApiContext, batch_id: str) -> BatchView:
    view = await api.slots.read(api.store.batch, batch_id)
    if view is None:
        raise BatchNotFound(batch_id)
    return view


ROUTES = [
    Route("/batches", create_batch, methods=["POST"]),
    Route("/batches", list_batches, methods=["GET"]),
    Route("/batches/{batch_id}", get_batch, methods=["GET"]),
    Route("/batches/{batch_id}/jobs", list_members, methods=["GET"]),
    Route("/batches/{batch_id}/jobs", add_jobs, methods=["POST"]),
    Route("/batches/{batch_id}/seal", seal_batch, methods=["POST"]),
]
