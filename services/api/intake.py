"""From a create request's JSON value to the job to store, or the client's error (ApiError).

Validation includes parsing the schedule (cron search, time zone files), which can take milliseconds: callers
run it in the thread pool.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from services.api.errors import ApiError
from services.api.schemas import JobRequest, PayloadTooLarge
from shared.cron import ScheduleError
from shared.jsonsafe import shorten
from shared.model import utc_now
from shared.store.base import NewJob


def new_job(data: Any) -> NewJob:
    if not isinstance(data, dict):
        raise ApiError(400, "the body must be a JSON object")
    try:
        return JobRequest.model_validate(data).to_new_job(utc_now())
    except ValidationError as exc:
        too_large = any(isinstance(e.get("ctx", {}).get("error"), PayloadTooLarge) for e in exc.errors())
        raise ApiError(413 if too_large else 400, describe(exc)) from None
    except ScheduleError as exc:
        raise ApiError(400, str(exc)) from None


def describe(exc: ValidationError) -> str:
    """pydantic's errors as one line; field names come from the client, so they are shortened."""
    parts = []
    for item in exc.errors(include_url=False, include_input=False):
        where = ".".join(shorten(str(p), 32) for p in item["loc"])
        message = shorten(str(item["msg"]).removeprefix("Value error, "), 300)
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts[:10])
