"""Cancellation racing the scheduler's claim: a cancel that succeeded always holds the job's next attempt."""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
from pymongo.database import Database

from shared.model import Outcome, Status
from shared.store.base import AttemptStart, NewJob, TransitionRefused, only_answer
from shared.store.mongo import MongoJobStore

JOBS = 60


def test_cancel_racing_a_claim_never_lets_a_cancelled_job_start(
    mongo_store: MongoJobStore, mongo_db: Database[dict[str, object]]
) -> None:
    past = datetime.now(UTC) - timedelta(minutes=1)
    ids = [
        mongo_store.create(NewJob(idempotencyKey=f"race-{i}", tenantId="t", jobType="noop", scheduledAt=past)).id
        for i in range(JOBS)
    ]
    start = threading.Barrier(2)
    cancelled: list[str] = []

    def claim_all() -> int:
        start.wait()
        claimed = 0
        while batch := mongo_store.claim_due_jobs(datetime.now(UTC), 7, {"noop"}):
            claimed += len(batch)
        return claimed

    def cancel_all() -> None:
        start.wait()
        for job_id in ids:
            with contextlib.suppress(TransitionRefused):
                cancelled.append(mongo_store.cancel(job_id).id)

    with ThreadPoolExecutor(2) as pool:
        claimer = pool.submit(claim_all)
        pool.submit(cancel_all).result()
        claimer.result()

    assert cancelled, "pending and queued jobs are cancellable: the canceller must win some"
    for job_id in cancelled:
        job = mongo_store.get(job_id)
        assert job is not None
        assert job.status is Status.CANCELLED
        assert [(e.attempt, e.outcome) for e in mongo_store.list_executions(job_id)] == [(1, Outcome.CANCELLED)]
        with pytest.raises(TransitionRefused):  # a wake-up of the claim that raced the cancel starts nothing
            only_answer(mongo_store.start_attempts([AttemptStart(job_id, "noop", "w1", past + timedelta(hours=1))]))
    for job_id in set(ids) - set(cancelled):
        assert mongo_store.list_executions(job_id) == []


def test_cancelled_template_and_refusals(mongo_store: MongoJobStore) -> None:
    now = datetime.now(UTC)
    template = mongo_store.create(
        NewJob(idempotencyKey="tpl", tenantId="t", jobType="noop", scheduledAt=now, cron="* * * * *")
    )
    assert mongo_store.cancel(template.id).status is Status.CANCELLED
    assert mongo_store.due_templates(now + timedelta(minutes=5), 10) == []
