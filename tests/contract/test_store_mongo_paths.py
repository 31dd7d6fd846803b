"""The MongoDB store writes nothing but the job's own fields, creates every query index (partial ones included),
and its claim's guard keeps a run rescheduled meanwhile."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from bson import ObjectId
from pymongo.database import Database

from shared.model import JOB_FIELDS, Outcome, Status, utc_now
from shared.store.base import AttemptStart
from shared.store.mongo import MongoJobStore
from shared.store.transitions import stored_time
from tests.contract.store_kit import LEASE, claim_one, hint, new, reload, result
from tests.support import start_one

QUERY_INDEXES = {
    "jobs": {
        *("pending_runs", "template_times", "buffered_runs", "template_runs_by_plan", "tenant_newest"),
        *("queued_age", "claimed_leases", "running_leases", "cancelled_age", "dead_letter_age"),
        *("tenant_status_listing", "tenant_type_listing", "type_counts", "tenant_templates"),
        *("template_runs", "recent_completions", "dead_letters", "tenant_dead_letters"),
    },
    "executions": {"job_attempts"},
    "attempt_outcomes": {"job_outcomes", "recent_outcomes"},
}
# Indexes of every job that migration 6 replaced with partial ones or dropped (issue 49: entries per job).
REPLACED = {"claim_order", "due_lanes", "due_templates", "template_runs_planned", "tenant_listing"}
REPLACED |= {"expired_attempts", "finished_age"}


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
    extra = {key for doc in mongo_db["jobs"].find() for key in doc} - JOB_FIELDS - {"_id", "kind"}
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
