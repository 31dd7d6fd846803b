"""The console's history in the MongoDB database (shared/store/history.py): one document per tenant, job type and
minute in `job_minutes`, {_id, tenantId, jobType, minute, at, <counters>, waiting, running}, which the server
deletes a day and an hour on (TTL index `minute_age`), and one more per job type and minute with tenantId null:
every tenant's sum, so that an admin's chart of a busy day reads a day's documents, not a day's per tenant.

A write per job would cost every job one more write and index entry (issue 49). Instead each process counts what
its store does (attempts started with their lateness, attempts failed, jobs completed and dead-lettered) in memory
and adds it to the documents about once a second (`$inc`, one bulk write): a process that dies loses at most its
last second of counts, a flush the server applied but whose answer was lost counts twice. A read first flushes
its own process's counts. What is waiting and running is sampled once a minute by the reaper (sample_backlog).
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from pymongo import UpdateOne
from pymongo.collection import Collection
from pymongo.errors import BulkWriteError, InvalidOperation, PyMongoError

from shared.model import Job, Status
from shared.store.history import (
    EVENT_COUNTERS,
    GAUGES,
    LATENESS_COUNTERS,
    History,
    MinuteCounts,
    backlog_of,
    history_of,
    lateness_bucket,
    minute_start,
    unix_minute,
)

Document = dict[str, Any]  # database.py's, which builds on this module (MongoDatabase.minutes)
Key = tuple[str | None, str, int]  # (tenantId, or None for every tenant's sum; jobType; unix minute)
FLUSH_S: Final = 1.0
KEPT_FOR: Final = timedelta(hours=25)  # the TTL index's: a day's chart and its first minute, with room
DUPLICATE_KEY: Final = 11000  # as database.py's
log = logging.getLogger("jobsched.store")


def document_id(key: Key) -> str:
    """A minute's document id: JSON, so that no tenant or type can be mistaken for another."""
    return json.dumps(key, separators=(",", ":"))


class MinuteCounters:
    """One process's counts not written yet, flushed by a thread of its own (started by the first count)."""

    def __init__(self, collection: Collection[Document]) -> None:
        self.collection = collection
        self._lock = threading.Lock()  # the counts, while they are added to or taken for a flush
        # One flush at a time, held until its write is answered: a read's flush waits for the flusher's in flight,
        # so that it reads what its process counted.
        self._flushing = threading.Lock()
        self._counts: dict[Key, Counter[str]] = {}  # per tenant: every tenant's sums are added at a flush
        self._unwritten: dict[Key, Counter[str]] = {}  # what a flush could not write, sums included: as they are
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None

    def started(self, jobs: Iterable[Job]) -> None:
        """Attempts just started (the jobs as moved to running): one start each, with its lateness."""
        with self._lock:
            for job in jobs:
                at = job.claimedAt or job.updatedAt
                late_ms = (at - job.scheduledAt).total_seconds() * 1000
                counts = self._at(job, at)
                counts["started"] += 1
                counts[f"l{lateness_bucket(late_ms)}"] += 1
        self._ensure_flusher()

    def closed(self, jobs: Iterable[Job], *, failed: bool = False) -> None:
        """Attempts just closed (the jobs as their close left them): a completion or dead letter each, and a
        failed attempt each when `failed`."""
        with self._lock:
            for job in jobs:
                counts = self._at(job, job.updatedAt)
                if job.status in (Status.COMPLETED, Status.DLQ):
                    counts[job.status.value] += 1
                if failed:
                    counts["failed"] += 1
        self._ensure_flusher()

    def _at(self, job: Job, at: datetime) -> Counter[str]:
        return self._counts.setdefault((job.tenantId, job.jobType, unix_minute(at)), Counter())

    def _ensure_flusher(self) -> None:
        if self._flusher is None and not self._stop.is_set():
            with self._lock:
                if self._flusher is None:
                    self._flusher = threading.Thread(target=self._flush_every_second, name="minute-counts", daemon=True)
                    self._flusher.start()

    def _flush_every_second(self) -> None:
        while not self._stop.wait(FLUSH_S):
            try:
                self.flush()
            except InvalidOperation:  # its client was closed without close(): nothing can be written any more
                return
            except PyMongoError as exc:  # the database away: the counts wait for the next flush
                log.warning("history counts not written yet", extra={"action": "minutes_unflushed", "error": str(exc)})
            except Exception:  # a bug: said with its traceback, and the thread goes on (the counts are kept)
                log.exception("history counts not written", extra={"action": "minutes_flush_error"})

    def flush(self) -> None:
        """Add the counts not written yet to their minutes' documents (and to every tenant's sums). What could not
        be written is kept, as it was to be written, for the next flush, and the error raised."""
        with self._flushing:
            self._flush()

    def _flush(self) -> None:
        with self._lock:
            counts, self._counts = self._counts, {}
            entries, self._unwritten = self._unwritten, {}
        for (tenant, job_type, minute), counted in counts.items():
            for key in ((tenant, job_type, minute), (None, job_type, minute)):
                entries.setdefault(key, Counter()).update(counted)
        if not entries:
            return
        keys = list(entries)
        updates = [_added(key, entries[key]) for key in keys]
        try:
            self.collection.bulk_write(updates, ordered=False)
        except BulkWriteError as exc:
            errors = exc.details.get("writeErrors", [])
            self._keep({keys[e["index"]]: entries[keys[e["index"]]] for e in errors})
            # A duplicate key is two processes' first counts of one minute upserted at once: the loser's counts
            # find the document at the next flush. Anything else is said.
            if any(e.get("code") != DUPLICATE_KEY for e in errors):
                raise
        except PyMongoError:
            self._keep(entries)
            raise

    def _keep(self, entries: dict[Key, Counter[str]]) -> None:
        """What a flush could not write, back for the next one; a minute older than the documents are kept is
        dropped (the server would delete it), so an outage does not grow this without end."""
        oldest = unix_minute(datetime.now(UTC) - KEPT_FOR)
        with self._lock:
            for key, counted in entries.items():
                if key[2] >= oldest:
                    self._unwritten.setdefault(key, Counter()).update(counted)

    def close(self) -> None:
        """Stop the flusher after one last flush (best effort: the database may be gone)."""
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join()
        try:
            self.flush()
        except PyMongoError as exc:
            log.warning("history counts lost at close", extra={"action": "minutes_lost", "error": str(exc)})


