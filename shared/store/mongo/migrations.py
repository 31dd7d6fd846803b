"""The MongoDB database's schema changes, numbered from 1 in the order they were made: migration k (MIGRATIONS[k-1])
takes a database of schema version k-1 to version k. schema.py applies the pending ones and keeps the version.

Every migration is a function of the MongoDatabase, named for what it does, its docstring saying why, and
- may run more than once, and on several replicas at the same time: creating an index that exists changes
  nothing, and a drop accepts an index dropped meanwhile. A database written before numbered migrations has no
  version and gets every one of them, though it already holds what the first ones make;
- is frozen once released: it spells out its collections, and its indexes' keys, names and filters, rather than
  reading names or constants that later code may change, so that it does to a database what it did when it was
  released. A change to the schema is a new migration at the end of MIGRATIONS, never an edit of one
  (tests/contract/test_store_mongo_migrations.py holds each one's digest).
No query names an index (none is hinted), so index names live here only.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Final

from bson import ObjectId
from pymongo import UpdateOne
from pymongo.errors import BulkWriteError, OperationFailure

from shared.store.mongo.database import Document, MongoDatabase

Migration = Callable[[MongoDatabase], None]


def unique_idempotency_per_tenant(database: MongoDatabase) -> None:
    """The unique index that decides which create owns an idempotency key within a tenant. First, as it is what
    keeps two creates from taking one key: the reason a process writes jobs only once its schema is applied."""
    jobs = database.collection("jobs")
    jobs.create_index([("tenantId", 1), ("idempotencyKey", 1)], unique=True, name="tenant_idempotency_unique")


def drop_global_idempotency_index(database: MongoDatabase) -> None:
    """A database written before idempotency keys were unique per tenant has a unique index on the key alone,
    which would refuse a key that another tenant uses. It goes once the per-tenant index exists (migration 1),
    so one unique index guards every moment of the upgrade; replicas starting together may race to drop it."""
    jobs = database.collection("jobs")
    for name, spec in jobs.index_information().items():
        if spec.get("unique") and [field for field, _ in spec["key"]] == ["idempotencyKey"]:
            try:
                jobs.drop_index(name)
            except OperationFailure as exc:
                if exc.code != 27:  # IndexNotFound: another replica dropped it first
                    raise


def query_indexes(database: MongoDatabase) -> None:
    """The indexes of the store's own queries, so that none reads a whole collection: the claim's (claim_order;
    due_lanes: a type's tenants with pending runs, then each one's runs in claim order), due templates, a tenant's
    jobs newest first, a template's runs by planned time, the reaper's expired attempts, retention's finished jobs
    by age, and a job's attempt records and outcomes."""
    jobs = database.collection("jobs")
    jobs.create_index([("status", 1), ("priority", -1), ("scheduledAt", 1)], name="claim_order")
    jobs.create_index(
        [
            ("status", 1),
            ("kind", 1),
            ("jobType", 1),
            ("tenantId", 1),
            ("priority", -1),
            ("scheduledAt", 1),
            ("_id", 1),
        ],
        name="due_lanes",
    )
    jobs.create_index([("kind", 1), ("status", 1), ("scheduledAt", 1)], name="due_templates")
    jobs.create_index([("tenantId", 1), ("createdAt", -1), ("status", 1)], name="tenant_listing")
    jobs.create_index([("templateId", 1), ("plannedAt", -1)], name="template_runs_planned")
    jobs.create_index([("status", 1), ("leaseExpiresAt", 1)], name="expired_attempts")
    jobs.create_index([("status", 1), ("updatedAt", 1)], name="finished_age")
    database.collection("executions").create_index([("jobId", 1), ("attempt", 1)], name="job_attempts")
    database.collection("attempt_outcomes").create_index([("jobId", 1)], name="job_outcomes")


