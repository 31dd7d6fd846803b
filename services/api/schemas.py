"""Request and response models of the API: validation and the OpenAPI document come from these."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from shared.cron import MAX_CRON_LENGTH, MAX_INTERVAL_LENGTH, MAX_TIMEZONE_LENGTH, Schedule
from shared.handlers import registry
from shared.jsonsafe import check_field_names, encoded_size, shorten
from shared.model import MAX_PAYLOAD_BYTES, Status, effective_max_attempts
from shared.rfc3339 import EXAMPLE, parse_time
from shared.store.base import NewJob

MAX_TIMEOUT_S = 24 * 3600
MAX_JOB_TYPE_LENGTH = 128


class PayloadTooLarge(ValueError):
    """A payload over MAX_PAYLOAD_BYTES: HTTP 413, not 400."""


def _rfc3339(value: Any) -> Any:
    """Accept only RFC 3339 strings with an explicit offset (or Z); pydantic alone also takes numbers."""
    if not isinstance(value, str):
        raise ValueError(f"must be an RFC 3339 string, e.g. {EXAMPLE}")
    return parse_time(value)


Rfc3339 = Annotated[datetime, BeforeValidator(_rfc3339)]


class JobRequest(BaseModel):
    """POST /jobs: a one-off job (scheduledAt) or a recurring template (cron or interval)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    idempotencyKey: str = Field(min_length=1, max_length=512, description="Unique within the tenant; duplicate → 409")
    tenantId: str = Field(min_length=1, max_length=256, description="AUTH=required: the key's when omitted")
    jobType: str = Field(
        max_length=MAX_JOB_TYPE_LENGTH, description="A registered handler: " + ", ".join(registry.names())
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
        default=None,
        max_length=MAX_CRON_LENGTH,
        description="5-field cron, 6 fields with seconds first, or a macro such as @hourly",
    )
    interval: str | None = Field(
        default=None, max_length=MAX_INTERVAL_LENGTH, description="Fixed interval such as '30s', '5m' or '1h30m'"
    )
    timezone: str | None = Field(
        default=None, max_length=MAX_TIMEZONE_LENGTH, description="IANA zone the cron is read in (default UTC)"
    )

    @field_validator("jobType")
    @classmethod
    def _registered(cls, value: str) -> str:
        if value not in registry:
            raise ValueError(f"unknown jobType {shorten(value)!r}; known types: {', '.join(registry.names())}")
        return value

    @field_validator("payload")
    @classmethod
    def _small_enough(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_field_names(value, "payload")
        size = encoded_size(value)
        if size > MAX_PAYLOAD_BYTES:
            raise PayloadTooLarge(f"payload is {size} bytes of UTF-8 JSON; the limit is {MAX_PAYLOAD_BYTES}")
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

    def to_new_job(self, now: datetime) -> NewJob:
        """Raises ScheduleError for an invalid cron/interval/timezone."""
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
            maxAttempts=effective_max_attempts(self.maxAttempts),
            timeoutSeconds=self.timeoutSeconds,
            cron=self.cron,
            interval=self.interval,
            timezone=(self.timezone or "UTC") if self.cron else None,
            createdAt=now,
        )


class ErrorBody(BaseModel):
    error: str


STATUS_VALUES = [s.value for s in Status]
