"""A running executor (real threads, heartbeat) on both stores: cancellation of running sync and async
handlers, the handler's context, and a type's registered defaults. The bus is the in-process one."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest
from bson import ObjectId

from jobsched import HandlerContext, HandlerError, JobTypes, Payload
from jobsched.backoff import Backoff
from shared.bus.base import Wakeup
from shared.bus.memory import MemoryBus
from shared.model import Job, Outcome, Status
from shared.store.base import JobStore, NewJob, RunSpec
from tests.executor_support import executor_of, running
from tests.support import wait_until

BEAT = timedelta(milliseconds=100)
SLOW_RETRY = Backoff(base_s=100, cap_s=1000)
RETRY_SOON = Backoff(base_s=0.05, cap_s=0.05)


class Handlers:
    """The test's own job types, and what their calls saw."""

    def __init__(self) -> None:
        self.registry = JobTypes()
        self.started: dict[str, threading.Event] = {}
        self.contexts: list[HandlerContext] = []
        self.release = threading.Event()
        register = self.registry.handler

        @register("careful")  # a plain function that checks the signal between steps
        def careful(payload: Payload, ctx: HandlerContext) -> None:
            self._started(ctx)
            while not ctx.cancelled.wait(0.02):
                pass
            raise HandlerError("stopped: cancelled")

        @register("sleepy")  # async: its task is cancelled
        async def sleepy(payload: Payload, ctx: HandlerContext) -> None:
            self._started(ctx)
            await asyncio.sleep(60)

        @register("stubborn")  # ignores the signal and finishes
        def stubborn(payload: Payload, ctx: HandlerContext) -> None:
            self._started(ctx)
            self.release.wait(30)

        @register("quick-timeout", timeout=0.3)
        async def quick_timeout(payload: Payload, ctx: HandlerContext) -> None:
            await asyncio.sleep(5)

        @register("slow-retry", backoff=SLOW_RETRY)
        def slow_retry(payload: Payload, ctx: HandlerContext) -> None:
            raise HandlerError("try again later")

        @register("fails-once", backoff=RETRY_SOON)
        def fails_once(payload: Payload, ctx: HandlerContext) -> None:
            self._started(ctx)
            if ctx.attempt == 1:
                raise HandlerError("the first try failed")

    def _started(self, ctx: HandlerContext) -> None:
        self.contexts.append(ctx)
        ctx.logger.info("handler started", extra={"action": "test_handler_started"})
        self.started.setdefault(ctx.job_id, threading.Event()).set()

    def wait_started(self, job_id: str) -> None:
        event = self.started.setdefault(job_id, threading.Event())
        assert event.wait(30), f"handler of {job_id} never started"


@pytest.fixture
def handlers() -> Handlers:
    return Handlers()


@pytest.fixture
def bus() -> MemoryBus:
    return MemoryBus()


@pytest.fixture
def run_executors(api_store: JobStore, bus: MemoryBus, handlers: Handlers) -> Iterator[None]:
    executors = [
        executor_of(api_store, bus, handlers.registry, t, bus.subscribe(t), f"w-{t}", heartbeat=BEAT)
        for t in handlers.registry.names()
    ]
    with running(*executors):
        yield
        handlers.release.set()


def dispatch(store: JobStore, bus: MemoryBus, job_type: str, **fields: Any) -> Job:
    """Create a due job, claim it and publish its wake-up, as the scheduler does."""
    due = datetime.now(UTC) - timedelta(seconds=1)
    job = store.create(
        NewJob(idempotencyKey=f"k-{ObjectId()}", tenantId="tenant-c", jobType=job_type, scheduledAt=due, **fields)
    )
    [queued] = [j for j in store.claim_due_jobs(datetime.now(UTC), 100, {job_type}) if j.id == job.id]
    assert not bus.publish_wakeups([Wakeup(jobId=queued.id, jobType=job_type, priority=0, attempt=1)])
    return queued


def claim_when_due(store: JobStore, job: Job) -> Job | None:
    claimed = [j for j in store.claim_due_jobs(datetime.now(UTC), 100, {job.jobType}) if j.id == job.id]
    return claimed[0] if claimed else None


def final(store: JobStore, job: Job) -> Job:
    def done() -> Job | None:
        current = store.get(job.id)
        return (
            current
            if current is not None and current.status not in (Status.QUEUED, Status.CLAIMED, Status.RUNNING)
            else None
        )

    return wait_until(done, 30, f"job {job.id} to end")


@pytest.mark.usefixtures("run_executors")
@pytest.mark.parametrize("job_type", ["careful", "sleepy"])
def test_cancelling_a_running_handler_ends_the_job_cancelled_with_one_outcome(
    api_store: JobStore, bus: MemoryBus, handlers: Handlers, job_type: str
) -> None:
    job = dispatch(api_store, bus, job_type, maxAttempts=5)
    handlers.wait_started(job.id)
    requested = api_store.cancel(job.id)
    assert (requested.status, requested.cancelRequested) == (Status.RUNNING, True)
    ended = final(api_store, job)
    assert (ended.status, ended.attempts) == (Status.CANCELLED, 1)
    [record] = api_store.list_executions(job.id)
    assert record.outcome is Outcome.CANCELLED
    assert str(record.error).startswith("cancelled while running")