def operator_indexes(database: MongoDatabase) -> None:
    """What the operator's pages and counts read (browse.py): a tenant's jobs by status or by type, the counts
    by type and status from index entries alone, templates and their runs, the last hour's completions, the
    dead letters (of every tenant, of one) and the recent attempt outcomes. tenant_status_listing and type_counts
    change with every status change; the partial ones hold only templates, runs, completed or dead-lettered
    jobs, so that the jobs that come and go fastest stay out of them."""
    jobs = database.collection("jobs")
    jobs.create_index([("tenantId", 1), ("status", 1), ("createdAt", -1), ("_id", -1)], name="tenant_status_listing")
    jobs.create_index([("tenantId", 1), ("jobType", 1), ("createdAt", -1), ("_id", -1)], name="tenant_type_listing")
    jobs.create_index([("jobType", 1), ("status", 1), ("tenantId", 1)], name="type_counts")
    jobs.create_index(
        [("tenantId", 1), ("createdAt", -1), ("_id", -1)],
        name="tenant_templates",
        partialFilterExpression={"kind": "template"},
    )
    jobs.create_index(
        [("templateId", 1), ("createdAt", -1), ("_id", -1)],
        name="template_runs",
        partialFilterExpression={"templateId": {"$exists": True}},
    )
    jobs.create_index(
        [("updatedAt", 1), ("jobType", 1), ("tenantId", 1)],
        name="recent_completions",
        partialFilterExpression={"status": "completed"},
    )
    jobs.create_index(
        [("lastError", 1), ("updatedAt", -1), ("tenantId", 1)],
        name="dead_letters",
        partialFilterExpression={"status": "dlq"},
    )
    jobs.create_index(
        [("tenantId", 1), ("lastError", 1), ("updatedAt", -1)],
        name="tenant_dead_letters",
        partialFilterExpression={"status": "dlq"},
    )
    database.collection("attempt_outcomes").create_index([("outcome", 1), ("at", 1)], name="recent_outcomes")


def backoff_on_jobs(database: MongoDatabase) -> None:
    """A job keeps its type's retry backoff from its creation (subdocument `backoff`, absent for the default 1 s
    base, 300 s cap, no jitter), read by whoever closes one of its attempts; before, each closer looked the type's
    backoff up. The jobs not final yet (templates included) of a type whose latest announcement (by seenAt, then
    executor) carries another backoff get that one, so that they go on being retried as before; a job that has one
    already keeps it, and a backoff that cannot be read counts as the default, as the announcement's readers take
    it. Replicas running it together write the same values."""
    latest: dict[str, Document] = {}
    for announced in database.collection("job_type_announcements").find({}):
        seen = latest.get(announced["jobType"])
        if seen is None or (announced["seenAt"], announced["executor"]) > (seen["seenAt"], seen["executor"]):
            latest[announced["jobType"]] = announced
    for job_type, announced in latest.items():
        try:
            stated = announced["defaults"]["backoff"]
            backoff = {
                "baseSeconds": float(stated.get("baseSeconds", 1.0)),
                "capSeconds": float(stated.get("capSeconds", 300.0)),
                "jitter": bool(stated.get("jitter", False)),
            }
        except (TypeError, ValueError, KeyError, AttributeError):
            continue
        readable = backoff["baseSeconds"] > 0 and backoff["capSeconds"] >= backoff["baseSeconds"]
        if not readable or backoff == {"baseSeconds": 1.0, "capSeconds": 300.0, "jitter": False}:
            continue
        database.collection("jobs").update_many(
            {
                "jobType": job_type,
                "status": {"$in": ["pending", "buffered", "queued", "claimed", "running"]},
                "backoff": {"$exists": False},
            },
            {"$set": {"backoff": backoff}},
        )


