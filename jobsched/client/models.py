"""What the API returns, as typed objects; every one keeps the raw JSON (`raw`) for fields added later."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from jobsched.limits import Limits

TERMINAL_STATUSES = frozenset({"completed", "dlq", "cancelled"})
# A workflow's statuses once every step's job has ended (it is "creating" or "running" before).
WORKFLOW_FINAL_STATUSES = frozenset({"succeeded", "failed", "cancelled", "expired"})


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@dataclass(frozen=True)
class Progress:
    """What the handler of a job's running (or last) attempt reported with ctx.report_progress."""

    attempt: int
    value: Any
    reported_at: datetime | None

    @classmethod
    def from_wire(cls, body: Any) -> Progress | None:
        if not isinstance(body, dict):
            return None
        return cls(int(body.get("attempt", 0)), body.get("value"), parse_time(body.get("reportedAt")))


@dataclass(frozen=True)
class Job:
    id: str
    idempotency_key: str
    tenant_id: str
    job_type: str
    status: str
    payload: dict[str, Any]
    priority: int
    scheduled_at: datetime | None
    attempts: int  # attempts that ended without completing the job (the API contract's count)
    max_attempts: int
    created_at: datetime | None
    updated_at: datetime | None
    last_error: str | None = None
    cron: str | None = None
    interval: str | None = None
    timezone: str | None = None
    template_id: str | None = None
    timeout_seconds: float | None = None
    cancel_requested: bool = False
    concurrency_key: str | None = None
    result: Any = None  # what the handler returned at its last attempt that kept one (small JSON)
    snoozes: int = 0  # attempts that snoozed (jobsched.Snooze), not spent
    progress: Progress | None = None
    runs: int = 0  # attempts started (each in executions()): `attempts` plus the open or the completing one
    attempt_base: int = 0  # a re-drive's fresh budget counts from here: attempts - attempt_base of max_attempts
    depends_on: list[str] = field(default_factory=list)  # the jobs it waits for (status `waiting` until they end)
    on_parent_failure: str | None = None  # what a parent ending dlq or cancelled does: cancel (default) or run
    workflow_id: str | None = None  # a workflow's step: the workflow's id, and `step` the step's name
    step: str | None = None
    traceparent: str | None = None  # the W3C trace context it was created in (docs/operations.md#traces)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> Job:
        return cls(
            id=str(body["id"]),
            idempotency_key=str(body["idempotencyKey"]),
            tenant_id=str(body["tenantId"]),
            job_type=str(body["jobType"]),
            status=str(body["status"]),
            payload=dict(body.get("payload") or {}),
            priority=int(body.get("priority", 0)),
            scheduled_at=parse_time(body.get("scheduledAt")),
            attempts=int(body.get("attempts", 0)),
            max_attempts=int(body.get("maxAttempts", 3)),
            created_at=parse_time(body.get("createdAt")),
            updated_at=parse_time(body.get("updatedAt")),
            last_error=body.get("lastError"),
            cron=body.get("cron"),
            interval=body.get("interval"),
            timezone=body.get("timezone"),
            template_id=body.get("templateId"),
            timeout_seconds=body.get("timeoutSeconds"),
            cancel_requested=bool(body.get("cancelRequested", False)),
            concurrency_key=body.get("concurrencyKey"),
            result=body.get("result"),
            snoozes=int(body.get("snoozes") or 0),
            progress=Progress.from_wire(body.get("progress")),
            runs=int(body.get("runs") or 0),
            attempt_base=int(body.get("attemptBase") or 0),
            depends_on=[str(parent) for parent in body.get("dependsOn") or ()],
            on_parent_failure=body.get("onParentFailure"),
            workflow_id=body.get("workflowId"),
            step=body.get("step"),
            traceparent=body.get("traceparent"),
            raw=body,
        )


@dataclass(frozen=True)
class WorkflowStep:
    """One step of a workflow: its name, the job that runs it (an ordinary job: `client.get(job_id)`), its job
    type, the steps it waits for and its job's status (None once retention deleted the job)."""

    name: str
    job_id: str
    job_type: str
    after: list[str]
    status: str | None

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> WorkflowStep:
        return cls(
            name=str(body["name"]),
            job_id=str(body["jobId"]),
            job_type=str(body["jobType"]),
            after=[str(parent) for parent in body.get("after") or ()],
            status=str(body["status"]) if "status" in body else None,
        )


