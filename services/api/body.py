"""Reading a request body: the one way every route gets its JSON.

The size limit and the read deadline are enforced while the body arrives (limits.RequestLimits); here the
body is required to be JSON by its Content-Type and parsed strictly (shared.jsonsafe). Parsing a large body
takes milliseconds of CPU, so it runs in the thread pool, never on the event loop.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from services.api.errors import ApiError
from shared import jsonsafe

INLINE_PARSE_BYTES = 16 * 1024  # smaller bodies parse in microseconds: not worth a thread hop


def is_json_media_type(content_type: str) -> bool:
    """application/json or application/<anything>+json, optionally with parameters; a charset must be UTF-8."""
    media_type, _, parameters = content_type.partition(";")
    kind = media_type.strip().lower()
    if kind != "application/json" and not (kind.startswith("application/") and kind.endswith("+json")):
        return False
    for parameter in parameters.split(";"):
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"').lower() not in ("utf-8", "utf8"):
            return False
    return True


def unsupported_media_type(content_type: str | None) -> ApiError:
    given = f"not {jsonsafe.shorten(content_type, 40)!r}" if content_type else "it is missing"
    return ApiError(415, f"Content-Type must be application/json ({given})")


async def read_json(request: Request, *, max_bytes: int | None = None) -> Any:
    """The request's JSON value; ApiError 415 when it is not declared JSON, 400 when it is not JSON we accept,
    413 when it is longer than `max_bytes` (a route's own limit, below the one every request meets)."""
    content_type = request.headers.get("content-type")
    if content_type is None or not is_json_media_type(content_type):
        raise unsupported_media_type(content_type)
    raw = await request.body()
    if max_bytes is not None and len(raw) > max_bytes:
        raise ApiError(413, f"request body is {len(raw)} bytes; the limit is {max_bytes}")
    try:
        if len(raw) <= INLINE_PARSE_BYTES:
            return jsonsafe.parse_request(raw)
        return await run_in_threadpool(jsonsafe.parse_request, raw)
    except jsonsafe.JsonRejected as exc:
        raise ApiError(400, str(exc)) from None
