"""The executor's starts and finishes of attempts (MongoJobStore's start_attempt(s), finish_attempt(s) and the
reaper's recover_attempt call these).

An attempt's record in `executions` is inserted when the attempt starts: its insert decides which executor runs
it. Its outcome document in `attempt_outcomes` is inserted when the attempt ends: its insert decides the
attempt's one outcome (the executor's result or the reaper's "lost"). Conditional updates then move the job. A
change of two documents (record + job, outcome + job) is no transaction, so each is ordered such that a crash
between its writes leaves a state the next visitor completes: the reaper closes attempts whose lease ran out,
every closer re-applies the decided outcome, and a start that finds its attempt's record taken repairs the job
from the records (_repair).

An executor makes its store calls from one thread per delivery; concurrent starts and finishes become bulk
writes (group commit), which saves round trips under load. A success does not rewrite its record: the history
reads the attempt's end from its outcome.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

from bson import ObjectId
from pymongo import ReturnDocument
from pymongo.collection import Collection as MongoCollection
from pymongo.errors import BulkWriteError, ConnectionFailure, DuplicateKeyError

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
from shared.store.mongo.claims import counted_starts, key_rate_id
from shared.store.mongo.codecs import decided_closing, decision, job_from_document, read_job, update_document
from shared.store.mongo.database import DUPLICATE_KEY, Document, MongoDatabase, caught, translate_errors
from shared.store.transitions import ATTEMPT_ACTIVE, ATTEMPT_CLOSABLE, CANCELLABLE_VALUES, attempt_record_id


def start_one(database: MongoDatabase, job_id: str, job_type: str, worker: str, lease_until: datetime) -> Job:
    """start_attempt without batching: read the job, insert its next attempt's record, move it to running."""
    job = read_job(database, job_id)
    if job is None:
        raise JobNotFound(job_id)
    transitions.check_startable(job, job_type)
    attempt = job.next_attempt
    record = _record(job.id, attempt, worker, utc_now(), lease_until)
    with translate_errors():
        try:
            database.executions.insert_one(record)
        except DuplicateKeyError as exc:
            _repair(database, job, attempt)
            raise AttemptTaken(f"attempt {attempt} of job {job.id} is already taken") from exc
        try:
            doc = database.jobs.find_one_and_update(
                {"_id": ObjectId(job.id), "attempts": job.attempts, "status": Status.QUEUED.value},
                update_document(
                    {
                        **transitions.started(worker, record["startedAt"], lease_until),
                        "startToken": transitions.UNSET,
                    }
                ),
                return_document=ReturnDocument.AFTER,
            )
        except ConnectionFailure:
            started = _settle_interrupted_start(database, job.id, attempt, worker)
            if started is None:
                raise
            return started
        if doc is None:
            # The job moved on (cancelled, re-pended, finished) before the start: the attempt never ran,
            # so give it back for a delivery that matches the job's real state.
            give_back(database, record["_id"])
    if doc is None:
        raise AttemptTaken(f"job {job.id} is no longer queued for attempt {attempt}")
    return job_from_document(doc)


def start_attempts(database: MongoDatabase, starts: Sequence[AttemptStart]) -> list[Job | StoreError]:
    """The hinted starts at once: one insert of their attempt records (ownership, as in start_one), one
    guarded update per (claim, attempt, job type, worker) moving the won jobs queued → running under this
    batch's token, and one read of the jobs that carry it (a group of one job is moved and read by one
    findAndModify). A job that is not where its hint says (released, claimed again, cancelled, of another
    type), and a start without a hint, take the one-by-one path, which names the exact reason."""
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
    records = {
        i: _record(starts[i].job_id, h.attempt, starts[i].worker, now, starts[i].lease_until) for i, h in hinted.items()
    }
    with translate_errors():
        order = list(records)
        taken = {order[k] for k in _insert_new(database.executions, list(records.values()))}
        won = [i for i in order if i not in taken]
        try:
            groups: dict[tuple[str, int, str, str], list[int]] = defaultdict(list)
            started: dict[str, Job] = {}
            moved: list[str] = []  # moved by update_many: read back by the batch's token
            for i in won:
                r, h = starts[i], hinted[i]
                groups[(h.claim, h.attempt, r.job_type, r.worker)].append(i)
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
                doc = database.jobs.find_one_and_update(guard, update, return_document=ReturnDocument.AFTER)
                if doc is not None:
                    started[ids[0]] = job_from_document(doc)
            started.update(_read_started(database, token, moved))
            for i in won:
                job = started.get(starts[i].job_id)
                if job is not None:
                    results[i] = job
                    continue
                give_back(database, records[i]["_id"])
        except ConnectionFailure as exc:  # see _settle_interrupted_start
            unavailable = StoreUnavailable(f"MongoDB unavailable: {exc}")
            for i in won:
                r = starts[i]
                results[i] = _settle_interrupted_start(database, r.job_id, hinted[i].attempt, r.worker) or unavailable
            return [r if r is not None else unavailable for r in results]
        for i, r in enumerate(starts):  # taken, unhinted or not started above: the one-by-one path
            if results[i] is None:
                results[i] = caught(start_one, database, r.job_id, r.job_type, r.worker, r.lease_until)
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
    docs = database.jobs.find({"_id": {"$in": [ObjectId(job_id) for job_id in ids]}, "startToken": token})
    return {str(d["_id"]): job_from_document(d) for d in docs}


