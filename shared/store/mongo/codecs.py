"""The store's documents and the model's objects, both ways: a job document as a Job (read_job: one read by its id,
which the store and the attempts share), an execution record as an Execution, a transition's fields as an update
document, and an attempt's decided outcome as a document and back."""

from __future__ import annotations

from datetime import timedelta

from bson import ObjectId

from jobsched.backoff import Backoff, backoff_document, backoff_from_document
from shared.model import EXECUTION_FIELDS, JOB_FIELDS, Execution, Job, Outcome, Status, job_from_fields
from shared.store import transitions
from shared.store.base import AttemptResult
from shared.store.mongo.database import Document, MongoDatabase, translate_errors
from shared.store.transitions import attempt_record_id


def job_from_document(doc: Document) -> Job:
    """The Job a stored job document holds."""
    values = {k: v for k, v in doc.items() if k in JOB_FIELDS}
    values["id"] = str(doc["_id"])
    values["status"] = Status(doc["status"])
    if "backoff" in values:
        values["backoff"] = backoff_from_document(values["backoff"])
    return job_from_fields(values)


def job_document(fields: transitions.Fields) -> Document:
    """A transition's fields as the job document holds them: a backoff as its subdocument (backoff_document)."""
    backoff = fields.get("backoff")
    if isinstance(backoff, Backoff):
        return {**fields, "backoff": backoff_document(backoff)}
    return fields


def read_job(database: MongoDatabase, job_id: str) -> Job | None:
    """The job with this id as stored, or None (also for an id that is not a valid ObjectId)."""
    if not ObjectId.is_valid(job_id):
        return None
    with translate_errors():
        doc = database.jobs.find_one({"_id": ObjectId(job_id)})
    return job_from_document(doc) if doc else None


def to_execution(doc: Document) -> Execution:
    values: Document = {k: doc.get(k) for k in EXECUTION_FIELDS}
    return Execution(**{**values, "id": str(doc["_id"]), "outcome": Outcome(doc["outcome"])})


def update_document(fields: transitions.Fields) -> Document:
    """A transition's fields as an update document: UNSET fields are removed, the rest set."""
    update: Document = {"$set": {k: v for k, v in job_document(fields).items() if v is not transitions.UNSET}}
    removed = {k: "" for k, v in fields.items() if v is transitions.UNSET}
    if removed:
        update["$unset"] = removed
    return update


def decision(job: Job, closing: AttemptResult) -> Document:
    """The attempt-outcome document whose insert decides how attempt `job.next_attempt` ended."""
    decided: Document = {
        "_id": attempt_record_id(job.id, job.next_attempt),
        "jobId": job.id,
        "outcome": closing.outcome.value,
        "error": closing.error,
        "at": closing.finishedAt,
        "startedAt": closing.startedAt,
    }
    if closing.traceback is not None:
        decided["traceback"] = closing.traceback
    if closing.result is not None:
        decided["result"] = closing.result
    if closing.snooze is not None:
        decided["snoozeSeconds"] = closing.snooze.total_seconds()
    if closing.final:
        decided["final"] = True
    if closing.retry_after is not None:
        decided["retryAfterSeconds"] = closing.retry_after.total_seconds()
    return decided


def decided_closing(decided: Document) -> AttemptResult:
    """The closing an attempt-outcome document decided (its inverse of decision)."""
    snooze, retry_after = decided.get("snoozeSeconds"), decided.get("retryAfterSeconds")
    return AttemptResult(
        Outcome(decided["outcome"]),
        decided.get("startedAt"),
        decided["at"],
        decided.get("error"),
        decided.get("traceback"),
        decided.get("result"),
        timedelta(seconds=snooze) if snooze is not None else None,
        bool(decided.get("final")),
        timedelta(seconds=retry_after) if retry_after is not None else None,
    )
