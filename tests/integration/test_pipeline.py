"""Real processes end to end: scheduler → Kafka → executors (→ reaper) on real etcd, Kafka and FerretDB."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from bson import ObjectId

from shared.model import Outcome, Status
from shared.store.base import NewJob
from shared.store.mongo import MongoJobStore
from tests.conftest import Launch
from tests.support import wait_until


def create(store: MongoJobStore, job_type: str, payload: dict[str, Any] | None = None, **fields: Any) -> str:
    past = datetime.now(UTC) - timedelta(seconds=1)
    return store.create(
        NewJob(
            idempotencyKey=f"k-{ObjectId()}",
            tenantId="t",
            jobType=job_type,
            scheduledAt=past,
            payload=payload or {},
            **fields,
        )
    ).id


def status_of(store: MongoJobStore, job_id: str) -> Status | None:
    job = store.get(job_id)
    return job.status if job else None


def test_every_builtin_handler_end_to_end(launch: Launch, mongo_store: MongoJobStore) -> None:
    launch("scheduler")
    for job_type in ("noop", "log-message", "flaky", "slow"):
        launch("executor", "--type", job_type, name=f"executor-{job_type}")
    ids = {
        "noop": create(mongo_store, "noop"),
        "log-message": create(mongo_store, "log-message", {"message": "hi"}),
        "flaky-ok": create(mongo_store, "flaky", {"failRate": 0}),
        "flaky-dlq": create(mongo_store, "flaky", {"failRate": 1}, maxAttempts=2),
        "slow": create(mongo_store, "slow", {"sleepMs": 300}),
    }
    expected = {name: Status.COMPLETED for name in ids} | {"flaky-dlq": Status.DLQ}
    wait_until(lambda: all(status_of(mongo_store, ids[n]) is s for n, s in expected.items()), 60, "every job to finish")
    dead = mongo_store.get(ids["flaky-dlq"])
    assert dead is not None
    assert dead.attempts == 2


def test_unknown_type_executor_exits_non_zero_naming_the_known_types(launch: Launch) -> None:
    executor = launch("executor", "--type", "fax")
    assert executor.process.wait(30) == 2
    assert "known types: flaky, http, log-message, noop, slow" in executor.log_text()


def test_kill_9_mid_handler_never_starts_the_same_attempt_twice(launch: Launch, mongo_store: MongoJobStore) -> None:
    lease = {"CLAIM_TIMEOUT": "3s"}
    launch("scheduler")
    first = launch("executor", "--type", "slow", name="slow-1", **lease)
    job_id = create(mongo_store, "slow", {"sleepMs": 4000})
    wait_until(lambda: status_of(mongo_store, job_id) is Status.RUNNING, 30, "the handler to start")
    first.kill()
    second = launch("executor", "--type", "slow", name="slow-2", **lease)
    # The uncommitted wake-up is redelivered to the new executor, which must not start attempt 1 again.
    wait_until(
        lambda: (second.metric("executor_skipped_deliveries_total") or 0) >= 1,
        60,
        "the redelivered wake-up to be skipped",
    )
    assert [e.outcome for e in mongo_store.list_executions(job_id)] == [Outcome.RUNNING]
    # The reaper closes the lost attempt; the job runs again as attempt 2 and completes.
    launch("reaper", REAPER_INTERVAL="500ms", **lease)
    wait_until(lambda: status_of(mongo_store, job_id) is Status.COMPLETED, 60, "attempt 2 to complete")
    assert [(e.attempt, e.outcome) for e in mongo_store.list_executions(job_id)] == [
        (1, Outcome.LOST),
        (2, Outcome.SUCCEEDED),
    ]


def test_a_live_heartbeat_keeps_a_long_job_from_being_reaped(launch: Launch, mongo_store: MongoJobStore) -> None:
    lease = {"CLAIM_TIMEOUT": "2s"}
    launch("scheduler")
    launch("executor", "--type", "slow", **lease)
    launch("reaper", REAPER_INTERVAL="300ms", **lease)
    job_id = create(mongo_store, "slow", {"sleepMs": 6000})  # three times the claim timeout
    wait_until(lambda: status_of(mongo_store, job_id) is Status.COMPLETED, 60, "the long job to complete")
    job = mongo_store.get(job_id)
    assert job is not None
    assert job.attempts == 0
    assert [e.outcome for e in mongo_store.list_executions(job_id)] == [Outcome.SUCCEEDED]


def test_sigterm_lets_the_running_handler_finish(launch: Launch, mongo_store: MongoJobStore) -> None:
    launch("scheduler")
    executor = launch("executor", "--type", "slow")
    job_id = create(mongo_store, "slow", {"sleepMs": 1500})
    wait_until(lambda: status_of(mongo_store, job_id) is Status.RUNNING, 30, "the handler to start")
    assert executor.terminate() == 0
    assert status_of(mongo_store, job_id) is Status.COMPLETED


@pytest.mark.parametrize("sweep", ["queued"])
def test_reaper_returns_a_job_whose_wake_up_was_lost(launch: Launch, mongo_store: MongoJobStore, sweep: str) -> None:
    job_id = create(mongo_store, "noop")
    [queued] = mongo_store.claim_due_jobs(datetime.now(UTC), 10, {"noop"})  # claimed, but no wake-up was ever sent
    assert queued.id == job_id
    reaper = launch("reaper", REAPER_INTERVAL="300ms", QUEUED_TIMEOUT="1s")
    wait_until(lambda: status_of(mongo_store, job_id) is Status.PENDING, 30, "the reaper to re-pend the job")
    wait_until(lambda: reaper.metric("reaper_recovered_jobs_total") == 1, 10, "the recovery to be counted")
    launch("scheduler")
    launch("executor", "--type", "noop")
    wait_until(lambda: status_of(mongo_store, job_id) is Status.COMPLETED, 60, "the job to complete")
