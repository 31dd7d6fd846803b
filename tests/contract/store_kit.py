"""Building blocks of the store contract tests: jobs to create, the steps that move them, races."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any, TypeVar

from bson import ObjectId

from shared.model import TERMINAL, Job, Outcome, Status, utc_now
from shared.store.base import (
    AttemptResult,
    AttemptStart,
    AttemptTaken,
    JobStore,
    NewJob,
    RunSpec,
    StartHint,
    TransitionRefused,
)
from tests.support import start_one

T = TypeVar("T")
LEASE = timedelta(minutes=5)
RACE_TIMEOUT_S = 60


def new(key: str | None = None, **fields: Any) -> NewJob:
    values: dict[str, Any] = {
        "idempotencyKey": key or f"k-{ObjectId()}",
        "tenantId": "tenant-a",
        "jobType": "noop",
        "scheduledAt": utc_now() - timedelta(minutes=1),
    }
    values.update(fields)
    return NewJob(**values)


def claim_one(store: JobStore, job: Job, now: datetime | None = None) -> Job:
    """Claim every due job of `job`'s type and return `job` as queued (tests give it a type of its own
    when other jobs of that type must stay pending)."""
    [claimed] = [j for j in store.claim_due_jobs(now or utc_now(), 1000, {job.jobType}) if j.id == job.id]
    return claimed


def queued(store: JobStore, **fields: Any) -> Job:
    return claim_one(store, store.create(new(**fields)))


def running(store: JobStore, worker: str = "w1", lease_until: datetime | None = None, **fields: Any) -> Job:
    return start(store, queued(store, **fields), worker, lease_until)


def start(store: JobStore, job: Job, worker: str = "w1", lease_until: datetime | None = None) -> Job:
    """What an executor does with `job`'s wake-up (without a claim hint)."""
    return start_one(store, AttemptStart(job.id, job.jobType, worker, lease_until or utc_now() + LEASE))


def hint(job: Job) -> StartHint:
    """The hint a wake-up for `job` (as the scheduler claimed it) carries (SQLite has no claim tokens)."""
    return StartHint(job.claimToken or "no-claim", job.next_attempt)


# The jobs of one_in_every_status that are not final (those that may still run an attempt, or spawn runs).
NOT_FINAL_ONES = frozenset({"pending", "queued", "running", "template", "buffered"})


def one_in_every_status(store: JobStore, job_type: str) -> dict[str, Job]:
    """A job of `job_type` in each status a store keeps, by name: pending, queued, running, a template and a
    buffered run of it, completed, dlq and cancelled."""
    later = utc_now() + timedelta(days=1)
    made: dict[str, Job | None] = {
        "completed": store.finish_attempt(running(store, jobType=job_type), result(Outcome.SUCCEEDED)),
        "dlq": store.finish_attempt(running(store, jobType=job_type, maxAttempts=1), result(Outcome.FAILED, "x")),
        "running": running(store, jobType=job_type),
        "queued": queued(store, jobType=job_type),
        "pending": store.create(new(jobType=job_type, scheduledAt=later)),
        "cancelled": store.cancel(store.create(new(jobType=job_type, scheduledAt=later)).id),
        "template": store.create(new(jobType=job_type, cron="0 3 * * *", scheduledAt=later)),
    }
    template = made["template"]
    assert template is not None
    made["buffered"], _ = store.add_run(template, RunSpec(later, status=Status.BUFFERED))
    jobs = {name: job for name, job in made.items() if job is not None}
    assert len(jobs) == len(made)
    return jobs


def claimed_batch(store: JobStore, count: int, job_type: str = "noop") -> list[Job]:
    for i in range(count):
        store.create(new(jobType=job_type, priority=i % 3))
    return list(store.claim_due_jobs(utc_now(), count, {job_type}))


def result(outcome: Outcome, error: str | None = None, duration: timedelta = timedelta(0)) -> AttemptResult:
    finished = utc_now()
    return AttemptResult(outcome=outcome, startedAt=finished - duration, finishedAt=finished, error=error)


def reload(store: JobStore, job: Job | str) -> Job:
    current = store.get(job if isinstance(job, str) else job.id)
    assert current is not None
    return current


def together(calls: list[Callable[[], T]], step: threading.Barrier | None = None) -> list[T | BaseException]:
    """Run the calls on their own threads, released at the same instant; each one's result or exception.
    Calls that loop pass `step` and wait on it every round, so each round is a race of its own (a fast store
    would otherwise let one thread finish all its rounds before the other one starts)."""
    start = step or threading.Barrier(len(calls))

    def run(call: Callable[[], T]) -> T:
        start.wait(RACE_TIMEOUT_S)
        if step is None:
            return call()  # a one-shot race: its expected exceptions (AttemptTaken...) are results
        try:
            return call()
        except BaseException:
            step.abort()  # release the others instead of leaving them waiting for a round that never comes
            raise

    with ThreadPoolExecutor(len(calls)) as pool:
        futures = [pool.submit(run, call) for call in calls]
        outcomes: list[T | BaseException] = []
        for future in futures:
            error = future.exception(RACE_TIMEOUT_S)
            outcomes.append(error if error is not None else future.result())
    return outcomes


def lockstep(threads: int = 2) -> threading.Barrier:
    return threading.Barrier(threads)


def is_utc_ms(moment: datetime | None) -> bool:
    return moment is not None and moment.utcoffset() == timedelta(0) and moment.microsecond % 1000 == 0


def drive_to_the_end(store: JobStore, job: Job, rounds: int = 4) -> Job:
    """What the running system does to a job (reaper sweeps, scheduler claims, executor runs), with the
    clock moved past every lease and backoff, until it is final or `rounds` rounds have passed."""
    for r in range(1, rounds + 1):
        current = reload(store, job)
        if current.status in TERMINAL:
            return current
        later = utc_now() + timedelta(hours=r)
        store.release_stale_claims(later)
        for expired in store.expired_attempts(later, 100):
            store.recover_attempt(expired, "lost")
        store.claim_due_jobs(later, 100, {job.jobType})
        current = reload(store, job)
        if current.status is Status.QUEUED:
            try:
                began = start(store, current, "rescuer", later + LEASE)
            except (AttemptTaken, TransitionRefused):
                continue
            store.finish_attempt(began, result(Outcome.SUCCEEDED))
    return reload(store, job)


def executor_or_reaper(
    jobs: list[Job], by_executor: Callable[[Job], Job | None], by_reaper: Callable[[Job], Job | None]
) -> list[bool]:
    """Race an executor's close and the reaper's close of each job's attempt, round by round; whether the
    executor won each one (exactly one of the two does)."""
    step = lockstep()

    def closing(close: Callable[[Job], Job | None]) -> Callable[[], list[bool]]:
        def run() -> list[bool]:
            won = []
            for job in jobs:
                step.wait(RACE_TIMEOUT_S)
                won.append(close(job) is not None)
            return won

        return run

    executor_won, reaper_won = together([closing(by_executor), closing(by_reaper)], step)
    assert isinstance(executor_won, list), executor_won
    assert isinstance(reaper_won, list), reaper_won
    for job, executor, reaper in zip(jobs, executor_won, reaper_won, strict=True):
        assert executor != reaper, job.id
    return executor_won
