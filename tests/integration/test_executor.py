"""The executor's handling of wake-ups on the real store (FerretDB), its events and dead letters on Kafka: the
product's Executor, fed each test's wake-ups (tests/executor_support.py)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from bson import ObjectId

from jobsched import HandlerContext, JobTypes, Payload
from services.reaper.sweeper import sweep
from shared.bus.base import Wakeup
from shared.bus.kafka import KafkaBus
from shared.handlers.builtin import builtin_types
from shared.model import Job, Outcome, Status
from shared.store.base import AttemptResult, AttemptStart, NewJob
from shared.store.mongo import MongoJobStore
from tests.executor_support import Feed, executor_of, running, wakeup_for
from tests.support import read_events, start_one

BUILTIN_TYPES = builtin_types(demo=True)  # what the binaries serve by default

MakeExecutor = Callable[..., Feed]


@pytest.fixture
def make_executor(mongo_store: MongoJobStore, kafka_bus: KafkaBus) -> Iterator[MakeExecutor]:
    """A running executor of a job type, fed through the Feed returned; stopped after the test."""
    kafka_bus.ensure_topics(BUILTIN_TYPES.names())
    with ExitStack() as stack:

        def make(job_type: str, registry: JobTypes = BUILTIN_TYPES, name: str = "w1") -> Feed:
            feed = Feed(job_type)
            stack.enter_context(running(executor_of(mongo_store, kafka_bus, registry, job_type, feed, name)))
            return feed

        yield make


def queued_job(store: MongoJobStore, job_type: str, payload: dict[str, Any] | None = None, **fields: Any) -> Job:
    past = datetime.now(UTC) - timedelta(seconds=1)
    job = store.create(
        NewJob(
            idempotencyKey=f"k-{ObjectId()}",
            tenantId="tenant-x",
            jobType=job_type,
            scheduledAt=past,
            payload=payload or {},
            **fields,
        )
    )
    claimed = [j for j in store.claim_due_jobs(datetime.now(UTC), 100, {job_type}) if j.id == job.id]
    assert claimed, "the job should have been claimed"
    return claimed[0]


def redeliver_until_final(store: MongoJobStore, executor: Feed, job: Job, rounds: int) -> Job:
    """Run the job's attempts back to back: after each failure make it due again and re-queue it."""
    for _ in range(rounds):
        executor.drain(wakeup_for(job))
        current = store.get(job.id)
        assert current is not None
        if current.status is not Status.PENDING:
            return current
        now = datetime.now(UTC) + timedelta(minutes=10)  # past the backoff
        [job] = store.claim_due_jobs(now, 10, {job.jobType})
    raise AssertionError("the job never reached a final status")


def test_noop_runs_to_completed_with_an_execution_record(
    mongo_store: MongoJobStore, make_executor: MakeExecutor, kafka_brokers: str, topic_prefix: str
) -> None:
    job = queued_job(mongo_store, "noop")
    make_executor("noop").drain(wakeup_for(job))
    done = mongo_store.get(job.id)
    assert done is not None
    assert done.status is Status.COMPLETED
    assert (done.claimedBy, done.attempts) == ("w1", 0)
    assert done.claimedAt is not None
    [execution] = mongo_store.list_executions(job.id)
    assert (execution.id, execution.attempt, execution.outcome, execution.worker) == (
        f"{job.id}:1",
        1,
        Outcome.SUCCEEDED,
        "w1",
    )
    assert execution.durationMs is not None
    assert execution.finishedAt is not None
    events = read_events(kafka_brokers, topic_prefix, 2)
    assert [e["event"] for e in events if e["jobId"] == job.id] == ["job.execution.started", "job.execution.succeeded"]


