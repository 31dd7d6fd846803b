"""From a create request's JSON value to the job to store, or the client's error (ApiError).

Validation includes parsing the schedule (cron search, time zone files), which can take milliseconds: callers
run it in the thread pool.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from services.api.bodies import validated
from services.api.errors import ApiError
from services.api.schemas import JobRequest
from shared.cron import ScheduleError
from shared.model import utc_now
from shared.store.base import NewJob


def new_job(data: Any, type_max_attempts: Callable[[str], int | None] = lambda _: None) -> NewJob:
    """`type_max_attempts`: a job type's default attempt budget, for a request that gives none."""
    if not isinstance(data, dict):
        raise ApiError(400, "the body must be a JSON object")
    try:
        request = validated(JobRequest, data)
        return request.to_new_job(utc_now(), type_max_attempts(request.jobType))
    except ScheduleError as exc:
        raise ApiError(400, str(exc)) from None
