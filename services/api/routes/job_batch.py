"""POST /jobs/batch: up to MAX_BATCH_JOBS creates in one request, each answered on its own.

The body is `{"tenantId"?: ..., "jobs": [<a POST /jobs body>, ...]}`; a job that names no tenantId is the batch's
(with AUTH=required, the key's when the batch names none either). The answer is 200 with one result per job, in
order: `{"status": 201, "id"}` created, `{"status": 409, "id", "error"}` its idempotency key is held (by the job
`id`: an earlier job of the same batch included), `{"status": 400|413, "error"}` refused as POST /jobs would
refuse it, `{"status": 503, "error"}` not written (send it again: its key decides). One job's refusal never
refuses another. Only a body that is not such a list at all is refused whole (400), as is a batch naming a
tenant its key may not use (403, by the authentication).
"""

from __future__ import annotations

import logging
from typing import Any, Final

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.api.context import context
from services.api.http.errors import ApiError, SafeJSONResponse
from services.api.http.request_bodies import read_json
from services.api.new_job import TypeDefaultsOf, new_job, unknown_type
from shared.jsonsafe import shorten
from shared.model import Job
from shared.store.base import DuplicateJob, JobRefused, NewJob, StoreError, StoreUnavailable

log = logging.getLogger("jobsched.api")
MAX_BATCH_JOBS: Final = 1000
BATCH_FIELDS: Final = frozenset({"tenantId", "jobs"})
Result = dict[str, Any]


async def create_jobs(request: Request) -> Response:
    api = context(request)
    jobs, tenant = _envelope(await read_json(request))
    checked = await run_in_threadpool(_validated, jobs, tenant, api.known.defaults)
    results: list[Result | None] = [r if isinstance(r, dict) else None for r in checked]
    news: list[tuple[int, NewJob]] = [(i, n) for i, n in enumerate(checked) if isinstance(n, NewJob)]
    accepted: dict[str, bool] = {}
    for _, new in news:
        if new.jobType not in accepted:
            accepted[new.jobType] = await api.known.accepts(new.jobType)
    for i, new in news:
        if not accepted[new.jobType]:
            results[i] = _refused(400, unknown_type(new.jobType, api.known.names()))
    news = [(i, n) for i, n in news if accepted[n.jobType]]
    if news:
        await api.schema.wait_ready()
        answers = await api.slots.write(api.store.create_many, [n for _, n in news])
        for (i, _), answer in zip(news, answers, strict=True):
            results[i] = _result(answer)
        api.stored(answers)
    final = [r for r in results if r is not None]
    counts = {
        "created": sum(r["status"] == 201 for r in final),
        "duplicates": sum(r["status"] == 409 for r in final),
        "refused": sum(r["status"] not in (201, 409) for r in final),
    }
    log.info(
        "jobs created in a batch",
        extra={
            "action": "jobs_created_batch",
            "createdJobs": counts["created"],
            "duplicateJobs": counts["duplicates"],
            "refusedJobs": counts["refused"],
        },
    )
    return SafeJSONResponse({**counts, "results": final})


def _envelope(data: Any) -> tuple[list[Any], str | None]:
    """The batch's jobs and default tenant, or the 400 of a body that is not a batch."""
    if not isinstance(data, dict):
        raise ApiError(400, 'the body must be a JSON object: {"jobs": [...]}')
    unknown = sorted(set(data) - BATCH_FIELDS)
    if unknown:
        raise ApiError(400, f"unknown field {shorten(unknown[0])!r}; a batch has tenantId and jobs")
    jobs, tenant = data.get("jobs"), data.get("tenantId")
    if not isinstance(jobs, list) or not jobs:
        raise ApiError(400, "jobs: a non-empty array of jobs (each a POST /jobs body) is required")
    if len(jobs) > MAX_BATCH_JOBS:
        raise ApiError(400, f"jobs: {len(jobs)} jobs; a batch takes at most {MAX_BATCH_JOBS}")
    if tenant is not None and (not isinstance(tenant, str) or not tenant):
        raise ApiError(400, "tenantId: the batch's tenant must be a non-empty string")
    return jobs, tenant


def _validated(jobs: list[Any], tenant: str | None, type_defaults: TypeDefaultsOf) -> list[NewJob | Result]:
    """Each job as POST /jobs validates it (in the thread pool: a batch's validation takes milliseconds)."""
    checked: list[NewJob | Result] = []
    for data in jobs:
        if isinstance(data, dict) and tenant is not None and "tenantId" not in data:
            data = {**data, "tenantId": tenant}
        try:
            checked.append(new_job(data, type_defaults))
        except ApiError as exc:
            checked.append(_refused(exc.status, exc.message))
    return checked


def _result(answer: Job | StoreError) -> Result:
    if isinstance(answer, Job):
        return {"status": 201, "id": answer.id}
    if isinstance(answer, DuplicateJob):
        message = f"a job with idempotencyKey {shorten(answer.idempotency_key)!r} already exists"
        return {"status": 409, "id": answer.existing_id, "error": message}
    if isinstance(answer, JobRefused):
        return _refused(400, str(answer))
    if isinstance(answer, StoreUnavailable):
        return _refused(503, "the job store is unavailable; send this job again")
    log.warning("batch create refused", extra={"action": "batch_create_error", "error": str(answer)})
    return _refused(500, "internal error")


def _refused(status: int, message: str) -> Result:
    return {"status": status, "error": message}


ROUTES = [Route("/jobs/batch", create_jobs, methods=["POST"])]