def _settle_interrupted_start(database: MongoDatabase, job_id: str, attempt: int, worker: str) -> Job | None:
    """A start that lost the connection after its attempt's record was inserted: the started job when its
    move to running landed after all; otherwise, with the job still queued for this attempt, the attempt
    is given back, so that the executor's retry starts it again instead of finding it taken (and leaving it
    to the reaper, which would spend the attempt as lost). Best effort: while the database stays away the
    record keeps its first lease, after which the reaper closes it."""
    try:
        doc = database.jobs.find_one({"_id": ObjectId(job_id)})
        job = job_from_document(doc) if doc else None
        if job is None or job.attempts != attempt - 1:
            return None
        if job.status is Status.RUNNING and job.claimedBy == worker:
            return job
        if job.status is Status.QUEUED:
            give_back(database, attempt_record_id(job_id, attempt))
    except ConnectionFailure:
        pass
    return None


def give_back(database: MongoDatabase, record_id: str) -> None:
    """Undo the start of an attempt that never ran."""
    database.executions.delete_one({"_id": record_id, "outcome": Outcome.RUNNING.value})


def _repair(database: MongoDatabase, job: Job, attempt: int) -> None:
    """The attempt's record exists, yet the job was read as queued for it: finish what the record's writer
    did not (it stopped between two writes). A cancelled attempt makes the job cancelled again, a decided
    one has its outcome re-applied, and one whose start never reached the job is closed as lost once the
    record's lease has run out (before that, its executor may still be writing)."""
    record_id = attempt_record_id(job.id, attempt)
    record = database.executions.find_one({"_id": record_id})
    if record is None:
        return
    now = utc_now()
    if record.get("outcome") == Outcome.CANCELLED.value:
        database.jobs.update_one(
            {"_id": ObjectId(job.id), "status": {"$in": list(CANCELLABLE_VALUES)}},
            update_document(transitions.cancelled(now)),
        )
    elif database.outcomes.find_one({"_id": record_id}) is not None:
        close_attempt(database, job, AttemptResult.lost(None, now))  # re-applies the decided outcome
    elif record.get("leaseExpiresAt", now) < now:
        reason = f"attempt {attempt} lost: its executor stopped before the job was started"
        close_attempt(database, job, AttemptResult.lost(reason, now))


