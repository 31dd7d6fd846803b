"""The operator's console: plain HTML, CSS and JavaScript modules under static/, served at /ui.

Nothing is built or fetched from elsewhere: the browser loads these files from the API process, and the pages
call the same JSON API as any client (relative to /ui, so a path prefix in front of the API still works). The
Content-Security-Policy holds the pages to that: scripts, styles and requests go to this origin only.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.api.http.errors import CONSOLE

STATIC_DIR = Path(__file__).parent / "static"
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    # Revalidate every time (the ETag makes that a 304): after an upgrade the browser never mixes old modules
    # with new ones.
    (b"cache-control", b"no-cache"),
]


class _WithHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def add_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        await self._app(scope, receive, add_headers)


async def _to_console(request: Request) -> Response:
    # Relative to where the client asked, never built from its Host header (which a shared cache in front
    # would keep and serve to others), and still right behind a proxy that serves the API under a path prefix.
    return RedirectResponse("ui/", status_code=307)


def console_routes() -> list[BaseRoute]:
    """/ui/ and its assets, and /ui redirecting to /ui/."""
    return [
        Route("/ui", _to_console, methods=["GET", "HEAD"]),
        Mount("/ui", app=_WithHeaders(StaticFiles(directory=STATIC_DIR, html=True)), name=CONSOLE),
    ]
