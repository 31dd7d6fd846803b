"""Idempotency keys are unique per tenant (invariant 4), on every store, and data written when they were
unique across tenants keeps working after an upgrade (ensure_schema replaces the old unique index)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import pytest
from pymongo import ASCENDING
from pymongo.database import Database

from shared.model import Job, run_key
from shared.store.base import DuplicateJob, JobStore, RunSpec
from shared.store.mongo import MongoJobStore
from shared.store.sqlite import SqliteJobStore
from tests.contract.conftest import Harness
from tests.contract.store_kit import new, together
from tests.support import tenant_jobs


def test_one_key_in_two_tenants_makes_two_jobs_and_stays_unique_within_each(store: JobStore) -> None:
    a = store.create(new("shared-key", tenantId="tenant-a"))
    b = store.create(new("shared-key", tenantId="tenant-b"))
    assert a.id != b.id
    for tenant in ("tenant-a", "tenant-b"):
        with pytest.raises(DuplicateJob):
            store.create(new("shared-key", tenantId=tenant))
        assert [j.idempotencyKey for j in tenant_jobs(store, tenant, None, 10)] == ["shared-key"]


def test_concurrent_creates_of_one_key_make_one_job_per_tenant(harness: Harness) -> None:
    stores = [harness.store, harness.open()]
    outcomes = together([partial(stores[i % 2].create, new("raced", tenantId=f"tenant-{i % 2}")) for i in range(16)])
    made = [o for o in outcomes if isinstance(o, Job)]
    assert sorted(j.tenantId for j in made) == ["tenant-0", "tenant-1"], outcomes
    assert all(isinstance(o, DuplicateJob) for o in outcomes if not isinstance(o, Job)), outcomes


def test_templates_with_one_key_in_two_tenants_spawn_a_run_each(store: JobStore) -> None:
    planned = datetime(2030, 1, 1, 2, 0, tzinfo=UTC)
    templates = [store.create(new("nightly", tenantId=t, cron="0 2 * * *")) for t in ("tenant-a", "tenant-b")]
    assert [store.add_run(t, RunSpec(planned))[1] for t in templates] == [True, True]
    assert [store.add_run(t, RunSpec(planned))[1] for t in templates] == [False, False]
    for template in templates:
        [run] = [j for j in tenant_jobs(store, template.tenantId, None, 10) if j.templateId == template.id]
        assert run.idempotencyKey == run_key("nightly", planned)


# --- upgrades from the global unique index --------------------------------------------------------------

# The jobs table as files written before per-tenant keys declare it (the key UNIQUE on its own).
OLD_SQLITE_JOBS = """CREATE TABLE jobs (
    id TEXT PRIMARY KEY, idempotencyKey TEXT NOT NULL UNIQUE, tenantId TEXT NOT NULL, jobType TEXT NOT NULL,
    kind TEXT NOT NULL, status TEXT NOT NULL, scheduledAt INTEGER NOT NULL, createdAt INTEGER NOT NULL,
    updatedAt INTEGER NOT NULL, payload TEXT NOT NULL DEFAULT '{}', priority INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0, maxAttempts INTEGER NOT NULL DEFAULT 3,
    attemptBase INTEGER NOT NULL DEFAULT 0, timeoutSeconds REAL, cron TEXT, interval TEXT, timezone TEXT,
    templateId TEXT, lastError TEXT, claimedBy TEXT, claimedAt INTEGER, queuedAt INTEGER, leaseExpiresAt INTEGER
)"""


def assert_upgraded(store: JobStore, old: list[Job]) -> None:
    """Old jobs read back unchanged and keep their keys; the same key is free in another tenant."""
    store.ensure_schema()  # idempotent once upgraded
    assert [store.get(j.id) for j in old] == old
    with pytest.raises(DuplicateJob):
        store.create(new(old[0].idempotencyKey, tenantId=old[0].tenantId))
    other = store.create(new(old[0].idempotencyKey, tenantId="tenant-new"))
    assert store.get(other.id) == other


def test_an_old_sqlite_file_is_rebuilt_with_per_tenant_keys(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.execute(OLD_SQLITE_JOBS)
    conn.close()
    store = SqliteJobStore(path)
    old = [store.create(new(f"old-{i}", tenantId="tenant-a", payload={"n": i})) for i in range(3)]
    with pytest.raises(DuplicateJob):  # the old layout: one key across tenants
        store.create(new("old-0", tenantId="tenant-b"))
    store.ensure_schema()
    assert_upgraded(store, old)
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    conn.close()
    assert "jobs_with_global_keys" not in tables
    assert {"tenant_idempotency", "due_order", "tenant_listing"} <= indexes
    store.close()


def test_an_old_mongo_database_swaps_the_global_index_for_the_per_tenant_one(
    mongo_uri: str, mongo_db: Database[dict[str, object]]
) -> None:
    """Replicas upgrading at once: on FerretDB 2 one's drop of the old index and the others' index builds can
    deadlock in PostgreSQL, which the store retries (shared/store/deadlocks.py)."""
    mongo_db["jobs"].create_index("idempotencyKey", unique=True, name="idempotencyKey_unique")  # the old layout
    stores = [MongoJobStore.connect(mongo_uri, mongo_db.name) for _ in range(4)]
    try:
        old = [stores[0].create(new(f"old-{i}", tenantId="tenant-a")) for i in range(3)]
        with pytest.raises(DuplicateJob):
            stores[0].create(new("old-0", tenantId="tenant-b"))
        assert together([s.ensure_schema for s in stores]) == [None] * len(stores)
        indexes = mongo_db["jobs"].index_information()
        assert "idempotencyKey_unique" not in indexes
        assert indexes["tenant_idempotency_unique"]["unique"] is True
        assert indexes["tenant_idempotency_unique"]["key"] == [("tenantId", ASCENDING), ("idempotencyKey", ASCENDING)]
        assert_upgraded(stores[1], old)
    finally:
        for s in stores:
            s.close()
