"""A job is retried at its type's backoff as the API resolved it when the job was created, whoever closes the
attempt: the executor with its result, or the reaper with "lost" (invariant: one source, the job). On every store.

Jobs are made as POST /jobs makes them: the body validated, the type's defaults as its executors announced them in
the store (KnownTypes), the job stored."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

import pytest
from bson import ObjectId

from jobsched.backoff import DEFAULT_BACKOFF, Backoff
from jobsched.handlers import JobTypes
from jobsched.type_defaults import TypeDefaults
from services.api.new_job import new_job
from shared.job_types.known import KnownTypes
from shared.model import Job, Outcome, Status, utc_now
from shared.store.base import JobStore, RunSpec
from tests.contract.store_kit import claim_one, reload, result, start
from tests.support import backend_beside

SLOW = Backoff(base_s=30, cap_s=600)  # a first retry 60 s after the failure; the default's is 2 s
ANNOUNCED = "slow-retry"
NOT_ANNOUNCED = "configured-only"  # in JOB_TYPES: accepted before any executor of it announced itself
BEAT = timedelta(seconds=30)


def api_of(store: JobStore) -> Callable[..., Job]:
    """POST /jobs on `store`, once an executor announced ANNOUNCED with SLOW and a budget of 4: a body's fields
    in, the stored job out."""
    now = utc_now()
    registry = backend_beside(store).job_types
    registry.announce("exec-1", {ANNOUNCED: TypeDefaults(max_attempts=4, backoff=SLOW)}, now, now + BEAT)
    known = KnownTypes(registry, local=JobTypes(), configured=[NOT_ANNOUNCED])

    def create(job_type: str, **fields: object) -> Job:
        assert asyncio.run(known.accepts(job_type))  # what the API checks; its first call reads the announcements
        body = {"idempotencyKey": f"k-{ObjectId()}", "tenantId": "tenant-a", "jobType": job_type}
        if "cron" not in fields:
            body["scheduledAt"] = "2020-01-01T00:00:00Z"
        return store.create(new_job({**body, **fields}, known.defaults))

    return create


def failed_by_its_executor(store: JobStore, job: Job) -> Job:
    began = start(store, claim_one(store, job))
    closed = store.finish_attempt(began, result(Outcome.FAILED, "boom"))
    assert closed is not None
    return closed


def lost_to_the_reaper(store: JobStore, job: Job) -> Job:
    began = start(store, claim_one(store, job), lease_until=utc_now() - timedelta(seconds=1))
    [expired] = [j for j in store.expired_attempts(utc_now(), 100) if j.id == job.id]
    closed = store.recover_attempt(expired, "lost")
    assert closed is not None
    assert closed.attempts == began.attempts + 1
    return closed


CLOSERS = [pytest.param(failed_by_its_executor, id="executor"), pytest.param(lost_to_the_reaper, id="reaper")]


@pytest.mark.parametrize("close", CLOSERS)
def test_a_job_is_retried_at_its_types_backoff_whoever_closes_the_attempt(
    store: JobStore, close: Callable[[JobStore, Job], Job]
) -> None:
    create = api_of(store)
    job = create(ANNOUNCED)
    assert (job.maxAttempts, job.backoff) == (4, SLOW)  # resolved together, from the type's announcement
    assert "backoff" not in job.to_wire()  # kept by the store, never shown
    retried = close(store, job)
    assert (retried.status, retried.attempts) == (Status.PENDING, 1)
    # updatedAt is when the attempt ended, whoever ended it
    assert retried.scheduledAt == retried.updatedAt + SLOW.delay(1) == retried.updatedAt + timedelta(seconds=60)
    assert reload(store, job) == retried


@pytest.mark.parametrize("close", CLOSERS)
def test_a_job_of_a_type_not_announced_yet_is_retried_at_the_default(
    store: JobStore, close: Callable[[JobStore, Job], Job]
) -> None:
    create = api_of(store)
    job = create(NOT_ANNOUNCED)
    assert (job.maxAttempts, job.backoff) == (3, None)  # the defaults, as for its budget: nothing stored
    retried = close(store, job)
    assert retried.scheduledAt == retried.updatedAt + DEFAULT_BACKOFF.delay(1)  # 2 s


@pytest.mark.parametrize("close", CLOSERS)
def test_a_templates_runs_keep_the_backoff_it_was_created_with(
    store: JobStore, close: Callable[[JobStore, Job], Job]
) -> None:
    create = api_of(store)
    template = create(ANNOUNCED, cron="0 3 * * *")
    assert reload(store, template).backoff == SLOW
    run, _ = store.add_run(template, RunSpec(utc_now() - timedelta(seconds=1)))
    assert (run.maxAttempts, run.backoff) == (4, SLOW)
    retried = close(store, run)
    assert retried.scheduledAt == retried.updatedAt + timedelta(seconds=60)
    plain = create(NOT_ANNOUNCED, cron="0 3 * * *")
    plain_run, _ = store.add_run(plain, RunSpec(utc_now() - timedelta(seconds=1)))
    assert plain_run.backoff is None
