"""The store's documents and the model's objects, both ways: a job document as a Job (read_job: one read by its id,
which the store and the attempts share), a transition's fields as an update document, and an attempt's entry in
its job's history (`history`, the last HISTORY_KEPT attempts) and the Executions a job document holds."""

from __future__ import annotations

from typing import Final

from bson import ObjectId

from jobsched.backoff import Backoff, backoff_document, backoff_from_document
from shared.model import EXECUTION_FIELDS, JOB_FIELDS, Execution, Job, Outcome, Status, job_from_fields
from shared.store import transitions
from shared.store.mongo.database import Document, MongoDatabase, translate_errors
from shared.store.transitions import ATTEMPT_ACTIVE, HISTORY_KEPT, attempt_record_id


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


# A job read as a Job leaves out its attempts' history (up to HISTORY_KEPT tracebacks and results).
WITHOUT_HISTORY: Final[Document] = {"history": 0}


def read_job(database: MongoDatabase, job_id: str) -> Job | None:
    """The job with this id as stored, or None (also for an id that is not a valid ObjectId)."""
    if not ObjectId.is_valid(job_id):
        return None
    with translate_errors():
        doc = database.jobs.find_one({"_id": ObjectId(job_id)}, WITHOUT_HISTORY)
    return job_from_document(doc) if doc else None


def update_document(fields: transitions.Fields) -> Document:
    """A transition's fields as an update document: UNSET fields are removed, the rest set."""
    update: Document = {"$set": {k: v for k, v in job_document(fields).items() if v is not transitions.UNSET}}
    removed = {k: "" for k, v in fields.items() if v is transitions.UNSET}
    if removed:
        update["$unset"] = removed
    return update


def closing_update(fields: transitions.Fields, entry: Document) -> Document:
    """The update that moves a job as `fields` say and appends `entry` to its history, which keeps the last
    HISTORY_KEPT attempts (the first kept one's number says how many went before it)."""
    update = update_document(fields)
    update["$push"] = {"history": {"$each": [entry], "$slice": -HISTORY_KEPT}}
    return update


def executions_of(doc: Document) -> list[Execution]:
    """A job document's attempts, oldest first: its history, then the attempt open now (claimed or running), which
    is the job's own fields until it ends."""
    job_id = str(doc["_id"])
    listed = [_execution(job_id, entry) for entry in doc.get("history") or []]
    if doc.get("status") in ATTEMPT_ACTIVE:
        attempt = int(doc.get("attempts", 0)) + 1
        listed.append(_execution(job_id, transitions.open_attempt(attempt, doc.get("claimedBy"), doc.get("claimedAt"))))
    return listed[-HISTORY_KEPT:]


def _execution(job_id: str, entry: Document) -> Execution:
    values: Document = {k: entry.get(k) for k in EXECUTION_FIELDS}
    values.update(id=attempt_record_id(job_id, int(entry["attempt"])), jobId=job_id, outcome=Outcome(entry["outcome"]))
    return Execution(**values)
