"""The blocking client."""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Iterable
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

    @property
    def base_url(self) -> str:
        """The API this client talks to."""
        return str(self._http.base_url)

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

    def enqueue(self, job_type: JobType[P, Any], payload: P, **options: Unpack[CreateOptions]) -> Job:
        """`create` for a job type of a JobTypes collection, with its payload as the handler takes it (a
        dataclass, a model or a dict): type checkers check `payload` against the handler's, and a payload of
        another type is a TypeError here rather than a failed attempt later."""
        return self.create(job_type.name, job_type.encode(payload), **options)

    def create_many(
        self, job_type: str, payloads: Iterable[dict[str, Any]], **options: Unpack[ManyOptions]
    ) -> builtins.list[Enqueued]:
        """One-off jobs of `job_type`, one per payload (any number: sent 1,000 a request), each created or
        refused on its own: one Enqueued per payload, in order (see Enqueued; the same options for all, see
        ManyOptions). Raises only for a request refused whole or the API unreachable."""
        results: builtins.list[Enqueued] = []
        for call in _calls.create_many(job_type, builtins.list(payloads), self.tenant_id, options):
            batch: builtins.list[Enqueued] = self._call(call)
            results += batch
        return results

    def enqueue_many(
        self, job_type: JobType[P, Any], payloads: Iterable[P], **options: Unpack[ManyOptions]
    ) -> builtins.list[Enqueued]:
        """`create_many` for a job type of a JobTypes collection, with payloads as the handler takes them
        (checked like `enqueue`'s, before anything is sent)."""
        return self.create_many(job_type.name, [job_type.encode(p) for p in payloads], **options)

    def upsert(
        self,
        job_type: str,
        idempotency_key: str,
        payload: dict[str, Any] | None = None,
        **options: Unpack[JobOptions],
    ) -> Job:
        """Create the job or template `idempotency_key` names, or make the one that holds the key what this
        call declares: the fields given here that differ are PATCHed (left-out fields keep their values; nothing
        is sent when nothing differs, so a deploy that declares the same schedule again changes nothing).
        Conflict when the key's holder is of another type or kind, finished (delete it first) or, for a one-off
        job, no longer pending."""
        call = _calls.create(
            job_type,
            payload,
            self.tenant_id,
            CreateOptions(**options, idempotency_key=idempotency_key, depends_on=None, on_parent_failure=None),
        )
        try:
            return self._send(Exchange(call, self._retries))
        except DuplicateJob as duplicate:
            if not duplicate.job_id:
                raise
            existing = self.get(duplicate.job_id)
        assert call.body is not None
        changes = _calls.upsert_changes(existing, call.body, options.get("scheduled_at") is not None)
        return self._call(_calls.patch(existing.id, changes)) if changes else existing

    def update(self, job_id: str, **options: Unpack[UpdateOptions]) -> Job:
        """Change a template (schedule, payload, limits, policy) or a pending one-off job (scheduled_at,
        priority, payload); see UpdateOptions."""
        return self._call(_calls.update(job_id, options))

    def pause(self, job_id: str, note: str | None = None) -> Job:
        """Stop a template firing until resume; `note` says why (its pauseNote). Triggers still run."""
        return self._call(_calls.pause(job_id, note))

    def resume(self, job_id: str) -> Job:
        """Let a paused template fire again, from its first fire time after now (the missed ones do not run)."""
        return self._call(_calls.resume(job_id))

    def trigger(
        self,
        job_id: str,
        payload: dict[str, Any] | None = None,
        *,
        overlap: str | None = None,
        idempotency_key: str | None = None,
    ) -> Job:
        """One run of a template now (with its payload unless `payload`), returned. The same `idempotency_key`
        again gives the same run."""
        return self._call(_calls.trigger(job_id, payload, overlap, idempotency_key))

    def backfill(
        self, job_id: str, start: datetime | str, end: datetime | str, *, overlap: str | None = None
    ) -> Backfilled:
        """A run for each fire time of a template in [start, end); sending it again spawns nothing twice."""
        return self._call(_calls.backfill(job_id, start, end, overlap))

    def runs(self, job_id: str, *, limit: int | None = None) -> builtins.list[Job]:
        """A template's runs, newest first."""
        return self._call(_calls.runs(job_id, limit))

    def upcoming(self, job_id: str, count: int | None = None) -> builtins.list[datetime]:
        """A template's next fire times (UTC); empty while it is paused or once it has ended."""
        return self._call(_calls.upcoming(job_id, count))

    def preview(
        self,
        *,
        cron: str | None = None,
        interval: str | None = None,
        timezone: str | None = None,
        count: int | None = None,
    ) -> builtins.list[datetime]:
        """The next fire times of a schedule, before creating it (BadRequest names what is wrong with it)."""
        return self._call(_calls.preview(cron, interval, timezone, count))

    def delete(self, job_id: str) -> Deleted:
        """Remove a finished job, or a finished template with all its runs, and their attempt records; the
        idempotency key is free again. Conflict while the job (or a run) is unfinished."""
        return self._call(_calls.delete(job_id))

    def get(self, job_id: str) -> Job:
        return self._call(_calls.get(job_id))

    def list(
        self,
        tenant_id: str | None = None,
        *,
        status: str | None = None,
        limit: int | None = None,
        **narrowed: Unpack[ListFilter],
    ) -> builtins.list[Job]:
        """The newest `limit` jobs (default 100, at most 5,000) of the tenant, narrowed by status, job type,
        kind (`"template"` or `"run"`) or template (`template_id`: its runs)."""
        return self._call(_calls.list_jobs(tenant_id or self.tenant_id, status, limit, narrowed))

    def apply_schedules(
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
        return self._call(_calls.apply_schedules(bodies, tenant, removed, dry_run))

    def dead_letters(self, tenant_id: str | None = None) -> builtins.list[DeadLetters]:
        """The DLQ grouped by last error, largest group first, each with its most recent jobs."""
        return self._call(_calls.dead_letters(tenant_id or self.tenant_id))

    def redrive(
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
        return self._call(_calls.redrive(ids, last_error, tenant_id or self.tenant_id))

    def cancel(self, job_id: str) -> Job:
        """The cancelled job, or (running) the job with `cancel_requested`: its executor stops it."""
        return self._call(_calls.cancel(job_id))

    def retry(self, job_id: str) -> Job:
        """Re-drive a job from the DLQ."""
        return self._call(_calls.retry(job_id))

    def executions(self, job_id: str) -> builtins.list[Execution]:
        return self._call(_calls.executions(job_id))

    def job_types(self) -> builtins.list[ServedType]:
        return self._call(_calls.job_types())

    def limits(self, job_type: str) -> TypeLimits:
        """The type's limits: in force, registered with its handler, and an operator's."""
        return self._call(_calls.type_limits(job_type))

    def set_limits(self, job_type: str, limits: Limits) -> TypeLimits:
        """An operator's limits for the type, in place of the registered ones (an admin key with AUTH=required)."""
        return self._call(_calls.set_limits(job_type, limits))

    def clear_limits(self, job_type: str) -> TypeLimits:
        """Remove the operator's limits: the ones registered with the handler apply again."""
        return self._call(_calls.clear_limits(job_type))

    def signing_secrets(self, tenant_id: str | None = None) -> builtins.list[SigningSecret]:
        """The tenant's live secrets its http jobs' requests are signed with (a writer key with AUTH=required)."""
        return self._call(_calls.signing_secrets(tenant_id or self.tenant_id))

    def add_signing_secret(self, tenant_id: str | None = None) -> SigningSecret:
        """A new signing secret (Conflict when the tenant has two: remove one first)."""
        return self._call(_calls.add_signing_secret(tenant_id or self.tenant_id))

    def remove_signing_secret(self, secret_id: str, tenant_id: str | None = None) -> None:
        """Requests are no longer signed with it (NotFound when the tenant has no such secret)."""
        self._call(_calls.remove_signing_secret(secret_id, tenant_id or self.tenant_id))

    def credentials(self, tenant_id: str | None = None) -> builtins.list[Credential]:
        """The tenant's credentials for its http jobs' headers: names and times, never values."""
        return self._call(_calls.credentials(tenant_id or self.tenant_id))

    def set_credential(self, name: str, value: str, tenant_id: str | None = None) -> Credential:
        """Make the credential, or replace its value (a rotation): requests sent from now on carry the new one."""
        return self._call(_calls.set_credential(name, value, tenant_id or self.tenant_id))

    def delete_credential(self, name: str, tenant_id: str | None = None) -> None:
        """Jobs that name it fail their next attempt (NotFound when the tenant has no such credential)."""
        self._call(_calls.delete_credential(name, tenant_id or self.tenant_id))

    def workflow(
        self,
        idempotency_key: str | None = None,
        *,
        name: str | None = None,
        tenant_id: str | None = None,
        scheduled_at: datetime | str | None = None,
    ) -> WorkflowBuilder[Workflow, Job]:
        """A workflow to build: add its steps to the builder, then `submit()` makes them all in one request and
        returns the Workflow. Nothing is sent before. An idempotency key is generated when none is given; the
        first steps are due at `scheduled_at` (default now)."""
        return WorkflowBuilder(
            self._submit_workflow,
            self._call,
            idempotency_key,
            name=name,
            tenant_id=tenant_id or self.tenant_id,
            scheduled_at=scheduled_at,
        )

    def get_workflow(self, workflow_id: str) -> Workflow:
        """A workflow with its steps and their jobs' statuses (NotFound for an unknown id or another tenant's)."""
        return self._call(_calls.get_workflow(workflow_id))

    def workflows(
        self, tenant_id: str | None = None, *, limit: int | None = None, before: str | Workflow | None = None
    ) -> builtins.list[Workflow]:
        """The tenant's newest workflows, without their steps (`step_count` says how many); the next page is
        `before=` the last one of this page."""
        return self._call(_calls.list_workflows(tenant_id or self.tenant_id, limit, before))

    def cancel_workflow(self, workflow_id: str) -> Workflow:
        """Cancel every unfinished step of the workflow (a running one is asked to stop); returns the workflow."""
        return self._call(_calls.cancel_workflow(workflow_id))

    def wait(
        self, job_id: str, statuses: Iterable[str] | str | None = None, timeout: float = 60.0, poll: float = 0.2
    ) -> Job:
        """Poll until the job is in one of `statuses` (default: completed, dlq or cancelled); raise WaitTimeout
        after `timeout` seconds."""
        wanted = _calls.wanted_statuses(statuses)
        return _polled(partial(self.get, job_id), lambda j: j.status in wanted, f"job {job_id}", timeout, poll)

    def batch(
        self,
        idempotency_key: str | None = None,
        *,
        name: str | None = None,
        tenant_id: str | None = None,
        on_complete: BatchCallback | None = None,
        on_success: BatchCallback | None = None,
    ) -> Batch:
        """Create an open batch with its callbacks (`jobsched.client.callback(...)`): onComplete runs once every
        member has ended, onSuccess once every member completed (cancelled when one did not). Add members with
        `add_to_batch`, then `seal_batch`. DuplicateBatch (409) when the key is taken."""
        return self._call(
            _batch_calls.create_batch(idempotency_key, tenant_id or self.tenant_id, name, on_complete, on_success)
        )

    def add_to_batch(
        self, batch_id: str, job_type: str, payloads: Iterable[dict[str, Any]], **options: Unpack[ManyOptions]
    ) -> builtins.list[Enqueued]:
        """`create_many` into the batch (of its tenant): one Enqueued per payload, 1,000 a request. A sealed
        batch is a Conflict (409)."""
        results: builtins.list[Enqueued] = []
        for call in _batch_calls.add_to_batch(batch_id, job_type, builtins.list(payloads), options):
            added: builtins.list[Enqueued] = self._call(call)
            results += added
        return results

    def enqueue_to_batch(
        self, batch_id: str, job_type: JobType[P, Any], payloads: Iterable[P], **options: Unpack[ManyOptions]
    ) -> builtins.list[Enqueued]:
        """`add_to_batch` for a JobType, each payload checked as `enqueue` checks it."""
        return self.add_to_batch(batch_id, job_type.name, [job_type.encode(p) for p in payloads], **options)

    def seal_batch(self, batch_id: str) -> Batch:
        """No more members: the callbacks fire once every member has ended (at once if all have)."""
        return self._call(_batch_calls.seal_batch(batch_id))

    def get_batch(self, batch_id: str) -> Batch:
        """A batch and its progress: its members counted by status."""
        return self._call(_batch_calls.get_batch(batch_id))

    def batch_members(
        self, batch_id: str, *, status: str | None = None, limit: int | None = None, after: str | None = None
    ) -> BatchMembers:
        """A page of the batch's members (each one's job id and status), by status then id, of `status` only when
        given (which failed: "dlq"); the next page is `after=` this one's `next`."""
        return self._call(_batch_calls.batch_members(batch_id, status, limit, after))

    def batches(
        self, tenant_id: str | None = None, *, limit: int | None = None, before: str | Batch | None = None
    ) -> builtins.list[Batch]:
        """The tenant's newest batches; the next page is `before=` the last of this one."""
        return self._call(_batch_calls.list_batches(tenant_id or self.tenant_id, limit, before))

    def wait_batch(self, batch_id: str, timeout: float = 60.0, poll: float = 0.2) -> Batch:
        """Poll until the batch is sealed and every member has ended; raise WaitTimeout after `timeout` s."""
        return _polled(partial(self.get_batch, batch_id), lambda b: b.finished, f"batch {batch_id}", timeout, poll)

    def wait_workflow(self, workflow_id: str, timeout: float = 60.0, poll: float = 0.2) -> Workflow:
        """Poll until every step of the workflow has ended (succeeded, failed or cancelled); raise WaitTimeout
        after `timeout` seconds."""
        read = partial(self.get_workflow, workflow_id)
        return _polled(read, lambda w: w.finished, f"workflow {workflow_id}", timeout, poll)

    def _submit_workflow(self, call: Call[Workflow]) -> Workflow:
        exchange = Exchange(call, self._retries)
        try:
            return self._send(exchange)
        except DuplicateWorkflow as duplicate:
            if exchange.retried and duplicate.workflow_id:  # an earlier try of this very call landed
                return self.get_workflow(duplicate.workflow_id)
            raise

    def _call(self, call: Call[T]) -> T:
        return self._send(Exchange(call, self._retries))

    def _send(self, exchange: Exchange[T]) -> T:
        call = exchange.call
        while True:
            try:
                exchange.sending()
                try:
                    response = self._http.request(
                        call.method, call.path, params=call.params, json=call.body, headers=_calls.trace_headers()
                    )
                except httpx.TransportError as exc:
                    exchange.failed(exc)
                return exchange.answered(response)
            except RetryIn as retry:
                time.sleep(retry.delay)


Read = TypeVar("Read", Job, Workflow, Batch)


def _polled(read: Callable[[], Read], done: Callable[[Read], bool], what: str, timeout: float, poll: float) -> Read:
    """`read()` every `poll` seconds until `done` says so; WaitTimeout naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = read()
        if done(found):
            return found
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"{what} is {found.status} after {timeout:g}s", found)
        time.sleep(min(poll, max(deadline - time.monotonic(), 0)))
