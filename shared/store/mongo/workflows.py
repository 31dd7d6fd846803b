"""Workflows on MongoDB (shared/workflows.py), written in steps that are each safe to repeat, since no transaction
spans documents here; the record's `state` says how far a create got, and moves only by guarded updates:
1. the record is inserted `creating` with every step's job id (the unique (tenant, key) index decides a create);
2. the steps' jobs are inserted parents first, every one waiting (the roots held: waiting for nobody), each parent
   marked in its own document as having dependents (dependencies.py: its end settles them); then the record moves
   creating → releasing: from then on nothing removes it;
3. the roots are released (waiting → pending), then the record moves releasing → running.
A create that finds the key's record (a resend, or a create racing it) with the same steps finishes it from where
it is, with its ids (jobs written before are skipped); with other steps, or `running`, it is a duplicate. The reaper
(settle_creating) releases a record left `releasing`, or `creating` with every step written, and removes one left
`creating` with steps missing (creating → removing first, so that no create releases it meanwhile; a create that
finds it removed deletes what it wrote after): no step of a removed workflow ran, its roots were held."""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime
from functools import partial

from bson import ObjectId
from pymongo.collection import Collection
from pymongo.errors import BulkWriteError, DuplicateKeyError

from shared.jsonsafe import shorten
from shared.model import Status, utc_now
from shared.store.base import DuplicateWorkflow, JobRefused, NewWorkflow, StoreUnavailable
from shared.store.deadlocks import TRIES as DEADLOCK_TRIES
from shared.store.deadlocks import is_deadlock_answer, retry_deadlocks
from shared.store.mongo import groups
from shared.store.mongo.codecs import job_document
from shared.store.mongo.database import DUPLICATE_KEY, Document, MongoDatabase, translate_errors
from shared.store.transitions import Fields
from shared.store.workflow_plans import Plan, planned
from shared.workflows import Workflow, WorkflowState, WorkflowView, steps_document, steps_of

log = logging.getLogger("jobsched.store")
_WAITING = Status.WAITING.value


def records(database: MongoDatabase) -> Collection[Document]:
    return database.collection("workflows")


def create(database: MongoDatabase, new: NewWorkflow) -> WorkflowView:
    now = utc_now()
    plan = planned(new, str(ObjectId()), now, held=True)
    with translate_errors():
        try:
            retry_deadlocks(partial(records(database).insert_one, record_document(plan.workflow)))
            state = WorkflowState.CREATING
        except DuplicateKeyError:
            plan, state = _resumed(database, new)
        if state is WorkflowState.CREATING:
            write_steps(database, plan, now)
            all_written(database, plan)
        _release(database, plan.workflow.id, now)
    found = read(database, plan.workflow.id)
    if found is None:  # removed since (by hand): the client may send it again
        raise StoreUnavailable("the workflow vanished as it was written; send it again")
    return found


def _resumed(database: MongoDatabase, new: NewWorkflow) -> tuple[Plan, WorkflowState]:
    """The plan of the record that holds `new`'s key and its state, to finish when it is still being written
    (a resend, or a create racing this one) and has the same steps; DuplicateWorkflow otherwise."""
    held = records(database).find_one({"tenantId": new.tenantId, "idempotencyKey": new.idempotencyKey})
    if held is None:  # removed between the insert and this read: a resend decides
        raise StoreUnavailable("the workflow's key was released as it was written; send it again")
    recorded = _workflow(held)
    if recorded.state is WorkflowState.REMOVING:
        raise StoreUnavailable("a workflow left half written under this key is being removed; send it again")
    ids = {step.name: step.jobId for step in recorded.steps}
    plan = planned(new, recorded.id, recorded.createdAt, held=True, ids=ids) if set(ids) == _names(new) else None
    if plan is None or set(plan.workflow.steps) != set(recorded.steps) or recorded.state is WorkflowState.RUNNING:
        raise DuplicateWorkflow(new.idempotencyKey, recorded.id)
    return plan, recorded.state


def _names(new: NewWorkflow) -> set[str]:
    return {step.name for step in new.steps}


