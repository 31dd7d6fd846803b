"""Request and response models of a job as the API takes it: validation and the OpenAPI document come from these.
The executors check the schedules declared in the code with them too (services/executor/declared_schedules.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from jobsched.type_defaults import BUILTIN_DEFAULTS, TypeDefaults
from shared import jsonsafe, tracing
from shared.cron import MAX_CRON_LENGTH, MAX_INTERVAL_LENGTH, MAX_TIMEZONE_LENGTH
from shared.http_jobs.request import JOB_TYPE as HTTP_JOB_TYPE
from shared.http_jobs.request import HttpRequest
from shared.jsonsafe import check_field_names, encoded_size
from shared.model import MAX_PAYLOAD_BYTES, Status, TemplatePolicy, effective_max_attempts, stored_backoff
from shared.rfc3339 import EXAMPLE, parse_time
from shared.schedules.spec import NoFireTime, TemplateSpec
from shared.schedules.workflow_runs import WORKFLOW_SCHEDULE
from shared.store.base import NewJob
from shared.store.dependencies import MAX_PARENTS

MAX_TIMEOUT_S = 24 * 3600
MAX_JOB_TYPE_LENGTH = 128
MAX_CONCURRENCY_KEY_LENGTH = 256


class PayloadTooLarge(ValueError):
    """A payload over MAX_PAYLOAD_BYTES: HTTP 413, not 400."""


def _rfc3339(value: Any) -> Any:
    """Accept only RFC 3339 strings with an explicit offset (or Z); pydantic alone also takes numbers."""
    if not isinstance(value, str):
        raise ValueError(f"must be an RFC 3339 string, e.g. {EXAMPLE}")
    return parse_time(value)


Rfc3339 = Annotated[datetime, BeforeValidator(_rfc3339)]


def check_size(value: dict[str, Any]) -> dict[str, Any]:
    """A payload a store can keep as it came: field names MongoDB accepts and at most MAX_PAYLOAD_BYTES of
    UTF-8 JSON (numbers and strings were checked when the body was parsed)."""
    check_field_names(value, "payload")
    size = encoded_size(value)
    if size > MAX_PAYLOAD_BYTES:
        raise PayloadTooLarge(f"payload is {size} bytes of UTF-8 JSON; the limit is {MAX_PAYLOAD_BYTES}")
    return value


JobPayload = Annotated[dict[str, Any], AfterValidator(check_size)]


def check_payload(job_type: str, payload: dict[str, Any]) -> None:
    """What a job's type asks of its payload, checked wherever a payload is written: POST /jobs, its batch,
    schedules applied from a file or declared in the code (all through JobRequest), PATCH of a job or a template
    and trigger (services/api/http/request_bodies.py). A job that could never run as asked is refused there (a
    ValueError naming the field) rather than stored and dead-lettered by its executor. Only the built-in types ask
    anything: `http` a request it may send (shared/http_jobs/request.py), `jobsched.workflow` (a workflow schedule,
    whose steps are fixed when POST /workflows makes it) that nothing writes it but that; other types' handlers judge
    their own."""
    if job_type == HTTP_JOB_TYPE:
        HttpRequest.from_payload(payload)
    elif job_type == WORKFLOW_SCHEDULE:  # its payload is a workflow's steps, validated as POST /workflows validates
        raise ValueError(
            "jobType jobsched.workflow is a workflow schedule's, whose steps are fixed when POST /workflows makes it"
            " (with cron or interval); its runs take no payload"
        )


def _job_id(value: str) -> str:
    """A job's id as every store keeps it: 24 hex digits, lower case."""
    if not (len(value) == 24 and all(c in "0123456789abcdefABCDEF" for c in value)):
        raise ValueError("must be a job id (24 hex digits)")
    return value.lower()


JobId = Annotated[str, AfterValidator(_job_id)]
ParentFailureName = Literal["cancel", "run"]
OverlapName = Literal["allow_all", "skip", "buffer_one", "buffer_all", "cancel_other"]
CatchupName = Literal["latest", "all", "none"]