@pytest.mark.usefixtures("run_executors")
def test_a_handler_that_ignores_the_signal_has_its_result_recorded(
    api_store: JobStore, bus: MemoryBus, handlers: Handlers
) -> None:
    job = dispatch(api_store, bus, "stubborn")
    handlers.wait_started(job.id)
    api_store.cancel(job.id)
    ctx = next(c for c in handlers.contexts if c.job_id == job.id)
    assert ctx.cancelled.wait(10), "the heartbeat should have signalled the handler"
    handlers.release.set()
    ended = final(api_store, job)
    assert (ended.status, ended.cancelRequested) == (Status.COMPLETED, True)
    assert [e.outcome for e in api_store.list_executions(job.id)] == [Outcome.SUCCEEDED]


@pytest.mark.usefixtures("run_executors")
def test_the_context_carries_the_jobs_ids_and_a_bound_logger(
    api_store: JobStore, bus: MemoryBus, handlers: Handlers, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="jobsched.handler")
    job = dispatch(api_store, bus, "careful")
    handlers.wait_started(job.id)
    api_store.cancel(job.id)
    final(api_store, job)
    ctx = next(c for c in handlers.contexts if c.job_id == job.id)
    assert (ctx.tenant_id, ctx.scheduled_at, ctx.attempt, ctx.job_type) == ("tenant-c", job.scheduledAt, 1, "careful")
    [record] = [r for r in caplog.records if getattr(r, "action", None) == "test_handler_started"]
    assert (record.jobId, record.tenantId, record.attempt, record.jobType) == (job.id, "tenant-c", 1, "careful")  # type: ignore[attr-defined]


@pytest.mark.usefixtures("run_executors")
def test_a_template_runs_context_says_which_fire_time_it_runs_for_also_when_retried(
    api_store: JobStore, bus: MemoryBus, handlers: Handlers
) -> None:
    """A nightly report retried the next morning still knows which night it covers: planned_at stays the fire
    time while scheduled_at moves with the retry's backoff."""
    template = api_store.create(
        NewJob(
            idempotencyKey=f"nightly-{ObjectId()}",
            tenantId="tenant-c",
            jobType="fails-once",
            scheduledAt=datetime(2030, 1, 1, 2, tzinfo=UTC),
            cron="0 2 * * *",
            backoff=RETRY_SOON,  # the type's, as the API stores it on the template
        )
    )
    night = datetime(2026, 1, 1, 2, tzinfo=UTC)
    run, _ = api_store.add_run(template, RunSpec(night, scheduledAt=datetime.now(UTC) - timedelta(seconds=1)))
    for attempt in (1, 2):  # as the scheduler would: claimed once due (the retry after its backoff), dispatched
        claimed = wait_until(partial(claim_when_due, api_store, run), 30, f"attempt {attempt} to be claimed")
        assert not bus.publish_wakeups([Wakeup(jobId=claimed.id, jobType="fails-once", priority=0, attempt=attempt)])
        handlers.wait_started(run.id)
        handlers.started.pop(run.id)
    assert final(api_store, run).status is Status.COMPLETED
    first, retry = [c for c in handlers.contexts if c.job_id == run.id]
    assert (first.planned_at, first.template_id, first.scheduled_at) == (night, template.id, run.scheduledAt)
    assert (retry.planned_at, retry.template_id, retry.attempt) == (night, template.id, 2)
    assert retry.scheduled_at > first.scheduled_at  # the retry's due time, after its backoff
    one_off = dispatch(api_store, bus, "fails-once", maxAttempts=1)
    handlers.wait_started(one_off.id)
    ctx = next(c for c in handlers.contexts if c.job_id == one_off.id)
    assert (ctx.planned_at, ctx.template_id) == (None, None)


@pytest.mark.usefixtures("run_executors")
def test_a_types_registered_timeout_and_backoff_apply_unless_the_job_sets_its_own(
    api_store: JobStore, bus: MemoryBus
) -> None:
    timed_out = final(api_store, dispatch(api_store, bus, "quick-timeout", maxAttempts=1))
    [record] = api_store.list_executions(timed_out.id)
    assert (timed_out.status, record.outcome, record.error) == (Status.DLQ, Outcome.TIMEOUT, "timed out after 0.3s")
    own = final(api_store, dispatch(api_store, bus, "quick-timeout", maxAttempts=1, timeoutSeconds=0.1))
    assert api_store.list_executions(own.id)[0].error == "timed out after 0.1s"
    # The type's backoff, as the API stores it on the jobs it creates: the executor retries with the job's.
    retried = final(api_store, dispatch(api_store, bus, "slow-retry", maxAttempts=3, backoff=SLOW_RETRY))
    [failed] = api_store.list_executions(retried.id)
    assert retried.status is Status.PENDING
    assert failed.finishedAt is not None
    assert retried.scheduledAt == failed.finishedAt + timedelta(seconds=200)  # 100 s x 2^1: the type's backoff
