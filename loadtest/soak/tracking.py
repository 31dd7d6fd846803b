"""Following every job the soak created, and every run of its template, in the store until it is final.

Every POLL_S the due (or cancelled) jobs not yet seen final are read by id, those read longest ago first, at most
MAX_READ_PER_POLL of them: the reads cost the store what the jobs finishing cost, not what a backlog holds. A final
status is counted in the window it was seen in and the job is let go (retention may delete it afterwards). The
first attempt's start (its execution record, `<job id>:1`) is read once the job is seen running or final: its
lateness is that start - the scheduledAt the API answered at creation (a retry moves the stored one).

A job no longer there although never seen final is lost when that is certain: retention deletes a job RETAIN
after the time its finish was stamped with, and it was last seen not final less than half of RETAIN before it was
found gone (the other half allows for a finish written later than its stamp). Otherwise (the reads fell that far
behind) it is counted apart as not verified, and the no-lost-job target is not met either.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bson import ObjectId
from pymongo import MongoClient
from pymongo.errors import PyMongoError

from loadtest.benchkit import first_starts
from loadtest.server_logs import Finding
from loadtest.soak.windows import Windows
from shared.model import TERMINAL, Status, utc_now

POLL_S = 2.0
MAX_READ_PER_POLL = 2000
CHUNK = 1000  # ids per $in query
READ_TIMEOUT_MS = 30_000
# A job in these has started: its first attempt's record is there.
STARTED = frozenset({Status.RUNNING.value, Status.COMPLETED.value, Status.DLQ.value})
FINAL = frozenset(s.value for s in TERMINAL)


@dataclass(slots=True)
class Tracked:
    scheduled_at: datetime
    expected: str | None  # the final status it must reach; None: any (a cancel that found it running)
    seen_unfinished: datetime  # when it was last known not final: its creation, then each read
    is_run: bool = False  # a run of the template
    cancel_sent: bool = False
    start_read: bool = False


class StoreReads:
    """The soak's reads of the jobs and their first attempts, straight from the MongoDB-compatible store."""

    def __init__(self, uri: str, database: str) -> None:
        # A read that the server never answers fails (counted, asked again) instead of stopping the soak for good.
        self._client: MongoClient[dict[str, Any]] = MongoClient(
            uri, tz_aware=True, socketTimeoutMS=READ_TIMEOUT_MS, serverSelectionTimeoutMS=READ_TIMEOUT_MS
        )
        self._db = self._client[database]

    def statuses(self, ids: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for chunk in _chunks(ids):
            for doc in self._db["jobs"].find({"_id": {"$in": [ObjectId(i) for i in chunk]}}, {"status": 1}):
                found[str(doc["_id"])] = doc["status"]
        return found

    def statuses_each(self, ids: Sequence[str]) -> dict[str, str]:
        """The jobs read one by one: whether those a `statuses` read did not return are really gone."""
        found = (self._db["jobs"].find_one({"_id": ObjectId(i)}, {"status": 1}) for i in ids)
        return {str(doc["_id"]): doc["status"] for doc in found if doc is not None}

    def first_starts(self, ids: Sequence[str]) -> dict[str, datetime]:
        found: dict[str, datetime] = {}
        for chunk in _chunks(ids):
            found.update(first_starts(self._db["jobs"], {"_id": {"$in": [ObjectId(i) for i in chunk]}}))
        return found

    def template_runs(self, template_id: str, after: datetime | None) -> list[tuple[str, datetime, datetime]]:
        """The template's runs planned after `after` (all without it): (id, plannedAt, createdAt), oldest first."""
        query: dict[str, Any] = {"templateId": template_id}
        if after is not None:
            query["plannedAt"] = {"$gt": after}
        runs = self._db["jobs"].find(query, {"plannedAt": 1, "createdAt": 1}).sort("plannedAt", 1)
        return [(str(d["_id"]), d["plannedAt"], d["createdAt"]) for d in runs]

    def operations(self) -> list[tuple[str, float, str]]:
        """The server's operations on the soak's database running now (currentOp, which FerretDB answers too):
        (opid, seconds running, namespace and command)."""
        running = []
        for op in self._client.admin.command("currentOp")["inprog"]:
            namespace = op.get("ns") or ""
            if op.get("active") and op.get("secs_running") is not None and namespace.startswith(f"{self._db.name}."):
                command = next(iter(op.get("command") or {}), op.get("op"))
                running.append((str(op.get("opid")), float(op["secs_running"]), f"{namespace} {command}"))
        return running

    def close(self) -> None:
        self._client.close()


def _chunks(ids: Sequence[str]) -> Iterable[Sequence[str]]:
    return (ids[n : n + CHUNK] for n in range(0, len(ids), CHUNK))


@dataclass
class Tracker:
    """The jobs not yet seen final (least recently read first), and what became of the others."""

    windows: Windows
    retain_s: float  # how long retention keeps a finished job
    open: dict[str, Tracked] = field(default_factory=dict)
    tracked: int = 0
    runs: int = 0
    vanished: Finding = field(default_factory=Finding)  # gone, surely before they were final: lost
    unverified: Finding = field(default_factory=Finding)  # gone, last seen not final too long before to be sure
    unexpected: Finding = field(default_factory=Finding)  # final, but not in the status their kind must reach
    missed: Finding = field(default_factory=Finding)  # there, but left out of the answer to a read of many ids
    start_missing: int = 0  # completed or dead-lettered without a first attempt's record
    template_id: str | None = None
    runs_after: datetime | None = None
    longest_poll_s: float = 0.0
    full_polls: int = 0  # polls that had more jobs to read than MAX_READ_PER_POLL

    def add(self, job_id: str, job: Tracked) -> None:
        self.open[job_id] = job
        self.tracked += 1

    def cancel_answered(self, job_id: str, status: int) -> None:
        """What DELETE /jobs/{id} answered: 200 cancelled it; 202 found it running (it ends as it may)."""
        job = self.open.get(job_id)
        if job is not None:
            job.cancel_sent = True
            if status != 200:
                job.expected = None

    def due(self, now: datetime, limit: int | None = MAX_READ_PER_POLL) -> list[str]:
        """Up to `limit` jobs to read, due or cancelled, those read longest ago first."""
        due = (i for i, job in self.open.items() if job.scheduled_at <= now or job.cancel_sent)
        chosen = list(itertools.islice(due, limit))
        if limit is not None and len(chosen) == limit:
            self.full_polls += 1
        return chosen

    def add_runs(self, runs: list[tuple[str, datetime, datetime]]) -> None:
        for run_id, planned_at, created_at in runs:
            self.add(run_id, Tracked(planned_at, Status.COMPLETED.value, created_at, is_run=True))
            self.runs += 1
            self.runs_after = planned_at

    def apply_statuses(
        self, asked: Sequence[str], statuses: dict[str, str], read_at: datetime, answered_at: datetime
    ) -> dict[str, Tracked]:
        """Counts what a read sent at `read_at` and answered at `answered_at` showed; returns the jobs whose first
        start is to be read."""
        to_read: dict[str, Tracked] = {}
        for job_id in asked:
            job = self.open.pop(job_id, None)
            if job is None:
                continue
            status = statuses.get(job_id)
            if status is None:
                unseen_s = (answered_at - job.seen_unfinished).total_seconds()
                what = f"{'a template run' if job.is_run else 'a job'} to end {job.expected or 'final'}"
                found = self.vanished if unseen_s < self.retain_s / 2 else self.unverified
                found.add(f"{job_id} ({what}): gone {unseen_s:.1f}s after it was last seen not final")
                continue
            if (status in STARTED or status in FINAL) and not job.start_read:
                to_read[job_id] = job
            if status in FINAL:
                self.windows.at(answered_at).finals[status] += 1
                if job.expected is not None and status != job.expected:
                    self.unexpected.add(f"{job_id}: {status}, expected {job.expected}")
            else:
                job.seen_unfinished = read_at
                self.open[job_id] = job  # back at the end: read again after the others
        return to_read

    def apply_starts(self, to_read: dict[str, Tracked], starts: dict[str, datetime], statuses: dict[str, str]) -> None:
        for job_id, job in to_read.items():
            started = starts.get(job_id)
            if started is None:
                if statuses.get(job_id) in (Status.COMPLETED.value, Status.DLQ.value):
                    self.start_missing += 1
                continue
            window = self.windows.at(started)
            values = window.run_lateness_ms if job.is_run else window.lateness_ms
            values.append((started - job.scheduled_at).total_seconds() * 1000)
            job.start_read = True

    def outstanding(self, until: datetime) -> int:
        """The jobs not seen final that were due by `until`."""
        return sum(1 for job in self.open.values() if job.scheduled_at <= until)


async def poll(store: StoreReads, tracker: Tracker, limit: int | None = MAX_READ_PER_POLL) -> None:
    """One round: the template's new runs, the due jobs' statuses (up to `limit`), the first starts of those that
    started. A store that does not answer is counted (store_read_errors) and asked again at the next round."""
    started = time.monotonic()
    try:
        if tracker.template_id is not None:
            tracker.add_runs(await asyncio.to_thread(store.template_runs, tracker.template_id, tracker.runs_after))
        read_at = utc_now()
        asked = tracker.due(read_at, limit)
        statuses = await asyncio.to_thread(store.statuses, asked)
        if absent := [i for i in asked if i not in statuses and i in tracker.open]:
            again = await asyncio.to_thread(store.statuses_each, absent)
            for job_id, status in again.items():
                tracker.missed.add(f"{job_id} ({status}): not in the answer to a read of {len(asked)} ids, there alone")
            statuses.update(again)
        to_read = tracker.apply_statuses(asked, statuses, read_at, utc_now())
        starts = await asyncio.to_thread(store.first_starts, list(to_read))
        tracker.apply_starts(to_read, starts, statuses)
    except PyMongoError:
        tracker.windows.at(utc_now()).server["store_read_errors"] += 1
    tracker.longest_poll_s = max(tracker.longest_poll_s, time.monotonic() - started)


async def watch(store: StoreReads, tracker: Tracker, stop: asyncio.Event) -> None:
    while not stop.is_set():
        began = time.monotonic()
        await poll(store, tracker)
        await pause(stop, POLL_S - (time.monotonic() - began))


async def pause(stop: asyncio.Event, seconds: float) -> None:
    """Wait `seconds`, or less if `stop` is set meanwhile."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=max(0.0, seconds))
