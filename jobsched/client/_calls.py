"""What the sync and the async client share: each API call described once (method, path, body, how to read
the answer), and the retry rule, so the two clients differ only in how they send and how they sleep."""

from __future__ import annotations

import json
import random
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any, Generic, Literal, NoReturn, TypedDict, TypeVar
from urllib.parse import quote

import httpx

from jobsched.client.errors import Conflict, ConnectionFailed, JobschedError, error_for
from jobsched.client.models import (
    TERMINAL_STATUSES,
    Applied,
    Backfilled,
    Credential,
    DeadLetters,
    Deleted,
    Enqueued,
    Execution,
    Job,
    Redriven,
    ServedType,
    SigningSecret,
    TypeLimits,
    Workflow,
    parse_time,
)
from jobsched.limits import Limits
from jobsched.schedules import Schedule

T = TypeVar("T")
MAX_BATCH_JOBS = 1000  # jobs per POST /jobs/batch


@dataclass(frozen=True)
class Retries:
    """How often and how patiently to try again after a 503 or a connection failure: `attempts` tries in all,
    waits of base_s * 2^n capped at cap_s, each drawn from the upper half so that many clients spread out."""

    attempts: int = 5
    base_s: float = 0.2
    cap_s: float = 5.0

    def delay(self, failed: int, retry_after: float | None = None) -> float:
        wait = min(self.base_s * 2 ** min(failed - 1, 32), self.cap_s)
        wait = wait / 2 + random.random() * wait / 2
        return max(wait, min(retry_after, self.cap_s)) if retry_after is not None else float(wait)


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    read: Callable[[Any], T]
    params: dict[str, str] | None = None
    body: dict[str, Any] | None = None
    # May be sent again after a failure that may have reached the server (a read timeout, a reset): reads,
    # creates (their idempotency key makes a second insert a 409) and cancels. Not re-drives.
    resendable: bool = True


class RetryIn(Exception):
    def __init__(self, delay: float) -> None:
        super().__init__(delay)
        self.delay = delay


class Exchange(Generic[T]):
    """The tries of one call: after each answer or failure, the result, a typed error, or RetryIn."""

    def __init__(self, call: Call[T], retries: Retries) -> None:
        self.call = call
        self._retries = retries
        self.tries = 0

    @property
    def retried(self) -> bool:
        return self.tries > 1

    def sending(self) -> None:
        self.tries += 1

    def failed(self, exc: httpx.TransportError) -> NoReturn:
        unsent = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
        if self.tries < self._retries.attempts and (unsent or self.call.resendable):
            raise RetryIn(self._retries.delay(self.tries))
        raise ConnectionFailed(f"{self.call.method} {self.call.path}: {type(exc).__name__}: {exc}") from exc

    def answered(self, response: httpx.Response) -> T:
        body = _json(response)
        if response.is_success:
            return self.call.read(body)
        if response.status_code == 503 and self.tries < self._retries.attempts:
            raise RetryIn(self._retries.delay(self.tries, _retry_after(response)))
        raise error_for(response.status_code, body)


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return float(response.headers.get("Retry-After", ""))
    except ValueError:
        return None


# --- the calls ------------------------------------------------------------------------------------------


def _job(body: Any) -> Job:
    return Job.from_wire(body)


def _jobs(body: Any) -> list[Job]:
    return [Job.from_wire(item) for item in body]


class JobOptions(TypedDict, total=False):
    """The optional arguments of `upsert` (and of `create`, with its idempotency_key), shared by both clients."""

    tenant_id: str | None  # default: the client's tenant_id
    scheduled_at: datetime | str | None  # default: now (one-off jobs only)
    cron: str | None
    interval: str | None
    timezone: str | None
    priority: int | None
    max_attempts: int | None
    timeout_seconds: float | None
    concurrency_key: str | None  # what the type's concurrency_per_key limit counts by (a customer id...)
    # A template's schedule policy, keyed as the API spells it: overlap, catchup, catchupWindow, startAt, endAt,
    # remainingRuns, jitter, pauseOnFailure (the API checks it, and refuses it on a one-off job).
    policy: Mapping[str, Any] | None


class CreateOptions(JobOptions, total=False):
    idempotency_key: str | None  # default: generated
    # The jobs (ids, or Jobs) this one waits for: it stays `waiting` until every one has completed (one-off jobs).
    depends_on: Sequence[str | Job] | None
    on_parent_failure: Literal["cancel", "run"] | None  # a parent ending dlq or cancelled: cancel this (default)