@dataclass(frozen=True)
class Workflow:
    """A workflow: steps (jobs) that wait for one another. `status` is "running" while a step is unfinished, then
    "succeeded" (every step completed), "failed" (one ended in the DLQ) or "cancelled" ("expired" once retention
    deleted every step's job; "creating" while a MongoDB store writes it); `counts` counts its steps'
    jobs by job status. A listing (`client.workflows()`) leaves `steps` empty: `step_count` says how many."""

    id: str
    tenant_id: str
    idempotency_key: str
    name: str | None
    created_at: datetime | None
    status: str
    counts: dict[str, int]
    steps: list[WorkflowStep]
    step_count: int
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def finished(self) -> bool:
        """Every step has ended: succeeded, failed or cancelled."""
        return self.status in WORKFLOW_FINAL_STATUSES

    def step(self, name: str) -> WorkflowStep:
        """The step called `name` (KeyError when there is none, or the workflow came from a listing)."""
        for step in self.steps:
            if step.name == name:
                return step
        raise KeyError(f"workflow {self.id} has no step {name!r}")

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> Workflow:
        steps = [WorkflowStep.from_wire(step) for step in body.get("steps") or ()]
        return cls(
            id=str(body["id"]),
            tenant_id=str(body["tenantId"]),
            idempotency_key=str(body["idempotencyKey"]),
            name=body.get("name"),
            created_at=parse_time(body.get("createdAt")),
            status=str(body["status"]),
            counts={str(status): int(n) for status, n in (body.get("counts") or {}).items()},
            steps=steps,
            step_count=int(body.get("stepCount", len(steps))),
            raw=body,
        )


@dataclass(frozen=True)
class Batch:
    """A batch: jobs added in one or several calls, with callbacks once all have ended. `status` is "open"
    (members may be added) until sealed, then "running" while a member has not ended, then "succeeded" (every
    member completed) or "failed"; `counts` counts its members by job status (its progress), `total` them all;
    `on_complete` and `on_success` are its callbacks' job ids (`client.get(...)`)."""

    id: str
    tenant_id: str
    idempotency_key: str
    name: str | None
    created_at: datetime | None
    sealed: bool
    status: str
    total: int
    counts: dict[str, int]
    on_complete: str | None = None
    on_success: str | None = None
    fired_at: datetime | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def finished(self) -> bool:
        """Sealed, and every member has ended: its callbacks were released (or onSuccess cancelled)."""
        return self.status in ("succeeded", "failed")

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> Batch:
        callbacks = body.get("callbacks") or {}
        return cls(
            id=str(body["id"]),
            tenant_id=str(body["tenantId"]),
            idempotency_key=str(body["idempotencyKey"]),
            name=body.get("name"),
            created_at=parse_time(body.get("createdAt")),
            sealed=bool(body.get("sealed")),
            status=str(body["status"]),
            total=int(body.get("total", 0)),
            counts={str(status): int(n) for status, n in (body.get("counts") or {}).items()},
            on_complete=callbacks.get("onComplete"),
            on_success=callbacks.get("onSuccess"),
            fired_at=parse_time(body.get("firedAt")),
            raw=body,
        )


@dataclass(frozen=True)
class BatchMembers:
    """A page of a batch's members, by status then id: `members` maps each member's job id to its status (in that
    order); `next` is the following page's `after=` (None after the last)."""

    members: dict[str, str]
    next: str | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> BatchMembers:
        members = {str(m["jobId"]): str(m["status"]) for m in body.get("jobs", [])}
        return cls(members=members, next=body.get("next"), raw=body)


@dataclass(frozen=True)
class SigningSecret:
    """One of a tenant's secrets that its http jobs' requests are signed with (docs/http-jobs.md)."""

    id: str
    tenant_id: str
    secret: str
    created_at: datetime | None

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> SigningSecret:
        return cls(str(body["id"]), str(body["tenantId"]), str(body["secret"]), parse_time(body.get("createdAt")))


@dataclass(frozen=True)
class Credential:
    """One of a tenant's named credentials for its http jobs' headers (docs/http-jobs.md#credentials): its name
    and times; its value is never shown."""

    name: str
    tenant_id: str
    created_at: datetime | None
    updated_at: datetime | None

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> Credential:
        return cls(
            str(body["name"]),
            str(body["tenantId"]),
            parse_time(body.get("createdAt")),
            parse_time(body.get("updatedAt")),
        )


@dataclass(frozen=True)
class Execution:
    """One attempt of a job."""

    id: str
    job_id: str
    attempt: int
    outcome: str
    worker: str | None
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: float | None
    error: str | None
    traceback: str | None = None  # a handler that raised: where, as Python printed it
    result: Any = None  # what the handler returned (or an HTTP job's response summary)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> Execution:
        return cls(
            id=str(body["id"]),
            job_id=str(body["jobId"]),
            attempt=int(body["attempt"]),
            outcome=str(body["outcome"]),
            worker=body.get("worker"),
            started_at=parse_time(body.get("startedAt")),
            finished_at=parse_time(body.get("finishedAt")),
            duration_ms=body.get("durationMs"),
            error=body.get("error"),
            traceback=body.get("traceback"),
            result=body.get("result"),
            raw=body,
        )


