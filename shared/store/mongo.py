"""JobStore on MongoDB (pymongo), also correct on Mongo-compatible servers without atomic updates.

FerretDB 1.x, the test stand-in, evaluates findAndModify/update by reading and writing back whole documents
without re-checking the filter, so conditional updates there are best effort. Everything that decides
ownership is therefore an insert into a unique index: idempotency keys on `jobs`, attempt records
`<jobId>:<attempt>` on `executions` (DESIGN.md, invariants). It also avoids what FerretDB rejects:
`projection=` on find_one_and_update, partial and TTL indexes.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from bson import ObjectId
from pymongo import ASCENDING, DESCENDING, MongoClient, ReturnDocument
from pymongo.collection import Collection as MongoCollection
from pymongo.errors import ConnectionFailure, DuplicateKeyError

from shared.model import JOB_FIELDS, Execution, Job, Outcome, Status, utc_now
from shared.store import transitions
from shared.store.base import (
    AttemptResult,
    AttemptTaken,
    DuplicateJob,
    JobNotFound,
    NewJob,
    StoreUnavailable,
    TransitionRefused,
)
from shared.store.transitions import ATTEMPT_ACTIVE, ATTEMPT_CLOSABLE, CANCELLABLE_VALUES
from shared.store.transitions import KIND_RUN as KIND_RUN  # re-exported: loaders and tests query by kind
from shared.store.transitions import KIND_TEMPLATE as KIND_TEMPLATE
from shared.store.transitions import attempt_record_id as attempt_record_id

Document = dict[str, Any]
CLAIM_ORDER = [("priority", DESCENDING), ("scheduledAt", ASCENDING)]


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

    @classmethod
    def connect(cls, uri: str, database: str, *, timeout_ms: int = 5000) -> MongoJobStore:
        client: MongoClient[Document] = MongoClient(
            uri,
            tz_aware=True,
            serverSelectionTimeoutMS=timeout_ms,
            connectTimeoutMS=timeout_ms,
            socketTimeoutMS=max(timeout_ms * 6, 30_000),
        )
        return cls(client, database)

    def close(self) -> None:
        self._client.close()

    def ensure_schema(self) -> None:
        with _translate_errors():
            self._jobs.create_index("idempotencyKey", unique=True, name="idempotencyKey_unique")
            self._jobs.create_index([("status", ASCENDING), *CLAIM_ORDER], name="claim_order")
            self._jobs.create_index(
                [("tenantId", ASCENDING), ("createdAt", DESCENDING), ("status", ASCENDING)],
                name="tenant_listing",
            )
            self._executions.create_index([("jobId", ASCENDING), ("attempt", ASCENDING)], name="job_attempts")
            self._executions.create_index([("outcome", ASCENDING), ("leaseExpiresAt", ASCENDING)], name="leases")

    def ping(self) -> None:
        with _translate_errors():
            self._db.command("ping")

    def create(self, new: NewJob) -> Job:
        doc = transitions.new_job(new, new.createdAt or utc_now())
        with _translate_errors():
            try:
                result = self._jobs.insert_one(doc)
            except DuplicateKeyError as exc:
                raise DuplicateJob(new.idempotencyKey) from exc
        doc["_id"] = result.inserted_id
        return _to_job(doc)

    def get(self, job_id: str) -> Job | None:
        if not ObjectId.is_valid(job_id):
            return None
        with _translate_errors():
            doc = self._jobs.find_one({"_id": ObjectId(job_id)})
        return _to_job(doc) if doc else None

    def list_for_tenant(self, tenant_id: str, status: Status | None, limit: int) -> list[Job]:
        query: Document = {"tenantId": tenant_id}
        if status is not None:
            query["status"] = status.value
        with _translate_errors():
            docs = self._jobs.find(query).sort([("createdAt", DESCENDING), ("_id", DESCENDING)]).limit(limit)
            return [_to_job(d) for d in docs]

    def cancel(self, job_id: str) -> Job:
        job = self.get(job_id)
        if job is None:
            raise JobNotFound(job_id)
        transitions.check_cancellable(job)
        now = utc_now()
        if not job.is_template:
            # Take the next attempt before any executor can: a duplicate means one already started it.
            with _translate_errors():
                try:
                    self._executions.insert_one(
                        {"_id": attempt_record_id(job.id, job.next_attempt), **transitions.attempt_cancelled(job, now)}
                    )
                except DuplicateKeyError as exc:
                    raise TransitionRefused(self.get(job_id) or job, "cancel") from exc
        with _translate_errors():
            updated = self._jobs.find_one_and_update(
                {"_id": ObjectId(job.id), "status": {"$in": list(CANCELLABLE_VALUES)}},
                _update(transitions.cancelled(now)),
                return_document=ReturnDocument.AFTER,
            )
        if updated is None:
            current = self.get(job_id) or job
            if current.status is Status.CANCELLED:
                return current
            raise TransitionRefused(current, "cancel")
        return _to_job(updated)

    def claim_due(self, now: datetime, limit: int, job_types: Collection[str]) -> list[Job]:
        """Find the first `limit` due runs in claim order, flip them with one guarded update_many, then
        re-read which ones carry this call's claim token: those are the ones won, in claim order. Each
        document is still updated atomically on MongoDB, and the order is exactly that of `limit` single
        claims; on FerretDB two overlapping claimers may both win a document, which the executor's attempt
        record absorbs (invariant 2)."""
        token = uuid.uuid4().hex
        with _translate_errors():
            found = self._jobs.find(_due_runs(now, job_types), {"_id": 1}).sort(CLAIM_ORDER).limit(limit)
            candidates = [d["_id"] for d in found]
            if not candidates:
                return []
            self._jobs.update_many(
                {"_id": {"$in": candidates}, "status": Status.PENDING.value},
                {"$set": _queued(now, token)},
            )
            won = self._jobs.find({"_id": {"$in": candidates}, "claimToken": token}).sort(CLAIM_ORDER)
            return [_to_job(d) for d in won]

    def claim_next(self, now: datetime, job_types: Collection[str]) -> Job | None:
        with _translate_errors():
            doc = self._jobs.find_one_and_update(
                _due_runs(now, job_types),
                {"$set": _queued(now, uuid.uuid4().hex)},
                sort=CLAIM_ORDER,
                return_document=ReturnDocument.AFTER,
            )
        return _to_job(doc) if doc else None

    def due_job_types(self, now: datetime) -> set[str]:
        query = {"status": Status.PENDING.value, "kind": KIND_RUN, "scheduledAt": {"$lte": now}}
        with _translate_errors():
            return {str(t) for t in self._jobs.distinct("jobType", query)}

    def release(self, jobs: Sequence[Job]) -> None:
        if not jobs:
            return
        with _translate_errors():
            self._jobs.update_many(
                {"_id": {"$in": [ObjectId(j.id) for j in jobs]}, "status": Status.QUEUED.value},
                _update(transitions.requeued(utc_now())),
            )

    def due_templates(self, now: datetime, limit: int) -> list[Job]:
        query = {"status": Status.PENDING.value, "kind": KIND_TEMPLATE, "scheduledAt": {"$lte": now}}
        with _translate_errors():
            return [_to_job(d) for d in self._jobs.find(query).sort("scheduledAt", ASCENDING).limit(limit)]

    def spawn_run(self, template: Job, planned: datetime) -> bool:
        doc = transitions.template_run(template, planned, utc_now())
        with _translate_errors():
            try:
                self._jobs.insert_one(doc)
            except DuplicateKeyError:
                return False
        return True

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

    # --- executor ---------------------------------------------------------------------------------------

    def begin_attempt(self, job: Job, worker: str, lease_until: datetime) -> Job:
        attempt = job.next_attempt
        record_id = attempt_record_id(job.id, attempt)
        now = utc_now()
        # Unlike SQLite, the record and the job cannot change in one transaction here, so the record carries
        # its own lease (extended by heartbeats): if the claim below never lands, or a non-atomic write-back
        # hides it, the reaper still finds and closes the attempt (expired_attempts).
        record = {"_id": record_id, **transitions.attempt_started(job, worker, now), "leaseExpiresAt": lease_until}
        with _translate_errors():
            try:
                self._executions.insert_one(record)
            except DuplicateKeyError as exc:
                self._heal_from_ledger(job, attempt)
                raise AttemptTaken(f"attempt {attempt} of job {job.id} is already taken") from exc
            doc = self._jobs.find_one_and_update(
                {"_id": ObjectId(job.id), "attempts": job.attempts, "status": Status.QUEUED.value},
                _update(transitions.claimed(worker, now, lease_until)),
                return_document=ReturnDocument.AFTER,
            )
            if doc is None:
                # The job moved on (cancelled, re-pended, finished) before the claim: the attempt never
                # started, so give it back for a delivery that matches the job's real state.
                self._executions.delete_one({"_id": record_id, "outcome": Outcome.RUNNING.value})
        if doc is None:
            raise AttemptTaken(f"job {job.id} is no longer queued for attempt {attempt}")
        return _to_job(doc)

    def _heal_from_ledger(self, job: Job, attempt: int) -> None:
        """The attempt record says this attempt is already taken. If the job document disagrees because a
        non-atomic write-back on a Mongo-compatible server put back an older state, the ledger wins: a
        cancelled attempt makes the job cancelled again, a decided one re-applies its outcome. Without this
        the job would be re-dispatched and refused forever. (On MongoDB proper this finds nothing to fix.)"""
        record = self._executions.find_one({"_id": attempt_record_id(job.id, attempt)})
        if record is None:
            return
        if record.get("outcome") == Outcome.CANCELLED.value:
            self._jobs.update_one(
                {"_id": ObjectId(job.id), "status": {"$in": list(CANCELLABLE_VALUES)}},
                _update(transitions.cancelled(utc_now())),
            )
        elif self._outcomes.find_one({"_id": attempt_record_id(job.id, attempt)}) is not None:
            self._close_attempt(job, Outcome.LOST, None, utc_now(), None)  # re-applies the decided outcome

    def mark_running(self, job: Job) -> Job:
        with _translate_errors():
            doc = self._jobs.find_one_and_update(
                {
                    "_id": ObjectId(job.id),
                    "attempts": job.attempts,
                    "status": Status.CLAIMED.value,
                    "claimedBy": job.claimedBy,
                },
                _update(transitions.running(utc_now())),
                return_document=ReturnDocument.AFTER,
            )
        if doc is None:
            raise AttemptTaken(f"attempt {job.next_attempt} of job {job.id} was recovered before it started")
        return _to_job(doc)

    def heartbeat(self, jobs: Sequence[Job], lease_until: datetime) -> None:
        with _translate_errors():
            for job in jobs:
                self._jobs.update_one(
                    {"_id": ObjectId(job.id), "attempts": job.attempts, "status": {"$in": list(ATTEMPT_ACTIVE)}},
                    {"$set": {"leaseExpiresAt": lease_until}},
                )
                self._executions.update_one(
                    {"_id": attempt_record_id(job.id, job.next_attempt), "outcome": Outcome.RUNNING.value},
                    {"$set": {"leaseExpiresAt": lease_until}},
                )

    def finish_attempt(self, job: Job, result: AttemptResult) -> Job | None:
        return self._close_attempt(job, result.outcome, result.error, result.finishedAt, result.startedAt)

    def _close_attempt(
        self, job: Job, outcome: Outcome, error: str | None, at: datetime, started: datetime | None
    ) -> Job | None:
        """Decide the attempt's one outcome (first insert wins: the executor's result or the reaper's "lost"),
        then complete its record and move the job. Those two writes are repeated by every later closer with
        the decided outcome, so a failure between the writes (or a write-back hiding them) is healed by the
        next sweep instead of stranding the job. Returns the moved job only to the closer that decided."""
        record_id = attempt_record_id(job.id, job.next_attempt)
        decided: Document = {"_id": record_id, "outcome": outcome.value, "error": error, "at": at, "startedAt": started}
        with _translate_errors():
            try:
                self._outcomes.insert_one(decided)
                won = True
            except DuplicateKeyError:
                won = False
                decided = self._outcomes.find_one({"_id": record_id}) or decided
            outcome, error, at = Outcome(decided["outcome"]), decided.get("error"), decided["at"]
            self._executions.update_one(
                {"_id": record_id},
                _update(transitions.attempt_result(outcome, error, at, decided.get("startedAt"))),
            )
            doc = self._jobs.find_one_and_update(
                {"_id": ObjectId(job.id), "attempts": job.attempts, "status": {"$in": list(ATTEMPT_CLOSABLE)}},
                _update(transitions.attempt_closed(job, outcome, error, at)),
                return_document=ReturnDocument.AFTER,
            )
        if not won:
            return None
        # A racing closer may have applied this outcome first (it re-applies the decided one): the job moved
        # all the same, and this closer, which decided it, gets the job as it is now.
        return _to_job(doc) if doc else self.get(job.id)

    def list_executions(self, job_id: str) -> list[Execution]:
        with _translate_errors():
            docs = self._executions.find({"jobId": job_id}).sort("attempt", ASCENDING)
            return [_to_execution(d) for d in docs]

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
        return _to_job(doc)

    # --- reaper -----------------------------------------------------------------------------------------

    def requeue_stale_queued(self, queued_before: datetime) -> int:
        with _translate_errors():
            result = self._jobs.update_many(
                {"status": Status.QUEUED.value, "queuedAt": {"$lt": queued_before}},
                _update(transitions.requeued(utc_now())),
            )
        return int(result.modified_count)

    def expired_attempts(self, now: datetime, limit: int) -> list[Job]:
        """Claimed/running jobs whose lease ran out, and the jobs of attempt records still `running` past
        their lease whatever the job document says (see begin_attempt), each as of that attempt."""
        found: dict[tuple[str, int], Job] = {}
        with _translate_errors():
            active = {"status": {"$in": list(ATTEMPT_ACTIVE)}, "leaseExpiresAt": {"$lt": now}}
            for doc in self._jobs.find(active).limit(limit):
                job = _to_job(doc)
                found[(job.id, job.next_attempt)] = job
            stale = {"outcome": Outcome.RUNNING.value, "leaseExpiresAt": {"$lt": now}}
            for record in self._executions.find(stale).limit(limit):
                key = (str(record["jobId"]), int(record["attempt"]))
                if key in found or not ObjectId.is_valid(key[0]):
                    continue
                owner = self._jobs.find_one({"_id": ObjectId(key[0])})
                if owner is not None:
                    found[key] = _to_job(owner).evolve(attempts=key[1] - 1)
        return list(found.values())[:limit]

    def recover_attempt(self, job: Job, reason: str) -> Job | None:
        return self._close_attempt(job, Outcome.LOST, reason, utc_now(), None)


def _update(fields: transitions.Fields) -> Document:
    """A transition's fields as an update document: UNSET fields are removed, the rest set."""
    update: Document = {"$set": {k: v for k, v in fields.items() if v is not transitions.UNSET}}
    removed = {k: "" for k, v in fields.items() if v is transitions.UNSET}
    if removed:
        update["$unset"] = removed
    return update


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


def _due_runs(now: datetime, job_types: Collection[str]) -> Document:
    return {
        "status": Status.PENDING.value,
        "kind": KIND_RUN,
        "scheduledAt": {"$lte": now},
        "jobType": {"$in": sorted(job_types)},
    }


def _queued(now: datetime, token: str) -> Document:
    """The claim's update; the token tells this call's winners apart from a concurrent claimer's."""
    return {**transitions.queued(now), "claimToken": token}


def _to_job(doc: Document) -> Job:
    values = {k: v for k, v in doc.items() if k in JOB_FIELDS}
    values["id"] = str(doc["_id"])
    values["status"] = Status(doc["status"])
    return Job(**values)
