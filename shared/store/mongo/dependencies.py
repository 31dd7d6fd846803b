"""Waiting jobs on MongoDB (shared/store/dependencies.py says what a wait becomes).

MongoDB has no transaction across a parent and its dependents here, so a wait is settled by steps that each may be
the last one a crash lets run, and that are safe to repeat:
1. a create marks its parents first (`hasDependents`, `dependentsAt`: now; a mark younger than MARK_REUSED_FOR
   stands), then inserts the waiting job, then settles it against its parents as they are (they may have ended
   before the mark);
2. a parent's end (completed, dlq, cancelled) reads the mark in the document its guarded update returns, and
   settles the parent's waiting dependents (index `waiting_on`);
3. the reaper (settle_stale) settles again the dependents of every marked parent that ended and was marked
   SETTLE_GRACE ago, then clears the mark, guarded on `dependentsAt` (a later create's mark stays).
So a dependent whose parents all ended is settled by 1, by 2, or by 3 within the grace period after a crash; and
every settling reads all its parents, so none releases it early.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from bson import ObjectId
from pymongo import ReturnDocument

from shared.model import TERMINAL, Job, Status, utc_now
from shared.store.base import NewJob, StoreUnavailable
from shared.store.dependencies import MARK_REUSED_FOR, Parent, Waiting, check_parents, parents_of, resolution
from shared.store.mongo import batches
from shared.store.mongo.codecs import WITHOUT_HISTORY, closing_update, job_from_document, update_document
from shared.store.mongo.database import Document, MongoDatabase, translate_errors
from shared.store.transitions import KIND_TEMPLATE

log = logging.getLogger("jobsched.store")
_WAITING = Status.WAITING.value
_ENDED = [s.value for s in TERMINAL]
_WAIT_FIELDS: Document = {"dependsOn": 1, "onParentFailure": 1, "scheduledAt": 1, "attempts": 1}


def _object_ids(ids: Iterable[str]) -> list[ObjectId]:
    return [ObjectId(i) for i in ids if ObjectId.is_valid(i)]


def create_waiting(database: MongoDatabase, new: NewJob, insert: Callable[[], Job]) -> Job:
    """Step 1: the parents checked (DependencyRefused) and marked, the job inserted by `insert`, its wait settled."""
    parents = list(dict.fromkeys(new.dependsOn or ()))
    with translate_errors():
        found = {
            str(d["_id"]): Parent(str(d["_id"]), str(d["tenantId"]), d.get("kind") == KIND_TEMPLATE)
            for d in database.jobs.find({"_id": {"$in": _object_ids(parents)}}, {"tenantId": 1, "kind": 1})
        }
        check_parents(new, found)
        now = utc_now()
        fresh = {"hasDependents": True, "dependentsAt": {"$gte": now - MARK_REUSED_FOR}}
        mark = {"$set": {"hasDependents": True, "dependentsAt": now}}
        database.jobs.update_many({"_id": {"$in": _object_ids(parents)}, "$nor": [fresh]}, mark)
    job = insert()
    return settle_created(database, job)


def mark_again(database: MongoDatabase, job_id: str, now: datetime) -> Document:
    """The mark a job re-driven from the DLQ takes back when jobs still wait for it (under `run`, its failure
    left them waiting for their other parents; the sweep has cleared its mark since), so that its next end settles
    them: to write with the re-drive (a dependent created after this read marks it itself)."""
    waiting = database.jobs.find_one({"dependsOn": job_id, "status": _WAITING}, {"_id": 1})
    return {} if waiting is None else {"hasDependents": True, "dependentsAt": now}


def settle_created(database: MongoDatabase, job: Job) -> Job:
    """A waiting job's wait settled once it is stored: the job as it is then (as stored, when the store fails
    meanwhile: its parents' marks leave it to the sweep)."""
    if job.status is not Status.WAITING:
        return job
    try:
        with translate_errors():  # as it was inserted: the write is guarded on `waiting`, whatever moved since
            wait = Waiting(job.id, list(job.dependsOn or ()), job.onParentFailure, job.scheduledAt, job.attempts)
            settled = _settle(database, [wait])
    except StoreUnavailable as exc:  # the job is stored: its parents' marks leave it to the sweep
        _left_to_the_sweep([job.id], exc)
        return job
    return settled.get(job.id, job)


