"""GET /job-types: the types the API accepts, with their executors and limits (shared/job_types/known.py).
GET/PUT/DELETE /job-types/{job_type}/limits: a type's limits, and an operator's in place of the registered ones
(PUT and DELETE need an admin key when AUTH=required: a type's limits bind every tenant)."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jobsched.limits import Limits
from services.api.context import context
from services.api.http.errors import ApiError, SafeJSONResponse
from services.api.http.request_bodies import read_json
from services.api.new_job import unknown_type
from shared.job_types.limits import LimitsView, TypeLimits
from shared.jsonsafe import shorten

LIMITS_PATH = "/job-types/{job_type}/limits"


async def list_job_types(request: Request) -> Response:
    api = context(request)
    listing = await api.known.listing()
    limits = await run_in_threadpool(_view(request).read)
    for entry in listing:
        found = limits.get(str(entry["name"]), TypeLimits())
        entry["limits"] = found.in_force_document
        entry["limitsSource"] = found.source
    return SafeJSONResponse(listing)


async def get_limits(request: Request) -> Response:
    job_type = await _known_type(request)
    return SafeJSONResponse(await _answer(request, job_type))


async def set_limits(request: Request) -> Response:
    job_type = await _known_type(request)
    body = await read_json(request)
    if not isinstance(body, dict):
        raise ApiError(400, 'limits: must be an object such as {"concurrency": 5}')
    try:
        limits = Limits.from_document(body)
    except (ValueError, TypeError) as exc:
        raise ApiError(400, f"limits: {shorten(str(exc), 300)}") from None
    api = context(request)
    await api.slots.write(api.known.limits.set, job_type, limits)
    return SafeJSONResponse(await _answer(request, job_type))


async def clear_limits(request: Request) -> Response:
    api = context(request)
    job_type = str(request.path_params["job_type"])
    # A type the API accepts, or one no longer served whose operator's limits outlive its executors (they must
    # stay removable); any other name is a 404, as GET and PUT answer.
    if not await api.known.accepts(job_type):
        stored = await run_in_threadpool(_view(request).read)
        if job_type not in stored or stored[job_type].override is None:
            raise ApiError(404, unknown_type(job_type, api.known.names()).removeprefix("jobType: "))
    await api.slots.write(api.known.limits.set, job_type, None)
    return SafeJSONResponse(await _answer(request, job_type))


async def _known_type(request: Request) -> str:
    api = context(request)
    job_type = str(request.path_params["job_type"])
    if not await api.known.accepts(job_type):
        raise ApiError(404, unknown_type(job_type, api.known.names()).removeprefix("jobType: "))
    return job_type


async def _answer(request: Request, job_type: str) -> dict[str, Any]:
    limits = await run_in_threadpool(_view(request).read)
    return {"jobType": job_type, **limits.get(job_type, TypeLimits()).to_wire()}


def _view(request: Request) -> LimitsView:
    return context(request).known.limits


ROUTES = [
    Route("/job-types", list_job_types, methods=["GET"]),
    Route(LIMITS_PATH, get_limits, methods=["GET"]),
    Route(LIMITS_PATH, set_limits, methods=["PUT"]),
    Route(LIMITS_PATH, clear_limits, methods=["DELETE"]),
]