def leaner_job_indexes(database: MongoDatabase) -> None:
    """Fewer index entries per job (issue 49). DocumentDB writes an entry into every index of a collection at each
    update (a document is one column, every index is over it); MongoDB into each index whose key changed, and the
    dropped ones all held the status. So the indexes that serve the scheduler's, the reaper's and retention's
    queries hold only the jobs those queries look for: partial ones, filtered by equality (DocumentDB refuses
    $in in a partial filter), which a job enters once or twice in its life. Kept whole: the unique key, the
    operator's listings and the counts by type. claim_order served no query since the claim reads lanes;
    tenant_listing becomes tenant_newest, whose _id orders a page's ties. The new ones come first, so that every
    query has an index at each moment of the upgrade; a drop accepts an index dropped meanwhile."""
    jobs = database.collection("jobs")
    jobs.create_index(
        [("jobType", 1), ("tenantId", 1), ("priority", -1), ("scheduledAt", 1), ("_id", 1)],
        name="pending_runs",
        partialFilterExpression={"status": "pending", "kind": "run"},
    )
    jobs.create_index(
        [("status", 1), ("scheduledAt", 1)], name="template_times", partialFilterExpression={"kind": "template"}
    )
    jobs.create_index(
        [("plannedAt", 1), ("_id", 1)], name="buffered_runs", partialFilterExpression={"status": "buffered"}
    )
    jobs.create_index(
        [("templateId", 1), ("plannedAt", -1)],
        name="template_runs_by_plan",
        partialFilterExpression={"templateId": {"$exists": True}},
    )
    jobs.create_index([("tenantId", 1), ("createdAt", -1), ("_id", -1)], name="tenant_newest")
    jobs.create_index([("queuedAt", 1)], name="queued_age", partialFilterExpression={"status": "queued"})
    jobs.create_index([("leaseExpiresAt", 1)], name="claimed_leases", partialFilterExpression={"status": "claimed"})
    jobs.create_index([("leaseExpiresAt", 1)], name="running_leases", partialFilterExpression={"status": "running"})
    jobs.create_index([("updatedAt", 1)], name="cancelled_age", partialFilterExpression={"status": "cancelled"})
    jobs.create_index([("updatedAt", 1)], name="dead_letter_age", partialFilterExpression={"status": "dlq"})
    for name in (
        "claim_order",
        "due_lanes",
        "due_templates",
        "template_runs_planned",
        "tenant_listing",
        "expired_attempts",
        "finished_age",
    ):
        try:
            jobs.drop_index(name)
        except OperationFailure as exc:
            if exc.code != 27:  # IndexNotFound: another replica dropped it first
                raise


