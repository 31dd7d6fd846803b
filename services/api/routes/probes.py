"""GET /healthz (the process answers) and GET /readyz (the store's schema is ready and the store answers)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from services.api.context import context
from services.api.http.errors import error


async def healthz(request: Request) -> Response:
    return PlainTextResponse("ok")


async def readyz(request: Request) -> Response:
    api = context(request)
    if not api.schema.ready:
        return error(503, api.schema.problem or "store schema not ready yet")
    await api.store_ping.check()  # not admitted: an overloaded API is still ready
    return PlainTextResponse("ok")


ROUTES = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
]
