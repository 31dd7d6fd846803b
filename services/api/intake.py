"""From a create request's JSON value to the job to store, or the client's error (ApiError).

Validation includes parsing the schedule (cron search, time zone files), which can take milliseconds: callers
run it in the thread pool.
"""

from __future__ import annotations

from typing import Any

from services.api.bodies import validated
from services.api.errors import ApiError
from services.api.schemas import JobRequest
from shared.cron import ScheduleError
from shared.model import utc_now
from shared.store.base import NewJob


def new_job(data: Any) -> NewJob:
    if not isinstance(data, dict):
        raise ApiError(400, "the body must be a JSON object")
    try:
        return validated(JobRequest, data).to_new_job(utc_now())
    except ScheduleError as exc:
        raise ApiError(400, str(exc)) from None
