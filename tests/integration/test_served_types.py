"""Which types the scheduler claims (shared/job_types/served.py) and what executors announce, on both
stores: jobs of a type no live executor serves stay pending and are counted; an executor's announcement
makes them go out, its shutdown stops it counting as live."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from prometheus_client import REGISTRY

from jobsched.type_defaults import TypeDefaults
from services.executor.announcer import TypeAnnouncer
from services.scheduler.dispatcher import Dispatcher
from shared.bus.memory import MemoryBus
from shared.election.base import Term
from shared.handlers.builtin import builtin_types
from shared.job_types.served import ServedTypes
from shared.model import Status, utc_now
from shared.store.base import JobStore, NewJob
from tests.executor_support import executor_of, running
from tests.support import MovedClock, backend_beside, wait_until

BUILTIN_TYPES = builtin_types(demo=True)  # what the binaries serve by default


RETENTION = timedelta(days=7)
BEAT = timedelta(seconds=30)


def waiting(job_type: str) -> float | None:
    return REGISTRY.get_sample_value("scheduler_jobs_waiting_for_executor", {"job_type": job_type})


def status(store: JobStore, job_id: str) -> Status | None:
    job = store.get(job_id)
    return job.status if job else None


def due(store: JobStore, key: str, job_type: str) -> str:
    at = datetime.now(UTC) - timedelta(seconds=1)
    return store.create(NewJob(idempotencyKey=key, tenantId="t", jobType=job_type, scheduledAt=at)).id


def test_jobs_of_a_type_without_a_live_executor_stay_pending_and_are_counted(api_store: JobStore) -> None:
    types = backend_beside(api_store).job_types
    clock = MovedClock(1000.0)
    served = ServedTypes(types, ["noop", "fax-served-test"], retention=RETENTION, monotonic=clock)
    dispatcher = Dispatcher(api_store, MemoryBus(), served, batch=100)
    term = Term(token=1, trusted_until=math.inf)
    now = utc_now()
    types.announce("exec-noop", {"noop": TypeDefaults()}, now, now + BEAT)
    served_job = due(api_store, "served", "noop")
    unserved = [due(api_store, f"fax-{i}", "fax-served-test") for i in range(3)]
    nobody = due(api_store, "nobody", "never-announced-served-test")

    assert dispatcher.tick(term).claimed == 1
    assert status(api_store, served_job) is Status.QUEUED
    assert {status(api_store, job_id) for job_id in [*unserved, nobody]} == {Status.PENDING}  # not queued for nobody
    assert waiting("fax-served-test") == 3
    assert waiting("never-announced-served-test") == 1  # found by the due-types check

    clock.now += 60  # past the refresh and the waiting check
    now = utc_now()
    types.announce("exec-fax", {"fax-served-test": TypeDefaults()}, now, now + BEAT)
    assert dispatcher.tick(term).claimed == 3
    assert waiting("fax-served-test") == 0


def test_an_executor_announces_its_type_while_it_runs_and_withdraws_on_stop(api_store: JobStore) -> None:
    types = backend_beside(api_store).job_types
    bus = MemoryBus()
    heartbeat = timedelta(milliseconds=100)
    announcer = TypeAnnouncer(types, "w-announcing", {"slow": BUILTIN_TYPES["slow"].defaults}, heartbeat)
    executor = executor_of(
        api_store,
        bus,
        BUILTIN_TYPES,
        "slow",
        bus.subscribe("slow"),
        "w-announcing",
        timeout=BEAT,
        lease=BEAT,
        concurrency=1,
        heartbeat=heartbeat,
        announcer=announcer,
    )

    def slow_type() -> tuple[int, datetime] | None:
        found = [t for t in types.job_types(utc_now(), utc_now() - RETENTION) if t.name == "slow"]
        return (found[0].executors, found[0].lastSeenAt) if found else None

    with running(executor):
        first = wait_until(slow_type, 30, "the executor's announcement")
        assert first[0] == 1
        wait_until(lambda: (seen := slow_type()) is not None and seen[1] > first[1], 30, "a renewed announcement")
    after = slow_type()
    assert after is not None
    assert after[0] == 0  # withdrawn at once, not after three beats