def attempt_history_in_jobs(database: MongoDatabase) -> None:
    """An attempt's start and outcome become guarded updates of its job (issue 49): the job keeps its last 20
    attempts in `history`, and each failed attempt leaves an event in attempt_failures (which a TTL index empties
    two hours on) for the console's last hour. Copied from `executions` and `attempt_outcomes`: every job's closed
    attempts (a record completed from its outcome; an open one stays the job's own fields) into a job that has no
    history yet, and the failed attempts of the last two hours as events keyed by their record's id, so replicas
    running it together write the same. The two collections stay, read by nothing, for a later release to drop."""
    failures = database.collection("attempt_failures")
    failures.create_index([("at", 1)], name="failure_age", expireAfterSeconds=7200)
    failures.create_index([("tenantId", 1), ("at", 1)], name="tenant_failures")
    executions = database.collection("executions")
    outcomes = database.collection("attempt_outcomes")
    jobs = database.collection("jobs")
    kept = ("attempt", "worker", "startedAt", "outcome", "finishedAt", "durationMs", "error", "traceback", "result")

    def copy_histories(records: dict[str, list[Document]]) -> None:
        """Some jobs' records (by job id, in attempt order) into their histories."""
        if not records:
            return
        ids = [f"{job_id}:{r['attempt']}" for job_id, rs in records.items() for r in rs]
        decided = {d["_id"]: d for d in outcomes.find({"_id": {"$in": ids}})}
        updates: list[UpdateOne] = []
        for job_id, rs in records.items():
            history: list[Document] = []
            for record in rs:
                outcome = decided.get(record["_id"])
                entry: Document = {k: record[k] for k in kept if k in record}
                if outcome is not None and record.get("finishedAt") is None:
                    entry.update(outcome=outcome["outcome"], finishedAt=outcome["at"], error=outcome.get("error"))
                    entry.update({k: outcome[k] for k in ("traceback", "result") if k in outcome})
                    started = outcome.get("startedAt") or record.get("startedAt")
                    if started is not None:
                        entry["durationMs"] = round((outcome["at"] - started).total_seconds() * 1000, 3)
                if entry.get("outcome") != "running":
                    history.append(entry)
            if history and ObjectId.is_valid(job_id):
                guard = {"_id": ObjectId(job_id), "history": {"$exists": False}}
                updates.append(UpdateOne(guard, {"$set": {"history": history[-20:]}}))
        if updates:
            jobs.bulk_write(updates, ordered=False)

    batch: dict[str, list[Document]] = {}
    for record in executions.find({}).sort([("jobId", 1), ("attempt", 1)]):
        if record["jobId"] not in batch and len(batch) >= 500:
            copy_histories(batch)
            batch = {}
        batch.setdefault(record["jobId"], []).append(record)
    copy_histories(batch)
    recent = {
        "outcome": {"$in": ["failed", "timeout", "lost"]},
        "at": {"$gte": datetime.now(UTC) - timedelta(hours=2)},
    }
    failed = list(outcomes.find(recent))
    for start in range(0, len(failed), 500):
        chunk = failed[start : start + 500]
        ids = [ObjectId(d["jobId"]) for d in chunk if ObjectId.is_valid(d["jobId"])]
        owners = {str(d["_id"]): d for d in jobs.find({"_id": {"$in": ids}}, {"tenantId": 1, "jobType": 1})}
        events = [
            {"_id": d["_id"], "at": d["at"], "outcome": d["outcome"]}
            | {"tenantId": owners[d["jobId"]]["tenantId"], "jobType": owners[d["jobId"]]["jobType"]}
            for d in chunk
            if d["jobId"] in owners
        ]
        if events:
            try:
                failures.insert_many(events, ordered=False)
            except BulkWriteError as exc:
                if any(e.get("code") != 11000 for e in exc.details.get("writeErrors", [])):
                    raise


def dependency_indexes(database: MongoDatabase) -> None:
    """Jobs that wait for other jobs (dependsOn, issue 50): a parent's end finds its waiting dependents
    (`waiting_on`, multikey, holding a job only while it waits), and the reaper finds the parents that ended with a
    mark still on them (`marked_parents`, holding a job only while marked): both partial, so a job with no
    dependency costs them nothing."""
    jobs = database.collection("jobs")
    jobs.create_index([("dependsOn", 1)], name="waiting_on", partialFilterExpression={"status": "waiting"})
    jobs.create_index(
        [("status", 1), ("dependentsAt", 1)], name="marked_parents", partialFilterExpression={"hasDependents": True}
    )


def workflow_indexes(database: MongoDatabase) -> None:
    """Workflows (issue 50): one per tenant and idempotency key (the unique insert decides a create), listed newest
    first per tenant; the reaper finds the ones a crash left half written; a workflow's jobs are found by
    `jobs_of_workflow`, which holds only jobs of a workflow (partial), so other jobs cost it nothing."""
    workflows = database.collection("workflows")
    workflows.create_index([("tenantId", 1), ("idempotencyKey", 1)], name="workflow_key", unique=True)
    workflows.create_index([("tenantId", 1), ("_id", -1)], name="workflows_of_tenant")
    workflows.create_index([("createdAt", 1)], name="workflows_creating", partialFilterExpression={"state": "creating"})
    jobs = database.collection("jobs")
    jobs.create_index(
        [("workflowId", 1)], name="jobs_of_workflow", partialFilterExpression={"workflowId": {"$exists": True}}
    )


