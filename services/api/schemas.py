"""Request and response models of the API: validation and the OpenAPI document come from these."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from shared.cron import Schedule
from shared.model import MAX_PAYLOAD_BYTES, Status, effective_max_attempts
from shared.store.base import NewJob

MAX_TIMEOUT_S = 24 * 3600


class PayloadTooLarge(ValueError):
    """A payload over MAX_PAYLOAD_BYTES: HTTP 413, not 400."""


def _rfc3339(value: Any) -> Any:
    """Accept only RFC 3339 strings with an explicit offset (or Z); pydantic alone also takes numbers."""
    if not isinstance(value, str):
        raise ValueError("must be an RFC 3339 string, e.g. 2026-09-29T18:00:00Z")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an RFC 3339 time, e.g. 2026-09-29T18:00:00Z") from None
    if "T" not in value.upper() or parsed.tzinfo is None:
        raise ValueError(f"{value!r} is not an RFC 3339 time: it needs a date, a time and an offset (Z or +hh:mm)")
    return parsed.astimezone(UTC)


Rfc3339 = Annotated[datetime, BeforeValidator(_rfc3339)]


class JobRequest(BaseModel):
    """POST /jobs: a one-off job (scheduledAt) or a recurring template (cron or interval)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    idempotencyKey: str = Field(min_length=1, max_length=512, description="Unique within the tenant; duplicate → 409")
    tenantId: str = Field(min_length=1, max_length=256, description="AUTH=required: the key's when omitted")
    jobType: str = Field(
        min_length=1,
        max_length=256,
        description="A type an executor announced (GET /job-types), one listed in JOB_TYPES, or a built-in",
    )
    scheduledAt: Rfc3339 | None = Field(
        default=None, description="RFC 3339; when the job becomes due. Required unless cron or interval is set"
    )
    payload: dict[str, Any] = Field(default_factory=dict, description="JSON object passed to the handler")
    priority: int = Field(default=0, ge=-(2**31), le=2**31 - 1, description="Higher runs first among due jobs")
    maxAttempts: int | None = Field(
        default=None, le=1000, description="Total tries before the DLQ; 3 when missing or not positive"
    )
    timeoutSeconds: float | None = Field(
        default=None, gt=0, le=MAX_TIMEOUT_S, description="Per-attempt handler timeout; default from config"
    )
    cron: str | None = Field(
        default=None, description="5-field cron, 6 fields with seconds first, or a macro such as @hourly"
    )
    interval: str | None = Field(default=None, description="Fixed interval such as '30s', '5m' or '1h30m'")
    timezone: str | None = Field(default=None, description="IANA zone the cron is read in (default UTC)")

    @field_validator("payload")
    @classmethod
    def _small_enough(cls, value: dict[str, Any]) -> dict[str, Any]:
        size = len(json.dumps(value, separators=(",", ":")).encode())
        if size > MAX_PAYLOAD_BYTES:
            raise PayloadTooLarge(f"payload is {size} bytes; the limit is {MAX_PAYLOAD_BYTES}")
        return value

    @model_validator(mode="after")
    def _one_shape(self) -> JobRequest:
        recurring = self.cron is not None or self.interval is not None
        if recurring and self.scheduledAt is not None:
            raise ValueError("give scheduledAt for a one-off job or cron/interval for a recurring one, not both")
        if not recurring and self.scheduledAt is None:
            raise ValueError("scheduledAt is required unless cron or interval is set")
        if self.timezone is not None and self.cron is None:
            raise ValueError("timezone applies only to cron schedules")
        return self

    def schedule(self, now: datetime) -> Schedule | None:
        if self.cron is None and self.interval is None:
            return None
        return Schedule.parse(cron=self.cron, interval=self.interval, timezone=self.timezone, anchor=now)

    def to_new_job(self, now: datetime, default_max_attempts: int | None = None) -> NewJob:
        """Raises ScheduleError for an invalid cron/interval/timezone. `default_max_attempts`: the job type's,
        for a request without a positive maxAttempts (3 when the type sets none)."""
        schedule = self.schedule(now)
        scheduled_at = schedule.next_after(now) if schedule else self.scheduledAt
        assert scheduled_at is not None
        return NewJob(
            idempotencyKey=self.idempotencyKey,
            tenantId=self.tenantId,
            jobType=self.jobType,
            scheduledAt=scheduled_at,
            payload=self.payload,
            priority=self.priority,
            maxAttempts=effective_max_attempts(self.maxAttempts, default_max_attempts),
            timeoutSeconds=self.timeoutSeconds,
            cron=self.cron,
            interval=self.interval,
            timezone=(self.timezone or "UTC") if self.cron else None,
            createdAt=now,
        )


class ErrorBody(BaseModel):
    error: str


STATUS_VALUES = [s.value for s in Status]