def settle_dependents(database: MongoDatabase, parents: Sequence[Job]) -> None:
    """Step 2: the waiting dependents of these jobs, which just ended, settled (those of a parent that has none
    are not looked for). Never raises for the store's sake: the ends it follows are written, and a wait it could
    not settle is the sweep's (step 3)."""
    ended = [p.id for p in parents if p.hasDependents and p.status in TERMINAL]
    if not ended:
        return
    try:
        with translate_errors():
            _settle_dependents_of(database, ended)
    except StoreUnavailable as exc:  # the ends are written, with their marks: the sweep settles what is left
        _left_to_the_sweep(ended, exc)


def _left_to_the_sweep(job_ids: list[str], error: StoreUnavailable) -> None:
    log.warning(
        "waits left to the reaper's sweep",
        extra={"action": "dependents_unsettled", "jobIds": job_ids[:10], "error": str(error)},
    )


def _settle_dependents_of(database: MongoDatabase, parent_ids: list[str]) -> None:
    """A dependent the settling cancels may be a parent itself: its own dependents are settled next, down the
    graph."""
    while parent_ids:
        waiting = list(database.jobs.find({"dependsOn": {"$in": parent_ids}, "status": _WAITING}, _WAIT_FIELDS))
        settled = _settle(database, [_waiting(doc) for doc in waiting])
        batches.ended(database, settled.values())  # a cancelled dependent may be its batch's last member
        parent_ids = [job.id for job in settled.values() if job.hasDependents and job.status in TERMINAL]


def _settle(database: MongoDatabase, waits: list[Waiting]) -> dict[str, Job]:
    """Each of these waiting jobs settled against its parents' statuses as they are now: the jobs that moved."""
    if not waits:
        return {}
    statuses = {
        str(d["_id"]): Status(d["status"])
        for d in database.jobs.find({"_id": {"$in": _object_ids(parents_of(waits))}}, {"status": 1})
    }
    now = utc_now()
    moved: dict[str, Job] = {}
    for wait in waits:
        settled = resolution(wait, statuses, now)
        if settled is None:
            continue
        if settled.cancelled_attempt is None:
            update = update_document(settled.fields)
        else:
            update = closing_update(settled.fields, settled.cancelled_attempt)
        doc = database.jobs.find_one_and_update(
            {"_id": ObjectId(wait.id), "status": _WAITING},
            update,
            projection=WITHOUT_HISTORY,
            return_document=ReturnDocument.AFTER,
        )
        if doc is not None:
            moved[wait.id] = job_from_document(doc)
    return moved


def _waiting(doc: Document) -> Waiting:
    return Waiting(
        str(doc["_id"]),
        [str(p).lower() for p in doc.get("dependsOn") or ()],
        doc.get("onParentFailure"),
        doc["scheduledAt"],
        int(doc.get("attempts", 0)),
    )


def settle_stale(database: MongoDatabase, ended_before: datetime, limit: int) -> int:
    """Step 3: the marked parents that ended and were marked before `ended_before`, their dependents settled and
    their marks cleared; how many parents."""
    with translate_errors():
        parents = list(
            database.jobs.find(
                {"hasDependents": True, "status": {"$in": _ENDED}, "dependentsAt": {"$lt": ended_before}},
                {"dependentsAt": 1},
            ).limit(max(limit, 0))
        )
        if parents:
            _settle_dependents_of(database, [str(p["_id"]) for p in parents])
        for parent in parents:
            database.jobs.update_one(
                {"_id": parent["_id"], "dependentsAt": parent["dependentsAt"]},
                {"$unset": {"hasDependents": "", "dependentsAt": ""}},
            )
    return len(parents)
