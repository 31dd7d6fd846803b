"""What a request brings: its JSON body validated by a model, its job id, its list limit. Bad input raises
HTTPException (400 malformed or invalid, 413 too large), which the app turns into `{"error": ...}`."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request

from services.api.schemas import PayloadTooLarge

# The payload limit is 256 KiB; the rest of a job is small, so a body past this is too large whatever it is.
MAX_BODY_BYTES = 512 * 1024
LIST_LIMIT_DEFAULT = 100
LIST_LIMIT_MAX = 5000
M = TypeVar("M", bound=BaseModel)


def list_limit(raw: str | None) -> int:
    """Default 100, cap 5000; invalid or non-positive falls back to the default (reference contract)."""
    try:
        value = int(raw) if raw is not None else LIST_LIMIT_DEFAULT
    except ValueError:
        return LIST_LIMIT_DEFAULT
    return LIST_LIMIT_DEFAULT if value <= 0 else min(value, LIST_LIMIT_MAX)


def path_job_id(request: Request) -> str:
    """The `{job_id}` of the path; a malformed one is a 400 (job ids are 24 hex characters)."""
    job_id: str = request.path_params["job_id"]
    if len(job_id) != 24 or any(c not in "0123456789abcdefABCDEF" for c in job_id):
        raise HTTPException(400, f"malformed job id {job_id!r}: expected 24 hex characters")
    return job_id


async def json_object(request: Request, *, empty_ok: bool = False) -> dict[str, Any]:
    """The body as a JSON object (`{}` for an empty body when `empty_ok`)."""
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        raise HTTPException(413, f"request body is {len(body)} bytes; the limit is {MAX_BODY_BYTES}")
    if empty_ok and not body.strip():
        return {}
    try:
        data: Any = json.loads(body, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HTTPException(400, f"malformed JSON: {exc}") from None
    if not isinstance(data, dict):
        raise HTTPException(400, "the body must be a JSON object")
    return data


def validated(model: type[M], data: dict[str, Any]) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise invalid(exc) from None


def invalid(exc: ValidationError) -> HTTPException:
    """A validation error as the HTTP error it is: 413 for a payload over the limit, else 400."""
    if any(isinstance(e.get("ctx", {}).get("error"), PayloadTooLarge) for e in exc.errors()):
        return HTTPException(413, describe(exc))
    return HTTPException(400, describe(exc))


def describe(exc: ValidationError) -> str:
    parts = []
    for item in exc.errors(include_url=False):
        where = ".".join(str(p) for p in item["loc"])
        message = str(item["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)


def _reject_constant(name: str) -> Any:
    """NaN and Infinity are not JSON (RFC 8259) although Python's parser takes them."""
    raise ValueError(f"{name} is not valid JSON")
