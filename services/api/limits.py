"""Limits every request meets before and while a route sees it, whatever the route (ASGI middleware).

- Headers larger than `max_header_bytes` are refused with 431 (the HTTP server bounds what it buffers of
  headers that never end).
- At most `max_in_flight` requests are served at once; past that the answer is an immediate 503 with
  Retry-After, instead of a queue that turns into seconds of latency for everyone.
- A body declared larger than `max_body_bytes` (Content-Length) is refused with 413 before a byte of it is
  read; a body without a length (chunked) is read only up to the limit. Either way the connection is closed,
  so the rest is never read.
- A body must arrive within `body_timeout_s` of the request's headers (408), so a client that sends slowly
  cannot hold a connection and its buffer. Headers have their own deadline in the HTTP server (server.py).
- A request target (path or query) holding a NUL character (`%00`) is a 400: no text that can be stored holds
  one (bodies refuse it too), so such an id or filter can match nothing, and a store on PostgreSQL (the
  stand-in) fails the query instead of finding nothing.
- A request that carries a body, or a POST/PUT/PATCH/DELETE that declares a Content-Type, must declare JSON
  (415): browsers send other sites' forms and `text/plain` bodies without asking (no CORS preflight), JSON
  only after a preflight this API never grants.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.api import admission
from services.api.bodies import is_json_media_type, unsupported_media_type
from services.api.errors import CLOSE, ApiError, error, overloaded
from shared.config import Settings

# Room for the largest payload (256 KiB of UTF-8) however a client escapes it: a character that is one byte
# in UTF-8 can take six as a \u escape. The payload's own limit is checked on its UTF-8 size.
MAX_BODY_BYTES = 2 * 1024 * 1024
MAX_HEADER_BYTES = 16 * 1024
BODY_TIMEOUT_S = 30.0
HEADER_TIMEOUT_S = 10.0
MAX_IN_FLIGHT = 256
_UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class ApiLimits:
    max_body_bytes: int = MAX_BODY_BYTES
    max_header_bytes: int = MAX_HEADER_BYTES
    body_timeout_s: float = BODY_TIMEOUT_S
    header_timeout_s: float = HEADER_TIMEOUT_S
    max_in_flight: int = MAX_IN_FLIGHT
    store_slots: int = admission.WRITE_SLOTS
    store_wait_s: float = admission.WAIT_S

    @classmethod
    def from_settings(cls, settings: Settings) -> ApiLimits:
        return cls(
            body_timeout_s=settings.api_body_timeout.total_seconds(),
            header_timeout_s=settings.api_header_timeout.total_seconds(),
            max_in_flight=settings.api_max_in_flight,
            store_slots=settings.api_store_slots,
            store_wait_s=settings.api_store_wait.total_seconds(),
        )


class RequestLimits:
    def __init__(self, app: ASGIApp, limits: ApiLimits) -> None:
        self._app = app
        self._limits = limits
        self._in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if self._in_flight >= self._limits.max_in_flight:
            await overloaded(f"{self._in_flight} requests in progress")(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        self._in_flight += 1
        try:
            await self._app(scope, _BodyReader(receive, self._limits), send)
        finally:
            self._in_flight -= 1

    def _refusal(self, scope: Scope) -> Response | None:
        """The answer to a request refused on its headers alone, or None."""
        header_bytes = sum(len(name) + len(value) for name, value in scope["headers"])
        if header_bytes > self._limits.max_header_bytes:
            return error(431, f"request headers are {header_bytes} bytes; the limit is {self._limits.max_header_bytes}")
        if "\x00" in scope["path"] or b"%00" in scope.get("query_string", b""):
            return error(400, "the request target holds a NUL character (%00), which no stored text can")
        headers = Headers(scope=scope)
        length = headers.get("content-length", "")
        declared = int(length) if length.isascii() and length.isdigit() else None  # the server checked its form
        if declared is not None and declared > self._limits.max_body_bytes:
            return error(413, f"request body is {declared} bytes; the limit is {self._limits.max_body_bytes}", CLOSE)
        content_type = headers.get("content-type")
        has_body = bool(declared) or "transfer-encoding" in headers
        declares_other = content_type is not None and not is_json_media_type(content_type)
        if (declares_other and (has_body or scope["method"] in _UNSAFE_METHODS)) or (has_body and content_type is None):
            refused = unsupported_media_type(content_type)
            return error(refused.status, refused.message, CLOSE if has_body else None)
        return None


class _BodyReader:
    """The app's `receive`, counting body bytes against the limit and bounding the time the body takes."""

    def __init__(self, receive: Receive, limits: ApiLimits) -> None:
        self._receive = receive
        self._limits = limits
        self._deadline = asyncio.get_running_loop().time() + limits.body_timeout_s
        self._received = 0
        self._done = False

    async def __call__(self) -> Message:
        if self._done:  # after the body: only the disconnect notice, which may take as long as the response
            return await self._receive()
        try:
            async with asyncio.timeout_at(self._deadline):
                message = await self._receive()
        except TimeoutError:
            late = f"the request body did not arrive within {self._limits.body_timeout_s:g}s"
            raise ApiError(408, late, CLOSE) from None
        if message["type"] != "http.request":
            self._done = True
            return message
        self._received += len(message.get("body", b""))
        if self._received > self._limits.max_body_bytes:
            raise ApiError(413, f"request body is over the limit of {self._limits.max_body_bytes} bytes", CLOSE)
        self._done = not message.get("more_body", False)
        return message
