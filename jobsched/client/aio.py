"""The asyncio client: the same calls as Client, awaited."""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from functools import partial
from types import TracebackType
from typing import Any, TypeVar, Unpack

import httpx

from jobsched.client import _batch_calls, _calls
from jobsched.client._batch_calls import BatchCallback
from jobsched.client._calls import (
    Call,
    CreateOptions,
    Exchange,
    JobOptions,
    ListFilter,
    ManyOptions,
    Retries,
    RetryIn,
    UpdateOptions,
)
from jobsched.client.errors import DuplicateJob, DuplicateWorkflow, WaitTimeout
from jobsched.client.models import (
    Applied,
    Backfilled,
    Batch,
    BatchMembers,
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
)
from jobsched.client.workflows import WorkflowBuilder
from jobsched.handlers import JobType
from jobsched.limits import Limits
from jobsched.schedules import Schedule

T = TypeVar("T")
P = TypeVar("P")


class AsyncClient:
    """`async with AsyncClient("http://127.0.0.1:8080") as client: await client.create(...)`; see Client."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = 10.0,
        tenant_id: str | None = None,
        retries: Retries | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.tenant_id = tenant_id
        self._retries = retries or Retries()
        self._http = httpx.AsyncClient(
            base_url=base_url, headers=_calls.headers(api_key), timeout=timeout, transport=transport
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @property
    def base_url(self) -> str:
        """The API this client talks to."""
        return str(self._http.base_url)

    async def close(self) -> None:
        await self._http.aclose()

    async def create(
        self, job_type: str, payload: dict[str, Any] | None = None, **options: Unpack[CreateOptions]
    ) -> Job:
        """Create a one-off job (due now unless `scheduled_at`) or a recurring template (`cron`/`interval`);
        see CreateOptions. An idempotency key is generated when none is given. Raises DuplicateJob (409) when
        the key is taken, except when an earlier try of this very call made the job: then it is returned."""
        call = _calls.create(job_type, payload, self.tenant_id, options)
        exchange = Exchange(call, self._retries)
        try:
            return await self._send(exchange)
        except DuplicateJob as duplicate:
            if exchange.retried and duplicate.job_id:
                return await self.get(duplicate.job_id)
            raise

    async def enqueue(self, job_type: JobType[P, Any], payload: P, **options: Unpack[CreateOptions]) -> Job:
        """`create` for a job type of a JobTypes collection, with its payload as the handler takes it (see
        Client.enqueue)."""
        return await self.create(job_type.name, job_type.encode(payload), **options)

    async def create_many(
        self, job_type: str, payloads: Iterable[dict[str, Any]], **options: Unpack[ManyOptions]
    ) -> builtins.list[Enqueued]:
        """See Client.create_many."""
        results: builtins.list[Enqueued] = []
        for call in _calls.create_many(job_type, builtins.list(payloads), self.tenant_id, options):
            batch: builtins.list[Enqueued] = await self._call(call)
            results += batch
        return results

    async def enqueue_many(
        self, job_type: JobType[P, Any], payloads: Iterable[P], **options: Unpack[ManyOptions]
    ) -> builtins.list[Enqueued]:
        """See Client.enqueue_many."""
        return await self.create_many(job_type.name, [job_type.encode(p) for p in payloads], **options)

    async def upsert(
        self,
        job_type: str,
        idempotency_key: str,
        payload: dict[str, Any] | None = None,
        **options: Unpack[JobOptions],
    ) -> Job:
        """See Client.upsert."""
        call = _calls.create(
            job_type,
            payload,
            self.tenant_id,
            CreateOptions(**options, idempotency_key=idempotency_key, depends_on=None, on_parent_failure=None),
        )
        try:
            return await self._send(Exchange(call, self._retries))
        except DuplicateJob as duplicate:
            if not duplicate.job_id:
                raise
            existing = await self.get(duplicate.job_id)
        assert call.body is not None
        changes = _calls.upsert_changes(existing, call.body, options.get("scheduled_at") is not None)
        return await self._call(_calls.patch(existing.id, changes)) if changes else existing

    async def update(self, job_id: str, **options: Unpack[UpdateOptions]) -> Job:
        return await self._call(_calls.update(job_id, options))

    async def pause(self, job_id: str, note: str | None = None) -> Job:
        return await self._call(_calls.pause(job_id, note))

    async def resume(self, job_id: str) -> Job:
        return await self._call(_calls.resume(job_id))

    async def trigger(
        self,
        job_id: str,
        payload: dict[str, Any] | None = None,
        *,
        overlap: str | None = None,
        idempotency_key: str | None = None,
    ) -> Job:
        return await self._call(_calls.trigger(job_id, payload, overlap, idempotency_key))

    async def backfill(
        self, job_id: str, start: datetime | str, end: datetime | str, *, overlap: str | None = None
    ) -> Backfilled:
        return await self._call(_calls.backfill(job_id, start, end, overlap))

    async def runs(self, job_id: str, *, limit: int | None = None) -> builtins.list[Job]:
        return await self._call(_calls.runs(job_id, limit))

    async def upcoming(self, job_id: str, count: int | None = None) -> builtins.list[datetime]:
        return await self._call(_calls.upcoming(job_id, count))

    async def preview(
        self,
        *,
        cron: str | None = None,
        interval: str | None = None,
        timezone: str | None = None,
        count: int | None = None,
    ) -> builtins.list[datetime]:
        return await self._call(_calls.preview(cron, interval, timezone, count))

    async def delete(self, job_id: str) -> Deleted:
        return await self._call(_calls.delete(job_id))

    async def get(self, job_id: str) -> Job:
        return await self._call(_calls.get(job_id))

    async def list(
        self,
        tenant_id: str | None = None,
        *,
        status: str | None = None,
        limit: int | None = None,
        **narrowed: Unpack[ListFilter],
    ) -> builtins.list[Job]:
        """The newest `limit` jobs (default 100, at most 5,000) of the tenant, narrowed by status, job type,
        kind (`"template"` or `"run"`) or template (`template_id`: its runs)."""
        return await self._call(_calls.list_jobs(tenant_id or self.tenant_id, status, limit, narrowed))

    async def apply_schedules(
        self,
        schedules: Iterable[tuple[str, Schedule]],
        *,
        tenant_id: str | None = None,
        removed: str = "keep",
        dry_run: bool = False,
    ) -> Applied:
        """Make the tenant's schedules applied from a file what `schedules` declares ((job type, Schedule) pairs):
        created, updated in place, and those applied earlier that are not given any more reported, or paused or
        cancelled (`removed`). With `dry_run`, only say what it would do. Their payloads are dicts."""
        tenant = tenant_id or self.tenant_id
        bodies = [_calls.schedule_body(s, tenant) for s in schedules]
        return await self._call(_calls.apply_schedules(bodies, tenant, removed, dry_run))

    async def dead_letters(self, tenant_id: str | None = None) -> builtins.list[DeadLetters]:
        """The DLQ grouped by last error, largest group first, each with its most recent jobs."""
        return await self._call(_calls.dead_letters(tenant_id or self.tenant_id))

    async def redrive(
        self,
        job_ids: Iterable[str] | None = None,
        *,
        last_error: str | None = None,
        tenant_id: str | None = None,
    ) -> Redriven:
        """Send dead letters back to pending: the jobs named, or every one whose last error is `last_error` (of
        the tenant; `Redriven.more` says a group had more than one call re-drives)."""
        if (job_ids is None) == (last_error is None):
            raise ValueError("give job_ids or last_error, not both and not neither")
        ids = None if job_ids is None else builtins.list(job_ids)
        return await self._call(_calls.redrive(ids, last_error, tenant_id or self.tenant_id))

    async def cancel(self, job_id: str) -> Job:
        return await self._call(_calls.cancel(job_id))

    async def retry(self, job_id: str) -> Job:
        return await self._call(_calls.retry(job_id))

    async def executions(self, job_id: str) -> builtins.list[Execution]:
        return await self._call(_calls.executions(job_id))

    async def job_types(self) -> builtins.list[ServedType]:
        return await self._call(_calls.job_types())

    async def limits(self, job_type: str) -> TypeLimits:
        """The type's limits: in force, registered with its handler, and an operator's."""
        return await self._call(_calls.type_limits(job_type))

    async def set_limits(self, job_type: str, limits: Limits) -> TypeLimits:
        """An operator's limits for the type, in place of the registered ones (an admin key with AUTH=required)."""
        return await self._call(_calls.set_limits(job_type, limits))

    async def clear_limits(self, job_type: str) -> TypeLimits:
        """Remove the operator's limits: the ones registered with the handler apply again."""
        return await self._call(_calls.clear_limits(job_type))

    async def signing_secrets(self, tenant_id: str | None = None) -> builtins.list[SigningSecret]:
        """The tenant's live secrets its http jobs' requests are signed with (a writer key with AUTH=required)."""
        return await self._call(_calls.signing_secrets(tenant_id or self.tenant_id))

    async def add_signing_secret(self, tenant_id: str | None = None) -> SigningSecret:
        """A new signing secret (Conflict when the tenant has two: remove one first)."""
        return await self._call(_calls.add_signing_secret(tenant_id or self.tenant_id))

    async def remove_signing_secret(self, secret_id: str, tenant_id: str | None = None) -> None:
        """Requests are no longer signed with it (NotFound when the tenant has no such secret)."""
        await self._call(_calls.remove_signing_secret(secret_id, tenant_id or self.tenant_id))

    async def credentials(self, tenant_id: str | None = None) -> builtins.list[Credential]:
        """The tenant's credentials for its http jobs' headers: names and times, never values."""
        return await self._call(_calls.credentials(tenant_id or self.tenant_id))

    async def set_credential(self, name: str, value: str, tenant_id: str | None = None) -> Credential:
        """Make the credential, or replace its value (a rotation): requests sent from now on carry the new one."""
        return await self._call(_calls.set_credential(name, value, tenant_id or self.tenant_id))

    async def delete_credential(self, name: str, tenant_id: str | None = None) -> None:
        """Jobs that name it fail their next attempt (NotFound when the tenant has no such credential)."""
        await self._call(_calls.delete_credential(name, tenant_id or self.tenant_id))

    def workflow(
        self,
        idempotency_key: str | None = None,
        *,
        name: str | None = None,
        tenant_id: str | None = None,
        scheduled_at: datetime | str | None = None,
    ) -> WorkflowBuilder[Awaitable[Workflow], Awaitable[Job]]:
        """A workflow to build (see Client.workflow); `await builder.submit()` makes it."""
        return WorkflowBuilder(
            self._submit_workflow,
            self._call,
            idempotency_key,
            name=name,
            tenant_id=tenant_id or self.tenant_id,
            scheduled_at=scheduled_at,
        )

    async def get_workflow(self, workflow_id: str) -> Workflow:
        """A workflow with its steps and their jobs' statuses (NotFound for an unknown id or another tenant's)."""
        return await self._call(_calls.get_workflow(workflow_id))

    async def workflows(
        self, tenant_id: str | None = None, *, limit: int | None = None, before: str | Workflow | None = None
    ) -> builtins.list[Workflow]:
        """The tenant's newest workflows, without their steps (`step_count` says how many); the next page is
        `before=` the last one of this page."""
        return await self._call(_calls.list_workflows(tenant_id or self.tenant_id, limit, before))

    async def cancel_workflow(self, workflow_id: str) -> Workflow:
        """Cancel every unfinished step of the workflow (a running one is asked to stop); returns the workflow."""
        return await self._call(_calls.cancel_workflow(workflow_id))

    async def wait(
        self,
        job_id: str,
        statuses: Iterable[str] | str | None = None,
        timeout: float = 60.0,  # noqa: ASYNC109 - the same call as Client.wait
        poll: float = 0.2,
    ) -> Job:
        wanted = _calls.wanted_statuses(statuses)
        return await _polled(partial(self.get, job_id), lambda j: j.status in wanted, f"job {job_id}", timeout, poll)

    async def batch(
        self,
        idempotency_key: str | None = None,
        *,
        name: str | None = None,
        tenant_id: str | None = None,
        on_complete: BatchCallback | None = None,
        on_success: BatchCallback | None = None,
    ) -> Batch:
        return await self._call(
            _batch_calls.create_batch(idempotency_key, tenant_id or self.tenant_id, name, on_complete, on_success)
        )

    async def add_to_batch(
        self, batch_id: str, job_type: str, payloads: Iterable[dict[str, Any]], **options: Unpack[ManyOptions]
    ) -> builtins.list[Enqueued]:
        results: builtins.list[Enqueued] = []
        for call in _batch_calls.add_to_batch(batch_id, job_type, builtins.list(payloads), options):
            added: builtins.list[Enqueued] = await self._call(call)
            results += added
        return results

    async def enqueue_to_batch(
        self, batch_id: str, job_type: JobType[P, Any], payloads: Iterable[P], **options: Unpack[ManyOptions]
    ) -> builtins.list[Enqueued]:
        return await self.add_to_batch(batch_id, job_type.name, [job_type.encode(p) for p in payloads], **options)

    async def seal_batch(self, batch_id: str) -> Batch:
        return await self._call(_batch_calls.seal_batch(batch_id))

    async def get_batch(self, batch_id: str) -> Batch:
        return await self._call(_batch_calls.get_batch(batch_id))

    async def batch_members(
        self, batch_id: str, *, status: str | None = None, limit: int | None = None, after: str | None = None
    ) -> BatchMembers:
        return await self._call(_batch_calls.batch_members(batch_id, status, limit, after))

    async def batches(
        self, tenant_id: str | None = None, *, limit: int | None = None, before: str | Batch | None = None
    ) -> builtins.list[Batch]:
        return await self._call(_batch_calls.list_batches(tenant_id or self.tenant_id, limit, before))

    async def wait_batch(
        self,
        batch_id: str,
        timeout: float = 60.0,  # noqa: ASYNC109 - the same call as Client.wait_batch
        poll: float = 0.2,
    ) -> Batch:
        read = partial(self.get_batch, batch_id)
        return await _polled(read, lambda b: b.finished, f"batch {batch_id}", timeout, poll)

    async def wait_workflow(
        self,
        workflow_id: str,
        timeout: float = 60.0,  # noqa: ASYNC109 - the same call as Client.wait_workflow
        poll: float = 0.2,
    ) -> Workflow:
        read = partial(self.get_workflow, workflow_id)
        return await _polled(read, lambda w: w.finished, f"workflow {workflow_id}", timeout, poll)

    async def _submit_workflow(self, call: Call[Workflow]) -> Workflow:
        exchange = Exchange(call, self._retries)
        try:
            return await self._send(exchange)
        except DuplicateWorkflow as duplicate:
            if exchange.retried and duplicate.workflow_id:  # an earlier try of this very call landed
                return await self.get_workflow(duplicate.workflow_id)
            raise

    async def _call(self, call: Call[T]) -> T:
        return await self._send(Exchange(call, self._retries))

    async def _send(self, exchange: Exchange[T]) -> T:
        call = exchange.call
        while True:
            try:
                exchange.sending()
                try:
                    response = await self._http.request(
                        call.method, call.path, params=call.params, json=call.body, headers=_calls.trace_headers()
                    )
                except httpx.TransportError as exc:
                    exchange.failed(exc)
                return exchange.answered(response)
            except RetryIn as retry:
                await asyncio.sleep(retry.delay)


Read = TypeVar("Read", Job, Workflow, Batch)


async def _polled(
    read: Callable[[], Awaitable[Read]],
    done: Callable[[Read], bool],
    what: str,
    timeout: float,  # noqa: ASYNC109 - the wait methods' own argument: polls stop by it, not by cancellation
    poll: float,
) -> Read:
    """Client._polled's loop, awaited."""
    deadline = time.monotonic() + timeout
    while True:
        found = await read()
        if done(found):
            return found
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"{what} is {found.status} after {timeout:g}s", found)
        await asyncio.sleep(min(poll, max(deadline - time.monotonic(), 0)))
