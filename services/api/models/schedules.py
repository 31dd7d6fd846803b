"""The request bodies of the schedule endpoints (routes/schedules.py), and what a PATCH changes."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from jobsched.type_defaults import BUILTIN_DEFAULTS, TypeDefaults
from services.api.http.errors import ApiError
from shared.cron import MAX_CRON_LENGTH, MAX_INTERVAL_LENGTH, MAX_TIMEZONE_LENGTH
from shared.job_requests import MAX_TIMEOUT_S, JobPayload, OverlapName, Rfc3339, SchedulePolicy
from shared.model import Job, effective_max_attempts, stored_backoff
from shared.store import transitions


class PauseRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    note: str | None = Field(default=None, max_length=2000, description="Why; shown as the template's pauseNote")


MAX_APPLIED_SCHEDULES = 1000


class ApplyRequest(BaseModel):
    """POST /schedules/apply: every schedule of a tenant declared in a file; each item is a POST /jobs body of a
    template (its tenantId, if any, the request's)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    tenantId: str | None = Field(default=None, min_length=1, max_length=256, description="AUTH=required: the key's")
    schedules: list[dict[str, Any]] = Field(
        max_length=MAX_APPLIED_SCHEDULES, description="The templates the file declares (empty: none)"
    )
    removed: Literal["keep", "pause", "cancel"] = Field(
        default="keep", description="What happens to a template applied from a file earlier that this one drops"
    )
    dryRun: bool = Field(default=False, description="Only say what applying would do")


class EmptyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class TriggerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    payload: JobPayload | None = Field(default=None, description="This run's payload (default: the template's)")
    overlap: OverlapName | None = Field(default=None, description="Overrides the template's overlap policy")
    idempotencyKey: str | None = Field(
        default=None, min_length=1, max_length=256, description="A retried request with the same key gets the same run"
    )


class BackfillRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    start: Rfc3339 = Field(alias="from", description="First fire time included")
    end: Rfc3339 = Field(alias="to", description="Fire times before this")
    overlap: OverlapName | None = Field(default=None, description="Overrides the template's overlap policy")


class TemplatePatch(SchedulePolicy):
    """PATCH of a template: the schedule, what its runs copy, and the policy; null clears a bound."""

    cron: str | None = Field(default=None, max_length=MAX_CRON_LENGTH)
    interval: str | None = Field(default=None, max_length=MAX_INTERVAL_LENGTH)
    timezone: str | None = Field(default=None, max_length=MAX_TIMEZONE_LENGTH)
    payload: JobPayload | None = None
    priority: int | None = Field(default=None, ge=-(2**31), le=2**31 - 1)
    maxAttempts: int | None = Field(default=None, le=1000)
    timeoutSeconds: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S)

    @model_validator(mode="after")
    def _one_schedule(self) -> TemplatePatch:
        if self.cron is not None and self.interval is not None:
            raise ValueError("give at most one of cron and interval")
        return self

    def changes(self, template: Job, type_defaults: TypeDefaults | None = None) -> dict[str, Any]:
        """The stored fields this patch sets (UNSET: removed); `type_defaults`: the job type's registered defaults
        (None: a type not known now), whose budget is what a null maxAttempts means (as on creation). A patch
        that sets maxAttempts decides the template's retry rule anew, as its creation did: its backoff becomes
        the type's of now too (kept otherwise)."""
        given = {name: getattr(self, name) for name in self.model_fields_set}
        changes: dict[str, Any] = {}
        for name, value in given.items():
            if value is None and name in ("overlap", "catchup"):
                value = "allow_all" if name == "overlap" else "latest"
            elif value is None and name in ("cron", "interval", "payload", "priority"):
                raise ApiError(400, f"{name} cannot be null")
            changes[name] = transitions.UNSET if value is None else value
        if "maxAttempts" in given:  # null or not positive: the default, as on creation
            defaults = type_defaults or BUILTIN_DEFAULTS
            changes["maxAttempts"] = effective_max_attempts(given["maxAttempts"], defaults.max_attempts)
            changes["backoff"] = stored_backoff(defaults.backoff) or transitions.UNSET
        if self.cron is not None:  # an interval template becomes a cron one
            changes["interval"] = transitions.UNSET
            changes.setdefault("timezone", template.timezone or "UTC")
        if self.interval is not None:
            if self.timezone is not None:
                raise ApiError(400, "timezone applies only to cron schedules")
            changes.update(cron=transitions.UNSET, timezone=transitions.UNSET)
        if self.timezone is not None and self.interval is None and not (self.cron or template.cron):
            raise ApiError(400, "timezone applies only to cron schedules")
        return changes


class RunPatch(BaseModel):
    """PATCH of a pending one-off job."""

    model_config = ConfigDict(extra="forbid", strict=True)
    scheduledAt: Rfc3339 | None = None
    priority: int | None = Field(default=None, ge=-(2**31), le=2**31 - 1)
    payload: JobPayload | None = None

    def changes(self, now: datetime) -> dict[str, Any]:
        changes: dict[str, Any] = {name: getattr(self, name) for name in self.model_fields_set}
        if any(value is None for value in changes.values()):
            raise ApiError(400, f"{', '.join(k for k, v in changes.items() if v is None)} cannot be null")
        if "scheduledAt" in changes:
            changes["scheduledAt"] = transitions.stored_time(changes["scheduledAt"])
        return {**changes, "updatedAt": now}