def create(
    job_type: str, payload: dict[str, Any] | None, default_tenant: str | None, options: CreateOptions
) -> Call[Job]:
    """A one-off job (due at `scheduled_at`, now when not given) or, with `cron` or `interval`, a template."""
    cron, interval, scheduled_at = options.get("cron"), options.get("interval"), options.get("scheduled_at")
    recurring = cron is not None or interval is not None
    if recurring and scheduled_at is not None:
        raise ValueError("give scheduled_at for a one-off job or cron/interval for a recurring one, not both")
    body: dict[str, Any] = {
        "idempotencyKey": options.get("idempotency_key") or f"{job_type}-{uuid.uuid4().hex}",
        "jobType": job_type,
        "payload": json_payload(payload or {}),
        "tenantId": options.get("tenant_id") or default_tenant,
        "cron": cron,
        "interval": interval,
        "timezone": options.get("timezone"),
        "priority": options.get("priority"),
        "maxAttempts": options.get("max_attempts"),
        "timeoutSeconds": options.get("timeout_seconds"),
        "concurrencyKey": options.get("concurrency_key"),
        "dependsOn": _job_ids(options.get("depends_on")),
        "onParentFailure": options.get("on_parent_failure"),
        **(options.get("policy") or {}),
    }
    if not recurring:
        body["scheduledAt"] = format_time(scheduled_at or datetime.now(UTC))
    return Call("POST", "/jobs", _job, body={k: v for k, v in body.items() if v is not None})


def _job_ids(jobs: Sequence[str | Job] | None) -> list[str] | None:
    return None if jobs is None else [job.id if isinstance(job, Job) else job for job in jobs]


class ManyOptions(TypedDict, total=False):
    """The optional arguments of `create_many`/`enqueue_many`: the same for every job of the call."""

    tenant_id: str | None  # default: the client's tenant_id
    scheduled_at: datetime | str | None  # default: now
    priority: int | None
    max_attempts: int | None
    timeout_seconds: float | None
    concurrency_key: str | None
    idempotency_keys: Sequence[str] | None  # one per payload, in order; default: generated


def create_many(
    job_type: str,
    payloads: Sequence[dict[str, Any]],
    default_tenant: str | None,
    options: ManyOptions,
    path: str = "/jobs/batch",
) -> Iterator[Call[list[Enqueued]]]:
    """One-off jobs of one type, one per payload: POST /jobs/batch calls (or to `path`, which answers alike: a
    batch's /batches/{id}/jobs) of up to MAX_BATCH_JOBS jobs each, made as they are sent (a million payloads are
    never one body). Resent after a failure like create: the keys decide, so a job that an earlier try made comes
    back as a 409 naming it."""
    keys = options.get("idempotency_keys")
    if keys is not None and len(keys) != len(payloads):
        raise ValueError(f"{len(keys)} idempotency_keys for {len(payloads)} payloads: give one per payload")
    scheduled_at = format_time(options.get("scheduled_at") or datetime.now(UTC))
    shared = {
        "jobType": job_type,
        "scheduledAt": scheduled_at,
        "priority": options.get("priority"),
        "maxAttempts": options.get("max_attempts"),
        "timeoutSeconds": options.get("timeout_seconds"),
        "concurrencyKey": options.get("concurrency_key"),
    }
    shared = {k: v for k, v in shared.items() if v is not None}
    tenant = options.get("tenant_id") or default_tenant
    for start in range(0, len(payloads), MAX_BATCH_JOBS):
        jobs = [
            {
                "idempotencyKey": keys[i] if keys is not None else f"{job_type}-{uuid.uuid4().hex}",
                "payload": json_payload(payloads[i]),
                **shared,
            }
            for i in range(start, min(start + MAX_BATCH_JOBS, len(payloads)))
        ]
        body: dict[str, Any] = {"jobs": jobs} if tenant is None else {"tenantId": tenant, "jobs": jobs}
        yield Call("POST", path, partial(_enqueued, start), body=body)


def _enqueued(offset: int, body: Any) -> list[Enqueued]:
    return [
        Enqueued(index=offset + i, status=int(r["status"]), id=r.get("id"), error=r.get("error"))
        for i, r in enumerate(body["results"])
    ]