def test_log_message_and_slow_succeed(mongo_store: MongoJobStore, make_executor: MakeExecutor) -> None:
    logged = queued_job(mongo_store, "log-message", {"message": "hello"})
    make_executor("log-message").drain(wakeup_for(logged))
    slow = queued_job(mongo_store, "slow", {"sleepMs": 50})
    make_executor("slow").drain(wakeup_for(slow))
    assert mongo_store.get(logged.id).status is Status.COMPLETED  # type: ignore[union-attr]
    assert mongo_store.get(slow.id).status is Status.COMPLETED  # type: ignore[union-attr]


def test_failure_goes_back_to_pending_with_backoff_and_last_error(
    mongo_store: MongoJobStore, make_executor: MakeExecutor, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="jobsched.executor")
    job = queued_job(mongo_store, "log-message", {})
    before = datetime.now(UTC)
    make_executor("log-message").drain(wakeup_for(job))
    retried = mongo_store.get(job.id)
    assert retried is not None
    assert retried.status is Status.PENDING
    assert retried.attempts == 1
    assert retried.lastError is not None
    assert "payload.message" in retried.lastError
    assert before + timedelta(seconds=2) <= retried.scheduledAt <= datetime.now(UTC) + timedelta(seconds=2)
    [execution] = mongo_store.list_executions(job.id)
    assert execution.outcome is Outcome.FAILED
    assert execution.traceback is not None
    assert 'shared/handlers/builtin.py", line ' in execution.traceback
    [line] = [r for r in caplog.records if getattr(r, "action", None) == "attempt_failed"]
    assert getattr(line, "error", None) == retried.lastError  # its type and message, as lastError has them


def test_flaky_always_failing_ends_in_dlq_with_a_jobs_dlq_message(
    mongo_store: MongoJobStore, make_executor: MakeExecutor, kafka_brokers: str, topic_prefix: str
) -> None:
    job = queued_job(mongo_store, "flaky", {"failRate": 1}, maxAttempts=2)
    final = redeliver_until_final(mongo_store, make_executor("flaky"), job, rounds=3)
    assert final.status is Status.DLQ
    assert final.attempts == 2
    assert final.lastError is not None
    assert "failed on purpose" in final.lastError
    assert [e.outcome for e in mongo_store.list_executions(job.id)] == [Outcome.FAILED, Outcome.FAILED]
    dlq = read_events(kafka_brokers, topic_prefix, 1, topic="jobs.dlq")
    assert [(r["id"], r["status"], r["attempts"]) for r in dlq] == [(job.id, "dlq", 2)]


def test_timeout_is_an_attempt_failure(mongo_store: MongoJobStore, make_executor: MakeExecutor) -> None:
    job = queued_job(mongo_store, "slow", {"sleepMs": 5000}, timeoutSeconds=0.2)
    make_executor("slow").drain(wakeup_for(job))
    retried = mongo_store.get(job.id)
    assert retried is not None
    assert (retried.status, retried.attempts) == (Status.PENDING, 1)
    assert retried.lastError == "timed out after 0.2s"
    assert mongo_store.list_executions(job.id)[0].outcome is Outcome.TIMEOUT


def test_a_handler_that_exits_or_raises_base_exceptions_does_not_kill_the_executor(
    mongo_store: MongoJobStore, make_executor: MakeExecutor
) -> None:
    rogue = JobTypes()

    @rogue.handler("noop")
    def exits(payload: Payload, ctx: HandlerContext) -> None:
        raise SystemExit(3)

    job = queued_job(mongo_store, "noop")
    make_executor("noop", rogue).drain(wakeup_for(job))
    assert mongo_store.get(job.id).lastError == "SystemExit: 3"  # type: ignore[union-attr]


def test_a_cancelled_job_whose_wake_up_is_already_in_kafka_never_runs(
    mongo_store: MongoJobStore, make_executor: MakeExecutor
) -> None:
    calls: list[str] = []
    counting = JobTypes()
    counting.handler("noop")(lambda payload, ctx: calls.append(ctx.job_id))
    job = queued_job(mongo_store, "noop")  # claimed and (in production) published
    assert mongo_store.cancel(job.id).status is Status.CANCELLED
    make_executor("noop", counting).drain(wakeup_for(job))
    assert calls == []
    assert mongo_store.get(job.id).status is Status.CANCELLED  # type: ignore[union-attr]
    assert [e.outcome for e in mongo_store.list_executions(job.id)] == [Outcome.CANCELLED]


