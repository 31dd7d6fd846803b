"""GET /job-types: the types the API accepts, with their executors (shared/job_types/known.py)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.api.context import context
from services.api.http.errors import SafeJSONResponse


async def list_job_types(request: Request) -> Response:
    return SafeJSONResponse(await context(request).known.listing())


ROUTES = [Route("/job-types", list_job_types, methods=["GET"])]
