"""JobStore on MongoDB (pymongo), also correct on Mongo-compatible servers without atomic updates.

FerretDB 1.x, the test stand-in, evaluates findAndModify/update by reading and writing back whole documents
without re-checking the filter, so conditional updates there are best effort. Everything that decides
ownership is therefore an insert into a unique index: idempotency keys on `jobs`, attempt records
`<jobId>:<attempt>` on `executions` (DESIGN.md, invariants). It also avoids what FerretDB rejects:
`projection=` on find_one_and_update, partial and TTL indexes.

Collections: `jobs`; `executions`, one record per attempt, inserted when it starts (ownership and history);
`attempt_outcomes`, one per decided attempt (its insert decides the one outcome); `attempt_leases`, one per
attempt in an executor's hands, deleted when it is closed, so that the reaper reads only live attempts. A
success does not rewrite its record (the history reads its end from the outcome): on FerretDB an update costs
about what three inserts and a delete do.
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from collections.abc import Collection, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bson import ObjectId
from bson.errors import InvalidDocument
from pymongo import ASCENDING, DESCENDING, MongoClient, ReturnDocument
from pymongo.collection import Collection as MongoCollection
from pymongo.errors import BulkWriteError, ConnectionFailure, DuplicateKeyError, OperationFailure, WriteError

from shared.backoff import DEFAULT_BACKOFF, Backoff
from shared.jsonsafe import shorten
from shared.model import JOB_FIELDS, Execution, Job, Outcome, Status, utc_now
from shared.store import transitions
from shared.store.base import (
    AttemptResult,
    AttemptTaken,
    DuplicateJob,
    JobNotFound,
    JobRefused,
    NewJob,
    RunSpec,
    StartHint,
    StoreError,
    StoreUnavailable,
    TransitionRefused,
)
from shared.store.claim_lanes import BacklogCache, ClaimDocs, ClaimerMemory, new_lane, plan_claim
from shared.store.due_slots import LOOKBACK_SLOTS, due_slot, slot_of
from shared.store.group_commit import GroupCommit
from shared.store.transitions import ATTEMPT_ACTIVE, ATTEMPT_CLOSABLE, CANCELLABLE_VALUES, KIND_BUFFERED
from shared.store.transitions import KIND_RUN as KIND_RUN  # re-exported: loaders and tests query by kind
from shared.store.transitions import KIND_TEMPLATE as KIND_TEMPLATE
from shared.store.transitions import attempt_record_id as attempt_record_id

Document = dict[str, Any]
CLAIM_ORDER = [("priority", DESCENDING), ("scheduledAt", ASCENDING)]
CLAIM_FIELDS = {"_id": 1, "priority": 1, "scheduledAt": 1, "dueSlot": 1, "lane": 1}
DUPLICATE_KEY = 11000
INDEX_NOT_FOUND = 27
# What the operator's pages and counts use (browse_mongo.py). tenant_status_listing and type_counts change with
# every status change; the partial ones hold only templates, runs, completed or dead-lettered jobs.
OPERATOR_INDEXES: list[tuple[str, list[tuple[str, int]], dict[str, Any]]] = [
    ("jobs", [("tenantId", 1), ("status", 1), ("createdAt", -1), ("_id", -1)], {"name": "tenant_status_listing"}),
    ("jobs", [("tenantId", 1), ("jobType", 1), ("createdAt", -1), ("_id", -1)], {"name": "tenant_type_listing"}),
    ("jobs", [("jobType", 1), ("status", 1), ("tenantId", 1)], {"name": "type_counts"}),
    (
        "jobs",
        [("tenantId", 1), ("createdAt", -1), ("_id", -1)],
        {"name": "tenant_templates", "partialFilterExpression": {"kind": KIND_TEMPLATE}},
    ),
    (
        "jobs",
        [("templateId", 1), ("createdAt", -1), ("_id", -1)],
        {"name": "template_runs", "partialFilterExpression": {"templateId": {"$exists": True}}},
    ),
    (
        "jobs",
        [("updatedAt", 1), ("jobType", 1), ("tenantId", 1)],
        {"name": "recent_completions", "partialFilterExpression": {"status": Status.COMPLETED.value}},
    ),
    (
        "jobs",
        [("lastError", 1), ("updatedAt", -1), ("tenantId", 1)],
        {"name": "dead_letters", "partialFilterExpression": {"status": Status.DLQ.value}},
    ),
    ("attempt_outcomes", [("outcome", 1), ("at", 1)], {"name": "recent_outcomes"}),
]
CANCEL_TRIES = 5


@dataclass(frozen=True)
class _StartRequest:
    job_id: str
    job_type: str
    worker: str
    lease_until: datetime
    hint: StartHint


@dataclass(frozen=True)
class _FinishRequest:
    job: Job
    result: AttemptResult


@contextmanager
def _translate_errors() -> Iterator[None]:
    """Driver failures that mean "the database is not there" become StoreUnavailable (HTTP 503)."""
    try:
        yield
    except ConnectionFailure as exc:  # includes ServerSelectionTimeoutError and network timeouts
        raise StoreUnavailable(f"MongoDB unavailable: {exc}") from exc


class MongoJobStore:
    def __init__(self, client: MongoClient[Document], database: str) -> None:
        self._client = client
        self._db = client[database]
        self._jobs: MongoCollection[Document] = self._db["jobs"]
        self._executions: MongoCollection[Document] = self._db["executions"]
        self._outcomes: MongoCollection[Document] = self._db["attempt_outcomes"]
        self._leases: MongoCollection[Document] = self._db["attempt_leases"]
        self._cancel_requests: MongoCollection[Document] = self._db["cancel_requests"]
        self._claimer = ClaimerMemory(frozenset())
        # Executors call these from one thread per delivery; concurrent calls become bulk writes.
        self._starts: GroupCommit[_StartRequest, Job] = GroupCommit(self._start_batch)
        self._finishes: GroupCommit[_FinishRequest, Job | None] = GroupCommit(self._finish_batch)
        self._claim_docs = ClaimDocs()
        # Writes made beside a batch's job update, on connections of their own (a lease's insert or delete).
        self._side_writes = ThreadPoolExecutor(2, thread_name_prefix="side-writes")

    @classmethod
    def connect(cls, uri: str, database: str, *, timeout_ms: int = 5000) -> MongoJobStore:
        client: MongoClient[Document] = MongoClient(
            uri,
            tz_aware=True,
            # Text that is not UTF-8 (written by other clients or older versions) reads as U+FFFD instead of
            # failing every read of its job.
            unicode_decode_error_handler="replace",
            serverSelectionTimeoutMS=timeout_ms,
            connectTimeoutMS=timeout_ms,
            socketTimeoutMS=max(timeout_ms * 6, 30_000),
        )
        return cls(client, database)

    def close(self) -> None:
        self._side_writes.shutdown(wait=True)
        self._client.close()

    def ensure_schema(self) -> None:
        """Unique indexes always (they decide ownership); the indexes that only serve queries where the server
        uses them: FerretDB 1.x answers every query with a scan, so there they would only make each document
        write slower (one more index entry per write: 0.53 → 0.44 ms per updated job measured, see
        deployments/local/FERRETDB.md). Indexes that exist already are left alone."""
        with _translate_errors():
            self._jobs.create_index(
                [("tenantId", ASCENDING), ("idempotencyKey", ASCENDING)], unique=True, name="tenant_idempotency_unique"
            )
            self._drop_global_idempotency_index()
            if self._server_uses_indexes():
                self._create_query_indexes()

    def _drop_global_idempotency_index(self) -> None:
        """A database written before idempotency keys were unique per tenant has a unique index on the key
        alone, which would refuse a key that another tenant uses. It goes once the per-tenant index exists, so
        one unique index guards every moment of the upgrade; replicas starting together may race to drop it."""
        for name, spec in self._jobs.index_information().items():
            if spec.get("unique") and [field for field, _ in spec["key"]] == ["idempotencyKey"]:
                try:
                    self._jobs.drop_index(name)
                except OperationFailure as exc:
                    if exc.code != INDEX_NOT_FOUND:
                        raise

    def _server_uses_indexes(self) -> bool:
        info = self._client.admin.command("buildInfo")
        return "ferretdbVersion" not in info or not str(info["ferretdbVersion"]).startswith("v1.")

    def _create_query_indexes(self) -> None:
        self._jobs.create_index([("status", ASCENDING), *CLAIM_ORDER], name="claim_order")
        self._jobs.create_index([("status", ASCENDING), ("dueSlot", ASCENDING)], name="claim_slots")
        self._jobs.create_index(
            [("kind", ASCENDING), ("status", ASCENDING), ("scheduledAt", ASCENDING)], name="due_templates"
        )
        self._jobs.create_index("claimToken", name="claim_batches")
        self._jobs.create_index("startToken", name="start_batches")
        self._jobs.create_index(
            [("tenantId", ASCENDING), ("createdAt", DESCENDING), ("status", ASCENDING)],
            name="tenant_listing",
        )
        self._jobs.create_index([("templateId", ASCENDING), ("plannedAt", DESCENDING)], name="template_runs_planned")
        self._executions.create_index([("jobId", ASCENDING), ("attempt", ASCENDING)], name="job_attempts")
        self._leases.create_index("leaseExpiresAt", name="lease_expiry")
        for collection, keys, options in OPERATOR_INDEXES:
            self._db[collection].create_index(keys, **options)

    def ping(self) -> None:
        with _translate_errors():
            self._db.command("ping")

    def create(self, new: NewJob) -> Job:
        doc = pending_document(transitions.new_job(new, new.createdAt or utc_now()))
        with _translate_errors():
            try:
                result = self._jobs.insert_one(doc)
            except DuplicateKeyError as exc:
                holder = self._jobs.find_one(
                    {"tenantId": new.tenantId, "idempotencyKey": new.idempotencyKey}, {"_id": 1}
                )
                raise DuplicateJob(new.idempotencyKey, str(holder["_id"]) if holder else None) from exc
            except (WriteError, InvalidDocument, OverflowError) as exc:
                raise JobRefused(_refusal(exc)) from exc
        doc["_id"] = result.inserted_id
        return job_from_document(doc)

    def get(self, job_id: str) -> Job | None:
        if not ObjectId.is_valid(job_id):
            return None
        with _translate_errors():
            doc = self._jobs.find_one({"_id": ObjectId(job_id)})
        return job_from_document(doc) if doc else None

    def list_for_tenant(self, tenant_id: str, status: Status | None, limit: int) -> list[Job]:
        query: Document = {"tenantId": tenant_id}
        if status is not None:
            query["status"] = status.value
        with _translate_errors():
            docs = self._jobs.find(query).sort([("createdAt", DESCENDING), ("_id", DESCENDING)]).limit(limit)
            return [job_from_document(d) for d in docs]

    def cancel(self, job_id: str) -> Job:
        for _ in range(CANCEL_TRIES):  # a job that starts or stops between the read and the write is read again
            job = self.get(job_id)
            if job is None:
                raise JobNotFound(job_id)
            transitions.check_cancellable(job)
            done = self._request_cancel(job) if job.status.value in ATTEMPT_ACTIVE else self._cancel_now(job)
            if done is not None:
                return done
        current = self.get(job_id)
        if current is None:
            raise JobNotFound(job_id)
        raise TransitionRefused(current, "cancel")

    def _cancel_now(self, job: Job) -> Job | None:
        """pending|queued → cancelled; None when the job moved on meanwhile (started, or finished)."""
        now = utc_now()
        with _translate_errors():
            if not job.is_template:
                # Take the next attempt before any executor can: a duplicate means one already started it.
                try:
                    self._executions.insert_one(
                        {"_id": attempt_record_id(job.id, job.next_attempt), **transitions.attempt_cancelled(job, now)}
                    )
                except DuplicateKeyError:
                    return None
            updated = self._jobs.find_one_and_update(
                {"_id": ObjectId(job.id), "status": {"$in": list(CANCELLABLE_VALUES)}},
                _update(transitions.cancelled(now)),
                return_document=ReturnDocument.AFTER,
            )
        if updated is None:
            current = self.get(job.id) or job
            return current if current.status is Status.CANCELLED else None
        return job_from_document(updated)

    def _request_cancel(self, job: Job) -> Job | None:
        """claimed|running → cancelRequested, with the request its executor's heartbeat reads (a collection
        that holds only open requests, so the check costs the same whatever the number of jobs); None when
        the attempt ended meanwhile."""
        now = utc_now()
        with _translate_errors():
            self._cancel_requests.update_one({"_id": job.id}, {"$set": {"requestedAt": now}}, upsert=True)
            doc = self._jobs.find_one_and_update(
                {"_id": ObjectId(job.id), "status": {"$in": list(ATTEMPT_ACTIVE)}},
                _update(transitions.cancel_requested(now)),
                return_document=ReturnDocument.AFTER,
            )
            if doc is None:
                self._cancel_requests.delete_one({"_id": job.id})
                return None
        return job_from_document(doc)

    def cancel_requested(self, jobs: Sequence[Job]) -> set[str]:
        if not jobs:
            return set()
        with _translate_errors():
            return {str(d["_id"]) for d in self._cancel_requests.find({"_id": {"$in": [j.id for j in jobs]}})}

    def claim_due_jobs(
        self, now: datetime, limit: int, job_types: Collection[str], due_by: datetime | None = None
    ) -> list[Job]:
        """Find the due runs (by due slot, see due_slots.py; a passed slot's from the backlog cache, see
        claim_lanes.py), take the first `limit` in claim order, flip them with one guarded update_many per
        (slot, priority) or per lane of it, then re-read which ones carry this call's claim token: those are the
        ones won, in claim order. Each document is still updated atomically on MongoDB; on FerretDB two
        overlapping claimers may both win a document, which the executor's attempt record absorbs
        (invariant 2)."""
        due_by = due_by or now
        wall = utc_now()
        # Slots up to the wall clock at least: a run written (or released) after `now` was taken sits in the
        # slot of its write, and is due all the same when its scheduledAt <= due_by.
        memory = self._claimer = self._claimer.serving(job_types)
        slots = memory.window.plan(now, max(due_by, wall), memory.backlog.slots())
        with _translate_errors():
            query = due_runs_filter(due_by, job_types)
            read_started = time.perf_counter()
            found, queries = self._candidates(query, slots, memory.backlog, slot_of(wall) - LOOKBACK_SLOTS)
            read_s = time.perf_counter() - read_started
            found.sort(key=_claim_order)
            groups, left = plan_claim(found, limit)
            memory.window.claimed(now, slots is None, (d.get("dueSlot") for d in left), read_s, queries)
            memory.backlog.settle(left)
            if not groups:
                return []
            token = uuid.uuid4().hex
            for group in groups:
                # equalities the server can filter on before decoding: slot, priority (and lane) narrow the update
                guard: Document = {
                    "status": Status.PENDING.value,
                    "priority": group.priority,
                    "_id": {"$in": group.ids},
                }
                if group.slot is not None:
                    guard["dueSlot"] = group.slot
                if group.lane is not None:
                    guard["lane"] = group.lane
                self._jobs.update_many(guard, {"$set": _queued(now, token)})
            won = [job_from_document(d) for d in self._jobs.find({"claimToken": token})]
        return sorted(won, key=transitions.claim_order)

    def _candidates(
        self, query: Document, slots: list[int] | None, backlog: BacklogCache, closed_below: int
    ) -> tuple[list[Document], int]:
        """The due runs of `slots` (None: of every slot) and how many slot queries that took; slots before
        `closed_below` come from the backlog cache when it has them, and are cached when read."""
        if slots is None:
            found = list(self._jobs.find(query, CLAIM_FIELDS))
            backlog.rebuild(found, closed_below)
            return found, 0
        found, queries = [], 0
        for slot in slots:
            closed = slot < closed_below
            cached = backlog.get(slot) if closed else None
            if cached is None:
                cached = list(self._jobs.find({**query, "dueSlot": slot}, CLAIM_FIELDS))
                queries += 1
                if closed:
                    backlog.keep(slot, cached)
            found.extend(cached)
        return found, queries

    def due_job_types(self, now: datetime) -> set[str]:
        query = {"status": Status.PENDING.value, "kind": KIND_RUN, "scheduledAt": {"$lte": now}}
        with _translate_errors():
            return {str(t) for t in self._jobs.distinct("jobType", query)}

    def release_claims(self, jobs: Sequence[Job]) -> None:
        if not jobs:
            return
        with _translate_errors():
            self._jobs.update_many(
                {"_id": {"$in": [ObjectId(j.id) for j in jobs]}, "status": Status.QUEUED.value},
                _update(transitions.requeued(utc_now())),
            )

    def due_templates(self, now: datetime, limit: int) -> list[Job]:
        query = {
            "status": Status.PENDING.value,
            "kind": KIND_TEMPLATE,
            "scheduledAt": {"$lte": now},
            "paused": {"$ne": True},
        }
        with _translate_errors():
            return [job_from_document(d) for d in self._jobs.find(query).sort("scheduledAt", ASCENDING).limit(limit)]

    def spawn_run(self, template: Job, planned: datetime) -> bool:
        return self.add_run(template, RunSpec(planned))[1]

    def advance_template(self, template: Job, next_at: datetime) -> bool:
        with _translate_errors():
            result = self._jobs.update_one(
                {"_id": ObjectId(template.id), "status": Status.PENDING.value, "scheduledAt": template.scheduledAt},
                _update(transitions.template_advanced(next_at, utc_now())),
            )
        return result.modified_count == 1

    def dead_letter_template(self, template: Job, reason: str) -> bool:
        with _translate_errors():
            result = self._jobs.update_one(
                {"_id": ObjectId(template.id), "status": Status.PENDING.value},
                _update(transitions.template_dead_lettered(reason, utc_now())),
            )
        return result.modified_count == 1

    # --- schedules --------------------------------------------------------------------------------------

    def add_run(self, template: Job, run: RunSpec) -> tuple[Job, bool]:
        fields = transitions.template_run(template, run, utc_now())
        doc = pending_document(fields) if run.status is Status.PENDING else dict(fields)
        with _translate_errors():
            try:
                result = self._jobs.insert_one(doc)
            except DuplicateKeyError:
                # This key's run exists (a retry after a crash, another leader's spawn, a repeated trigger).
                existing = self.job_by_key(fields["tenantId"], fields["idempotencyKey"])
                if existing is None:  # removed since: nothing of ours to return
                    raise StoreUnavailable("the run's key was taken and then vanished; retry") from None
                return existing, False
        doc["_id"] = result.inserted_id
        return job_from_document(doc), True

    def job_by_key(self, tenant_id: str, idempotency_key: str) -> Job | None:
        with _translate_errors():
            doc = self._jobs.find_one({"tenantId": tenant_id, "idempotencyKey": idempotency_key})
        return job_from_document(doc) if doc else None

    def template_runs(
        self, template_id: str, statuses: Collection[Status] | None, limit: int, after_run: Job | None = None
    ) -> list[Job]:
        query: Document = {"templateId": template_id}
        if statuses is not None:
            query["status"] = {"$in": sorted(s.value for s in statuses)}
        if after_run is not None:
            query.update(_runs_after(after_run))
        order = [("plannedAt", DESCENDING), ("scheduledAt", DESCENDING), ("_id", DESCENDING)]
        with _translate_errors():
            return [job_from_document(d) for d in self._jobs.find(query).sort(order).limit(max(limit, 0))]

    def buffered_runs(self, limit: int) -> list[Job]:
        query = {"kind": KIND_BUFFERED, "status": Status.BUFFERED.value}
        order = [("plannedAt", ASCENDING), ("_id", ASCENDING)]
        with _translate_errors():
            return [job_from_document(d) for d in self._jobs.find(query).sort(order).limit(max(limit, 0))]

    def promote_buffered(self, run: Job, now: datetime) -> bool:
        with _translate_errors():
            result = self._jobs.update_one(
                {"_id": ObjectId(run.id), "status": Status.BUFFERED.value}, _update(transitions.promoted(now))
            )
        return result.modified_count == 1

    def update_pending(self, job: Job, fields: transitions.Fields) -> Job | None:
        with _translate_errors():
            doc = self._jobs.find_one_and_update(
                {"_id": ObjectId(job.id), "status": Status.PENDING.value, "scheduledAt": job.scheduledAt},
                _update(fields),
                return_document=ReturnDocument.AFTER,
            )
        return job_from_document(doc) if doc is not None else None

    # --- executor ---------------------------------------------------------------------------------------

    def _begin_attempt(self, job: Job, worker: str, lease_until: datetime) -> Job:
        """Claim attempt `job.next_attempt` by inserting its record, then move the job queued → running."""
        attempt = job.next_attempt
        record_id = attempt_record_id(job.id, attempt)
        now = utc_now()
        # Unlike SQLite, the record and the job cannot change in one transaction here, so the attempt gets a
        # lease of its own (extended by heartbeats): if the claim below never lands, or a non-atomic write-back
        # hides it, the reaper still finds and closes the attempt (expired_attempts).
        record = {"_id": record_id, **_record(job.id, attempt, worker, now, lease_until)}
        with _translate_errors():
            try:
                self._executions.insert_one(record)
            except DuplicateKeyError as exc:
                self._heal_from_ledger(job, attempt)
                raise AttemptTaken(f"attempt {attempt} of job {job.id} is already taken") from exc
            try:
                _insert_new(self._leases, [_lease(record)])
                doc = self._jobs.find_one_and_update(
                    {"_id": ObjectId(job.id), "attempts": job.attempts, "status": Status.QUEUED.value},
                    _update({**transitions.started(worker, now, lease_until), "startToken": transitions.UNSET}),
                    return_document=ReturnDocument.AFTER,
                )
            except ConnectionFailure:
                started = self._settle_interrupted_start(job.id, attempt, worker)
                if started is None:
                    raise
                return started
            if doc is None:
                # The job moved on (cancelled, re-pended, finished) before the claim: the attempt never
                # started, so give it back for a delivery that matches the job's real state.
                self._give_back(record_id)
        if doc is None:
            raise AttemptTaken(f"job {job.id} is no longer queued for attempt {attempt}")
        return job_from_document(doc)

    def _heal_from_ledger(self, job: Job, attempt: int) -> None:
        """The attempt record says this attempt is already taken. If the job document disagrees because a
        non-atomic write-back on a Mongo-compatible server put back an older state, the ledger wins: a
        cancelled attempt makes the job cancelled again, a decided one re-applies its outcome. Without this
        the job would be re-dispatched and refused forever. (On MongoDB proper this finds nothing to fix.)"""
        record_id = attempt_record_id(job.id, attempt)
        record = self._executions.find_one({"_id": record_id})
        if record is None:
            return
        now = utc_now()
        if record.get("outcome") == Outcome.CANCELLED.value:
            self._jobs.update_one(
                {"_id": ObjectId(job.id), "status": {"$in": list(CANCELLABLE_VALUES)}},
                _update(transitions.cancelled(now)),
            )
        elif self._outcomes.find_one({"_id": record_id}) is not None:
            self._close_attempt(job, Outcome.LOST, None, now, None)  # re-applies the decided outcome
        elif record.get("leaseExpiresAt", now) < now and self._leases.find_one({"_id": record_id}) is None:
            # Its executor stopped between the record's insert and its lease's, and the record's own lease
            # (the first one, never extended) has run out: no reaper will find it, so close it here.
            reason = f"attempt {attempt} lost: its executor stopped before the attempt had a lease"
            self._close_attempt(job, Outcome.LOST, reason, now, None)

    def start_attempt(
        self, job_id: str, job_type: str, worker: str, lease_until: datetime, hint: StartHint | None = None
    ) -> Job:
        if hint is None or not ObjectId.is_valid(job_id):
            return self._start_one(job_id, job_type, worker, lease_until)
        return self._starts.submit(_StartRequest(job_id, job_type, worker, lease_until, hint))

    def _start_batch(self, requests: Sequence[_StartRequest]) -> list[Job | BaseException]:
        """start_attempt for many hinted wake-ups at once: one insert of their attempt records (ownership, as in
        _begin_attempt), one update per (claim batch, attempt) moving the won jobs queued → running and marking
        them with this batch's token. The started documents are the claim's (read once per claim and kept,
        ClaimDocs) with the update applied; when an update moved fewer jobs than asked, one read of the batch's
        token says which moved. Every filter is an equality the server can apply
        before decoding (FerretDB), so the cost follows the batch, not the collection. A job that is not
        where its hint says (requeued, re-claimed, another type, cancelled) takes the step-by-step path,
        which names the exact reason."""
        now = utc_now()
        token = uuid.uuid4().hex
        records = [
            {
                "_id": attempt_record_id(r.job_id, r.hint.attempt),
                **_record(r.job_id, r.hint.attempt, r.worker, now, r.lease_until),
                "startToken": token,
            }
            for r in requests
        ]
        with _translate_errors():
            taken = _insert_new(self._executions, records)
            won = [i for i in range(len(requests)) if i not in taken]
            try:
                return self._start_won(requests, records, taken, won, token, now)
            except ConnectionFailure as exc:  # see _settle_interrupted_start
                unavailable = StoreUnavailable(f"MongoDB unavailable: {exc}")
                results: list[Job | BaseException] = [unavailable] * len(requests)
                for i in won:
                    r = requests[i]
                    results[i] = self._settle_interrupted_start(r.job_id, r.hint.attempt, r.worker) or unavailable
                return results

    def _start_won(
        self,
        requests: Sequence[_StartRequest],
        records: list[Document],
        taken: set[int],
        won: list[int],
        token: str,
        now: datetime,
    ) -> list[Job | BaseException]:
        """The rest of _start_batch once the records are in: the leases, the jobs' move, the results."""
        results: list[Job | BaseException | None] = [None] * len(requests)
        # The leases of the attempts won are written beside the jobs' update (a crash between the record and
        # its lease is healed at the next delivery, see _heal_from_ledger).
        leases = self._side_writes.submit(_insert_new, self._leases, [_lease(records[i]) for i in won])
        try:
            started: dict[str, Document] = {}
            unsure: list[str] = []
            groups: dict[tuple[str, int, str, str], list[int]] = defaultdict(list)
            for i in won:
                r = requests[i]
                groups[(r.hint.claim, r.hint.attempt, r.job_type, r.worker)].append(i)
            for (claim, attempt, job_type, worker), members in groups.items():
                guard = {
                    "claimToken": claim,
                    "status": Status.QUEUED.value,
                    "attempts": attempt - 1,
                    "jobType": job_type,
                    "_id": {"$in": [ObjectId(requests[i].job_id) for i in members]},
                }
                lease_until = max(requests[i].lease_until for i in members)
                update = _update({**transitions.started(worker, now, lease_until), "startToken": token})
                ids = [requests[i].job_id for i in members]
                if self._jobs.update_many(guard, update).modified_count == len(members):
                    known = self._claim_docs.take(claim, ids, lambda c: self._jobs.find({"claimToken": c}))
                    if known is not None:  # every one moved: their documents are the claim's plus this update
                        started.update((job_id, _applied(doc, update)) for job_id, doc in known.items())
                        continue
                unsure.extend(ids)
            if unsure:
                started.update((str(d["_id"]), d) for d in self._jobs.find({"startToken": token}))
        except ConnectionFailure:
            wait([leases])  # a lease still being written would outlive a give-back of its attempt
            raise
        leases.result()
        for i in won:
            doc = started.get(requests[i].job_id)
            if doc is not None:
                results[i] = job_from_document(doc)
                continue
            # Not queued for this attempt of this claim (or of another type): give the attempt back.
            self._give_back(records[i]["_id"])
            results[i] = self._start_in_steps(requests[i])
        for i in taken:  # the record exists: the step-by-step path heals and names the reason
            results[i] = self._start_in_steps(requests[i])
        return [r for r in results if r is not None]

    def _settle_interrupted_start(self, job_id: str, attempt: int, worker: str) -> Job | None:
        """A start that lost the connection after its attempt's record was inserted: the started job when its
        move to running landed after all; otherwise, with the job still queued for this attempt, the attempt
        is given back, so that the executor's retry starts it again instead of finding it taken (and leaving it
        to the reaper, which would spend the attempt as lost). Best effort: while the database stays away the
        record keeps its first lease, after which the reaper closes it."""
        try:
            doc = self._jobs.find_one({"_id": ObjectId(job_id)})
            job = job_from_document(doc) if doc else None
            if job is None or job.attempts != attempt - 1:
                return None
            if job.status is Status.RUNNING and job.claimedBy == worker:
                return job
            if job.status is Status.QUEUED:
                self._give_back(attempt_record_id(job_id, attempt))
        except ConnectionFailure:
            pass
        return None

    def _give_back(self, record_id: str) -> None:
        """Undo the start of an attempt that never ran, lease first: a record left without its lease is
        closed as lost once its first lease has run out (_heal_from_ledger), a lease left without its record
        would be recovered by the reaper as an attempt that ran."""
        self._leases.delete_one({"_id": record_id})
        self._executions.delete_one({"_id": record_id, "outcome": Outcome.RUNNING.value})

    def _start_one(self, job_id: str, job_type: str, worker: str, lease_until: datetime) -> Job:
        """start_attempt without batching: read the job, then claim and start its next attempt."""
        job = self.get(job_id)
        if job is None:
            raise JobNotFound(job_id)
        transitions.check_startable(job, job_type)
        return self._begin_attempt(job, worker, lease_until)

    def _start_in_steps(self, request: _StartRequest) -> Job | BaseException:
        try:
            return self._start_one(request.job_id, request.job_type, request.worker, request.lease_until)
        except StoreError as exc:
            return exc

    def extend_leases(self, jobs: Sequence[Job], lease_until: datetime) -> None:
        with _translate_errors():
            for job in jobs:
                self._jobs.update_one(
                    {"_id": ObjectId(job.id), "attempts": job.attempts, "status": {"$in": list(ATTEMPT_ACTIVE)}},
                    {"$set": {"leaseExpiresAt": lease_until}},
                )
                self._leases.update_one(
                    {"_id": attempt_record_id(job.id, job.next_attempt)}, {"$set": {"leaseExpiresAt": lease_until}}
                )

    def finish_attempt(self, job: Job, result: AttemptResult) -> Job | None:
        return self._finishes.submit(_FinishRequest(job, result))

    def _finish_batch(self, requests: Sequence[_FinishRequest]) -> list[Job | BaseException | None]:
        """Successes of running attempts are closed together (one insert of their outcomes, one update of their
        jobs and one delete of their leases per start batch); failures, timeouts and anything unusual are
        closed one by one, as they need per-job backoff."""
        results: list[Job | BaseException | None] = [None] * len(requests)
        bulk = []
        for i, request in enumerate(requests):
            job, outcome = request.job, request.result.outcome
            if outcome is Outcome.SUCCEEDED and job.claimedBy and job.status.value in ATTEMPT_ACTIVE:
                bulk.append(i)
            else:
                results[i] = self._close_in_steps(request)
        if bulk:
            for i, result in zip(bulk, self._finish_successes([requests[i] for i in bulk]), strict=True):
                results[i] = result
        return results

    def _finish_successes(self, requests: Sequence[_FinishRequest]) -> list[Job | None]:
        """The records are left as they are: the history completes them from the outcomes (list_executions)."""
        jobs = [r.job for r in requests]
        decisions = [
            _decision(r.job, Outcome.SUCCEEDED, None, r.result.finishedAt, r.result.startedAt) for r in requests
        ]
        now = utc_now()
        results: list[Job | None] = [None] * len(jobs)
        with _translate_errors():
            taken = _insert_new(self._outcomes, decisions)
            won = [k for k in range(len(jobs)) if k not in taken]
            for k in taken:  # decided before us (the reaper closed it as lost): re-apply that outcome
                self._close_attempt(jobs[k], Outcome.SUCCEEDED, None, decisions[k]["at"], None)
            fields = transitions.attempt_closed(jobs[0], Outcome.SUCCEEDED, None, now)  # the same for every job
            groups: dict[tuple[str, str | None, int, str | None], list[int]] = defaultdict(list)
            for k in won:
                groups[(jobs[k].status.value, jobs[k].claimedBy, jobs[k].attempts, jobs[k].startToken)].append(k)
            lease_deletes = []
            for (status, worker, attempts, start_token), members in groups.items():
                # Narrowed by worker and start batch: the server decodes that batch's leases and jobs, not all
                # of the worker's running ones (FerretDB). The leases are deleted beside the jobs' update, on a
                # second connection: the outcome is decided already, and should the update fail after its
                # lease is gone, the job's own lease still brings the reaper (expired_attempts).
                batch = {"startToken": start_token} if start_token is not None else {}
                lease_ids = [decisions[k]["_id"] for k in members]
                lease_deletes.append(
                    self._side_writes.submit(self._leases.delete_many, {**batch, "_id": {"$in": lease_ids}})
                )
                guard = {
                    "status": status,
                    "claimedBy": worker,
                    "attempts": attempts,
                    **batch,
                    "_id": {"$in": [ObjectId(jobs[k].id) for k in members]},
                }
                if self._jobs.update_many(guard, _update(fields)).modified_count == len(members):
                    for k in members:
                        results[k] = jobs[k].evolve(status=Status.COMPLETED, updatedAt=now)
                    continue
                for k in members:  # some did not move (a write-back raced): apply one by one, idempotently
                    doc = self._apply_decision(jobs[k], decisions[k])
                    results[k] = job_from_document(doc) if doc else self.get(jobs[k].id)
            for delete in lease_deletes:
                delete.result()  # its failure is the batch's (StoreUnavailable when the server is gone)
        return results

    def _close_in_steps(self, request: _FinishRequest) -> Job | BaseException | None:
        result = request.result
        try:
            return self._close_attempt(
                request.job, result.outcome, result.error, result.finishedAt, result.startedAt, result.backoff
            )
        except StoreError as exc:
            return exc

    def _close_attempt(
        self,
        job: Job,
        outcome: Outcome,
        error: str | None,
        at: datetime,
        started: datetime | None,
        backoff: Backoff = DEFAULT_BACKOFF,
    ) -> Job | None:
        """Decide the attempt's one outcome (first insert wins: the executor's result or the reaper's "lost"),
        then complete its record and move the job. Those two writes are repeated by every later closer with
        the decided outcome, so a failure between the writes (or a write-back hiding them) is healed by the
        next sweep instead of stranding the job. Returns the moved job only to the closer that decided."""
        decided = _decision(job, outcome, error, at, started)
        with _translate_errors():
            try:
                self._outcomes.insert_one(decided)
                won = True
            except DuplicateKeyError:
                won = False
                decided = self._outcomes.find_one({"_id": decided["_id"]}) or decided
            doc = self._apply_decision(job, decided, backoff)
        if not won:
            return None
        # A racing closer may have applied this outcome first (it re-applies the decided one): the job moved
        # all the same, and this closer, which decided it, gets the job as it is now.
        return job_from_document(doc) if doc else self.get(job.id)

    def _apply_decision(self, job: Job, decided: Document, backoff: Backoff = DEFAULT_BACKOFF) -> Document | None:
        """Complete the attempt's record and move the job as the decided outcome says; idempotent."""
        outcome, error, at = Outcome(decided["outcome"]), decided.get("error"), decided["at"]
        self._executions.update_one(
            {"_id": decided["_id"]},
            _update(transitions.attempt_result(outcome, error, at, decided.get("startedAt"))),
        )
        guard: Document = {"_id": ObjectId(job.id), "attempts": job.attempts, "status": {"$in": list(ATTEMPT_CLOSABLE)}}
        if outcome is not Outcome.SUCCEEDED and not job.cancelRequested:
            # A cancellation asked for after `job` was read wins over a retry: the retry's update excludes it.
            doc = self._jobs.find_one_and_update(
                {**guard, "cancelRequested": {"$ne": True}},
                _update(transitions.attempt_closed(job, outcome, error, at, backoff)),
                return_document=ReturnDocument.AFTER,
            )
            if doc is None:
                job = job.evolve(cancelRequested=True)
                guard["cancelRequested"] = True
        if outcome is Outcome.SUCCEEDED or job.cancelRequested:
            doc = self._jobs.find_one_and_update(
                guard,
                _update(transitions.attempt_closed(job, outcome, error, at, backoff)),
                return_document=ReturnDocument.AFTER,
            )
        if job.cancelRequested or (doc is not None and doc.get("cancelRequested")):  # also a success that won
            self._cancel_requests.delete_one({"_id": job.id})
        # Last: a lease left by a failure before this point brings the reaper back to finish the work.
        self._leases.delete_one({"_id": decided["_id"]})
        return doc

    def list_executions(self, job_id: str) -> list[Execution]:
        """The records, completed from their decided outcomes (a batched success leaves its record as it was
        inserted; its end, duration and error live in the outcome document)."""
        with _translate_errors():
            docs = list(self._executions.find({"jobId": job_id}).sort("attempt", ASCENDING))
            decided = {d["_id"]: d for d in self._outcomes.find({"jobId": job_id})}
        executions = []
        for doc in docs:
            outcome = decided.get(doc["_id"])
            if outcome is not None and doc.get("finishedAt") is None:
                result = transitions.attempt_result(
                    Outcome(outcome["outcome"]), outcome.get("error"), outcome["at"], outcome.get("startedAt")
                )
                doc = {**doc, **result}
            executions.append(_to_execution(doc))
        return executions

    def redrive(self, job_id: str) -> Job:
        job = self.get(job_id)
        if job is None:
            raise JobNotFound(job_id)
        transitions.check_redrivable(job)
        now = utc_now()
        with _translate_errors():
            doc = self._jobs.find_one_and_update(
                {"_id": ObjectId(job.id), "status": Status.DLQ.value, "attempts": job.attempts},
                _update(transitions.redriven(job, now)),
                return_document=ReturnDocument.AFTER,
            )
        if doc is None:
            raise TransitionRefused(self.get(job_id) or job, "retry")
        return job_from_document(doc)

    # --- reaper -----------------------------------------------------------------------------------------

    def release_stale_claims(self, queued_before: datetime) -> int:
        with _translate_errors():
            result = self._jobs.update_many(
                {"status": Status.QUEUED.value, "queuedAt": {"$lt": queued_before}},
                _update(transitions.requeued(utc_now())),
            )
        return int(result.modified_count)

    def expired_attempts(self, now: datetime, limit: int) -> list[Job]:
        """Claimed/running jobs whose lease ran out, and the jobs of attempt leases that ran out whatever the job
        document says (see _begin_attempt), each as of that attempt."""
        found: dict[tuple[str, int], Job] = {}
        with _translate_errors():
            for status in ATTEMPT_ACTIVE:  # one equality query each: FerretDB filters `$in` only after decoding
                for doc in self._jobs.find({"status": status, "leaseExpiresAt": {"$lt": now}}).limit(limit):
                    job = job_from_document(doc)
                    found[(job.id, job.next_attempt)] = job
            for lease in self._leases.find({"leaseExpiresAt": {"$lt": now}}).limit(limit):
                key = (str(lease["jobId"]), int(lease["attempt"]))
                if key in found or not ObjectId.is_valid(key[0]):
                    continue
                owner = self._jobs.find_one({"_id": ObjectId(key[0])})
                if owner is not None:
                    found[key] = job_from_document(owner).evolve(attempts=key[1] - 1)
        return list(found.values())[:limit]

    def recover_attempt(self, job: Job, reason: str, backoff: Backoff = DEFAULT_BACKOFF) -> Job | None:
        return self._close_attempt(job, Outcome.LOST, reason, utc_now(), None, backoff)