def json_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload, checked to be JSON before it is sent: a value JSON has no form for (a datetime, a set, an
    object) is named here, rather than as the HTTP library's TypeError from deep inside the send."""
    try:
        json.dumps(payload, allow_nan=False)
    except (TypeError, ValueError) as exc:
        hint = " (send a time as its RFC 3339 text: value.isoformat())" if "datetime" in str(exc) else ""
        raise ValueError(f"the payload is not JSON: {exc}{hint}") from None
    return payload


class UpdateOptions(TypedDict, total=False):
    """The fields of `update`: a field left out keeps its value; None clears it where the API allows (a
    template's timezone, timeoutSeconds, maxAttempts: its default) and is a 400 elsewhere."""

    scheduled_at: datetime | str | None  # a pending one-off job's
    cron: str | None
    interval: str | None
    timezone: str | None
    payload: dict[str, Any] | None
    priority: int | None
    max_attempts: int | None
    timeout_seconds: float | None
    policy: Mapping[str, Any] | None  # as in CreateOptions; None for a bound (endAt, remainingRuns...) clears it


_WIRE_NAMES = {"scheduled_at": "scheduledAt", "max_attempts": "maxAttempts", "timeout_seconds": "timeoutSeconds"}


def update(job_id: str, options: UpdateOptions) -> Call[Job]:
    """PATCH: a template's schedule, payload, limits and policy, or a pending one-off job's scheduledAt,
    priority and payload. A template's next fire time is computed again from now."""
    fields: dict[str, Any] = dict(options)
    body: dict[str, Any] = dict(fields.pop("policy", None) or {})
    for name, value in fields.items():
        if name == "scheduled_at" and value is not None:
            value = format_time(value)
        elif name == "payload" and value is not None:
            value = json_payload(value)
        body[_WIRE_NAMES.get(name, name)] = value
    return patch(job_id, body)


def patch(job_id: str, body: dict[str, Any]) -> Call[Job]:
    return Call("PATCH", f"/jobs/{job_id}", _job, body=body)


# A one-off job's fields that a PATCH can change; the rest are fixed once it is created.
_RUN_FIELDS = frozenset({"scheduledAt", "priority", "payload"})
_IDENTITY = frozenset({"idempotencyKey", "jobType", "tenantId"})


def upsert_changes(existing: Job, wanted: dict[str, Any], scheduled_given: bool) -> dict[str, Any]:
    """The PATCH body that makes `existing` (the job holding the idempotency key) what the create body
    `wanted` declares: only the fields that differ, so that declaring the same schedule again changes nothing
    (a PATCH would compute the next fire time again). Conflict when a PATCH cannot do it."""
    held = f"idempotency key {existing.idempotency_key!r} is held by job {existing.id}"
    recurring = "cron" in wanted or "interval" in wanted
    if existing.job_type != wanted["jobType"]:
        raise Conflict(f"{held} of type {existing.job_type!r}, not {wanted['jobType']!r}", 409)
    if recurring != bool(existing.cron or existing.interval):
        kind = "a recurring template" if recurring else "a one-off job"
        raise Conflict(f"{held}, which is not {kind}", 409)
    if existing.finished:
        raise Conflict(f"{held}, which is {existing.status}: delete it to use the key again", 409)
    if not recurring and existing.status != "pending":
        raise Conflict(f"{held}, which is {existing.status}: only a pending job can be changed", 409)
    changes = {
        name: value
        for name, value in wanted.items()
        if name not in _IDENTITY and not _same(name, existing.raw.get(name), value)
    }
    if not recurring:
        if not scheduled_given:
            changes.pop("scheduledAt", None)
        if fixed := sorted(set(changes) - _RUN_FIELDS):
            raise Conflict(f"{held}: {', '.join(fixed)} of a one-off job cannot be changed", 409)
    return changes


def _same(name: str, stored: Any, wanted: Any) -> bool:
    if name == "scheduledAt":
        return parse_time(stored) == parse_time(wanted)
    return bool(stored == wanted)


def pause(job_id: str, note: str | None) -> Call[Job]:
    return Call("POST", f"/jobs/{job_id}/pause", _job, body={"note": note} if note is not None else {})


def resume(job_id: str) -> Call[Job]:
    return Call("POST", f"/jobs/{job_id}/resume", _job, body={})


