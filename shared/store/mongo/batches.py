"""Batches on MongoDB (shared/batches.py). No transaction spans a member and its batch here, so a batch is fired
by steps that are each safe to repeat:
1. a sealed batch not fired yet carries `firing` (set by the seal; a partial index holds only those);
2. whoever ends a member (an executor, a cancel, the reaper's "lost", a cancelled dependent), and the seal, then
   looks for a member that has not ended, one index probe, and when there is none fires the batch: the callbacks
   released (guarded on `waiting`: a second firer changes nothing), then `firing` cleared and `firedAt` set;
3. the reaper checks every batch still `firing`, so a process killed between a member's end and its check delays
   the callbacks by a sweep.
A create writes the callbacks (held) before the record: a crash between leaves held jobs nothing releases, and no
batch."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime

from bson import ObjectId
from bson.errors import InvalidDocument
from pymongo.collection import Collection
from pymongo.errors import BulkWriteError, DuplicateKeyError

from shared.batches import (
    NOT_COMPLETED,
    UNFINISHED,
    Batch,
    BatchView,
    MemberResult,
    MembersPage,
    callback_key,
    failed_ends,
    not_completed_error,
)
from shared.jsonsafe import shorten
from shared.model import Job, Status, utc_now
from shared.store import transitions
from shared.store.base import (
    BatchNotFound,
    BatchSealed,
    DuplicateBatch,
    JobRefused,
    NewBatch,
    NewJob,
    StoreError,
    StoreUnavailable,
)
from shared.store.batch_members import member_refusals
from shared.store.dependencies import cancelled_wait
from shared.store.mongo import groups
from shared.store.mongo.codecs import closing_update, job_document, update_document
from shared.store.mongo.database import Document, MongoDatabase, translate_errors

log = logging.getLogger("jobsched.store")
_WAITING = Status.WAITING.value


def records(database: MongoDatabase) -> Collection[Document]:
    return database.collection("batches")


def create(database: MongoDatabase, new: NewBatch) -> BatchView:
    batch_id, now = str(ObjectId()), utc_now()
    callbacks = {name: job for name, job in (("onComplete", new.onComplete), ("onSuccess", new.onSuccess)) if job}
    docs: list[Document] = []
    for name, job in callbacks.items():
        held = replace(job, tenantId=new.tenantId, idempotencyKey=callback_key(batch_id, name), callbackOf=batch_id)
        doc = job_document({**transitions.new_job(held, now), "status": _WAITING})
        doc["_id"] = ObjectId()
        docs.append(doc)
    ids = {name: str(doc["_id"]) for name, doc in zip(callbacks, docs, strict=True)}
    batch = Batch(
        batch_id, new.tenantId, new.idempotencyKey, new.name, transitions.stored_time(now), False,
        ids.get("onComplete"), ids.get("onSuccess"),
    )  # fmt: skip
    with translate_errors():
        if docs:
            try:
                database.jobs.insert_many(docs)
            except (BulkWriteError, InvalidDocument, OverflowError) as exc:
                raise JobRefused(f"a callback cannot be stored: {shorten(str(exc), 200)}") from exc
        try:
            records(database).insert_one(_record_document(batch))
        except DuplicateKeyError:
            database.jobs.delete_many({"_id": {"$in": [doc["_id"] for doc in docs]}})
            holder = records(database).find_one({"tenantId": new.tenantId, "idempotencyKey": new.idempotencyKey})
            if holder is None:  # removed since: a resend decides
                raise StoreUnavailable("the batch's key was released as it was written; send it again") from None
            raise DuplicateBatch(new.idempotencyKey, str(holder["_id"])) from None
    return BatchView(batch, Counter())


def add(
    database: MongoDatabase,
    batch_id: str,
    news: Sequence[NewJob],
    create_many: Callable[[Sequence[NewJob]], list[Job | StoreError]],
) -> list[Job | StoreError]:
    """The members `news`, made by `create_many` (the store's)."""
    batch = _batch(database, batch_id)
    if batch.sealed:
        raise BatchSealed(batch.id)
    refused = member_refusals(batch, news)
    kept = [replace(new, batchId=batch.id) for i, new in enumerate(news) if i not in refused]
    written = iter(create_many(kept) if kept else [])
    return [refused[i] if i in refused else next(written) for i in range(len(news))]


def seal(database: MongoDatabase, batch_id: str) -> BatchView:
    batch = _batch(database, batch_id)
    with translate_errors():
        if not batch.sealed:
            records(database).update_one(
                {"_id": ObjectId(batch.id), "sealed": False}, {"$set": {"sealed": True, "firing": True}}
            )
        fire_if_done(database, [batch.id])
    found = read(database, batch.id)
    if found is None:
        raise BatchNotFound(batch_id)
    return found


def ended(database: MongoDatabase, jobs: Iterable[Job | None]) -> None:
    """These jobs just ended (as they are now): their batches' failures counted, and fire_if_done for those
    batches (most jobs are in none: nothing is read or written for them). Never raises for the store's sake: the
    ends are written, and a batch it could not check is the reaper's (settle; a failure left uncounted is still
    found by the firing's own probe, unless the member was deleted meanwhile)."""
    members = [job for job in jobs if job is not None and job.batchId is not None]
    if not members:
        return
    try:
        with translate_errors():
            for batch_id, failed in failed_ends(members).items():
                records(database).update_one({"_id": ObjectId(batch_id)}, {"$inc": {"failures": failed}})
            fire_if_done(database, [job.batchId for job in members if job.batchId is not None])
    except StoreUnavailable as exc:
        log.warning("batches left to the reaper", extra={"action": "batches_unchecked", "error": str(exc)})


def fire_if_done(database: MongoDatabase, batch_ids: Iterable[str]) -> None:
    for batch_id in dict.fromkeys(batch_ids):
        record = records(database).find_one({"_id": ObjectId(batch_id), "firing": True})
        if record is None or _any(database, batch_id, UNFINISHED):
            continue
        batch, now = _batch_of(record), utc_now()
        if batch.onComplete is not None:
            _release(database, batch.onComplete, now)
        if batch.onSuccess is not None and not batch.failures and not _any(database, batch_id, NOT_COMPLETED):
            _release(database, batch.onSuccess, now)
        elif batch.onSuccess is not None:
            counts = groups.counts(database, "batches", [batch_id])[batch_id]
            _cancel(database, batch.onSuccess, not_completed_error(batch, counts), now)
        records(database).update_one(
            {"_id": ObjectId(batch_id), "firing": True}, {"$set": {"firedAt": now}, "$unset": {"firing": ""}}
        )


def redriven(database: MongoDatabase, job: Job) -> None:
    """A member re-driven from the DLQ before its batch fired: its failure no longer counts (it may complete)."""
    if job.batchId is not None:
        records(database).update_one(
            {"_id": ObjectId(job.batchId), "firedAt": {"$exists": False}, "failures": {"$gt": 0}},
            {"$inc": {"failures": -1}},
        )


def settle(database: MongoDatabase, limit: int, after: str | None) -> tuple[int, str | None]:
    """Step 3: the next `limit` batches still `firing` after the batch `after` (id order: a sweep goes on where the
    last one stopped, so that long-running batches at the front never hide the others), each fired if every member
    has ended; how many were looked at, and where the next sweep starts (None: from the first again)."""
    query: Document = {"firing": True}
    if after is not None:
        query["_id"] = {"$gt": ObjectId(after)}
    with translate_errors():
        firing = [str(d["_id"]) for d in records(database).find(query, {"_id": 1}).sort("_id", 1).limit(limit)]
        fire_if_done(database, firing)
    return len(firing), firing[-1] if len(firing) == limit else None


def _any(database: MongoDatabase, batch_id: str, statuses: Sequence[str]) -> bool:
    """Whether a member is in one of these statuses: one probe of the index, whatever the batch's size."""
    found = database.jobs.find_one({"batchId": batch_id, "status": {"$in": list(statuses)}}, {"_id": 1})
    return found is not None


def _release(database: MongoDatabase, job_id: str, now: datetime) -> None:
    fields = {"status": Status.PENDING.value, "scheduledAt": now, "updatedAt": now}
    database.jobs.update_one({"_id": ObjectId(job_id), "status": _WAITING}, update_document(fields))


def _cancel(database: MongoDatabase, job_id: str, error: str, now: datetime) -> None:
    """A held callback cancelled, with its one `cancelled` attempt naming why (as a dependent's is)."""
    settled = cancelled_wait(1, error, now)
    update = closing_update(settled.fields, settled.cancelled_attempt or {})
    database.jobs.update_one({"_id": ObjectId(job_id), "status": _WAITING}, update)


def read(database: MongoDatabase, batch_id: str) -> BatchView | None:
    if not ObjectId.is_valid(batch_id):
        return None
    with translate_errors():
        record = records(database).find_one({"_id": ObjectId(batch_id)})
        if record is None:
            return None
        batch = _batch_of(record)
        return BatchView(batch, groups.counts(database, "batches", [batch.id])[batch.id])


def listing(database: MongoDatabase, tenant_id: str, limit: int, before: str | None) -> list[BatchView]:
    with translate_errors():
        found = [_batch_of(d) for d in groups.newest(database, "batches", tenant_id, limit, before)]
        counts = groups.counts(database, "batches", [b.id for b in found])
    return [BatchView(b, counts[b.id]) for b in found]


def members(database: MongoDatabase, batch_id: str, page: MembersPage) -> list[MemberResult]:
    """In the jobs_of_batch index's order (status, _id); without results, `result` is left out of what is read."""
    query: Document = {"batchId": batch_id.lower()}
    if page.status is not None:
        query["status"] = page.status
    if (after := page.after) is not None:
        later = {"status": after.status, "_id": {"$gt": ObjectId(after.jobId)}}
        query["$or"] = [{"status": {"$gt": after.status}}, later]
    fields = {"status": 1, "result": 1} if page.results else {"status": 1}
    with translate_errors():
        docs = database.jobs.find(query, fields).sort([("status", 1), ("_id", 1)]).limit(page.limit)
        return [MemberResult(str(d["_id"]), str(d["status"]), d.get("result")) for d in docs]


def _batch(database: MongoDatabase, batch_id: str) -> Batch:
    if not ObjectId.is_valid(batch_id):
        raise BatchNotFound(batch_id)
    with translate_errors():
        record = records(database).find_one({"_id": ObjectId(batch_id)})
    if record is None:
        raise BatchNotFound(batch_id)
    return _batch_of(record)


def _record_document(batch: Batch) -> Document:
    doc: Document = {
        "_id": ObjectId(batch.id),
        "tenantId": batch.tenantId,
        "idempotencyKey": batch.idempotencyKey,
        "createdAt": batch.createdAt,
        "sealed": batch.sealed,
    }
    optional = {"name": batch.name, "onComplete": batch.onComplete, "onSuccess": batch.onSuccess}
    return doc | {k: v for k, v in optional.items() if v is not None}


def _batch_of(record: Document) -> Batch:
    return Batch(
        id=str(record["_id"]),
        tenantId=str(record["tenantId"]),
        idempotencyKey=str(record["idempotencyKey"]),
        name=record.get("name"),
        createdAt=record["createdAt"],
        sealed=bool(record.get("sealed")),
        onComplete=record.get("onComplete"),
        onSuccess=record.get("onSuccess"),
        firedAt=record.get("firedAt"),
        failures=int(record.get("failures", 0)),
    )
