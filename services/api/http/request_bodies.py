"""What a request brings: its JSON body (declared JSON, parsed strictly), validated by a model, its job id,
its list limit. Bad input raises ApiError (400 malformed or invalid, 413 too large, 415 not declared JSON),
which services/api/http/errors.py turns into `{"error": ...}`.

The size limit and the read deadline are enforced while the body arrives (limits.RequestLimits); here the body
is required to be JSON by its Content-Type and parsed by shared.jsonsafe. Parsing a large body takes
milliseconds of CPU, so it runs in the thread pool, never on the event loop.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from services.api.http.errors import ApiError
from shared import jsonsafe
from shared.job_requests import PayloadTooLarge, check_payload, describe

INLINE_PARSE_BYTES = 16 * 1024  # smaller bodies parse in microseconds: not worth a thread hop
LIST_LIMIT_DEFAULT = 100
LIST_LIMIT_MAX = 5000
M = TypeVar("M", bound=BaseModel)


def list_limit(raw: str | None) -> int:
    """Default 100, cap 5000; anything but ASCII digits, or zero, falls back to the default (the API contract
    says so): `+5`, `1_0` and other scripts' digits are not numbers here although Python's int() takes them."""
    if raw is None or not (raw.isascii() and raw.isdigit()):
        return LIST_LIMIT_DEFAULT
    digits = raw.lstrip("0")
    if not digits:
        return LIST_LIMIT_DEFAULT
    return LIST_LIMIT_MAX if len(digits) > len(str(LIST_LIMIT_MAX)) else min(int(digits), LIST_LIMIT_MAX)


def path_job_id(request: Request) -> str:
    """The `{job_id}` of the path, lowercased as every store's lookup reads it; a malformed one is a 400 (job ids
    are 24 hex characters)."""
    job_id: str = request.path_params["job_id"]
    if len(job_id) != 24 or any(c not in "0123456789abcdefABCDEF" for c in job_id):
        raise ApiError(400, f"malformed job id {jsonsafe.shorten(job_id)!r}: expected 24 hex characters")
    return job_id.lower()


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
    raw = await request.body()
    if content_type is None and not raw:
        raise ApiError(400, "the request needs a JSON body")
    if content_type is None or not is_json_media_type(content_type):
        raise unsupported_media_type(content_type)
    if max_bytes is not None and len(raw) > max_bytes:
        raise ApiError(413, f"request body is {len(raw)} bytes; the limit is {max_bytes}")
    try:
        if len(raw) <= INLINE_PARSE_BYTES:
            return jsonsafe.parse_request(raw)
        return await run_in_threadpool(jsonsafe.parse_request, raw)
    except jsonsafe.JsonRejected as exc:
        raise ApiError(400, str(exc)) from None


async def json_object(request: Request, *, empty_ok: bool = False) -> dict[str, Any]:
    """The body as a JSON object read by read_json (`{}` for a request without a body when `empty_ok`: such a
    request needs no Content-Type)."""
    if empty_ok and not (await request.body()).strip():
        return {}
    data = await read_json(request)
    if not isinstance(data, dict):
        raise ApiError(400, "the body must be a JSON object")
    return data


async def checked(model: type[M], data: dict[str, Any]) -> M:
    """validated() in a worker thread: a body of up to the request limit (a payload's size, thousands of
    unknown fields) takes milliseconds to check, which the event loop must not spend."""
    return await run_in_threadpool(validated, model, data)


def validated(model: type[M], data: dict[str, Any]) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise invalid(exc) from None


async def checked_payload(job_type: str, payload: dict[str, Any] | None) -> None:
    """A payload a request brings for a stored job of `job_type` (PATCH of a job or a template, trigger), checked
    as POST /jobs checks one (check_payload), before anything is written: a 400 naming the field. The model
    validating the body cannot: the job type is the stored job's. In a worker thread, as the body's validation
    is: checking an http payload encodes its `json`, milliseconds for a large one."""
    if payload is None:
        return
    try:
        await run_in_threadpool(check_payload, job_type, payload)
    except ValueError as exc:
        raise ApiError(400, jsonsafe.shorten(str(exc), 300)) from None


def invalid(exc: ValidationError) -> ApiError:
    """A validation error as the HTTP error it is: 413 for a payload over the limit, else 400."""
    too_large = any(isinstance(e.get("ctx", {}).get("error"), PayloadTooLarge) for e in exc.errors())
    return ApiError(413 if too_large else 400, describe(exc))