def trigger(job_id: str, payload: dict[str, Any] | None, overlap: str | None, idempotency_key: str | None) -> Call[Job]:
    """One run of a template now. The request key is generated when not given, so a resent trigger makes
    one run, not two."""
    body = {
        "payload": json_payload(payload) if payload is not None else None,
        "overlap": overlap,
        "idempotencyKey": idempotency_key or uuid.uuid4().hex,
    }
    return Call("POST", f"/jobs/{job_id}/trigger", _job, body={k: v for k, v in body.items() if v is not None})


def backfill(job_id: str, start: datetime | str, end: datetime | str, overlap: str | None) -> Call[Backfilled]:
    """The runs of every fire time in [start, end); a backfill sent again spawns nothing twice."""
    body = {"from": format_time(start), "to": format_time(end), "overlap": overlap}
    return Call(
        "POST", f"/jobs/{job_id}/backfill", Backfilled.from_wire, body={k: v for k, v in body.items() if v is not None}
    )


def runs(job_id: str, limit: int | None) -> Call[list[Job]]:
    return Call("GET", f"/jobs/{job_id}/runs", _jobs, params={"limit": str(limit)} if limit is not None else None)


def upcoming(job_id: str, count: int | None) -> Call[list[datetime]]:
    return Call("GET", f"/jobs/{job_id}/upcoming", _times, params={"count": str(count)} if count is not None else None)


def preview(cron: str | None, interval: str | None, timezone: str | None, count: int | None) -> Call[list[datetime]]:
    params = {"cron": cron, "interval": interval, "timezone": timezone, "count": None if count is None else str(count)}
    return Call("GET", "/schedules/preview", _times, params={k: v for k, v in params.items() if v is not None})


def delete(job_id: str) -> Call[Deleted]:
    # Not resent: a delete that landed before its answer was lost would be answered 404 the second time.
    return Call("POST", f"/jobs/{job_id}/delete", Deleted.from_wire, resendable=False)


def _times(body: Any) -> list[datetime]:
    return [moment for moment in map(parse_time, body) if moment is not None]


def get(job_id: str) -> Call[Job]:
    return Call("GET", f"/jobs/{job_id}", _job)


class ListFilter(TypedDict, total=False):
    """GET /jobs's narrowing: one job type, templates (`kind="template"`) or one-off jobs and runs (`"run"`), or
    one template's runs."""

    job_type: str | None
    kind: str | None
    template_id: str | None


def list_jobs(tenant_id: str | None, status: str | None, limit: int | None, narrowed: ListFilter) -> Call[list[Job]]:
    params = {
        "tenantId": tenant_id,
        "status": status,
        "limit": str(limit) if limit is not None else None,
        "jobType": narrowed.get("job_type"),
        "kind": narrowed.get("kind"),
        "templateId": narrowed.get("template_id"),
    }
    return Call("GET", "/jobs", _jobs, params={k: v for k, v in params.items() if v is not None})


def schedule_body(declared: tuple[str, Schedule], tenant_id: str | None) -> dict[str, Any]:
    """A (job type, Schedule) pair as POST /schedules/apply takes it (no tenantId: the request's)."""
    job_type, schedule = declared
    if schedule.payload is not None and not isinstance(schedule.payload, dict):
        raise TypeError(f"schedule {schedule.name!r}: a payload applied from a file is a dict")
    body = schedule.body(job_type, tenant_id or "", json_payload(schedule.payload or {}))
    if not body["tenantId"]:
        del body["tenantId"]
    return body


def apply_schedules(
    schedules: Sequence[dict[str, Any]], tenant_id: str | None, removed: str, dry_run: bool
) -> Call[Applied]:
    body: dict[str, Any] = {"schedules": list(schedules), "removed": removed, "dryRun": dry_run}
    if tenant_id:
        body["tenantId"] = tenant_id
    return Call("POST", "/schedules/apply", Applied.from_wire, body=body)


def dead_letters(tenant_id: str | None) -> Call[list[DeadLetters]]:
    params = {"tenantId": tenant_id} if tenant_id else None
    return Call("GET", "/dlq", lambda body: [DeadLetters.from_wire(g) for g in body], params=params)


def redrive(job_ids: Sequence[str] | None, last_error: str | None, tenant_id: str | None) -> Call[Redriven]:
    body: dict[str, Any] = {"jobIds": list(job_ids)} if job_ids is not None else {"lastError": last_error}
    if tenant_id and job_ids is None:
        body["tenantId"] = tenant_id
    return Call("POST", "/dlq/redrive", Redriven.from_wire, body=body, resendable=False)


