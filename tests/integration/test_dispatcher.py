"""The scheduler's tick on the real store (FerretDB) and the real bus (Kafka)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from pymongo.database import Database

from loadtest.reference import MongoClaimNext, ReferenceDispatcher
from services.scheduler.dispatcher import Dispatcher
from shared.bus.base import dispatch_topic
from shared.bus.kafka import KafkaBus
from shared.election.base import Term
from shared.model import Job, Status, run_key
from shared.store.base import NewJob, RunSpec
from shared.store.mongo import MongoJobStore
from tests.support import read_wakeups

TYPES = ("noop", "slow")


def forever() -> Term:
    return Term(token=1, trusted_until=math.inf)


def new_job(key: str, at: datetime, priority: int = 0, job_type: str = "noop") -> NewJob:
    return NewJob(idempotencyKey=key, tenantId="t", jobType=job_type, scheduledAt=at, priority=priority)


@pytest.mark.parametrize("mode", ["batch", "single"])
def test_tick_claims_due_jobs_in_priority_order_and_publishes_them(
    mode: str,
    request: pytest.FixtureRequest,
    mongo_store: MongoJobStore,
    mongo_uri: str,
    mongo_db: Database[dict[str, object]],
    kafka_bus: KafkaBus,
    kafka_brokers: str,
    topic_prefix: str,
) -> None:
    """Batch claims, and the benchmarks' reference (single claims, loadtest/reference.py) on the same loop."""
    now = datetime.now(UTC)
    low_old = mongo_store.create(new_job("low-old", now - timedelta(minutes=5), priority=0))
    high_new = mongo_store.create(new_job("high-new", now - timedelta(seconds=1), priority=9))
    low_new = mongo_store.create(new_job("low-new", now - timedelta(seconds=30), priority=0))
    future = mongo_store.create(new_job("future", now + timedelta(hours=1), priority=99))
    slow = mongo_store.create(new_job("slow", now - timedelta(seconds=2), job_type="slow"))
    kafka_bus.ensure_topics(TYPES)

    claimed = []
    claim_next = MongoClaimNext(mongo_uri, mongo_db.name)
    request.addfinalizer(claim_next.close)
    dispatcher = (
        Dispatcher(mongo_store, kafka_bus, TYPES, batch=2)
        if mode == "batch"
        else ReferenceDispatcher(mongo_store, kafka_bus, TYPES, batch=2, claim=claim_next)
    )
    first = dispatcher.tick(forever())
    # batch mode drains everything due in one tick (batches come back full); single mode takes one batch.
    assert first.claimed == (4 if mode == "batch" else 2)
    claimed.append(first)
    if mode == "single":
        assert dispatcher.tick(forever()).claimed == 2
    assert first.failed == 0

    wakeups = read_wakeups(kafka_brokers, dispatch_topic("noop", topic_prefix), 3)
    assert [w.jobId for w in wakeups if w.jobId in {high_new.id}] == [high_new.id]
    assert {w.jobId for w in wakeups} == {high_new.id, low_old.id, low_new.id}
    assert [w.jobId for w in read_wakeups(kafka_brokers, dispatch_topic("slow", topic_prefix), 1)] == [slow.id]
    for job in (low_old, high_new, low_new, slow):
        stored = mongo_store.get(job.id)
        assert stored is not None
        assert stored.status is Status.QUEUED
        assert stored.queuedAt is not None
    assert mongo_store.get(future.id).status is Status.PENDING  # type: ignore[union-attr]


def test_batch_claim_order_is_strict_priority_then_age(mongo_store: MongoJobStore) -> None:
    now = datetime.now(UTC)
    created = [mongo_store.create(new_job(f"j{i}", now - timedelta(seconds=i), priority=i % 3)) for i in range(12)]
    expected = sorted(created, key=lambda j: (-j.priority, j.scheduledAt))
    claimed: list[Job] = []
    while batch := mongo_store.claim_due_jobs(now, 5, {"noop"}):
        claimed.extend(batch)
    assert [j.id for j in claimed] == [j.id for j in expected]


def test_unregistered_types_are_skipped_not_claimed(mongo_store: MongoJobStore, kafka_bus: KafkaBus) -> None:
    now = datetime.now(UTC)
    ghost = mongo_store.create(new_job("ghost", now - timedelta(seconds=1), job_type="retired-type"))
    ok = mongo_store.create(new_job("ok", now - timedelta(seconds=1)))
    kafka_bus.ensure_topics(TYPES)
    result = Dispatcher(mongo_store, kafka_bus, TYPES, batch=10).tick(forever())
    assert result.claimed == 1
    assert mongo_store.get(ghost.id).status is Status.PENDING  # type: ignore[union-attr]
    assert mongo_store.get(ok.id).status is Status.QUEUED  # type: ignore[union-attr]
    assert mongo_store.due_job_types(now) == {"retired-type"}


def test_kafka_outage_puts_jobs_back_and_they_go_out_when_kafka_is_back(
    mongo_store: MongoJobStore, kafka_bus: KafkaBus, kafka_brokers: str, topic_prefix: str
) -> None:
    now = datetime.now(UTC)
    job = mongo_store.create(new_job("outage", now - timedelta(seconds=1)))
    dead_broker = KafkaBus("127.0.0.1:1", topic_prefix=topic_prefix, delivery_timeout_ms=1500)
    try:
        result = Dispatcher(mongo_store, dead_broker, TYPES, batch=10).tick(forever())
    finally:
        dead_broker.close()
    assert (result.claimed, result.published, result.failed) == (1, 0, 1)
    assert mongo_store.get(job.id).status is Status.PENDING  # type: ignore[union-attr]

    kafka_bus.ensure_topics(TYPES)
    assert Dispatcher(mongo_store, kafka_bus, TYPES, batch=10).tick(forever()).published == 1
    assert [w.jobId for w in read_wakeups(kafka_brokers, dispatch_topic("noop", topic_prefix), 1)] == [job.id]


