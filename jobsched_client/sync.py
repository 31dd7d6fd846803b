"""The blocking client."""

from __future__ import annotations

import builtins
import time
from collections.abc import Iterable
from types import TracebackType
from typing import Any, TypeVar, Unpack

import httpx

from jobsched_client import _calls
from jobsched_client._calls import Call, CreateOptions, Exchange, Retries, RetryIn
from jobsched_client.errors import DuplicateJob, WaitTimeout
from jobsched_client.models import Execution, Job, JobType

T = TypeVar("T")


class Client:
    """`Client("http://127.0.0.1:8080")`; use as a context manager or call close(). Every call retries on 503
    and connection failures (`retries`); a create is safe to retry because its idempotency key is sent again:
    if an earlier try of the same call did land, the existing job is returned."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = 10.0,
        tenant_id: str | None = None,
        retries: Retries | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.tenant_id = tenant_id
        self._retries = retries or Retries()
        self._http = httpx.Client(
            base_url=base_url, headers=_calls.headers(api_key), timeout=timeout, transport=transport
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def create(self, job_type: str, payload: dict[str, Any] | None = None, **options: Unpack[CreateOptions]) -> Job:
        """Create a one-off job (due now unless `scheduled_at`) or a recurring template (`cron`/`interval`);
        see CreateOptions. An idempotency key is generated when none is given. Raises DuplicateJob (409) when
        the key is taken, except when an earlier try of this very call made the job: then it is returned."""
        call = _calls.create(job_type, payload, self.tenant_id, options)
        exchange = Exchange(call, self._retries)
        try:
            return self._send(exchange)
        except DuplicateJob as duplicate:
            if exchange.retried and duplicate.job_id:  # an earlier try of this very call landed
                return self.get(duplicate.job_id)
            raise

    def get(self, job_id: str) -> Job:
        return self._call(_calls.get(job_id))

    def list(
        self, tenant_id: str | None = None, *, status: str | None = None, limit: int | None = None
    ) -> builtins.list[Job]:
        return self._call(_calls.list_jobs(tenant_id or self.tenant_id, status, limit))

    def cancel(self, job_id: str) -> Job:
        """The cancelled job, or (running) the job with `cancel_requested`: its executor stops it."""
        return self._call(_calls.cancel(job_id))

    def retry(self, job_id: str) -> Job:
        """Re-drive a job from the DLQ."""
        return self._call(_calls.retry(job_id))

    def executions(self, job_id: str) -> builtins.list[Execution]:
        return self._call(_calls.executions(job_id))

    def job_types(self) -> builtins.list[JobType]:
        return self._call(_calls.job_types())

    def wait(
        self, job_id: str, statuses: Iterable[str] | str | None = None, timeout: float = 60.0, poll: float = 0.2
    ) -> Job:
        """Poll until the job is in one of `statuses` (default: completed, dlq or cancelled); raise WaitTimeout
        after `timeout` seconds."""
        wanted = _calls.wanted_statuses(statuses)
        deadline = time.monotonic() + timeout
        while True:
            job = self.get(job_id)
            if job.status in wanted:
                return job
            if time.monotonic() >= deadline:
                raise WaitTimeout(f"job {job_id} is {job.status} after {timeout:g}s", job)
            time.sleep(min(poll, max(deadline - time.monotonic(), 0)))

    def _call(self, call: Call[T]) -> T:
        return self._send(Exchange(call, self._retries))

    def _send(self, exchange: Exchange[T]) -> T:
        call = exchange.call
        while True:
            try:
                exchange.sending()
                try:
                    response = self._http.request(call.method, call.path, params=call.params, json=call.body)
                except httpx.TransportError as exc:
                    exchange.failed(exc)
                return exchange.answered(response)
            except RetryIn as retry:
                time.sleep(retry.delay)
