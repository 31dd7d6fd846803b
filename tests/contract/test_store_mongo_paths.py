"""The MongoDB store writes nothing but the job's own fields, creates every query index (partial ones included),
and its claim's guard keeps a run rescheduled meanwhile."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from bson import ObjectId
from pymongo import MongoClient, monitoring
from pymongo.database import Database

from shared.model import JOB_FIELDS, Outcome, Status, utc_now
from shared.store.base import AttemptStart
from shared.store.mongo import MongoDatabase, MongoJobStore
from shared.store.transitions import stored_time
from tests.contract.store_kit import LEASE, claim_one, hint, new, reload, result
from tests.support import start_one

QUERY_INDEXES = {
    "jobs": {
        *("pending_runs", "template_times", "buffered_runs", "template_runs_by_plan", "tenant_newest"),
        *("claimed_leases", "running_leases", "cancelled_age", "dead_letter_age"),
        *("tenant_status_listing", "tenant_type_listing", "status_counts", "tenant_templates"),
        *("template_runs", "recent_completions", "dead_letters", "tenant_dead_letters"),
        *("waiting_on", "marked_parents"),
    },
    "attempt_failures": {"failure_age", "tenant_failures"},
}
# Indexes of jobs that migrations 6 and 12 replaced or dropped (issue 49: entries per job).
REPLACED = {"claim_order", "due_lanes", "due_templates", "template_runs_planned", "tenant_listing"}
REPLACED |= {"expired_attempts", "finished_age"}
REPLACED |= {"type_counts", "queued_age"}  # migration 12: status_counts serves their queries


def run_one_job(store: MongoJobStore) -> str:
    """Create, claim, start (batched) and finish one job, and fail then retry another: every write path."""
    store.ensure_schema()
    done = claim_one(store, store.create(new(jobType="paths")))
    started = start_one(store, AttemptStart(done.id, "paths", "w1", utc_now() + LEASE, hint(done)))
    store.finish_attempt(started, result(Outcome.SUCCEEDED))
    retried = claim_one(store, store.create(new(jobType="paths-retried")))
    store.finish_attempt(
        start_one(store, AttemptStart(retried.id, "paths-retried", "w1", utc_now() + LEASE)), result(Outcome.FAILED)
    )
    return retried.id


def index_names(db: Database[dict[str, Any]]) -> dict[str, set[str]]:
    return {name: set(db[name].index_information()) for name in QUERY_INDEXES}


def test_the_store_writes_only_job_fields_and_creates_every_index(
    mongo_uri: str, mongo_db: Database[dict[str, Any]]
) -> None:
    store = MongoJobStore.connect(mongo_uri, mongo_db.name)
    try:
        retried = run_one_job(store)
    finally:
        store.close()
    extra = {key for doc in mongo_db["jobs"].find() for key in doc} - JOB_FIELDS - {"_id", "kind", "history"}
    pending = mongo_db["jobs"].find_one({"_id": ObjectId(retried)})
    assert pending is not None
    assert pending["status"] == "pending"
    assert extra == set()
    names = index_names(mongo_db)
    assert all(QUERY_INDEXES[c] <= names[c] for c in QUERY_INDEXES), names
    assert not names["jobs"] & REPLACED


def test_a_run_rescheduled_between_the_claims_read_and_its_update_is_not_claimed(
    mongo_uri: str, mongo_db: Database[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The production claim finds due runs, then moves them with one guarded update: a run moved to later in
    between (PATCH /jobs/{id}) must stay pending at its new time, and the claim returns only what it moved."""
    store = MongoJobStore.connect(mongo_uri, mongo_db.name)
    try:
        store.ensure_schema()
        kept, moved = store.create(new(jobType="resched")), store.create(new(jobType="resched"))
        later = utc_now() + timedelta(hours=1)
        update_many = store.database.jobs.update_many

        def reschedule_first(*args: Any, **kwargs: Any) -> Any:
            monkeypatch.setattr(store.database.jobs, "update_many", update_many)
            assert store.update_if_unmoved(moved, {"scheduledAt": later, "updatedAt": utc_now()}) is not None
            return update_many(*args, **kwargs)

        monkeypatch.setattr(store.database.jobs, "update_many", reschedule_first)
        claimed = store.claim_due_jobs(utc_now(), 10, {"resched"})
        assert [j.id for j in claimed] == [kept.id]
        assert (reload(store, moved).status, reload(store, moved).scheduledAt) == (Status.PENDING, stored_time(later))
    finally:
        store.close()


class Finds(monitoring.CommandListener):
    """The filters of the finds on jobs that a store sends."""

    def __init__(self) -> None:
        self.filters: list[dict[str, Any]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name == "find" and event.command["find"] == "jobs":
            self.filters.append(dict(event.command.get("filter", {})))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


def test_retention_reads_the_deleted_jobs_again_only_when_one_stayed(
    mongo_uri: str, mongo_db: Database[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """delete_finished learns from the delete's count that every job found went, so it sends no read of their ids
    (FerretDB 2 was seen to leave a job out of such a read under load: its records would then go with it); a job
    re-driven between the find and the delete stays, read again, with its records."""
    finds = Finds()
    client: MongoClient[dict[str, Any]] = MongoClient(mongo_uri, tz_aware=True, event_listeners=[finds])
    store = MongoJobStore(MongoDatabase(client, mongo_db.name))
    try:
        store.ensure_schema()
        for n in range(3):
            done = claim_one(store, store.create(new(f"done-{n}", jobType="aged")))
            store.finish_attempt(
                start_one(store, AttemptStart(done.id, "aged", "w1", utc_now() + LEASE)), result(Outcome.SUCCEEDED)
            )
        finds.filters.clear()
        assert store.delete_finished(Status.COMPLETED, utc_now() + timedelta(seconds=1), 10) == 3
        assert not [f for f in finds.filters if "_id" in f]

        kept = claim_one(store, store.create(new("kept", jobType="aged", maxAttempts=1)))
        dead = store.finish_attempt(
            start_one(store, AttemptStart(kept.id, "aged", "w1", utc_now() + LEASE)), result(Outcome.FAILED, "x")
        )
        assert dead is not None
        delete_many = store.database.jobs.delete_many

        def redrive_first(*args: Any, **kwargs: Any) -> Any:
            monkeypatch.setattr(store.database.jobs, "delete_many", delete_many)
            store.redrive(kept.id)
            return delete_many(*args, **kwargs)

        monkeypatch.setattr(store.database.jobs, "delete_many", redrive_first)
        assert store.delete_finished(Status.DLQ, utc_now() + timedelta(seconds=1), 10) == 0
        assert reload(store, kept).status is Status.PENDING
        assert len(store.list_executions(kept.id)) == 1
    finally:
        client.close()