def pending_document(fields: transitions.Fields) -> Document:
    """A job document to insert, with the due slot its claim will look for (everything that inserts jobs
    into this store's collection, seeders included, goes through here)."""
    return {**fields, **_due_fields(fields.get("scheduledAt"))}


def _due_fields(scheduled_at: datetime | None) -> Document:
    """What a pending run's claim looks for: its due slot and its lane (claim_lanes.py)."""
    return {"dueSlot": due_slot(scheduled_at, utc_now()), "lane": new_lane()}


def _applied(doc: Document, update: Document) -> Document:
    """`doc` as the server stores it after `update` ($set/$unset only; datetimes kept to BSON's milliseconds)."""
    result = {**doc, **{k: _bson_time(v) for k, v in update["$set"].items()}}
    for key in update.get("$unset", {}):
        result.pop(key, None)
    return result


def _bson_time(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.replace(microsecond=value.microsecond // 1000 * 1000)
    return value


def _runs_after(run: Job) -> Document:
    """The filter for the runs listed after `run` in template_runs' order (MongoDB sorts a missing plannedAt
    lowest, so runs without one come last)."""
    same_planned: list[Document] = [
        {"scheduledAt": {"$lt": run.scheduledAt}},
        {"scheduledAt": run.scheduledAt, "_id": {"$lt": ObjectId(run.id)}},
    ]
    if run.plannedAt is None:
        return {"plannedAt": None, "$or": same_planned}
    return {
        "$or": [
            {"plannedAt": None},
            {"plannedAt": {"$lt": run.plannedAt}},
            {"plannedAt": run.plannedAt, "$or": same_planned},
        ]
    }


def _update(fields: transitions.Fields) -> Document:
    """A transition's fields as an update document: UNSET fields are removed, the rest set. A job that becomes
    pending, or is moved in time, gets the due slot of its (new) scheduledAt."""
    if fields.get("status") == Status.PENDING.value or "scheduledAt" in fields:
        fields = {**fields, **_due_fields(fields.get("scheduledAt"))}
    update: Document = {"$set": {k: v for k, v in fields.items() if v is not transitions.UNSET}}
    removed = {k: "" for k, v in fields.items() if v is transitions.UNSET}
    if removed:
        update["$unset"] = removed
    return update


def _decision(job: Job, outcome: Outcome, error: str | None, at: datetime, started: datetime | None) -> Document:
    """The attempt-outcome document whose insert decides how attempt `job.next_attempt` ended."""
    return {
        "_id": attempt_record_id(job.id, job.next_attempt),
        "jobId": job.id,
        "outcome": outcome.value,
        "error": error,
        "at": at,
        "startedAt": started,
    }


def _insert_new(collection: MongoCollection[Document], docs: Sequence[Document]) -> set[int]:
    """Insert documents keyed by unique ids in one call; return the positions that already existed."""
    if not docs:
        return set()
    try:
        collection.insert_many(docs, ordered=False)
    except BulkWriteError as exc:
        errors = exc.details.get("writeErrors", [])
        if any(e.get("code") != DUPLICATE_KEY for e in errors) or not errors:
            raise
        return {int(e["index"]) for e in errors}
    return set()


def _record(job_id: str, attempt: int, worker: str, now: datetime, lease_until: datetime) -> Document:
    """An attempt's execution record; it keeps the attempt's first lease, which only _heal_from_ledger reads
    (heartbeats extend the attempt's lease document)."""
    return {**transitions.attempt_started(job_id, attempt, worker, now), "leaseExpiresAt": lease_until}


def _lease(record: Document) -> Document:
    """The lease of the attempt whose record this is, under the same id; the reaper reads only leases. Only the
    start that inserted the record inserts its lease (a give-back deletes the lease before the record), so a
    lease never exists already when it is inserted."""
    lease = {k: record[k] for k in ("_id", "jobId", "attempt", "worker", "leaseExpiresAt")}
    if "startToken" in record:
        lease["startToken"] = record["startToken"]
    return lease


def _to_execution(doc: Document) -> Execution:
    return Execution(
        id=str(doc["_id"]),
        jobId=doc["jobId"],
        attempt=doc["attempt"],
        outcome=Outcome(doc["outcome"]),
        worker=doc.get("worker"),
        startedAt=doc.get("startedAt"),
        finishedAt=doc.get("finishedAt"),
        durationMs=doc.get("durationMs"),
        error=doc.get("error"),
    )


def _refusal(exc: Exception) -> str:
    """The server's (or the driver's) reason for refusing a document, short: it may quote the document."""
    reason = exc.details.get("errmsg") if isinstance(exc, WriteError) and exc.details else None
    return shorten(str(reason or exc), 200)


def due_runs_filter(now: datetime, job_types: Collection[str]) -> Document:
    """The due one-off runs of these job types (templates are never claimed)."""
    return {
        "status": Status.PENDING.value,
        "kind": KIND_RUN,
        "scheduledAt": {"$lte": now},
        "jobType": {"$in": sorted(job_types)},
    }


def _claim_order(doc: Document) -> tuple[int, datetime, Any]:
    return (-int(doc.get("priority", 0)), doc["scheduledAt"], doc["_id"])


def _queued(now: datetime, token: str) -> Document:
    """The claim's update; the token tells this call's winners apart from a concurrent claimer's."""
    return {**transitions.queued(now), "claimToken": token}


def job_from_document(doc: Document) -> Job:
    """The Job a stored job document holds."""
    values = {k: v for k, v in doc.items() if k in JOB_FIELDS}
    values["id"] = str(doc["_id"])
    values["status"] = Status(doc["status"])
    return Job(**values)
