"""The operator's console: plain HTML, CSS and JavaScript modules under static/, served at /ui.

Nothing is built or fetched from elsewhere: the browser loads these files from the API process, and the pages
call the same JSON API as any client (relative to /ui, so a path prefix in front of the API still works). The
Content-Security-Policy holds the pages to that: scripts, styles and requests go to this origin only.
"""

from __future__ import annotations

from pathlib import Path

from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

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


def console_mount() -> Mount:
    """/ui/ and its assets; /ui itself redirects to /ui/ (the router's slash redirect)."""
    return Mount("/ui", app=_WithHeaders(StaticFiles(directory=STATIC_DIR, html=True)), name="console")
