"""The store contract, on every implementation: schema, health, creating and reading jobs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from functools import partial

import pytest
from bson import ObjectId

from shared.model import Job, Status, utc_now
from shared.store.base import (
    DuplicateJob,
    JobStore,
    StoreUnavailable,
)
from tests.contract.conftest import Harness
from tests.contract.store_kit import (
    claim_one,
    is_utc_ms,
    new,
    reload,
    together,
)
from tests.support import tenant_jobs


def test_ensure_schema_is_idempotent_and_keeps_data_and_unique_keys(store: JobStore) -> None:
    job = store.create(new("kept"))
    store.ensure_schema()
    store.ensure_schema()
    assert store.get(job.id) == job
    with pytest.raises(DuplicateJob):
        store.create(new("kept"))


def test_ping_answers(store: JobStore) -> None:
    store.ping()


def test_an_unusable_database_is_store_unavailable(harness: Harness) -> None:
    broken = harness.unreachable()
    with pytest.raises(StoreUnavailable):
        broken.ping()
    with pytest.raises(StoreUnavailable):
        broken.create(new())
    with pytest.raises(StoreUnavailable):
        broken.get(str(ObjectId()))


def test_data_is_durable_and_shared_between_store_instances(harness: Harness) -> None:
    job = harness.store.create(new("durable", payload={"a": 1}))
    harness.store.close()
    other = harness.open()
    assert other.get(job.id) == job
    with pytest.raises(DuplicateJob):
        other.create(new("durable"))


# --- create / get / list --------------------------------------------------------------------------------


def test_create_stores_a_pending_job_with_every_field(store: JobStore) -> None:
    scheduled = utc_now() + timedelta(hours=1)
    payload = {"s": "héllo ✓", "n": 3, "f": 1.5, "b": True, "z": None, "l": [1, {"a": []}], "o": {"k": "v"}}
    before = utc_now()
    job = store.create(
        new(
            "full",
            tenantId="tenant-b",
            jobType="log-message",
            scheduledAt=scheduled,
            payload=payload,
            priority=7,
            maxAttempts=5,
            timeoutSeconds=2.5,
        )
    )
    assert ObjectId.is_valid(job.id)
    assert len(job.id) == 24
    assert (job.idempotencyKey, job.tenantId, job.jobType) == ("full", "tenant-b", "log-message")
    assert (job.status, job.attempts, job.attemptBase, job.priority, job.maxAttempts) == (Status.PENDING, 0, 0, 7, 5)
    assert (job.payload, job.timeoutSeconds, job.scheduledAt) == (payload, 2.5, scheduled)
    assert before <= job.createdAt <= utc_now()
    assert job.updatedAt == job.createdAt
    assert (job.cron, job.interval, job.templateId, job.lastError, job.claimedBy, job.queuedAt) == (None,) * 6
    assert store.get(job.id) == job


def test_create_keeps_a_given_created_at_and_templates_fields(store: JobStore) -> None:
    anchor = utc_now() - timedelta(days=2)
    template = store.create(new("every-5m", interval="5m", timezone="Europe/Berlin", createdAt=anchor))
    assert (template.createdAt, template.updatedAt) == (anchor, anchor)
    assert (template.interval, template.timezone, template.is_template) == ("5m", "Europe/Berlin", True)
    assert store.get(template.id) == template


def test_times_come_back_utc_at_millisecond_precision_and_equal_to_what_create_returned(
    store: JobStore, harness: Harness, request: pytest.FixtureRequest
) -> None:
    berlin = timezone(timedelta(hours=2))
    scheduled = datetime(2030, 1, 2, 3, 4, 5, 678_901, tzinfo=berlin)
    job = store.create(new(scheduledAt=scheduled))
    fetched = reload(store, job)
    assert fetched.scheduledAt == datetime(2030, 1, 2, 1, 4, 5, 678_000, tzinfo=UTC)
    assert all(is_utc_ms(t) for t in (fetched.scheduledAt, fetched.createdAt, fetched.updatedAt))
    assert job == fetched


def test_a_duplicate_idempotency_key_is_refused_and_leaves_the_first_job(store: JobStore) -> None:
    first = store.create(new("dup", payload={"v": 1}))
    with pytest.raises(DuplicateJob) as refused:
        store.create(new("dup", payload={"v": 2}))
    assert (refused.value.idempotency_key, refused.value.existing_id) == ("dup", first.id)
    assert store.get(first.id) == first
    assert tenant_jobs(store, "tenant-a", None, 10) == [first]


def test_sixteen_threads_creating_one_key_make_exactly_one_job(harness: Harness) -> None:
    """Invariant 4 under a real race: the unique index decides, on every store."""
    stores = [harness.store, harness.open()]
    outcomes = together([partial(stores[i % 2].create, new("race", payload={"i": i})) for i in range(16)])
    created = [o for o in outcomes if isinstance(o, Job)]
    assert len(created) == 1, outcomes
    assert all(isinstance(o, DuplicateJob) for o in outcomes if not isinstance(o, Job)), outcomes
    assert [j.id for j in tenant_jobs(harness.store, "tenant-a", None, 100)] == [created[0].id]


@pytest.mark.parametrize("job_id", ["", "nope", "z" * 24, "a" * 23, "a" * 25, "abcdefghijkl"])
def test_get_of_an_invalid_id_is_none(store: JobStore, job_id: str) -> None:
    store.create(new())
    assert store.get(job_id) is None


def test_get_of_an_unknown_id_is_none_and_hex_case_does_not_matter(store: JobStore) -> None:
    job = store.create(new())
    assert store.get(str(ObjectId())) is None
    assert store.get(job.id.upper()) == job


def test_list_for_tenant_newest_first_with_status_filter_and_limit(store: JobStore) -> None:
    now = utc_now()
    oldest = store.create(new(createdAt=now - timedelta(minutes=3)))
    newest = store.create(new(createdAt=now - timedelta(minutes=1)))
    middle = store.create(new(createdAt=now - timedelta(minutes=2), jobType="other"))
    store.create(new(tenantId="tenant-b"))
    claim_one(store, middle)
    assert [j.id for j in tenant_jobs(store, "tenant-a", None, 100)] == [newest.id, middle.id, oldest.id]
    assert [j.id for j in tenant_jobs(store, "tenant-a", None, 2)] == [newest.id, middle.id]
    assert [j.id for j in tenant_jobs(store, "tenant-a", Status.PENDING, 100)] == [newest.id, oldest.id]
    assert [j.status for j in tenant_jobs(store, "tenant-a", Status.QUEUED, 100)] == [Status.QUEUED]
    assert tenant_jobs(store, "tenant-a", Status.DLQ, 100) == []
    assert tenant_jobs(store, "nobody", None, 100) == []


# --- create_many ----------------------------------------------------------------------------------------


def test_create_many_answers_each_job_in_order_and_one_refusal_refuses_no_other(store: JobStore) -> None:
    held = store.create(new("held"))
    batch = [
        new("first", payload={"n": 1}),
        new("held"),  # a key taken before the call
        new("second", priority=7),
        new("first"),  # a key taken by an earlier job of the same call
        new("held", tenantId="tenant-b"),  # the same key in another tenant is no conflict
    ]
    answers = store.create_many(batch)
    assert len(answers) == 5
    first, taken, second, repeated, other_tenant = answers
    assert isinstance(first, Job)
    assert isinstance(second, Job)
    assert isinstance(other_tenant, Job)
    assert (first.idempotencyKey, first.payload, first.status) == ("first", {"n": 1}, Status.PENDING)
    assert (second.idempotencyKey, second.priority) == ("second", 7)
    assert other_tenant.tenantId == "tenant-b"
    assert isinstance(taken, DuplicateJob)
    assert taken.existing_id == held.id
    assert isinstance(repeated, DuplicateJob)
    assert repeated.existing_id == first.id
    for job in (first, second, other_tenant):
        assert store.get(job.id) == job
    assert {j.idempotencyKey for j in tenant_jobs(store, "tenant-a")} == {"held", "first", "second"}


def test_create_many_of_nothing_writes_nothing(store: JobStore) -> None:
    assert store.create_many([]) == []
    assert tenant_jobs(store, "tenant-a") == []


def test_create_many_jobs_are_claimed_like_created_ones(store: JobStore) -> None:
    answers = store.create_many([new(jobType="bulk", priority=p) for p in (1, 5, 3)])
    assert all(isinstance(a, Job) for a in answers)
    claimed = store.claim_due_jobs(utc_now(), 10, {"bulk"})
    assert [j.priority for j in claimed] == [5, 3, 1]


def test_create_many_writes_more_jobs_than_one_transaction_holds(store: JobStore) -> None:
    answers = store.create_many([new(f"many-{i}", tenantId="tenant-many") for i in range(1203)])
    assert [a.idempotencyKey for a in answers if isinstance(a, Job)] == [f"many-{i}" for i in range(1203)]
    assert len(tenant_jobs(store, "tenant-many", limit=2000)) == 1203