def write_steps(database: MongoDatabase, plan: Plan, now: datetime, jobs: list[Fields] | None = None) -> None:
    """Step 2 for `jobs` (default: the plan's; parents first, ordered inserts), without those written before (a
    resend). A job the server refuses removes what was written of the workflow, and is the create's refusal; a
    deadlock's victim (FerretDB 2, two creates of one workflow at once) is sent again."""
    workflow_id = plan.workflow.id
    written = {str(d["_id"]) for d in database.jobs.find({"workflowId": workflow_id}, {"_id": 1})}
    docs = [_job_document(fields, plan.parents, now) for fields in (plan.jobs if jobs is None else jobs)]
    docs = [doc for doc in docs if str(doc["_id"]) not in written]
    steps = {step.jobId: step.name for step in plan.workflow.steps}
    deadlocks = 0
    while docs:
        try:
            database.jobs.insert_many(docs, ordered=True)
            return
        except BulkWriteError as exc:
            [error] = exc.details.get("writeErrors", [])[:1] or [{"index": 0, "code": None}]
            index, code, message = int(error["index"]), error.get("code"), error.get("errmsg")
            if code == DUPLICATE_KEY:
                docs = docs[index + 1 :]
            elif is_deadlock_answer(code, message) and deadlocks < DEADLOCK_TRIES:
                deadlocks += 1
                docs = docs[index:]
            else:
                _remove(database, workflow_id)
                step = steps[str(docs[index]["_id"])]
                raise JobRefused(f"step {step!r}: {shorten(str(message or 'refused'), 200)}") from exc


def _job_document(fields: Fields, parents: set[str], now: datetime) -> Document:
    doc = job_document({k: v for k, v in fields.items() if k != "id"})
    doc["_id"] = ObjectId(str(fields["id"]))
    if fields["id"] in parents:  # marked as a dependent's create marks its parents (dependencies.py)
        doc.update(hasDependents=True, dependentsAt=now)
    return doc


def all_written(database: MongoDatabase, plan: Plan) -> None:
    """creating → releasing, once every step is written: from then on nothing removes the workflow. When the
    reaper began removing it meanwhile (it was left `creating` for minutes), what this create wrote goes too."""
    workflow_id = plan.workflow.id
    moved = retry_deadlocks(  # guarded: a deadlock's victim (creates of one workflow at once) is sent again
        partial(
            records(database).update_one,
            {"_id": ObjectId(workflow_id), "state": WorkflowState.CREATING.value},
            {"$set": {"state": WorkflowState.RELEASING.value}},
        )
    )
    if moved.modified_count:
        return
    now = records(database).find_one({"_id": ObjectId(workflow_id)}, {"state": 1})
    if now is None or now["state"] == WorkflowState.REMOVING.value:
        _remove_jobs(database, workflow_id)
        raise StoreUnavailable("the workflow was removed as it was written; send it again")


def _release(database: MongoDatabase, workflow_id: str, now: datetime) -> None:
    """Step 3, for a record `releasing` (or `running`: done before): the roots pending, then the record `running`
    (a crash between leaves it `releasing`, which a resend or the reaper finishes). Both writes are guarded, so a
    deadlock's victim (FerretDB 2, creates of one workflow at once) is sent again."""
    retry_deadlocks(
        partial(
            database.jobs.update_many,
            {"workflowId": workflow_id, "status": _WAITING, "dependsOn": {"$exists": False}},
            {"$set": {"status": Status.PENDING.value, "updatedAt": now}},
        )
    )
    retry_deadlocks(
        partial(
            records(database).update_one,
            {"_id": ObjectId(workflow_id), "state": WorkflowState.RELEASING.value},
            {"$set": {"state": WorkflowState.RUNNING.value}},
        )
    )


def _remove(database: MongoDatabase, workflow_id: str) -> bool:
    """A workflow that will not be written whole, still `creating`: `removing` (so that no create releases it
    from then on), its jobs (none ran: the roots were held), its record. False when it is not `creating`."""
    moved = records(database).update_one(
        {"_id": ObjectId(workflow_id), "state": WorkflowState.CREATING.value},
        {"$set": {"state": WorkflowState.REMOVING.value}},
    )
    if not moved.modified_count:
        return False
    _finish_removing(database, workflow_id)
    return True