def cancel(job_id: str) -> Call[Job]:
    return Call("DELETE", f"/jobs/{job_id}", _job)


def retry(job_id: str) -> Call[Job]:
    return Call("POST", f"/jobs/{job_id}/retry", _job, resendable=False)


def executions(job_id: str) -> Call[list[Execution]]:
    return Call("GET", f"/jobs/{job_id}/executions", lambda body: [Execution.from_wire(e) for e in body])


def job_types() -> Call[list[ServedType]]:
    return Call("GET", "/job-types", lambda body: [ServedType.from_wire(t) for t in body])


def type_limits(job_type: str) -> Call[TypeLimits]:
    return Call("GET", _limits_path(job_type), TypeLimits.from_wire)


def set_limits(job_type: str, limits: Limits) -> Call[TypeLimits]:
    return Call("PUT", _limits_path(job_type), TypeLimits.from_wire, body=limits.to_document())


def clear_limits(job_type: str) -> Call[TypeLimits]:
    return Call("DELETE", _limits_path(job_type), TypeLimits.from_wire)


def _limits_path(job_type: str) -> str:
    return f"/job-types/{quote(job_type, safe='')}/limits"


def signing_secrets(tenant_id: str | None) -> Call[list[SigningSecret]]:
    params = {"tenantId": tenant_id} if tenant_id is not None else None
    return Call("GET", "/signing-secrets", _secrets, params=params)


def add_signing_secret(tenant_id: str | None) -> Call[SigningSecret]:
    # Not resent: a secret added before its answer was lost would take the second one's place (two at most).
    body = {"tenantId": tenant_id} if tenant_id is not None else {}
    return Call("POST", "/signing-secrets", SigningSecret.from_wire, body=body, resendable=False)


def remove_signing_secret(secret_id: str, tenant_id: str | None) -> Call[None]:
    params = {"tenantId": tenant_id} if tenant_id is not None else None
    return Call("DELETE", f"/signing-secrets/{quote(secret_id, safe='')}", _nothing, params=params)


def credentials(tenant_id: str | None) -> Call[list[Credential]]:
    params = {"tenantId": tenant_id} if tenant_id is not None else None
    return Call("GET", "/credentials", lambda body: [Credential.from_wire(c) for c in body], params=params)


def set_credential(name: str, value: str, tenant_id: str | None) -> Call[Credential]:
    # Resent when its answer was lost: setting the same value again changes nothing but updatedAt.
    params = {"tenantId": tenant_id} if tenant_id is not None else None
    path = f"/credentials/{quote(name, safe='')}"
    return Call("PUT", path, Credential.from_wire, body={"value": value}, params=params)


def delete_credential(name: str, tenant_id: str | None) -> Call[None]:
    params = {"tenantId": tenant_id} if tenant_id is not None else None
    return Call("DELETE", f"/credentials/{quote(name, safe='')}", _nothing, params=params)


# --- workflows ------------------------------------------------------------------------------------------


def create_workflow(
    idempotency_key: str,
    tenant_id: str | None,
    name: str | None,
    scheduled_at: datetime | str | None,
    steps: Sequence[Mapping[str, Any]],
) -> Call[Workflow]:
    """POST /workflows with `steps` as the API takes them (name, jobType, payload, after...), checked first as
    the API would check them, so that a misspelt `after` is named before anything is sent. Resent after a
    failure like create: the key decides, so a workflow an earlier try made comes back as a 409 naming it."""
    check_steps(steps)
    body: dict[str, Any] = {
        "idempotencyKey": idempotency_key,
        "tenantId": tenant_id,
        "name": name,
        # Left out when not given: the API's now, not this machine's clock.
        "scheduledAt": format_time(scheduled_at) if scheduled_at is not None else None,
        "steps": [dict(step) for step in steps],
    }
    return Call("POST", "/workflows", Workflow.from_wire, body={k: v for k, v in body.items() if v is not None})