def batch_indexes(database: MongoDatabase) -> None:
    """Batches (issue 50): one per tenant and idempotency key, listed newest first per tenant; the reaper finds the
    sealed ones not fired yet (`firing`, partial); a batch's members are found by status (a member's end probes
    for one that has not ended), in id order within a status (a callback reads them in pages): partial, so a job
    of no batch costs it nothing. And the workflows being written in any state (creating, releasing, removing),
    by state, for the reaper: one entry per workflow, not per job."""
    database.collection("workflows").create_index([("state", 1), ("createdAt", 1)], name="workflows_by_state")
    batches = database.collection("batches")
    batches.create_index([("tenantId", 1), ("idempotencyKey", 1)], name="batch_key", unique=True)
    batches.create_index([("tenantId", 1), ("_id", -1)], name="batches_of_tenant")
    batches.create_index([("firing", 1)], name="batches_firing", partialFilterExpression={"firing": True})
    in_a_batch = {"batchId": {"$exists": True}}
    database.collection("jobs").create_index(
        [("batchId", 1), ("status", 1), ("_id", 1)], name="jobs_of_batch", partialFilterExpression=in_a_batch
    )


def history_minutes(database: MongoDatabase) -> None:
    """The console's history (issue 51, minutes.py): one document per tenant (or every tenant's sum), job type
    and minute, read by tenant and type over a range of minutes (`tenant_minutes`) and deleted by the server a day
    and an hour after its minute (`minute_age`, TTL)."""
    minutes = database.collection("job_minutes")
    minutes.create_index([("tenantId", 1), ("jobType", 1), ("minute", 1)], name="tenant_minutes")
    minutes.create_index([("at", 1)], name="minute_age", expireAfterSeconds=25 * 3600)


def counts_by_status(database: MongoDatabase) -> None:
    """One index entry fewer per job (issue 49): the counts by type and status lead with the status and end with
    the time a job was queued (`status_counts`: status, jobType, tenantId, queuedAt, whole, as type_counts was), and
    the reaper's lost wake-ups (queued longer than QUEUED_TIMEOUT) are read from it instead of `queued_age`, which
    a job entered when it was claimed. The reaper's read walks the queued jobs' entries and compares their queuedAt
    in the index, fetching only the stale jobs; the overview's counts read the index in status order instead. The
    new index comes first, so that every query has one throughout the upgrade."""
    jobs = database.collection("jobs")
    jobs.create_index([("status", 1), ("jobType", 1), ("tenantId", 1), ("queuedAt", 1)], name="status_counts")
    for name in ("type_counts", "queued_age"):
        try:
            jobs.drop_index(name)
        except OperationFailure as exc:
            if exc.code != 27:  # IndexNotFound: another replica dropped it first
                raise


def collections_made_up_front(database: MongoDatabase) -> None:
    """The collections that no index made before, made here rather than by the first write into each at run time:
    keys, their use, credentials, signing secrets, a type's limits, cancellation requests and the rate limits'
    state. On FerretDB 2 (DocumentDB) a write into a missing collection creates it within that write (DDL in the
    write's transaction), and one such insert failed with "Unable to create the specified collection"
    (InternalError): no write of the product depends on that path any more."""
    db = database.client[database.name]
    for name in (
        "api_keys",
        "api_key_usage",
        "credentials",
        "signing_secrets",
        "job_type_limits",
        "cancel_requests",
        "rate_limits",
        "key_rate_limits",
    ):
        try:
            db.create_collection(name, check_exists=False)
        except OperationFailure as exc:
            if exc.code != 48:  # NamespaceExists: an earlier write made it, or another replica just did
                raise


# In the order they were released; only ever appended to.
MIGRATIONS: Final[tuple[Migration, ...]] = (
    unique_idempotency_per_tenant,
    drop_global_idempotency_index,
    query_indexes,
    operator_indexes,
    backoff_on_jobs,
    leaner_job_indexes,
    attempt_history_in_jobs,
    dependency_indexes,
    workflow_indexes,
    batch_indexes,
    history_minutes,
    counts_by_status,
    collections_made_up_front,
)
LATEST: Final = len(MIGRATIONS)