def test_the_same_message_to_two_executors_runs_the_attempt_once(
    mongo_store: MongoJobStore, make_executor: MakeExecutor
) -> None:
    calls: list[str] = []
    started = threading.Barrier(2)
    counting = JobTypes()

    @counting.handler("noop")
    def count(payload: Payload, ctx: HandlerContext) -> None:
        calls.append(ctx.job_id)

    job = queued_job(mongo_store, "noop")
    executors = [make_executor("noop", counting, name=f"w{i}") for i in range(2)]

    def deliver(executor: Feed) -> None:
        started.wait()
        executor.drain(wakeup_for(job))

    threads = [threading.Thread(target=deliver, args=(e,)) for e in executors]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert calls == [job.id]
    make_executor("noop", counting).drain(wakeup_for(job))  # a third, late duplicate
    assert calls == [job.id]
    assert len(mongo_store.list_executions(job.id)) == 1
    assert mongo_store.get(job.id).status is Status.COMPLETED  # type: ignore[union-attr]


def test_bad_and_unknown_messages_are_skipped(mongo_store: MongoJobStore, make_executor: MakeExecutor) -> None:
    executor = make_executor("noop")
    executor.drain(b"not json", b'{"jobId": 5}', Wakeup(str(ObjectId()), "noop", 0))
    pending = mongo_store.create(
        NewJob(idempotencyKey="p", tenantId="t", jobType="noop", scheduledAt=datetime.now(UTC) + timedelta(hours=1))
    )
    executor.drain(wakeup_for(pending))  # a stale wake-up for a job that is not queued
    assert mongo_store.get(pending.id).status is Status.PENDING  # type: ignore[union-attr]
    assert mongo_store.list_executions(pending.id) == []


def test_a_late_result_of_a_recovered_attempt_is_discarded(mongo_store: MongoJobStore) -> None:
    job = queued_job(mongo_store, "noop")
    claimed = start_one(mongo_store, AttemptStart(job.id, job.jobType, "slowpoke", datetime.now(UTC) - timedelta(1)))
    assert sweep(mongo_store, queued_timeout=timedelta(minutes=1)).recovered == 1  # its lease has expired
    recovered = mongo_store.get(job.id)
    assert recovered is not None
    assert (recovered.status, recovered.attempts) == (Status.PENDING, 1)
    now = datetime.now(UTC)
    late = mongo_store.finish_attempt(claimed, AttemptResult(Outcome.SUCCEEDED, startedAt=now, finishedAt=now))
    assert late is None
    after = mongo_store.get(job.id)
    assert after is not None
    assert (after.status, after.attempts) == (Status.PENDING, 1)
    [execution] = mongo_store.list_executions(job.id)
    assert execution.outcome is Outcome.LOST


def test_redrive_from_the_dlq(mongo_store: MongoJobStore, make_executor: MakeExecutor) -> None:
    job = queued_job(mongo_store, "flaky", {"failRate": 1}, maxAttempts=1)
    make_executor("flaky").drain(wakeup_for(job))
    assert mongo_store.get(job.id).status is Status.DLQ  # type: ignore[union-attr]
    again = mongo_store.redrive(job.id)
    assert (again.status, again.attempts, again.attemptBase) == (Status.PENDING, 1, 1)
    [requeued] = mongo_store.claim_due_jobs(datetime.now(UTC), 10, {"flaky"})
    make_executor("flaky").drain(wakeup_for(requeued))
    final = mongo_store.get(job.id)
    assert final is not None
    assert (final.status, final.attempts) == (Status.DLQ, 2)
    assert [e.id for e in mongo_store.list_executions(job.id)] == [f"{job.id}:1", f"{job.id}:2"]
