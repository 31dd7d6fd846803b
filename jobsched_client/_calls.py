"""What the sync and the async client share: each API call described once (method, path, body, how to read
the answer), and the retry rule, so the two clients differ only in how they send and how they sleep."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, NoReturn, TypedDict, TypeVar

import httpx

from jobsched_client.errors import ConnectionFailed, JobschedError, error_for
from jobsched_client.models import TERMINAL_STATUSES, Execution, Job, JobType

T = TypeVar("T")


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


class CreateOptions(TypedDict, total=False):
    """The optional arguments of `create`, shared by both clients."""

    tenant_id: str | None  # default: the client's tenant_id
    idempotency_key: str | None  # default: generated
    scheduled_at: datetime | str | None  # default: now (one-off jobs only)
    cron: str | None
    interval: str | None
    timezone: str | None
    priority: int | None
    max_attempts: int | None
    timeout_seconds: float | None
    # A template's schedule policy, keyed as the API spells it: overlap, catchup, catchupWindow, startAt, endAt,
    # remainingRuns, jitter, pauseOnFailure (the API checks it, and refuses it on a one-off job).
    policy: Mapping[str, Any] | None


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
        **(options.get("policy") or {}),
    }
    if not recurring:
        body["scheduledAt"] = format_time(scheduled_at or datetime.now(UTC))
    return Call("POST", "/jobs", _job, body={k: v for k, v in body.items() if v is not None})


def json_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload, checked to be JSON before it is sent: a value JSON has no form for (a datetime, a set, an
    object) is named here, rather than as the HTTP library's TypeError from deep inside the send."""
    try:
        json.dumps(payload, allow_nan=False)
    except (TypeError, ValueError) as exc:
        hint = " (send a time as its RFC 3339 text: value.isoformat())" if "datetime" in str(exc) else ""
        raise ValueError(f"the payload is not JSON: {exc}{hint}") from None
    return payload


def get(job_id: str) -> Call[Job]:
    return Call("GET", f"/jobs/{job_id}", _job)


def list_jobs(tenant_id: str | None, status: str | None, limit: int | None) -> Call[list[Job]]:
    params = {"tenantId": tenant_id, "status": status, "limit": str(limit) if limit is not None else None}
    return Call("GET", "/jobs", _jobs, params={k: v for k, v in params.items() if v is not None})


def cancel(job_id: str) -> Call[Job]:
    return Call("DELETE", f"/jobs/{job_id}", _job)


def retry(job_id: str) -> Call[Job]:
    return Call("POST", f"/jobs/{job_id}/retry", _job, resendable=False)


def executions(job_id: str) -> Call[list[Execution]]:
    return Call("GET", f"/jobs/{job_id}/executions", lambda body: [Execution.from_wire(e) for e in body])


def job_types() -> Call[list[JobType]]:
    return Call("GET", "/job-types", lambda body: [JobType.from_wire(t) for t in body])


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


def headers(api_key: str | None) -> dict[str, str]:
    found = {"Accept": "application/json", "User-Agent": "jobsched-client"}
    if api_key:
        found["Authorization"] = f"Bearer {api_key}"
    return found


__all__ = ["Call", "Exchange", "JobschedError", "Retries", "RetryIn"]
