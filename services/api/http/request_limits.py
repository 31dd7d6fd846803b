"""Limits every request meets before and while a route sees it, whatever the route (ASGI middleware).

- Headers larger than `max_header_bytes` are refused with 431 (the HTTP server bounds what it buffers of
  headers that never end).
- At most `max_in_flight` requests are served at once, of which one sharer (an API key, or the requests
  without one: fair_shares.py) holds at most `max_in_flight_per_key`; past either the answer is an immediate 503
  with Retry-After, instead of a queue that turns into seconds of latency for everyone. A request in flight
  is one connection (HTTP/1.1 serves one request at a time on a connection), so the share bounds a key's busy
  connections too; an idle one is closed after the keep-alive timeout, one that has not sent a whole request
  after the header deadline (server.py).
- `/healthz` and `/readyz` are not counted in flight: a probe never waits behind job traffic nor counts
  against it, so an API busy with one tenant's flood is not restarted as dead.
- A request that declares both Content-Length and Transfer-Encoding is refused and its connection closed
  (RFC 9112 6.1): a front end that reads it by its length would send the rest as a request of its own.
- A body declared larger than `max_body_bytes` (Content-Length) is refused with 413 before a byte of it is
  read; a body without a length (chunked) is read only up to the limit. Either way the connection is closed,
  so the rest is never read.
- A body must arrive within `body_timeout_s` of the request's headers (408), so a client that sends slowly
  cannot hold a connection and its buffer. Headers have their own deadline in the HTTP server (server.py).
- A request target (path or query) holding a NUL character (`%00`) is a 400: no text that can be stored holds
  one (bodies refuse it too), so such an id or filter can match nothing, and a MongoDB-compatible store on
  PostgreSQL fails the query instead of finding nothing.
- A request that carries a body, or a POST/PUT/PATCH/DELETE that declares a Content-Type, must declare JSON
  (415): browsers send other sites' forms and `text/plain` bodies without asking (no CORS preflight), JSON
  only after a preflight this API never grants.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.api.http.errors import CLOSE, ApiError, error, overloaded
from services.api.http.fair_shares import PUBLIC, FairShares, current_sharer
from services.api.http.request_bodies import is_json_media_type, unsupported_media_type
from services.api.http.store_slots import WAIT_S, WRITE_SLOTS
from shared.config import Settings

# Room for the largest payload (256 KiB of UTF-8) however a client escapes it: a character that is one byte
# in UTF-8 can take six as a \u escape. The payload's own limit is checked on its UTF-8 size.
MAX_BODY_BYTES = 2 * 1024 * 1024
MAX_HEADER_BYTES = 16 * 1024
BODY_TIMEOUT_S = 30.0
HEADER_TIMEOUT_S = 10.0
SEND_TIMEOUT_S = 30.0
MAX_IN_FLIGHT = 256
MAX_IN_FLIGHT_PER_KEY = 32
STORE_SLOTS_PER_KEY = 8
PROBE_PATHS = frozenset({"/healthz", "/readyz"})
_UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

Sharer = Callable[[Scope], Awaitable[str]]
"""Who a request's share is counted for (fair_shares.py): its API key's prefix, or PUBLIC."""


@dataclass(frozen=True)
class ApiLimits:
    max_body_bytes: int = MAX_BODY_BYTES
    max_header_bytes: int = MAX_HEADER_BYTES
    body_timeout_s: float = BODY_TIMEOUT_S
    header_timeout_s: float = HEADER_TIMEOUT_S
    send_timeout_s: float = SEND_TIMEOUT_S
    max_in_flight: int = MAX_IN_FLIGHT
    max_in_flight_per_key: int = MAX_IN_FLIGHT_PER_KEY
    store_slots: int = WRITE_SLOTS
    store_slots_per_key: int = STORE_SLOTS_PER_KEY
    store_wait_s: float = WAIT_S

    @classmethod
    def from_settings(cls, settings: Settings) -> ApiLimits:
        return cls(
            body_timeout_s=settings.api_body_timeout.total_seconds(),
            header_timeout_s=settings.api_header_timeout.total_seconds(),
            send_timeout_s=settings.api_send_timeout.total_seconds(),
            max_in_flight=settings.api_max_in_flight,
            max_in_flight_per_key=settings.api_max_in_flight_per_key,
            store_slots=settings.api_store_slots,
            store_slots_per_key=settings.api_store_slots_per_key,
            store_wait_s=settings.api_store_wait.total_seconds(),
        )


class RequestLimits:
    """The limits above as ASGI middleware; `sharer` (None without authentication: no shares) names whose share
    a request counts against."""

    def __init__(self, app: ASGIApp, limits: ApiLimits, sharer: Sharer | None = None) -> None:
        self._app = app
        self._limits = limits
        self._sharer = sharer
        per_key = limits.max_in_flight_per_key if sharer is not None else limits.max_in_flight
        self._in_flight = FairShares(limits.max_in_flight, per_key)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        if scope["path"] in PROBE_PATHS:
            await self._app(scope, _BodyReader(receive, self._limits), send)
            return
        sharer = await self._sharer(scope) if self._sharer is not None else PUBLIC
        if not self._in_flight.try_take(sharer):
            await self._overloaded(scope, sharer)(scope, receive, send)
            return
        token = current_sharer.set(sharer)
        try:
            await self._app(scope, _BodyReader(receive, self._limits), send)
        finally:
            current_sharer.reset(token)
            self._in_flight.give_back(sharer)

    def _overloaded(self, scope: Scope, sharer: str) -> Response:
        held, share = self._in_flight.held(sharer), self._in_flight.per_sharer
        if held >= share and self._sharer is not None:
            who = "requests without an API key" if sharer == PUBLIC else "this API key"
            what = f"{who} already have {held} requests in progress, their share"
        else:
            what = f"{self._in_flight.in_use} requests in progress"
        # The body of a refused request is not read: its connection cannot carry another request.
        return overloaded(what, CLOSE if _has_body(Headers(scope=scope)) else None)

    def _refusal(self, scope: Scope) -> Response | None:
        """The answer to a request refused on its headers alone, or None."""
        header_bytes = sum(len(name) + len(value) for name, value in scope["headers"])
        if header_bytes > self._limits.max_header_bytes:
            return error(431, f"request headers are {header_bytes} bytes; the limit is {self._limits.max_header_bytes}")
        if "\x00" in scope["path"] or b"%00" in scope.get("query_string", b""):
            return error(400, "the request target holds a NUL character (%00), which no stored text can")
        headers = Headers(scope=scope)
        if "transfer-encoding" in headers and "content-length" in headers:
            return error(400, "a request may declare Content-Length or Transfer-Encoding, not both", CLOSE)
        length = headers.get("content-length", "")
        declared = int(length) if length.isascii() and length.isdigit() else None  # the server checked its form
        if declared is not None and declared > self._limits.max_body_bytes:
            return error(413, f"request body is {declared} bytes; the limit is {self._limits.max_body_bytes}", CLOSE)
        content_type = headers.get("content-type")
        has_body = _has_body(headers)
        declares_other = content_type is not None and not is_json_media_type(content_type)
        if (declares_other and (has_body or scope["method"] in _UNSAFE_METHODS)) or (has_body and content_type is None):
            refused = unsupported_media_type(content_type)
            return error(refused.status, refused.message, CLOSE if has_body else None)
        return None


def _has_body(headers: Headers) -> bool:
    length = headers.get("content-length", "")
    return (length.isascii() and length.isdigit() and int(length) > 0) or "transfer-encoding" in headers


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
