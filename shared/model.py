"""The job document, its statuses and the transitions between them.

Wire and storage use the same camelCase field names. A job is either a one-off run (`scheduledAt`) or a
recurring template (`cron` or `interval`, optional `timezone`) that never runs itself and spawns one-off
runs keyed `<templateKey>-run-<planned fire time in unix ns>`.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import MISSING, dataclass, field, fields
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final

from jobsched.backoff import DEFAULT_BACKOFF, Backoff
from shared.rfc3339 import format_time as format_time
from shared.rfc3339 import parse_time as parse_time

DEFAULT_PRIORITY = 0
DEFAULT_MAX_ATTEMPTS = 3
MAX_PAYLOAD_BYTES = 256 * 1024


class Status(StrEnum):
    # A job that waits for its parents (dependsOn) to end: never claimed; it becomes pending once every parent
    # completed, or cancelled when one ended otherwise (its onParentFailure says which: shared/store/dependencies).
    WAITING = "waiting"
    PENDING = "pending"
    # A template's run waiting for the template's previous run to end (overlap buffer_one/buffer_all,
    # cancel_other): never claimed; the scheduler makes it pending once no other run of the template is active.
    BUFFERED = "buffered"
    QUEUED = "queued"
    CLAIMED = "claimed"
    RUNNING = "running"
    COMPLETED = "completed"
    DLQ = "dlq"
    CANCELLED = "cancelled"


TERMINAL = frozenset({Status.COMPLETED, Status.DLQ, Status.CANCELLED})
CANCELLABLE = frozenset({Status.WAITING, Status.PENDING, Status.QUEUED, Status.BUFFERED})
# A run of a template that is not final yet: what the overlap policies look at.
NOT_FINAL = frozenset(set(Status) - TERMINAL)


def effective_max_attempts(requested: int | None, type_default: int | None = None) -> int:
    """maxAttempts defaults, when missing or not positive, to the job type's registered default, else to 3 (the
    API contract, docs/api.md)."""
    if requested is not None and requested > 0:
        return requested
    return type_default if type_default is not None and type_default > 0 else DEFAULT_MAX_ATTEMPTS


def stored_backoff(type_backoff: Backoff) -> Backoff | None:
    """What a job keeps of its type's backoff when it is created (a type not known yet has the default): only one
    that differs from the default, which a job without one is retried with, so that the common job costs no more
    to store."""
    return None if type_backoff == DEFAULT_BACKOFF else type_backoff


def run_key(template_key: str, planned: datetime) -> str:
    """The deterministic idempotency key of a template's run for one planned fire time."""
    return f"{template_key}-run-{unix_ns(planned)}"