def check_steps(steps: Sequence[Mapping[str, Any]]) -> None:
    """ValueError, worded as the API's 400s, for steps the API would refuse whatever the tenant: none, two of
    one name, an `after` naming no step or the step itself, onParentFailure without after, or a cycle."""
    if not steps:
        raise ValueError("a workflow needs at least one step")
    names: dict[str, int] = {}
    for i, step in enumerate(steps):
        if step["name"] in names:
            raise ValueError(f"steps[{i}] ({step['name']}): name: steps[{names[step['name']]}] has this name too")
        names[step["name"]] = i
    for i, step in enumerate(steps):
        after = step.get("after") or ()
        for parent in after:
            if parent not in names:
                raise ValueError(f"steps[{i}] ({step['name']}): after: no step named {parent!r}")
            if parent == step["name"]:
                raise ValueError(f"steps[{i}] ({step['name']}): after: a step cannot wait for itself")
        if step.get("onParentFailure") is not None and not after:
            raise ValueError(f"steps[{i}] ({step['name']}): onParentFailure: only a step with `after` has parents")
    if cycle := _cycle({step["name"]: list(step.get("after") or ()) for step in steps}):
        raise ValueError(f"steps {' -> '.join(cycle)} wait for one another: after forms a cycle")


def _cycle(parents: dict[str, list[str]]) -> list[str]:
    """One cycle of the graph (a step's name, the parent it waits for, ..., the step again), or [] for none."""
    waiting = {name: len(set(after)) for name, after in parents.items()}
    children: dict[str, list[str]] = {name: [] for name in parents}
    for name, after in parents.items():
        for parent in set(after):
            children[parent].append(name)
    ready = [name for name, count in waiting.items() if count == 0]
    while ready:  # Kahn: take away every step that can start once the ones before it have
        for child in children[ready.pop()]:
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    stuck = {name for name, count in waiting.items() if count > 0}
    if not stuck:
        return []
    # Each stuck step waits for a stuck parent: walking to one, then its, ... comes back round to a step seen.
    walk = [min(stuck)]
    while walk[-1] not in walk[:-1]:
        walk.append(min(parent for parent in parents[walk[-1]] if parent in stuck))
    return walk[walk.index(walk[-1]) :]


def get_workflow(workflow_id: str) -> Call[Workflow]:
    return Call("GET", _workflow_path(workflow_id), Workflow.from_wire)


def list_workflows(tenant_id: str | None, limit: int | None, before: str | Workflow | None) -> Call[list[Workflow]]:
    params = {
        "tenantId": tenant_id,
        "limit": str(limit) if limit is not None else None,
        "before": before.id if isinstance(before, Workflow) else before,
    }
    return Call("GET", "/workflows", _workflows, params={k: v for k, v in params.items() if v is not None})


def _workflows(body: Any) -> list[Workflow]:
    return [Workflow.from_wire(item) for item in body]


def cancel_workflow(workflow_id: str) -> Call[Workflow]:
    return Call("DELETE", _workflow_path(workflow_id), Workflow.from_wire)


def _workflow_path(workflow_id: str) -> str:
    return f"/workflows/{quote(workflow_id, safe='')}"


def _secrets(body: Any) -> list[SigningSecret]:
    return [SigningSecret.from_wire(item) for item in body]


def _nothing(body: Any) -> None:
    return None


# --- helpers ----------------------------------------------------------------------------------------------


def format_time(moment: datetime | str) -> str:
    """RFC 3339 in UTC (a string is passed through: the API validates it)."""
    if isinstance(moment, str):
        return moment
    if moment.tzinfo is None:
        raise ValueError("scheduled_at needs a timezone (e.g. datetime.now(UTC))")
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def wanted_statuses(statuses: Iterable[str] | str | None) -> frozenset[str]:
    if statuses is None:
        return TERMINAL_STATUSES
    return frozenset([statuses] if isinstance(statuses, str) else statuses)


def trace_headers() -> dict[str, str] | None:
    """The current span's context (W3C `traceparent`) when the application traces with OpenTelemetry: the jobs a
    call creates keep it, and their attempts continue the application's trace. The client imports nothing of
    OpenTelemetry: an application that has not imported it itself sends none."""
    if "opentelemetry.trace" not in sys.modules:
        return None
    try:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(carrier)  # the W3C context only: never the application's baggage
    except Exception:  # tracing is the application's business: a call never fails for it
        return None
    return {"traceparent": carrier["traceparent"]} if "traceparent" in carrier else None


def headers(api_key: str | None) -> dict[str, str]:
    found = {"Accept": "application/json", "User-Agent": "jobsched-client"}
    if api_key:
        found["Authorization"] = f"Bearer {api_key}"
    return found


__all__ = ["Call", "Exchange", "JobschedError", "Retries", "RetryIn"]
