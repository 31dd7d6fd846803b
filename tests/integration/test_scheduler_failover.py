"""Two real scheduler processes on real etcd, Kafka and FerretDB: one leads, the standby takes over."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from jobsched.type_defaults import TypeDefaults
from shared.model import Status
from shared.store.base import NewJob
from shared.store.mongo import MongoJobStore
from tests.conftest import Launch
from tests.support import ServiceProcess, backend_beside, wait_until

LEASE_TTL_S = 10
KILL_TAKEOVER_BOUND_S = 30  # generous bound for the test; the goal (reported) is <= 12 s
SIGTERM_TAKEOVER_BOUND_S = 10  # the goal (reported) is <= 1 s


@pytest.fixture
def schedulers(launch: Launch, mongo_store: MongoJobStore) -> list[ServiceProcess]:
    # No executor consumes the wake-ups here; one announced for the test makes the schedulers claim `noop`.
    now = datetime.now(UTC)
    backend_beside(mongo_store).job_types.announce(
        "test-executor", {"noop": TypeDefaults()}, now, now + timedelta(hours=1)
    )
    first = launch("scheduler", name="a", NODE_ID="a", LEASE_TTL=f"{LEASE_TTL_S}s")
    wait_until(lambda: first.metric("scheduler_is_leader") == 1, 30, "scheduler a to lead")
    second = launch("scheduler", name="b", NODE_ID="b", LEASE_TTL=f"{LEASE_TTL_S}s")
    wait_until(lambda: second.metric("scheduler_is_leader") == 0, 30, "scheduler b to stand by")
    return [first, second]


def due_job(store: MongoJobStore, key: str) -> str:
    at = datetime.now(UTC) - timedelta(seconds=1)
    return store.create(NewJob(idempotencyKey=key, tenantId="t", jobType="noop", scheduledAt=at)).id


def is_queued(store: MongoJobStore, job_id: str) -> bool:
    job = store.get(job_id)
    return job is not None and job.status is Status.QUEUED


def test_only_the_leader_dispatches(schedulers: list[ServiceProcess], mongo_store: MongoJobStore) -> None:
    leader, standby = schedulers
    ids = [due_job(mongo_store, f"k{i}") for i in range(5)]
    wait_until(lambda: all(is_queued(mongo_store, i) for i in ids), 20, "the leader to dispatch")
    assert leader.metric("scheduler_jobs_claimed_total") == 5
    assert standby.metric("scheduler_jobs_claimed_total") == 0
    assert standby.metric("scheduler_is_leader") == 0


def test_kill_9_of_the_leader_hands_over_to_the_standby(
    schedulers: list[ServiceProcess], mongo_store: MongoJobStore, capsys: pytest.CaptureFixture[str]
) -> None:
    leader, standby = schedulers
    leader.kill()
    killed_at = time.monotonic()
    job_id = due_job(mongo_store, "after-kill")
    wait_until(lambda: is_queued(mongo_store, job_id), KILL_TAKEOVER_BOUND_S, "the standby to dispatch")
    takeover_s = time.monotonic() - killed_at
    assert standby.metric("scheduler_is_leader") == 1
    assert standby.metric("scheduler_jobs_claimed_total") == 1
    with capsys.disabled():
        print(
            f"\n[measure] kill -9 of the leader → first dispatch by the standby: {takeover_s:.2f}s "
            f"(lease TTL {LEASE_TTL_S}s, goal <= 12s)"
        )


def test_sigterm_of_the_leader_resigns_and_the_standby_takes_over_at_once(
    schedulers: list[ServiceProcess], mongo_store: MongoJobStore, capsys: pytest.CaptureFixture[str]
) -> None:
    leader, standby = schedulers
    stopped_at = time.monotonic()
    job_id = due_job(mongo_store, "after-sigterm")
    assert leader.terminate() == 0
    wait_until(lambda: is_queued(mongo_store, job_id), SIGTERM_TAKEOVER_BOUND_S, "the standby to dispatch")
    takeover_s = time.monotonic() - stopped_at
    assert standby.metric("scheduler_is_leader") == 1
    assert '"action": "leader_resigned"' in leader.log_text()
    with capsys.disabled():
        print(f"\n[measure] SIGTERM of the leader → first dispatch by the standby: {takeover_s:.2f}s (goal <= 1s)")
