"""From a create request's JSON value to the job to store, or the client's error (ApiError).

Validation of a template includes parsing its schedule (cron search, time zone files), and a large body's
fields take a while to check: those take milliseconds, which the event loop must not spend, so they are
validated in the thread pool. A small one-off job's validation takes microseconds, less than the hop to a
thread and back, which on a kept-alive connection is most of what a create costs: it is validated inline.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool

from jobsched.type_defaults import TypeDefaults
from services.api.http.errors import ApiError
from services.api.http.request_bodies import INLINE_PARSE_BYTES, validated
from shared.cron import ScheduleError
from shared.job_requests import JobRequest
from shared.jsonsafe import shorten
from shared.model import utc_now
from shared.store.base import NewJob

# A job type's registered defaults by its name (KnownTypes.defaults; None: a type not known yet).
TypeDefaultsOf = Callable[[str], TypeDefaults | None]


def new_job(data: Any, type_defaults: TypeDefaultsOf = lambda _: None) -> NewJob:
    """`type_defaults`: a job type's registered defaults (KnownTypes.defaults), which resolve its attempt budget
    for a request that gives none, and its backoff. A single create has no batch for dependsOnKeys to name."""
    new, keys = batch_job(data, type_defaults)
    if keys:
        raise ApiError(400, "dependsOnKeys names jobs of the same batch: send the jobs together to POST /jobs/batch")
    return new


def batch_job(data: Any, type_defaults: TypeDefaultsOf = lambda _: None) -> tuple[NewJob, list[str]]:
    """new_job for a job of a batch: the job, and the keys of the jobs of its batch it waits for (dependsOnKeys,
    which the batch resolves to ids once those are created)."""
    if not isinstance(data, dict):
        raise ApiError(400, "the body must be a JSON object")
    try:
        request = validated(JobRequest, data)
        return request.to_new_job(utc_now(), type_defaults(request.jobType)), list(request.dependsOnKeys or ())
    except ScheduleError as exc:
        raise ApiError(400, str(exc)) from None


async def new_job_of(data: Any, body_bytes: int, type_defaults: TypeDefaultsOf = lambda _: None) -> NewJob:
    """new_job, inline for a small one-off job, in the thread pool for anything else."""
    schedule = isinstance(data, dict) and ("cron" in data or "interval" in data)
    if body_bytes <= INLINE_PARSE_BYTES and not schedule:
        return new_job(data, type_defaults)
    return await run_in_threadpool(new_job, data, type_defaults)


def unknown_type(job_type: str, known: list[str]) -> str:
    """The 400's message for a job of a type the API does not accept."""
    return f"jobType: unknown jobType {shorten(job_type)!r}; known types: {', '.join(known)}"