def finish_attempts(database: MongoDatabase, finishes: Sequence[AttemptFinish]) -> list[Job | StoreError | None]:
    """Successes of running attempts are closed together: one insert of their outcomes, one update of their
    jobs per worker and attempt (their records are left as inserted: the history completes them from the
    outcomes). Failures, timeouts and anything unusual are closed one by one, as each moves its job its own way
    (a retry at the job's backoff, the DLQ...)."""
    results: list[Job | StoreError | None] = [None] * len(finishes)
    if not finishes:
        return results
    bulk: list[int] = []
    for i, r in enumerate(finishes):
        res = r.result
        plain_success = res.outcome is Outcome.SUCCEEDED and res.result is None and res.error is None
        if plain_success and r.job.claimedBy and r.job.status.value in ATTEMPT_ACTIVE:
            bulk.append(i)
        else:
            results[i] = caught(close_attempt, database, r.job, res)
    done = {i: finishes[i].result for i in bulk}
    decisions = {
        i: decision(finishes[i].job, AttemptResult(r.outcome, r.startedAt, r.finishedAt)) for i, r in done.items()
    }
    with translate_errors():
        taken = {bulk[k] for k in _insert_new(database.outcomes, [decisions[i] for i in bulk])}
        # The same for all: a plain success.
        fields = transitions.attempt_closed(finishes[0].job, AttemptResult(Outcome.SUCCEEDED, None, utc_now()))
        groups: dict[tuple[str, str | None, int], list[int]] = defaultdict(list)
        for i in bulk:
            if i in taken:  # decided before (the reaper closed it as lost): re-apply that outcome
                close_attempt(database, finishes[i].job, AttemptResult(Outcome.SUCCEEDED, None, decisions[i]["at"]))
                continue
            job = finishes[i].job
            groups[(job.status.value, job.claimedBy, job.attempts)].append(i)
        for (status, worker, attempts), members in groups.items():
            jobs = [finishes[i].job for i in members]
            guard: Document = {"_id": {"$in": [ObjectId(j.id) for j in jobs]}, "status": status}
            guard.update(claimedBy=worker, attempts=attempts)
            moved = database.jobs.update_many(guard, update_document(fields)).modified_count == len(members)
            for i, job in zip(members, jobs, strict=True):
                if moved:
                    results[i] = transitions.applied(job, fields)
                else:  # some did not move (their job changed meanwhile): apply one by one, idempotently
                    doc = _apply_decision(database, job, decisions[i])
                    results[i] = job_from_document(doc) if doc else read_job(database, job.id)
    return results


def close_attempt(database: MongoDatabase, job: Job, closing: AttemptResult) -> Job | None:
    """Decide the attempt's one outcome (first insert wins: the executor's result or the reaper's "lost"),
    then complete its record and move the job. Those two writes are repeated by every later closer with
    the decided outcome, so a failure between the writes is healed by the next sweep instead of stranding
    the job. Returns the moved job only to the closer that decided."""
    decided = decision(job, closing)
    with translate_errors():
        try:
            database.outcomes.insert_one(decided)
            won = True
        except DuplicateKeyError:
            won = False
            decided = database.outcomes.find_one({"_id": decided["_id"]}) or decided
        doc = _apply_decision(database, job, decided)
    if not won:
        return None
    # A racing closer may have applied this outcome first (it re-applies the decided one): the job moved
    # all the same, and this closer, which decided it, gets the job as it is now.
    return job_from_document(doc) if doc else read_job(database, job.id)


def _apply_decision(database: MongoDatabase, job: Job, decided: Document) -> Document | None:
    """Complete the attempt's record and move the job as the decided outcome says (a retry after the job's
    backoff, whoever applies it); idempotent."""
    closing = decided_closing(decided)
    outcome = closing.outcome
    record = transitions.attempt_result(closing)
    database.executions.update_one({"_id": decided["_id"]}, update_document(record))
    guard: Document = {"_id": ObjectId(job.id), "attempts": job.attempts, "status": {"$in": list(ATTEMPT_CLOSABLE)}}
    if outcome is not Outcome.SUCCEEDED and not job.cancelRequested:
        # A cancellation asked for after `job` was read wins over a retry: the retry's update excludes it.
        doc = database.jobs.find_one_and_update(
            {**guard, "cancelRequested": {"$ne": True}},
            update_document(transitions.attempt_closed(job, closing)),
            return_document=ReturnDocument.AFTER,
        )
        if doc is None:
            job = job.evolve(cancelRequested=True)
            guard["cancelRequested"] = True
    if outcome is Outcome.SUCCEEDED or job.cancelRequested:
        doc = database.jobs.find_one_and_update(
            guard,
            update_document(transitions.attempt_closed(job, closing)),
            return_document=ReturnDocument.AFTER,
        )
    if job.cancelRequested or (doc is not None and doc.get("cancelRequested")):  # also a success that won
        database.cancel_requests.delete_one({"_id": job.id})
    return doc


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
    """An attempt's execution record, with the attempt's first lease, which only _repair reads (the job's lease is
    the one the reaper reads and extend_leases extends)."""
    return {
        "_id": attempt_record_id(job_id, attempt),
        **transitions.attempt_started(job_id, attempt, worker, now),
        "leaseExpiresAt": lease_until,
    }