@dataclass(frozen=True)
class ServedType:
    """A job type the API accepts: how many executors serve it now, when one last announced it, and its limits
    in force (None: it has none) and where they come from ("code": registered with the handler; "api": an
    operator's)."""

    name: str
    executors: int
    last_seen_at: datetime | None
    limits: Limits | None = None
    limits_source: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> ServedType:
        limits = body.get("limits")
        return cls(
            name=str(body["name"]),
            executors=int(body.get("executors", 0)),
            last_seen_at=parse_time(body.get("lastSeenAt")),
            limits=Limits.from_document(limits) if limits is not None else None,
            limits_source=body.get("limitsSource"),
            raw=body,
        )


@dataclass(frozen=True)
class TypeLimits:
    """A job type's limits: the ones in force, where they come from ("code", "api" or None: none), the ones its
    handler registers, and an operator's (None: none, the registered ones apply)."""

    job_type: str
    limits: Limits
    source: str | None
    registered: Limits
    override: Limits | None

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> TypeLimits:
        override = body.get("override")
        return cls(
            job_type=str(body["jobType"]),
            limits=Limits.from_document(body.get("limits")),
            source=body.get("source"),
            registered=Limits.from_document(body.get("registered")),
            override=Limits.from_document(override) if override is not None else None,
        )


@dataclass(frozen=True)
class Backfilled:
    """What a backfill did: runs spawned, runs that existed already for their fire time, fire times skipped by
    the overlap policy."""

    spawned: int
    existing: int
    skipped: int

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> Backfilled:
        return cls(spawned=int(body["spawned"]), existing=int(body["existing"]), skipped=int(body["skipped"]))


@dataclass(frozen=True)
class Deleted:
    """A deleted job or template (with `runs_deleted` runs): its idempotency key is free again."""

    id: str
    idempotency_key: str
    status: str
    runs_deleted: int

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> Deleted:
        return cls(
            id=str(body["id"]),
            idempotency_key=str(body["idempotencyKey"]),
            status=str(body["status"]),
            runs_deleted=int(body.get("runsDeleted", 0)),
        )


@dataclass(frozen=True)
class DeadLetters:
    """Dead-lettered jobs that share one last error: how many, of which types, and the most recent of them
    (without their payloads)."""

    error: str
    count: int
    job_types: list[str]
    jobs: list[Job]
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> DeadLetters:
        return cls(
            error=str(body["error"]),
            count=int(body["count"]),
            job_types=[str(t) for t in body.get("jobTypes", [])],
            jobs=[Job.from_wire(j) for j in body.get("jobs", [])],
            raw=body,
        )


@dataclass(frozen=True)
class Redriven:
    """What a re-drive from the DLQ did: the ids sent back to pending, the jobs refused (`{"id", "error"}`: no longer
    in the DLQ, or unknown), and `more`: dead letters of the group are left (one call re-drives a bounded number)."""

    redriven: list[str]
    refused: list[dict[str, str]]
    more: bool

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> Redriven:
        return cls(
            redriven=[str(i) for i in body.get("redriven", [])],
            refused=[{str(k): str(v) for k, v in r.items()} for r in body.get("refused", [])],
            more=bool(body.get("more", False)),
        )


@dataclass(frozen=True)
class Applied:
    """What applying a file's schedules did (or, `dry_run`, would do), by schedule name: `changes` gives, per
    changed schedule, each field that differs as [stored, declared]."""

    added: list[str]
    changed: list[str]
    unchanged: list[str]
    removed: list[str]
    conflicts: list[str]
    changes: dict[str, dict[str, list[Any]]]
    dry_run: bool
    ended: list[str] = field(default_factory=list)  # no fire time left: nothing made, or its template completed
    resumed: list[str] = field(default_factory=list)  # paused when dropped from the file, given again
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> Applied:
        kinds = ("added", "changed", "unchanged", "removed", "conflicts", "ended", "resumed")
        names = {k: [str(n) for n in body.get(k, [])] for k in kinds}
        changes = dict(body.get("changes") or {})
        return cls(**names, changes=changes, dry_run=bool(body.get("dryRun", False)), raw=body)


@dataclass(frozen=True)
class Enqueued:
    """One job of a create_many/enqueue_many call: `status` 201 created (`id` the new job), 409 its idempotency key
    is held (`id` the holder: for a call that was resent, the job its earlier try made), 400/413 refused as a single
    create would be, 503 not written (send it again: its key decides); `error` says why for all but 201."""

    index: int  # the job's position in the call
    status: int
    id: str | None
    error: str | None = None

    @property
    def created(self) -> bool:
        return self.status == 201

    @property
    def ok(self) -> bool:
        """The job exists: created now, or by an earlier call with its key."""
        return self.status in (201, 409) and self.id is not None
