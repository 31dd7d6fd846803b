"""The job-type registry on the MongoDB database: collection `job_type_announcements`, one document per
(type, executor), written only by that executor (an upsert by `_id`). The collection holds one document per
executor process and type seen within the retention, so it is read whole."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime

from pymongo import UpdateOne
from pymongo.collection import Collection

from jobsched.limits import Limits
from jobsched.type_defaults import TypeDefaults
from shared.job_types.announcements import Announcement, JobTypeInfo, readable_overrides, summarize
from shared.model import Status
from shared.store.mongo.database import Document, MongoDatabase, translate_errors
from shared.store.transitions import KIND_RUN

COLLECTION = "job_type_announcements"
LIMITS_COLLECTION = "job_type_limits"  # {_id: jobType, limits: Limits.to_document(), updatedAt}: an operator's


class MongoJobTypes:
    def __init__(self, database: MongoDatabase) -> None:
        self._records: Collection[Document] = database.collection(COLLECTION)
        self._jobs: Collection[Document] = database.jobs
        self._limits: Collection[Document] = database.collection(LIMITS_COLLECTION)
        self._rates: Collection[Document] = database.rates
        self._key_rates: Collection[Document] = database.key_rates

    def announce(self, executor: str, types: Mapping[str, TypeDefaults], now: datetime, live_until: datetime) -> None:
        if not types:
            return
        writes = [
            UpdateOne(
                {"_id": _record_id(name, executor)},
                {
                    "$set": {
                        "jobType": name,
                        "executor": executor,
                        "seenAt": now,
                        "liveUntil": live_until,
                        "defaults": defaults.to_document(),
                    }
                },
                upsert=True,
            )
            for name, defaults in types.items()
        ]
        with translate_errors():
            self._records.bulk_write(writes, ordered=False)

    def withdraw(self, executor: str, now: datetime) -> None:
        with translate_errors():
            self._records.update_many({"executor": executor}, {"$set": {"liveUntil": now}})

    def job_types(self, now: datetime, seen_since: datetime) -> list[JobTypeInfo]:
        with translate_errors():
            records = [_to_announcement(d) for d in self._records.find({})]
        recent = {r.jobType for r in records if r.seenAt >= seen_since}
        return summarize((r for r in records if r.jobType in recent), now)

    def announcements(self, job_type: str) -> list[Announcement]:
        with translate_errors():
            return [_to_announcement(d) for d in self._records.find({"jobType": job_type})]

    def forget(self, seen_before: datetime) -> int:
        with translate_errors():
            return int(self._records.delete_many({"seenAt": {"$lt": seen_before}}).deleted_count)

    def waiting_runs(self, now: datetime, job_type: str) -> int:
        query = {"status": Status.PENDING.value, "kind": KIND_RUN, "jobType": job_type, "scheduledAt": {"$lte": now}}
        with translate_errors():
            return int(self._jobs.count_documents(query))

    def set_limits(self, job_type: str, limits: Limits | None, now: datetime) -> None:
        with translate_errors():
            self._rates.delete_one({"_id": job_type})  # see JobTypeRegistry.set_limits
            self._key_rates.delete_many({"_id.jobType": job_type})
            if limits is None:
                self._limits.delete_one({"_id": job_type})
            else:
                doc = {"limits": limits.to_document(), "updatedAt": now}
                self._limits.update_one({"_id": job_type}, {"$set": doc}, upsert=True)

    def limit_overrides(self) -> dict[str, Limits]:
        with translate_errors():
            return readable_overrides((str(d["_id"]), d.get("limits")) for d in self._limits.find({}))


def _record_id(job_type: str, executor: str) -> str:
    # JSON keeps the pair apart whatever characters either name holds.
    return json.dumps([job_type, executor], separators=(",", ":"))


def _to_announcement(doc: Document) -> Announcement:
    return Announcement(
        jobType=str(doc["jobType"]),
        executor=str(doc["executor"]),
        seenAt=doc["seenAt"],
        liveUntil=doc["liveUntil"],
        defaults=TypeDefaults.from_document(doc.get("defaults")),
    )