def _added(key: Key, counts: Counter[str]) -> UpdateOne:
    tenant, job_type, minute = key
    fields = {"tenantId": tenant, "jobType": job_type, "minute": minute, "at": minute_start(minute)}
    return UpdateOne({"_id": document_id(key)}, {"$inc": dict(counts), "$setOnInsert": fields}, upsert=True)


def sample_backlog(collection: Collection[Document], jobs: Collection[Document], now: datetime, minute: int) -> None:
    """Set `minute`'s waiting (runs due by `now` and not started: pending or queued) and running (claimed or
    running) per tenant and type, and their sums; zero where there are none now."""
    due = {"status": Status.PENDING.value, "kind": "run", "scheduledAt": {"$lte": now}}
    passing = {"status": {"$in": [Status.QUEUED.value, Status.CLAIMED.value, Status.RUNNING.value]}}
    by_due = {"$group": {"_id": {"t": "$tenantId", "j": "$jobType"}, "n": {"$sum": 1}}}
    by_status = {"$group": {"_id": {"t": "$tenantId", "j": "$jobType", "s": "$status"}, "n": {"$sum": 1}}}
    counted = backlog_of(
        ((g["_id"]["t"], g["_id"]["j"], g["n"]) for g in jobs.aggregate([{"$match": due}, by_due])),
        (
            (g["_id"]["t"], g["_id"]["j"], g["_id"]["s"], g["n"])
            for g in jobs.aggregate([{"$match": passing}, by_status])
        ),
    )
    gauges: dict[Key, tuple[int, int]] = {}
    for (tenant, job_type), (waiting, running) in counted.items():
        gauges[tenant, job_type, minute] = (waiting, running)
        summed = gauges.get((None, job_type, minute), (0, 0))
        gauges[None, job_type, minute] = (summed[0] + waiting, summed[1] + running)
    collection.update_many({"at": minute_start(minute)}, {"$set": dict.fromkeys(GAUGES, 0)})
    updates = [
        UpdateOne(
            {"_id": document_id(key)},
            {
                "$set": dict(zip(GAUGES, values, strict=True)),
                "$setOnInsert": {"tenantId": key[0], "jobType": key[1], "minute": minute, "at": minute_start(minute)},
            },
            upsert=True,
        )
        for key, values in gauges.items()
    ]
    if updates:
        collection.bulk_write(updates, ordered=False)


def history(
    collection: Collection[Document], tenant_id: str | None, job_type: str | None, first: int, last: int
) -> History:
    """Minutes first..last of one tenant (or every tenant's sums) and one type or all, read by tenant_minutes."""
    match: Document = {"tenantId": tenant_id, "minute": {"$gte": first, "$lte": last}}
    if job_type is not None:
        match["jobType"] = job_type
    names = (*EVENT_COUNTERS, *LATENESS_COUNTERS, *GAUGES)
    docs = collection.find(match, {"_id": 0, "minute": 1, **dict.fromkeys(names, 1)})
    return history_of(((int(d["minute"]), MinuteCounts.of([d.get(n, 0) for n in names])) for d in docs), first, last)