# A schedule's fields, as POST /jobs takes them for a template and POST /workflows for a workflow schedule.
Cron = Annotated[
    str | None,
    Field(
        max_length=MAX_CRON_LENGTH, description="5-field cron, 6 fields with seconds first, or a macro such as @hourly"
    ),
]
Interval = Annotated[
    str | None, Field(max_length=MAX_INTERVAL_LENGTH, description="Fixed interval such as '30s', '5m' or '1h30m'")
]
Timezone = Annotated[
    str | None, Field(max_length=MAX_TIMEZONE_LENGTH, description="IANA zone the cron is read in (default UTC)")
]


class SchedulePolicy(BaseModel):
    """A template's policy fields (POST /jobs with cron or interval, PATCH of a template)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    overlap: OverlapName | None = Field(
        default=None, description="When a fire time comes while an earlier run is not final (default allow_all)"
    )
    catchup: CatchupName | None = Field(default=None, description="Which missed fire times run (default latest)")
    catchupWindow: str | None = Field(
        default=None,
        max_length=MAX_INTERVAL_LENGTH,
        description="Duration: missed times older than this never run (default unlimited)",
    )
    startAt: Rfc3339 | None = Field(default=None, description="No fire time before this (an interval counts from it)")
    endAt: Rfc3339 | None = Field(default=None, description="No fire time at or after this; then the template ends")
    remainingRuns: int | None = Field(default=None, ge=0, le=2**31 - 1, description="Runs left; 0 ends the template")
    jitter: str | None = Field(
        default=None, max_length=MAX_INTERVAL_LENGTH, description="Duration: each run starts up to this much later"
    )
    pauseOnFailure: bool | None = Field(default=None, description="A run ending in the DLQ pauses the template")

    def policy_fields(self) -> dict[str, Any]:
        """The policy fields the request set, as stored on the template."""
        return {name: getattr(self, name) for name in SchedulePolicy.model_fields if name in self.model_fields_set}


class JobRequest(SchedulePolicy):
    """POST /jobs: a one-off job (scheduledAt) or a recurring template (cron or interval)."""

    idempotencyKey: str = Field(min_length=1, max_length=512, description="Unique within the tenant; duplicate → 409")
    tenantId: str = Field(min_length=1, max_length=256, description="AUTH=required: the key's when omitted")
    jobType: str = Field(
        min_length=1,
        max_length=MAX_JOB_TYPE_LENGTH,
        description="A type an executor announced (GET /job-types), one listed in JOB_TYPES, or a built-in",
    )
    scheduledAt: Rfc3339 | None = Field(
        default=None, description="RFC 3339; when the job becomes due. Required unless cron or interval is set"
    )
    payload: JobPayload = Field(default_factory=dict, description="JSON object passed to the handler")
    priority: int = Field(default=0, ge=-(2**31), le=2**31 - 1, description="Higher runs first among due jobs")
    maxAttempts: int | None = Field(
        default=None, le=1000, description="Total tries before the DLQ; 3 when missing or not positive"
    )
    timeoutSeconds: float | None = Field(
        default=None, gt=0, le=MAX_TIMEOUT_S, description="Per-attempt handler timeout; default from config"
    )
    cron: Cron = None
    interval: Interval = None
    timezone: Timezone = None
    concurrencyKey: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_CONCURRENCY_KEY_LENGTH,
        description="What the type's concurrencyPerKey limit counts by within the tenant (a customer id...)",
    )

    dependsOn: list[JobId] | None = Field(
        default=None,
        max_length=MAX_PARENTS,
        description="Ids of jobs of the tenant this one waits for: it is `waiting` until every one has completed",
    )
    dependsOnKeys: list[Annotated[str, Field(min_length=1, max_length=512)]] | None = Field(
        default=None,
        max_length=MAX_PARENTS,
        description="POST /jobs/batch: idempotency keys of jobs of the same batch this one waits for, as dependsOn",
    )
    onParentFailure: ParentFailureName | None = Field(
        default=None,
        description="What a parent ending dlq or cancelled does: cancel this job (default) or run it anyway",
    )

    @model_validator(mode="after")
    def _one_shape(self) -> JobRequest:
        recurring = self.cron is not None or self.interval is not None
        if recurring and self.scheduledAt is not None:
            raise ValueError("give scheduledAt for a one-off job or cron/interval for a recurring one, not both")
        if not recurring and self.scheduledAt is None:
            raise ValueError("scheduledAt is required unless cron or interval is set")
        if self.timezone is not None and self.cron is None:
            raise ValueError("timezone applies only to cron schedules")
        parents = [*(self.dependsOn or ()), *(self.dependsOnKeys or ())]
        if recurring and (self.dependsOn or self.dependsOnKeys or self.onParentFailure is not None):
            raise ValueError("dependsOn and onParentFailure apply only to one-off jobs (scheduledAt)")
        if self.onParentFailure is not None and not parents:
            raise ValueError("onParentFailure applies only to a job with dependsOn")
        if len(set(self.dependsOn or ())) != len(self.dependsOn or ()):
            raise ValueError("dependsOn names a job twice")
        if len(set(self.dependsOnKeys or ())) != len(self.dependsOnKeys or ()):
            raise ValueError("dependsOnKeys names a job twice")
        if len(parents) > MAX_PARENTS:
            raise ValueError(
                f"dependsOn and dependsOnKeys name {len(parents)} jobs; a job waits for {MAX_PARENTS} at most"
            )
        if self.idempotencyKey in (self.dependsOnKeys or ()):
            raise ValueError("dependsOnKeys: a job cannot wait for itself")
        policy = sorted(self.policy_fields())
        if policy and not recurring:
            raise ValueError(f"{', '.join(policy)} apply only to recurring templates (cron or interval)")
        check_payload(self.jobType, self.payload)
        return self

    def to_new_job(self, now: datetime, type_defaults: TypeDefaults | None = None) -> NewJob:
        """Raises ScheduleError for an invalid cron/interval/timezone or policy, or a schedule that never fires.
        `type_defaults`: the job type's registered defaults (None: a type not known yet): its attempt budget for a
        request without a positive maxAttempts (3 when the type sets none), and its backoff, which the job keeps."""
        scheduled_at = self.scheduledAt
        template: dict[str, Any] = {}
        if self.cron is not None or self.interval is not None:
            policy = TemplatePolicy(**self.policy_fields())
            spec = TemplateSpec.build(
                cron=self.cron, interval=self.interval, timezone=self.timezone, created_at=now, policy=policy
            )
            scheduled_at = spec.next_fire(now)
            if scheduled_at is None:
                raise NoFireTime("the schedule has no fire time inside its bounds (startAt, endAt, remainingRuns)")
            template = {
                **self.policy_fields(),
                "overlap": spec.overlap.value,
                "catchup": spec.catchup.value,
                "paused": False,
            }
        assert scheduled_at is not None
        defaults = type_defaults or BUILTIN_DEFAULTS
        return NewJob(
            idempotencyKey=self.idempotencyKey,
            tenantId=self.tenantId,
            jobType=self.jobType,
            scheduledAt=scheduled_at,
            payload=self.payload,
            priority=self.priority,
            maxAttempts=effective_max_attempts(self.maxAttempts, defaults.max_attempts),
            backoff=stored_backoff(defaults.backoff),
            timeoutSeconds=self.timeoutSeconds,
            cron=self.cron,
            interval=self.interval,
            timezone=(self.timezone or "UTC") if self.cron else None,
            concurrencyKey=self.concurrencyKey,
            dependsOn=self.dependsOn or None,
            onParentFailure=self.onParentFailure,
            createdAt=now,
            traceparent=tracing.request_traceparent(),
            **template,
        )


class ErrorBody(BaseModel):
    error: str


STATUS_VALUES = [s.value for s in Status]


def describe(exc: ValidationError) -> str:
    """pydantic's errors as one line; field names come from the client, so they are shortened."""
    parts = []
    for item in exc.errors(include_url=False, include_input=False):
        where = ".".join(jsonsafe.shorten(str(p), 32) for p in item["loc"])
        message = jsonsafe.shorten(str(item["msg"]).removeprefix("Value error, "), 300)
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts[:10])
