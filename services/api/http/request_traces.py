"""The trace context of every API request (ASGI middleware): the jobs a request creates keep it
(Job.traceparent), so that their attempts' spans continue the caller's trace.

When this process traces, each request is a span of its own (shared/tracing/spans.py), named like the request
metrics label it (`POST /jobs`: never the raw path), and the jobs keep that span's context. When it does not, a
caller's valid `traceparent` header is kept as it came: an executor that traces still joins the caller's trace.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from services.api.http.request_metrics import ResponseStatus, method_label, route_label
from shared import tracing


class RequestTraces:
    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._request(scope, receive, send)
        else:  # lifespan
            await self._app(scope, receive, send)

    async def _request(self, scope: Scope, receive: Receive, send: Send) -> None:
        active = tracing.active()
        if active is None:
            token = tracing.set_request_traceparent(_header(scope, b"traceparent"))
            try:
                await self._app(scope, receive, send)
            finally:
                tracing.reset_request_traceparent(token)
            return
        span = active.request(method_label(scope["method"]), scope["headers"])
        token = tracing.set_request_traceparent(span.traceparent)
        status = ResponseStatus(send)
        try:
            await self._app(scope, receive, status)
        finally:
            tracing.reset_request_traceparent(token)
            span.end(method_label(scope["method"]), route_label(scope), status.code)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return tracing.valid_traceparent(value.decode("latin-1"))
    return None
