"""The executor's starts and finishes of attempts (MongoJobStore's start_attempt(s), finish_attempt(s) and the
reaper's recover_attempt call these).

Ownership is decided on the job document alone, by conditional updates that the server applies atomically to one
document: starting attempt n moves the job queued → running only while it is queued with n-1 attempts made (one
findAndModify, or one update of a batch's jobs), and an attempt's outcome moves it on only while it is still in
attempt n (claimed or running with n-1 attempts made), so the first closer (the executor's result or the reaper's
"lost") decides and every later one changes nothing. The same update appends the attempt's entry to the job's
`history` (transitions.attempt_record): a job costs the store one write to start and one to finish, with no other
collection to keep in step and no crash between two writes to repair.

A failed attempt (failed, timed out, lost) also leaves an event in `attempt_failures`, which the console's "failed
in the last hour" counts; it is written after the job moved, so a crash in between leaves that count one short.
Starts and closes are counted for the console's history in memory (minutes.py), written about once a second.

An executor makes its store calls from one thread per delivery; concurrent starts and finishes become bulk
writes (group commit), which saves round trips under load.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from contextlib import suppress
from datetime import datetime

from bson import ObjectId
from pymongo import ReturnDocument, UpdateOne
from pymongo.errors import ConnectionFailure, DuplicateKeyError

from shared.model import Job, Outcome, Status, utc_now
from shared.store import transitions
from shared.store.base import (
    AttemptFinish,
    AttemptResult,
    AttemptStart,
    AttemptTaken,
    JobNotFound,
    StoreError,
    StoreUnavailable,
)
from shared.store.claim_limits import KeyOwner
from shared.store.mongo import batches
from shared.store.mongo.claims import counted_starts, key_rate_id
from shared.store.mongo.codecs import (
    WITHOUT_HISTORY,
    closing_update,
    job_from_document,
    read_job,
    update_document,
)
from shared.store.mongo.database import Document, MongoDatabase, caught, translate_errors
from shared.store.mongo.dependencies import settle_dependents
from shared.store.transitions import ATTEMPT_ACTIVE, attempt_record_id

FAILED_OUTCOMES = frozenset({Outcome.FAILED, Outcome.TIMEOUT, Outcome.LOST})


def start_one(database: MongoDatabase, job_id: str, job_type: str, worker: str, lease_until: datetime) -> Job:
    """start_attempt without batching: read the job, then move it queued → running if it still is."""
    job = read_job(database, job_id)
    if job is None:
        raise JobNotFound(job_id)
    transitions.check_startable(job, job_type)
    with translate_errors():
        try:
            doc = database.jobs.find_one_and_update(
                {"_id": ObjectId(job.id), "attempts": job.attempts, "status": Status.QUEUED.value},
                update_document(
                    {**transitions.started(worker, utc_now(), lease_until), "startToken": transitions.UNSET}
                ),
                projection=WITHOUT_HISTORY,
                return_document=ReturnDocument.AFTER,
            )
        except ConnectionFailure:
            started = _settle_interrupted_start(database, job.id, job.next_attempt, worker)
            if started is None:
                raise
            return started
    if doc is None:
        # Started by another delivery, cancelled, re-pended or finished between the read and the move.
        raise AttemptTaken(f"job {job.id} is no longer queued for attempt {job.next_attempt}")
    return job_from_document(doc)


def start_attempts(database: MongoDatabase, starts: Sequence[AttemptStart]) -> list[Job | StoreError]:
    """The hinted starts at once: one guarded update per (claim, attempt, job type, worker) moving the jobs still
    queued for that attempt to running under this batch's token, and one read of the jobs that carry it (a group
    of one job is moved and read by one findAndModify). A job that is not where its hint says (released, claimed
    again, cancelled, of another type), and a start without a hint, take the one-by-one path, which names the
    exact reason."""
    now = utc_now()
    token = uuid.uuid4().hex
    results: list[Job | StoreError | None] = [None] * len(starts)
    with translate_errors():
        results[:] = _rate_refusals(database, starts, now)
    hinted = {
        i: s.hint
        for i, s in enumerate(starts)
        if s.hint is not None and ObjectId.is_valid(s.job_id) and results[i] is None
    }
    with translate_errors():
        try:
            groups: dict[tuple[str, int, str, str], list[int]] = defaultdict(list)
            started: dict[str, Job] = {}
            moved: list[str] = []  # moved by update_many: read back by the batch's token
            for i, h in hinted.items():
                groups[(h.claim, h.attempt, starts[i].job_type, starts[i].worker)].append(i)
            for (claim, attempt, job_type, worker), members in groups.items():
                ids = [starts[i].job_id for i in members]
                guard = {
                    "_id": {"$in": [ObjectId(job_id) for job_id in ids]},
                    "claimToken": claim,
                    "status": Status.QUEUED.value,
                    "attempts": attempt - 1,
                    "jobType": job_type,
                }
                lease_until = max(starts[i].lease_until for i in members)
                update = update_document({**transitions.started(worker, now, lease_until), "startToken": token})
                if len(members) > 1:
                    database.jobs.update_many(guard, update)
                    moved.extend(ids)
                    continue
                # A group of one (a lone delivery): one command moves the job and returns it.
                doc = database.jobs.find_one_and_update(
                    guard, update, projection=WITHOUT_HISTORY, return_document=ReturnDocument.AFTER
                )
                if doc is not None:
                    started[ids[0]] = job_from_document(doc)
            started.update(_read_started(database, token, moved))
        except ConnectionFailure as exc:  # see _settle_interrupted_start
            unavailable = StoreUnavailable(f"MongoDB unavailable: {exc}")
            for i, h in hinted.items():
                r = starts[i]
                results[i] = _settle_interrupted_start(database, r.job_id, h.attempt, r.worker) or unavailable
            database.minutes.started(r for r in results if isinstance(r, Job))
            return [r if r is not None else unavailable for r in results]
    for i in hinted:  # a job started once, by the first of its starts (a second is a duplicate delivery)
        results[i] = started.pop(starts[i].job_id, None)
    for i, r in enumerate(starts):  # unhinted, or not started above: the one-by-one path
        if results[i] is None:
            results[i] = caught(start_one, database, r.job_id, r.job_type, r.worker, r.lease_until)
    database.minutes.started(r for r in results if isinstance(r, Job))
    return [r for r in results if r is not None]


def _rate_refusals(database: MongoDatabase, starts: Sequence[AttemptStart], now: datetime) -> list[StoreError | None]:
    """Per start, RateLimited when its type's rate, or its key's under a rate per key, leaves no start now,
    else None (its start is counted, in the order of the batch, whether or not it is then made: a start refused
    later only leaves a start unused)."""
    refusals: list[StoreError | None] = [None] * len(starts)
    by_type: dict[str, list[int]] = defaultdict(list)
    for i, start in enumerate(starts):
        if start.rate is not None:
            by_type[start.job_type].append(i)
    for job_type, members in by_type.items():
        rate = starts[members[0]].rate
        assert rate is not None
        verdicts = counted_starts(database.rates, job_type, job_type, len(members), rate, now)
        for i, verdict in zip(members, verdicts, strict=True):
            refusals[i] = verdict
    for owner, members in _keyed_starts(database, starts, refusals).items():
        rate = starts[members[0]].key_rate
        assert rate is not None
        verdicts = counted_starts(database.key_rates, key_rate_id(owner), owner[0], len(members), rate, now)
        for i, verdict in zip(members, verdicts, strict=True):
            refusals[i] = verdict
    return refusals


def _keyed_starts(
    database: MongoDatabase, starts: Sequence[AttemptStart], refusals: Sequence[StoreError | None]
) -> dict[KeyOwner, list[int]]:
    """The starts (not yet refused) under a rate per key whose job has a key, by its (type, tenant, key)."""
    keyed = {
        i: start.job_id
        for i, start in enumerate(starts)
        if start.key_rate is not None and refusals[i] is None and ObjectId.is_valid(start.job_id)
    }
    if not keyed:
        return {}
    ids = [ObjectId(job_id) for job_id in keyed.values()]
    keyed_jobs = {"_id": {"$in": ids}, "concurrencyKey": {"$ne": None}}
    owners = {
        str(d["_id"]): (str(d["tenantId"]), d["concurrencyKey"])
        for d in database.jobs.find(keyed_jobs, {"tenantId": 1, "concurrencyKey": 1})
    }
    grouped: dict[KeyOwner, list[int]] = defaultdict(list)
    for i, job_id in keyed.items():
        if job_id in owners:
            tenant, key = owners[job_id]
            grouped[(starts[i].job_type, tenant, str(key))].append(i)
    return grouped


def _read_started(database: MongoDatabase, token: str, ids: Sequence[str]) -> dict[str, Job]:
    """The jobs of `ids` that this start batch moved: those that carry its token."""
    if not ids:
        return {}
    query = {"_id": {"$in": [ObjectId(job_id) for job_id in ids]}, "startToken": token}
    return {str(d["_id"]): job_from_document(d) for d in database.jobs.find(query, WITHOUT_HISTORY)}


def _settle_interrupted_start(database: MongoDatabase, job_id: str, attempt: int, worker: str) -> Job | None:
    """A start that lost the connection: the started job when its move to running landed after all, else None
    (the executor's retry then finds the job as it is). Best effort: while the database stays away, a move that
    landed unseen leaves a running job no one runs, which the reaper closes once its lease has run out."""
    try:
        job = read_job(database, job_id)
    except StoreUnavailable:
        return None
    if job is not None and job.attempts == attempt - 1 and job.status is Status.RUNNING and job.claimedBy == worker:
        return job
    return None


def finish_attempts(database: MongoDatabase, finishes: Sequence[AttemptFinish]) -> list[Job | StoreError | None]:
    """Successes of running attempts are closed together: one bulk write of a guarded update per job (each moves
    its job to completed and appends the attempt to its history). Failures, timeouts and anything unusual are
    closed one by one, as each moves its job its own way (a retry at the job's backoff, the DLQ...)."""
    results: list[Job | StoreError | None] = [None] * len(finishes)
    bulk: list[int] = []
    for i, r in enumerate(finishes):
        res = r.result
        plain_success = res.outcome is Outcome.SUCCEEDED and res.result is None and res.error is None
        if plain_success and r.job.claimedBy and r.job.status.value in ATTEMPT_ACTIVE and not r.job.hasDependents:
            bulk.append(i)
        else:
            results[i] = caught(close_attempt, database, r.job, res)
    if not bulk:
        return results
    updates: list[UpdateOne] = []
    fields: dict[int, transitions.Fields] = {}
    for i in bulk:
        job, closing = finishes[i].job, finishes[i].result
        fields[i] = transitions.attempt_closed(job, closing)
        guard: Document = {"_id": ObjectId(job.id), "status": job.status.value, "claimedBy": job.claimedBy}
        # A job that got a dependent since it started is closed on its own (close_attempt), which settles them.
        guard.update(attempts=job.attempts, hasDependents={"$ne": True})
        updates.append(UpdateOne(guard, closing_update(fields[i], transitions.attempt_record(job, closing))))
    with translate_errors():
        moved = database.jobs.bulk_write(updates, ordered=False).modified_count
        if moved == len(bulk):
            closed: Sequence[Job | None] = [transitions.applied(finishes[i].job, fields[i]) for i in bulk]
            database.minutes.closed(j for j in closed if j is not None)
        else:  # some were closed meanwhile (the reaper's "lost"), or got a dependent: which ones, from the jobs
            closed = _closed_by(database, [finishes[i] for i in bulk])
    for i, closed_job in zip(bulk, closed, strict=True):
        results[i] = closed_job
    batches.ended(database, closed)
    return results


def _closed_by(database: MongoDatabase, finishes: Sequence[AttemptFinish]) -> list[Job | None]:
    """After a bulk close that moved fewer jobs than it was sent for: per finish, its job as it is now when this
    attempt's entry is the one its history ends with and the job completed (this close moved it), else None (another
    closer decided the attempt)."""
    ids = [ObjectId(f.job.id) for f in finishes]
    docs = {str(d["_id"]): d for d in database.jobs.find({"_id": {"$in": ids}}, {"history": {"$slice": -1}})}
    closed: list[Job | None] = []
    for finish in finishes:
        doc = docs.get(finish.job.id)
        last = (doc or {}).get("history") or [{}]
        ours = last[-1].get("attempt") == finish.job.next_attempt and last[-1].get("worker") == finish.job.claimedBy
        won = doc is not None and ours and doc["status"] == Status.COMPLETED.value
        if doc is not None and doc.get("hasDependents") and _still_in(doc, finish.job):
            closed.append(close_attempt(database, finish.job, finish.result))
        elif won and doc:
            completed = job_from_document(doc)
            database.minutes.closed([completed])
            closed.append(completed)
        else:
            closed.append(None)
    return closed


def _still_in(doc: Document, job: Job) -> bool:
    """Whether the job document is still in the attempt `job` was read in (nobody closed it)."""
    return doc["status"] in ATTEMPT_ACTIVE and doc.get("attempts", 0) == job.attempts


def close_attempt(database: MongoDatabase, job: Job, closing: AttemptResult) -> Job | None:
    """Decide attempt `job.next_attempt`'s one outcome and move the job as it says, in one guarded update: only
    while the job is still in that attempt, so the first closer decides. Returns the moved job to the closer that
    decided, None to any later one."""
    entry = transitions.attempt_record(job, closing)
    guard: Document = {"_id": ObjectId(job.id), "attempts": job.attempts, "status": {"$in": list(ATTEMPT_ACTIVE)}}
    doc = None
    with translate_errors():
        if closing.outcome is not Outcome.SUCCEEDED and not job.cancelRequested:
            # A cancellation asked for after `job` was read wins over a retry: the retry's update excludes it.
            doc = database.jobs.find_one_and_update(
                {**guard, "cancelRequested": {"$ne": True}},
                closing_update(transitions.attempt_closed(job, closing), entry),
                projection=WITHOUT_HISTORY,
                return_document=ReturnDocument.AFTER,
            )
            if doc is None:
                job = job.evolve(cancelRequested=True)
                guard["cancelRequested"] = True
        if closing.outcome is Outcome.SUCCEEDED or job.cancelRequested:
            doc = database.jobs.find_one_and_update(
                guard,
                closing_update(transitions.attempt_closed(job, closing), entry),
                projection=WITHOUT_HISTORY,
                return_document=ReturnDocument.AFTER,
            )
        if doc is None:
            return None
        if doc.get("cancelRequested"):  # also a success that won over the request
            database.cancel_requests.delete_one({"_id": job.id})
        if closing.outcome in FAILED_OUTCOMES:
            _count_failure(database, doc, entry)
    closed = job_from_document(doc)
    database.minutes.closed([closed], failed=closing.outcome in FAILED_OUTCOMES)
    settle_dependents(database, [closed])
    batches.ended(database, [closed])
    return closed


def _count_failure(database: MongoDatabase, doc: Document, entry: Document) -> None:
    """The failed attempt's event for the console's last hour, keyed by the attempt (written once)."""
    event = {"_id": attempt_record_id(str(doc["_id"]), int(entry["attempt"])), "at": entry["finishedAt"]}
    event.update(tenantId=doc["tenantId"], jobType=doc["jobType"], outcome=entry["outcome"])
    with suppress(DuplicateKeyError):  # the same event again (an insert the driver resent after a lost reply)
        database.failures.insert_one(event)
