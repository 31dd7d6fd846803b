"""Schedules declared with the code: a recurring template that exists because a handler module says so.

    @jobs.handler("send-digest", schedule=jobsched.Schedule("weekly-digest", cron="0 9 * * MON",
                                                            timezone="Europe/Berlin", payload={"list": "all"}))
    def send_digest(payload: dict, ctx: jobsched.HandlerContext) -> None: ...

The executors that run the handler (and `jobsched dev`) keep the store in step with the declarations when they
start and while they run: a missing schedule is created, a changed one updated in place (its last fire time kept),
and one the code no longer declares is reported, or paused or cancelled as DECLARED_SCHEDULES_REMOVED says. A
schedule is named (`name`, its idempotency key within its tenant); changing its name makes another schedule.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

# Where a template came from (its `declaredBy`): a handler module, or a file applied with `jobsched schedules apply`.
# Templates made through the API otherwise have none.
DECLARED_IN_CODE = "code"
DECLARED_IN_FILE = "file"
NAME_MAX = 256  # an idempotency key's length limit


@dataclass(frozen=True)
class Schedule:
    """A recurring template declared with a job type: `cron` (with `timezone`, default UTC) or `interval`
    (`"15m"`), the payload its runs get (a dict, or the handler's payload type), and what a template made
    through the API takes: priority, max_attempts, timeout (seconds or a timedelta), and the schedule policy
    (overlap, catchup, catchup_window, jitter, start_at, end_at, pause_on_failure; docs/schedules.md). It belongs
    to the tenant DECLARED_SCHEDULES_TENANT names (a file's schedules: to the tenant applying them)."""

    name: str
    cron: str | None = None
    interval: str | None = None
    timezone: str | None = None
    payload: Any = None
    priority: int | None = None
    max_attempts: int | None = None
    timeout: float | timedelta | None = None
    overlap: str | None = None
    catchup: str | None = None
    catchup_window: str | None = None
    jitter: str | None = None
    start_at: datetime | None = None
    end_at: datetime | None = None
    pause_on_failure: bool | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip() or len(self.name) > NAME_MAX:
            raise ValueError(f"a schedule needs a name (its key: 1 to {NAME_MAX} characters), not {self.name!r}")
        if (self.cron is None) == (self.interval is None):
            raise ValueError(f"schedule {self.name!r}: give cron or interval, one of them")
        if self.timezone is not None and self.cron is None:
            raise ValueError(f"schedule {self.name!r}: timezone applies only to cron schedules")
        for bound in (self.start_at, self.end_at):
            if bound is not None and (not isinstance(bound, datetime) or bound.tzinfo is None):
                raise ValueError(f"schedule {self.name!r}: start_at and end_at are datetimes with a timezone")

    def body(self, job_type: str, tenant_id: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The template as POST /jobs takes it (camelCase, only what is set) for `tenant_id`, `payload` already
        encoded."""
        timeout = self.timeout.total_seconds() if isinstance(self.timeout, timedelta) else self.timeout
        fields: dict[str, Any] = {
            "idempotencyKey": self.name,
            "tenantId": tenant_id,
            "jobType": job_type,
            "cron": self.cron,
            "interval": self.interval,
            "timezone": self.timezone,
            "payload": payload,
            "priority": self.priority,
            "maxAttempts": self.max_attempts,
            "timeoutSeconds": timeout,
            "overlap": self.overlap,
            "catchup": self.catchup,
            "catchupWindow": self.catchup_window,
            "jitter": self.jitter,
            "startAt": _time(self.start_at),
            "endAt": _time(self.end_at),
            "pauseOnFailure": self.pause_on_failure,
        }
        return {name: value for name, value in fields.items() if value is not None}


def digest(body: dict[str, Any]) -> str:
    """What a declared template stores as its `declaration`: equal for equal declarations, whatever their order."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:32]


def digest_of_all(bodies: Iterable[dict[str, Any]]) -> str:
    """One job type's declarations as a whole (what its executors announce): equal only for the same set."""
    return hashlib.sha256(",".join(sorted(digest(b) for b in bodies)).encode()).hexdigest()[:32]


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()
