"""What workflows and batches share on MongoDB: their records listed newest first per tenant, and their jobs
counted by status."""

from __future__ import annotations

from collections import Counter
from typing import Literal

from bson import ObjectId

from shared.store.mongo.database import Document, MongoDatabase

Group = Literal["workflows", "batches"]
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
