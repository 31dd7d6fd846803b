"""GET /openapi.json (the document, with the security of this API's mode) and GET /docs (a page that renders it)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from services.api.context import context
from services.api.http.errors import SafeJSONResponse
from services.api.openapi.document import DOCS_HTML


async def openapi(request: Request) -> Response:
    return SafeJSONResponse(context(request).openapi)


async def docs(request: Request) -> Response:
    return HTMLResponse(DOCS_HTML)


ROUTES = [
    Route("/openapi.json", openapi, methods=["GET"]),
    Route("/docs", docs, methods=["GET"]),
]