def _finish_removing(database: MongoDatabase, workflow_id: str) -> None:
    _remove_jobs(database, workflow_id)
    records(database).delete_one({"_id": ObjectId(workflow_id), "state": WorkflowState.REMOVING.value})


def _remove_jobs(database: MongoDatabase, workflow_id: str) -> None:
    """The jobs of a workflow being removed: held ones, and any cancelled by hand meanwhile."""
    unreleased = [Status.WAITING.value, Status.CANCELLED.value]
    database.jobs.delete_many({"workflowId": workflow_id, "status": {"$in": unreleased}})


def settle_creating(database: MongoDatabase, created_before: datetime, limit: int) -> int:
    """The records a crash (or a client that gave up) left being written since before `created_before`: one
    `creating` is released when every step's job is written, removed with what was written otherwise; one
    `releasing` is released; one `removing` is removed. How many were."""
    unfinished = [s.value for s in (WorkflowState.CREATING, WorkflowState.RELEASING, WorkflowState.REMOVING)]
    with translate_errors():
        stale = list(
            records(database)
            .find({"state": {"$in": unfinished}, "createdAt": {"$lt": created_before}})
            .sort("createdAt", 1)
            .limit(limit)
        )
        for record in stale:
            workflow = _workflow(record)
            if workflow.state is WorkflowState.REMOVING:
                _finish_removing(database, workflow.id)
                continue
            written = database.jobs.count_documents({"workflowId": workflow.id})
            whole = written == len(workflow.steps)
            if workflow.state is WorkflowState.CREATING and not whole:
                _remove(database, workflow.id)
            else:
                records(database).update_one(
                    {"_id": ObjectId(workflow.id), "state": WorkflowState.CREATING.value},
                    {"$set": {"state": WorkflowState.RELEASING.value}},
                )
                _release(database, workflow.id, utc_now())
            log.warning(
                "workflow left half written settled",
                extra={
                    "action": "workflow_settled",
                    "workflowId": workflow.id,
                    "tenantId": workflow.tenantId,
                    "finished": whole,
                },
            )
    return len(stale)


def read(database: MongoDatabase, workflow_id: str) -> WorkflowView | None:
    if not ObjectId.is_valid(workflow_id):
        return None
    with translate_errors():
        record = records(database).find_one({"_id": ObjectId(workflow_id)})
        if record is None:
            return None
        statuses = {
            str(d["_id"]): str(d["status"])
            for d in database.jobs.find({"workflowId": str(record["_id"])}, {"status": 1})
        }
    return WorkflowView(_workflow(record), Counter(statuses.values()), statuses)


def by_key(database: MongoDatabase, tenant_id: str, idempotency_key: str) -> WorkflowView | None:
    with translate_errors():
        holder = records(database).find_one({"tenantId": tenant_id, "idempotencyKey": idempotency_key}, {"_id": 1})
    return read(database, str(holder["_id"])) if holder is not None else None


def listing(database: MongoDatabase, tenant_id: str, limit: int, before: str | None) -> list[WorkflowView]:
    with translate_errors():
        found = groups.newest(database, "workflows", tenant_id, limit, before)
        counts = groups.counts(database, "workflows", [str(r["_id"]) for r in found])
    return [WorkflowView(_workflow(r), counts[str(r["_id"])]) for r in found]


def record_document(workflow: Workflow) -> Document:
    doc: Document = {
        "_id": ObjectId(workflow.id),
        "tenantId": workflow.tenantId,
        "idempotencyKey": workflow.idempotencyKey,
        "createdAt": workflow.createdAt,
        "state": workflow.state.value,
        "steps": steps_document(workflow.steps),
    }
    if workflow.name is not None:
        doc["name"] = workflow.name
    return doc


def _workflow(record: Document) -> Workflow:
    return Workflow(
        id=str(record["_id"]),
        tenantId=str(record["tenantId"]),
        idempotencyKey=str(record["idempotencyKey"]),
        name=record.get("name"),
        createdAt=record["createdAt"],
        state=WorkflowState(record["state"]),
        steps=steps_of(record["steps"]),
    )
