"""JobBrowser on the MongoDB database's jobs and failed attempts' events, over the job store's client.

The indexes these queries use are made by the database's migrations (migrations.py, `operator_indexes` and
`counts_by_status`): tenant_status_listing and tenant_type_listing for filtered pages, status_counts so the counts
read index entries only, tenant_templates and template_runs for templates and their runs, recent_completions
and dead_letters / tenant_dead_letters (partial: only completed or dead-lettered jobs enter them) for the last
hour and the DLQ (of every tenant, of one), and failure_age / tenant_failures (attempt_history_in_jobs) on the failed
attempts' events; the history is read from the per-minute counters (minutes.py, tenant_minutes). The pipelines
use only `$match`, `$sort` and `$group` with `$sum`, which every Mongo-compatible server answers.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from bson import ObjectId
from pymongo import ASCENDING, DESCENDING

from shared.model import Job, Status
from shared.store.browse import Counts, ErrorGroup, JobQuery, counts_from, error_groups
from shared.store.history import History, unix_minute
from shared.store.mongo import minutes
from shared.store.mongo.codecs import WITHOUT_HISTORY, job_from_document
from shared.store.mongo.database import Document, MongoDatabase, translate_errors
from shared.store.transitions import KIND_BUFFERED, KIND_RUN, KIND_TEMPLATE


class MongoBrowser:
    def __init__(self, database: MongoDatabase) -> None:
        self._jobs = database.jobs
        self._failures = database.failures
        self._minutes = database.minutes

    def page(self, tenant_id: str, query: JobQuery) -> list[Job]:
        if query.limit <= 0:
            return []  # limit(0) is "no limit" to MongoDB
        match: Document = {"tenantId": tenant_id}
        if query.status is not None:
            match["status"] = query.status.value
        if query.jobType is not None:
            match["jobType"] = query.jobType
        if query.templateId is not None:
            match["templateId"] = query.templateId
        if query.templates is not None:
            # A buffered run is a run (of its own kind only until it is promoted, or for good once cancelled).
            match["kind"] = KIND_TEMPLATE if query.templates else {"$in": [KIND_RUN, KIND_BUFFERED]}
        direction = DESCENDING
        if query.before is not None:
            match["$or"] = _beyond(query.before.createdAt, query.before.id, "$lt")
        elif query.after is not None:
            match["$or"] = _beyond(query.after.createdAt, query.after.id, "$gt")
            direction = ASCENDING  # walk up from the cursor, then list the page newest first like every page
        with translate_errors():
            docs = (
                self._jobs.find(match, WITHOUT_HISTORY)
                .sort([("createdAt", direction), ("_id", direction)])
                .limit(query.limit)
            )
            jobs = [job_from_document(d) for d in docs]
        return jobs if direction == DESCENDING else jobs[::-1]

    def counts(self, tenant_id: str | None, since: datetime) -> Counts:
        tenant = _tenant(tenant_id)
        with translate_errors():
            by_status = self._by_type_and_status(tenant)
            templates = self._by_type_and_status({"kind": KIND_TEMPLATE, **tenant})
            ended = [
                (group["_id"], status, group["n"])
                for status in (Status.COMPLETED.value, Status.DLQ.value)
                for group in self._jobs.aggregate(
                    [
                        # A schedule's own end is not a job's outcome (nor counted in the history).
                        {
                            "$match": {
                                "status": status,
                                "updatedAt": {"$gte": since},
                                "kind": {"$ne": KIND_TEMPLATE},
                                **tenant,
                            }
                        },
                        {"$group": {"_id": "$jobType", "n": {"$sum": 1}}},
                    ]
                )
            ]
            failed = self._failed_by_type(since, tenant_id)
            paused = self._jobs.count_documents(
                {"kind": KIND_TEMPLATE, "status": Status.PENDING.value, "paused": True, **tenant}
            )
        return counts_from(by_status, templates, ended, failed.items(), paused)

    def _by_type_and_status(self, match: Document) -> list[tuple[str, str, int]]:
        pipeline: list[Document] = [
            {"$match": match},
            # Sorting on the counted fields lets MongoDB count from the status_counts index alone.
            {"$sort": {"status": 1, "jobType": 1}},
            {"$group": {"_id": {"jobType": "$jobType", "status": "$status"}, "n": {"$sum": 1}}},
        ]
        return [(g["_id"]["jobType"], g["_id"]["status"], g["n"]) for g in self._jobs.aggregate(pipeline)]

    def _failed_by_type(self, since: datetime, tenant_id: str | None) -> Counter[str]:
        """Failed attempts since `since` by job type, from their events (failure_age, tenant_failures)."""
        pipeline: list[Document] = [
            {"$match": {"at": {"$gte": since}, **_tenant(tenant_id)}},
            {"$group": {"_id": "$jobType", "n": {"$sum": 1}}},
        ]
        return Counter({str(g["_id"]): int(g["n"]) for g in self._failures.aggregate(pipeline)})

    def tenants(self, tenant_id: str | None, limit: int) -> list[str]:
        with translate_errors():
            return sorted(str(t) for t in self._jobs.distinct("tenantId", _tenant(tenant_id)))[: max(limit, 0)]

    def dlq_groups(self, tenant_id: str | None, limit: int) -> list[ErrorGroup]:
        with translate_errors():
            rows = [
                (g["_id"]["error"], g["_id"]["jobType"], g["n"])
                for g in self._jobs.aggregate(
                    [
                        {"$match": {"status": Status.DLQ.value, **_tenant(tenant_id)}},
                        {"$group": {"_id": {"error": "$lastError", "jobType": "$jobType"}, "n": {"$sum": 1}}},
                    ]
                )
            ]
        return error_groups(rows, limit)

    def dead_letters(self, tenant_id: str | None, error: str, limit: int) -> list[Job]:
        if limit <= 0:
            return []
        match = {"status": Status.DLQ.value, "lastError": error, **_tenant(tenant_id)}
        with translate_errors():
            docs = (
                self._jobs.find(match, WITHOUT_HISTORY)
                .sort([("updatedAt", DESCENDING), ("_id", DESCENDING)])
                .limit(limit)
            )
            return [job_from_document(d) for d in docs]

    def history(self, tenant_id: str | None, job_type: str | None, since: datetime, until: datetime) -> History:
        with translate_errors():
            self._minutes.flush()  # what this process counted, written before it is read
            return minutes.history(
                self._minutes.collection, tenant_id, job_type, unix_minute(since), unix_minute(until)
            )


def _tenant(tenant_id: str | None) -> Document:
    return {"tenantId": tenant_id} if tenant_id is not None else {}


def _beyond(created_at: datetime, job_id: str, op: str) -> list[Document]:
    """Jobs past (createdAt, id) in one direction: a later/earlier createdAt, or the same one and a later/earlier
    id. Spelled as an `$or` of ranges, which both index bounds and every Mongo-compatible server understand."""
    return [{"createdAt": {op: created_at}}, {"createdAt": created_at, "_id": {op: ObjectId(job_id)}}]
