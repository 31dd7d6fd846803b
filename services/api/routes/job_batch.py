"""POST /jobs/batch: up to MAX_BATCH_JOBS creates in one request, each answered on its own.

The body is `{"tenantId"?: ..., "jobs": [<a POST /jobs body>, ...]}`; a job that names no tenantId is the batch's
(with AUTH=required, the key's when the batch names none either). The answer is 200 with one result per job, in
order: `{"status": 201, "id"}` created, `{"status": 409, "id", "error"}` its idempotency key is held (by the job
`id`: an earlier job of the same batch included), `{"status": 400|413, "error"}` refused as POST /jobs would
refuse it, `{"status": 503, "error"}` not written (send it again: its key decides). One job's refusal never
refuses another, except a job that waits for it: a job's `dependsOnKeys` name other jobs of the batch by their
idempotencyKey, which it waits for as for the ids of `dependsOn` (the batch is created in rounds, parents first;
a job whose named parent was refused, or is not in the batch, or that waits in a cycle, is a 400 naming the key;
one whose parent was not written, a 503). A round after the first that the store cannot take answers its jobs and
theirs 503, since earlier rounds were written.
Only a body that is not such a list at all is refused whole (400), as is a batch naming a tenant its key may not
use (403, by the authentication).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Final

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.api.batch_rounds import Key, batch_rounds
from services.api.context import ApiContext, context
from services.api.http.errors import ApiError, SafeJSONResponse
from services.api.http.request_bodies import read_json
from services.api.new_job import TypeDefaultsOf, batch_job, unknown_type
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
    results, news = await checked_jobs(api, jobs, tenant)
    if news:
        await api.schema.wait_ready()
    plan = await run_in_threadpool(batch_rounds, news)
    for i, key in plan.unplaced.items():
        results[i] = _refused(400, _no_parent_in_batch(key))
    # Round by round, each one create_many: a job's parents named by key were answered by the rounds before.
    held: dict[Key, str] = {}  # the id of the job that holds a (tenant, key) of the batch
    failed: dict[Key, Result] = {}  # the answer of a job of the batch that holds no key: refused, or not written
    written = False
    for round_ in plan.rounds:
        ready: list[tuple[int, NewJob]] = []
        for i in round_:
            new, keys = news[i]
            blocked = next((k for k in keys if (new.tenantId, k) not in held), None)
            if blocked is not None:
                answer = _parent_failed(blocked, failed[(new.tenantId, blocked)])
                results[i] = failed[(new.tenantId, new.idempotencyKey)] = answer
            else:
                ready.append((i, _with_parents(new, [held[(new.tenantId, k)] for k in keys])))
        if not ready:
            continue
        try:
            answers = await api.slots.write(api.store.create_many, [new for _, new in ready])
        except StoreUnavailable as exc:
            if not written:
                raise  # nothing written: the whole request is a 503
            answers = [exc] * len(ready)
        written = True
        for (i, new), created in zip(ready, answers, strict=True):
            results[i] = result = batch_result(created)
            if (holder := _holder(created)) is not None:
                held[(new.tenantId, new.idempotencyKey)] = holder
            else:
                failed[(new.tenantId, new.idempotencyKey)] = result
        api.stored(answers)
    final = [r for r in results if r is not None]
    counts = batch_counts(final)
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


async def checked_jobs(
    api: ApiContext, jobs: list[Any], tenant: str | None
) -> tuple[list[Result | None], dict[int, tuple[NewJob, list[str]]]]:
    """Each job as POST /jobs checks it (the job types it names accepted): the refusals by index, and the jobs to
    create with the keys of the batch's jobs each waits for (in the thread pool: a batch's validation takes
    milliseconds)."""
    checked = await run_in_threadpool(_validated, jobs, tenant, api.known.defaults)
    results: list[Result | None] = [r if isinstance(r, dict) else None for r in checked]
    news = {i: c for i, c in enumerate(checked) if isinstance(c, tuple)}
    accepted: dict[str, bool] = {}
    for new, _ in news.values():
        if new.jobType not in accepted:
            accepted[new.jobType] = await api.known.accepts(new.jobType)
    for i, (new, _) in list(news.items()):
        if not accepted[new.jobType]:
            results[i] = _refused(400, unknown_type(new.jobType, api.known.names()))
            del news[i]
    return results, news


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


def _validated(
    jobs: list[Any], tenant: str | None, type_defaults: TypeDefaultsOf
) -> list[tuple[NewJob, list[str]] | Result]:
    """Each job as POST /jobs validates it, with the keys of the batch's jobs it waits for (in the thread pool: a
    batch's validation takes milliseconds)."""
    checked: list[tuple[NewJob, list[str]] | Result] = []
    for data in jobs:
        if isinstance(data, dict) and tenant is not None and "tenantId" not in data:
            data = {**data, "tenantId": tenant}
        try:
            checked.append(batch_job(data, type_defaults))
        except ApiError as exc:
            checked.append(_refused(exc.status, exc.message))
    return checked


def _holder(answer: Job | StoreError) -> str | None:
    """The id of the job that holds a create's key: the job made, or the one that held it already (a batch sent
    again), which the batch's jobs that name the key wait for."""
    if isinstance(answer, Job):
        return answer.id
    return answer.existing_id if isinstance(answer, DuplicateJob) else None


def _with_parents(new: NewJob, batch_parents: list[str]) -> NewJob:
    """The job waiting also for the batch's jobs its dependsOnKeys named (by their ids now)."""
    if not batch_parents:
        return new
    return replace(new, dependsOn=[*(new.dependsOn or ()), *batch_parents])


def _no_parent_in_batch(key: str) -> str:
    return (
        f"dependsOnKeys: no job of this batch with idempotencyKey {shorten(key)!r} can be created before this one "
        "(missing, refused, or waiting in a cycle)"
    )


def _parent_failed(key: str, parent: Result) -> Result:
    """A job whose parent of the batch was not created: not written either when the parent was not (503: send the
    batch again), else refused."""
    if parent["status"] == 503:
        return _refused(503, f"dependsOnKeys: {shorten(key)!r} was not written; send the batch again")
    return _refused(400, f"dependsOnKeys: the batch's job {shorten(key)!r} was refused")


def batch_result(answer: Job | StoreError) -> Result:
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


def batch_counts(results: list[Result]) -> dict[str, int]:
    return {
        "created": sum(r["status"] == 201 for r in results),
        "duplicates": sum(r["status"] == 409 for r in results),
        "refused": sum(r["status"] not in (201, 409) for r in results),
    }


def _refused(status: int, message: str) -> Result:
    return {"status": status, "error": message}


ROUTES = [Route("/jobs/batch", create_jobs, methods=["POST"])]