def test_a_deposed_leader_publishes_nothing(mongo_store: MongoJobStore, kafka_bus: KafkaBus) -> None:
    mongo_store.create(new_job("x", datetime.now(UTC) - timedelta(seconds=1)))
    lost = Term(token=1, trusted_until=math.inf)
    lost.lost.set()
    assert Dispatcher(mongo_store, kafka_bus, TYPES, batch=10).tick(lost).claimed == 0


def test_template_spawns_one_run_per_fire_time_with_the_derived_key(
    mongo_store: MongoJobStore, kafka_bus: KafkaBus, mongo_db: Database[dict[str, object]]
) -> None:
    created = datetime(2026, 1, 1, tzinfo=UTC)
    template = mongo_store.create(
        NewJob(
            idempotencyKey="every-minute",
            tenantId="t",
            jobType="noop",
            cron="* * * * *",
            scheduledAt=created + timedelta(minutes=1),
            createdAt=created,
            payload={"a": 1},
            priority=4,
            maxAttempts=5,
        )
    )
    now = created + timedelta(minutes=1, seconds=0.3)
    dispatcher = Dispatcher(mongo_store, kafka_bus, TYPES, batch=10, clock=lambda: now)
    assert dispatcher.spawn_template_runs(now) == 1
    run = mongo_db["jobs"].find_one({"idempotencyKey": run_key("every-minute", created + timedelta(minutes=1))})
    assert run is not None
    assert run["idempotencyKey"] == f"every-minute-run-{1767225660 * 10**9}"
    assert (run["payload"], run["priority"], run["maxAttempts"], run["tenantId"]) == ({"a": 1}, 4, 5, "t")
    assert run["templateId"] == template.id
    assert "cron" not in run
    assert run["scheduledAt"] == created + timedelta(minutes=1)
    assert mongo_store.get(template.id).scheduledAt == created + timedelta(minutes=2)  # type: ignore[union-attr]
    assert dispatcher.spawn_template_runs(now) == 0  # not due again until the next minute


def test_crash_between_spawn_and_advance_spawns_nothing_twice(
    mongo_store: MongoJobStore, kafka_bus: KafkaBus, mongo_db: Database[dict[str, object]]
) -> None:
    created = datetime(2026, 1, 1, tzinfo=UTC)
    first_fire = created + timedelta(minutes=1)
    template = mongo_store.create(
        NewJob(
            idempotencyKey="tpl",
            tenantId="t",
            jobType="noop",
            cron="* * * * *",
            scheduledAt=first_fire,
            createdAt=created,
        )
    )
    assert mongo_store.add_run(template, RunSpec(first_fire))[1]  # the crashed leader got this far, never advanced
    now = first_fire + timedelta(seconds=5)
    Dispatcher(mongo_store, kafka_bus, TYPES, batch=10).spawn_template_runs(now)
    assert mongo_db["jobs"].count_documents({"templateId": template.id}) == 1
    assert mongo_store.get(template.id).scheduledAt == first_fire + timedelta(minutes=1)  # type: ignore[union-attr]


def test_catch_up_after_downtime_spawns_only_the_latest_missed_run(
    mongo_store: MongoJobStore, kafka_bus: KafkaBus, mongo_db: Database[dict[str, object]]
) -> None:
    created = datetime(2026, 1, 1, tzinfo=UTC)
    template = mongo_store.create(
        NewJob(
            idempotencyKey="tpl",
            tenantId="t",
            jobType="noop",
            interval="10m",
            scheduledAt=created + timedelta(minutes=10),
            createdAt=created,
        )
    )
    now = created + timedelta(hours=5, minutes=3)  # 30 fire times were missed
    Dispatcher(mongo_store, kafka_bus, TYPES, batch=10).spawn_template_runs(now)
    runs = list(mongo_db["jobs"].find({"templateId": template.id}))
    assert [r["scheduledAt"] for r in runs] == [created + timedelta(hours=5)]
    assert mongo_store.get(template.id).scheduledAt == created + timedelta(hours=5, minutes=10)  # type: ignore[union-attr]


def test_template_whose_schedule_no_longer_parses_goes_to_dlq(
    mongo_store: MongoJobStore, kafka_bus: KafkaBus, mongo_db: Database[dict[str, object]]
) -> None:
    now = datetime.now(UTC)
    template = mongo_store.create(
        NewJob(idempotencyKey="tpl", tenantId="t", jobType="noop", cron="* * * * *", scheduledAt=now)
    )
    from bson import ObjectId

    mongo_db["jobs"].update_one({"_id": ObjectId(template.id)}, {"$set": {"cron": "99 * * * *"}})  # hand-edited
    Dispatcher(mongo_store, kafka_bus, TYPES, batch=10).spawn_template_runs(now + timedelta(seconds=1))
    stored = mongo_store.get(template.id)
    assert stored is not None
    assert stored.status is Status.DLQ
    assert stored.lastError is not None
    assert "99 * * * *" in stored.lastError
    assert mongo_db["jobs"].count_documents({"templateId": template.id}) == 0