def unix_ns(moment: datetime) -> int:
    delta = moment.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def utc_now() -> datetime:
    """Now, truncated to milliseconds: the precision every store keeps, so round trips compare equal. Made from
    the whole milliseconds in one step (a float of milliseconds / 1000 rounds back to them exactly): an attempt
    asks several times, and now-then-replace made two datetimes (1.5 against 0.5 µs)."""
    return datetime.fromtimestamp(time.time_ns() // 1_000_000 / 1000, UTC)


@dataclass(frozen=True, kw_only=True)
class TemplatePolicy:
    """A template's schedule policy (see shared/schedules), as a client gives it and a template stores it.
    None on runs, and on templates older than these fields, which then behave as allow_all / latest with no
    bounds. Durations are kept as written (`10m`)."""

    overlap: str | None = None
    catchup: str | None = None
    catchupWindow: str | None = None
    startAt: datetime | None = None
    endAt: datetime | None = None
    remainingRuns: int | None = None
    jitter: str | None = None
    pauseOnFailure: bool | None = None
    paused: bool | None = None


_A_RUN_OPEN_OR_DONE: Final = frozenset({Status.CLAIMED, Status.RUNNING, Status.COMPLETED})
_LEASED: Final = frozenset({Status.QUEUED, Status.CLAIMED, Status.RUNNING})


@dataclass(frozen=True)
class Job(TemplatePolicy):
    """One job document. `id` is a 24-hex ObjectId string on every store."""

    id: str
    idempotencyKey: str
    tenantId: str
    jobType: str
    status: Status
    scheduledAt: datetime
    createdAt: datetime
    updatedAt: datetime
    payload: dict[str, Any] = field(default_factory=dict)
    priority: int = DEFAULT_PRIORITY
    attempts: int = 0
    maxAttempts: int = DEFAULT_MAX_ATTEMPTS
    # After a re-drive from the DLQ the fresh budget counts from here: dlq once attempts - attemptBase
    # reaches maxAttempts. `attempts` itself keeps counting every attempt ever made (attempt ids stay unique).
    attemptBase: int = 0
    # Its type's retry backoff when it was created (stored_backoff: None is the default), read by whoever closes
    # an attempt, so that the executor's result and the reaper's "lost" retry it alike. Internal: the API's job
    # body has no backoff.
    backoff: Backoff | None = field(default=None, metadata={"wire": False})
    timeoutSeconds: float | None = None
    cron: str | None = None
    interval: str | None = None
    timezone: str | None = None
    templateId: str | None = None
    pauseNote: str | None = None
    pausedAt: datetime | None = None
    resumedAt: datetime | None = None
    lastFiredAt: datetime | None = None  # the last planned fire time the template handled (spawned or not)
    plannedAt: datetime | None = None  # a run's planned fire time (its scheduledAt may carry jitter)
    # Set by DELETE (or a schedule's cancel_other) on a claimed or running job: its executor stops the handler,
    # and the attempt's end, unless it is a success that came first, makes the job cancelled.
    cancelRequested: bool | None = None
    # A template declared with the code (jobsched.schedules): where (`code`), and the digest of the declaration
    # it was last made from, which the executors compare with what their code declares.
    declaredBy: str | None = None
    declaration: str | None = None
    # What a type's concurrency_per_key limit counts by within the tenant (a customer id...); a template's runs
    # carry the template's.
    concurrencyKey: str | None = None
    # The jobs (ids, of the same tenant) this one waits for, and what a parent that ends dlq or cancelled does to it
    # ("cancel", the default, or "run"): shared/store/dependencies.py.
    dependsOn: list[str] | None = None
    onParentFailure: str | None = None
    # A step of a workflow (shared/workflows.py): the workflow's id and the step's name in it.
    workflowId: str | None = None
    step: str | None = None
    # A member of a batch, or a batch's callback (shared/batches.py): the batch's id.
    batchId: str | None = None
    callbackOf: str | None = None
    # The W3C trace context the job was created in (the API request's span, else the caller's header; a template's
    # runs keep the template's): an executor that traces parents its attempts on it (shared/tracing).
    traceparent: str | None = None
    # A job some waiting job depends on, since when (the last dependent's creation): its end looks its dependents
    # up, and the reaper settles them after a crash in between (MongoDB store). Internal.
    hasDependents: bool | None = field(default=None, metadata={"wire": False})
    dependentsAt: datetime | None = field(default=None, metadata={"wire": False})
    lastError: str | None = None
    # What the handler returned at its last attempt that kept a result (small JSON), and how many times it
    # snoozed (jobsched.Snooze: each one an attempt that did not spend the budget; None: never).
    result: Any = None
    snoozes: int | None = None
    # What the handler of the running (or last) attempt reported with ctx.report_progress: {"attempt": n,
    # "value": <small JSON>, "reportedAt": <time>}; cleared when an attempt starts.
    progress: Any = None
    claimedBy: str | None = None
    claimedAt: datetime | None = None
    queuedAt: datetime | None = None
    leaseExpiresAt: datetime | None = None
    # The scheduler's claim batch, passed on in the wake-up so an executor can start many of the batch's
    # jobs with one query (MongoDB store). Internal: never part of the API's job body.
    claimToken: str | None = field(default=None, metadata={"wire": False})
    # The executor's start batch (MongoDB store): the jobs one bulk write started, read back by it. Internal,
    # like claimToken.
    startToken: str | None = field(default=None, metadata={"wire": False})

    @property
    def is_template(self) -> bool:
        return self.cron is not None or self.interval is not None

    @property
    def next_attempt(self) -> int:
        """The number of the attempt that would run next (1-based); its record id is `<id>:<n>`."""
        return self.attempts + 1

    @property
    def retry_backoff(self) -> Backoff:
        """The backoff a failed attempt of this job is retried after."""
        return self.backoff if self.backoff is not None else DEFAULT_BACKOFF

    def budget_spent_after(self, attempts: int) -> bool:
        return attempts - self.attemptBase >= self.maxAttempts

    @property
    def runs(self) -> int:
        """How many attempts started (each has its record in /executions): `attempts` counts the ones that ended
        without completing the job (failed, timed out, lost, snoozed, cancelled), so the one open now, or the one
        that completed it, is one more."""
        return self.attempts + (1 if self.status in _A_RUN_OPEN_OR_DONE else 0)

    def evolve(self, **changes: Any) -> Job:
        return job_from_fields({**self.__dict__, **changes})

    def to_wire(self) -> dict[str, Any]:
        """The JSON body the API returns: RFC 3339 UTC times, optional fields only when set; `runs` beside
        `attempts` (a run's only), and a lease only while it holds (a finished job's would read as live)."""
        wire = wire_fields(self)
        if not self.is_template:
            wire["runs"] = self.runs
        if self.status not in _LEASED:
            wire.pop("leaseExpiresAt", None)
        return wire


class Outcome(StrEnum):
    """How an attempt ended (the execution record's `outcome`)."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMEOUT = "timeout"
    LOST = "lost"  # closed by the reaper: the executor died or hung
    CANCELLED = "cancelled"  # the job was cancelled before this attempt could start, while it ran, or by its handler
    SNOOZED = "snoozed"  # the handler asked to run again later (jobsched.Snooze): not a spent attempt


@dataclass(frozen=True)
class Execution:
    """One attempt of a job: `<jobId>:<attempt>`, its record once its outcome is decided (the attempt open now: its
    job's fields, outcome `running`)."""

    id: str
    jobId: str
    attempt: int
    outcome: Outcome
    worker: str | None = None
    startedAt: datetime | None = None
    finishedAt: datetime | None = None
    durationMs: float | None = None
    error: str | None = None
    traceback: str | None = None  # a handler that raised: where, as Python prints it (bounded)
    result: Any = None  # what the handler returned (small JSON), or an HTTP job's response summary

    def to_wire(self) -> dict[str, Any]:
        return wire_fields(self)


def wire_fields(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in sorted(fields(obj), key=lambda f: f.name in _POLICY_FIELDS):  # the job's own fields first
        value = getattr(obj, f.name)
        if value is None or f.metadata.get("wire") is False:
            continue
        if isinstance(value, datetime):
            value = format_time(value)
        elif isinstance(value, StrEnum):
            value = value.value
        out[f.name] = value
    return out


JOB_FIELDS = frozenset(f.name for f in fields(Job))
EXECUTION_FIELDS = frozenset(f.name for f in fields(Execution))
_JOB_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(Job) if f.default is not MISSING}
_JOB_FACTORIES = {f.name: f.default_factory for f in fields(Job) if f.default_factory is not MISSING}
_JOB_REQUIRED = JOB_FIELDS - _JOB_DEFAULTS.keys() - _JOB_FACTORIES.keys()


def job_from_fields(values: dict[str, Any]) -> Job:
    """A Job from its fields' values, each already of its type (a row the store converted, a copy of another job
    with some fields changed), without the dataclass constructor: a frozen dataclass sets each of its ~40
    fields through object.__setattr__, and a store builds several jobs per attempt. Fields left out take their
    defaults; `values` is taken over, not copied."""
    if values.keys() != JOB_FIELDS:
        if unknown := values.keys() - JOB_FIELDS:
            raise TypeError(f"Job has no fields {sorted(unknown)}")
        if missing := _JOB_REQUIRED - values.keys():
            raise TypeError(f"Job needs the fields {sorted(missing)}")
        values = {**_JOB_DEFAULTS, **{n: make() for n, make in _JOB_FACTORIES.items() if n not in values}, **values}
    job = object.__new__(Job)
    job.__dict__.update(values)
    return job


def missing_job_defaults(names: Collection[str]) -> dict[str, Any] | None:
    """The defaults of the Job fields that values with these `names` lack, when every one of those has a plain
    default and no name is unknown (what job_from_fields would fill in); None otherwise. Lets a store that builds
    many jobs from rows of one shape check the shape once."""
    if not JOB_FIELDS.issuperset(names):
        return None
    missing = JOB_FIELDS.difference(names)
    if not missing.issubset(_JOB_DEFAULTS):
        return None
    return {name: _JOB_DEFAULTS[name] for name in missing}


_POLICY_FIELDS = frozenset(f.name for f in fields(TemplatePolicy))
