"""Counts and times every API request (ASGI middleware).

Labels come from fixed sets only: the method when it is one of HTTP's standard methods, the route's template
(never the raw path: ids would grow the label set without bound) or `unmatched`. Anything else a client puts
in a request line is counted under `other`, so no request can add a time series.
"""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from shared import metrics

KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"})
OTHER = "other"
UNMATCHED = "unmatched"


def method_label(method: str) -> str:
    return method if method in KNOWN_METHODS else OTHER


def route_label(scope: Scope) -> str:
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) else UNMATCHED


class ResponseStatus:
    """`send` for an app, noting the status its response started with (500 until it starts: an app that fails
    before answering is answered 500 by the server)."""

    def __init__(self, send: Send) -> None:
        self.code = 500
        self._send = send

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.code = message["status"]
        await self._send(message)


class RequestMetrics:
    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        status = ResponseStatus(send)
        try:
            await self._app(scope, receive, status)
        finally:
            method, route = method_label(scope["method"]), route_label(scope)
            metrics.API_REQUESTS.labels(method, route, str(status.code)).inc()
            metrics.API_REQUEST_SECONDS.labels(method, route).observe(time.perf_counter() - started)
