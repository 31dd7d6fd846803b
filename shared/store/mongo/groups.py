"""What workflows and batches share on MongoDB: their records listed newest first per tenant, their jobs counted
by status, and retention of the records whose jobs retention deleted."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from bson import ObjectId

from shared.store.emptied_records import Group
from shared.store.mongo.database import Document, MongoDatabase

_JOB_FIELD = {"workflows": "workflowId", "batches": "batchId"}


def newest(database: MongoDatabase, group: Group, tenant_id: str, limit: int, before: str | None) -> list[Document]:
    """The tenant's records newest first (by _id: an ObjectId starts with its creation time), after `before`."""
    query: Document = {"tenantId": tenant_id}
    if before is not None:
        if not ObjectId.is_valid(before):
            return []
        query["_id"] = {"$lt": ObjectId(before)}
    return list(database.collection(group).find(query).sort("_id", -1).limit(limit))


def counts(database: MongoDatabase, group: Group, ids: list[str]) -> dict[str, Counter[str]]:
    """Each record's jobs (a workflow's steps, a batch's members) counted by status, by the record's id."""
    field = _JOB_FIELD[group]
    found: dict[str, Counter[str]] = {record_id: Counter() for record_id in ids}
    if ids:
        grouped = database.jobs.aggregate(
            [
                {"$match": {field: {"$in": ids}}},
                {"$group": {"_id": {"record": f"${field}", "status": "$status"}, "n": {"$sum": 1}}},
            ]
        )
        for entry in grouped:
            found[str(entry["_id"]["record"])][str(entry["_id"]["status"])] = int(entry["n"])
    return found


def delete_emptied(
    database: MongoDatabase, group: Group, created_before: datetime, limit: int, after: str | None
) -> tuple[int, str | None]:
    """Retention of records: of up to `limit` records created before `created_before`, oldest first after the
    record `after`, delete those no job of which is left (retention deleted them): a workflow once written whole,
    a batch once fired and its callbacks deleted too. How many were deleted, and where the next call starts (None:
    from the oldest again, every record was looked at)."""
    field = _JOB_FIELD[group]
    window: Document = {"$lt": ObjectId.from_datetime(created_before)}
    if after is not None:
        window["$gt"] = ObjectId(after)
    done: Document = {"state": "running"} if group == "workflows" else {"firedAt": {"$exists": True}}
    kept = {"onComplete": 1, "onSuccess": 1}  # not a workflow's steps: up to MAX_STEPS of them
    looked = list(database.collection(group).find({"_id": window, **done}, kept).sort("_id", 1).limit(limit))
    deleted = 0
    for record in looked:
        callbacks = [ObjectId(record[k]) for k in ("onComplete", "onSuccess") if record.get(k)]
        left = {"$or": [{field: str(record["_id"])}, *([{"_id": {"$in": callbacks}}] if callbacks else [])]}
        if database.jobs.find_one(left, {"_id": 1}) is None:
            deleted += database.collection(group).delete_one({"_id": record["_id"], **done}).deleted_count
    return deleted, (str(looked[-1]["_id"]) if len(looked) == limit else None)
