"""Filters are not pushed down: claims planned so that every hot query is a selective equality.

Why: FerretDB 1.x hands only top-level equality filters to its backend and evaluates the rest of a query
(ranges such as `scheduledAt <= now`, `$in`, sorts, limits) on documents it has already decoded; its own indexes
serve no query. The production claim, one range query in claim order, therefore decodes every pending run on
every claim, future ones included, and its cost grows with the backlog.

What this does instead:
- every pending run carries `dueSlot` (due_slots.py) and `lane` (claim_lanes.py); a claim reads the slots that
  can hold due runs by equality, keeps the candidates of passed slots between claims (the backlog cache) and
  updates a deep group lane by lane; the guarded updates and the re-read of a claim are equalities too;
- a finish batch's update is narrowed by its start batch (`startToken`), the reaper's query by one status at a
  time;
- no query index is created: none would serve a query, each would cost every write an index entry, and the
  partial ones cannot be built.

What it costs: two fields on every pending run; clocks further apart than the slots' lookback delay a run by
up to one full sweep period; within one priority and slot, a deep backlog taken in part is claimed lane by lane,
not strictly oldest first.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Collection
from datetime import datetime
from typing import Any

from pymongo import MongoClient

from shared.model import Job, Status, utc_now
from shared.store import transitions
from shared.store.mongo import Document, due_runs_filter, job_from_document, translate_errors
from shared.store.mongo_compat.claim_lanes import BacklogCache, ClaimerMemory, new_lane, plan_claim
from shared.store.mongo_compat.due_slots import LOOKBACK_SLOTS, due_slot, slot_of
from shared.store.mongo_compat.probe import Probed
from shared.store.transitions import ATTEMPT_ACTIVE

CLAIM_FIELDS = {"_id": 1, "priority": 1, "scheduledAt": 1, "dueSlot": 1, "lane": 1}


class NoFilterPushdown(Probed):
    def __init__(self, client: MongoClient[dict[str, Any]], database: str, *, accommodate: bool | None) -> None:
        super().__init__(client, database, accommodate=accommodate)
        self._claimer = ClaimerMemory(frozenset())

    def _create_query_indexes(self) -> None:
        """None on such a server, even with the production claim path forced: no index would serve a query
        there, and it cannot build the partial ones."""
        if not self._server_lacks_pushdown:
            super()._create_query_indexes()

    def pending_document(self, fields: transitions.Fields) -> transitions.Fields:
        """A job that becomes pending, or moves in time, gets the due slot of its (new) scheduledAt."""
        fields = super().pending_document(fields)
        if self._accommodating and (fields.get("status") == Status.PENDING.value or "scheduledAt" in fields):
            fields = {**fields, "dueSlot": due_slot(fields.get("scheduledAt"), utc_now()), "lane": new_lane()}
        return fields

    def claim_due_jobs(
        self, now: datetime, limit: int, job_types: Collection[str], due_by: datetime | None = None
    ) -> list[Job]:
        """Find the due runs by due slot (a passed slot's from the backlog cache), take the first `limit` in
        claim order, move them with one guarded update_many per (slot, priority) or per lane of it, then
        re-read which ones carry this call's claim token: those are the ones won. Two overlapping claimers may
        both win a document here, which the executor's attempt record absorbs."""
        if not self._accommodating:
            return super().claim_due_jobs(now, limit, job_types, due_by)
        due_by = due_by or now
        wall = utc_now()
        # Slots up to the wall clock at least: a run written (or released) after `now` was taken sits in the
        # slot of its write, and is due all the same when its scheduledAt <= due_by.
        memory = self._claimer = self._claimer.serving(job_types)
        slots = memory.window.plan(now, max(due_by, wall), memory.backlog.slots())
        with translate_errors():
            query = due_runs_filter(due_by, job_types)
            read_started = time.perf_counter()
            found, queries = self._candidates(query, slots, memory.backlog, slot_of(wall) - LOOKBACK_SLOTS)
            read_s = time.perf_counter() - read_started
            found.sort(key=_claim_order)
            groups, left = plan_claim(found, limit)
            memory.window.claimed(now, slots is None, (d.get("dueSlot") for d in left), read_s, queries)
            memory.backlog.settle(left)
            if not groups:
                return []
            token = uuid.uuid4().hex
            update = self._update({**transitions.queued(now), "claimToken": token})
            for group in groups:
                guard: Document = {
                    "status": Status.PENDING.value,
                    "priority": group.priority,
                    "_id": {"$in": group.ids},
                }
                if group.slot is not None:
                    guard["dueSlot"] = group.slot
                if group.lane is not None:
                    guard["lane"] = group.lane
                self._jobs.update_many(guard, update)
            won = [job_from_document(d) for d in self._jobs.find({"claimToken": token})]
        return sorted(won, key=transitions.claim_order)

    def _candidates(
        self, query: Document, slots: list[int] | None, backlog: BacklogCache, closed_below: int
    ) -> tuple[list[Document], int]:
        """The due runs of `slots` (None: of every slot) and how many slot queries that took; slots before
        `closed_below` come from the backlog cache when it has them, and are cached when read."""
        if slots is None:
            found = list(self._jobs.find(query, CLAIM_FIELDS))
            backlog.rebuild(found, closed_below)
            return found, 0
        found, queries = [], 0
        for slot in slots:
            closed = slot < closed_below
            cached = backlog.get(slot) if closed else None
            if cached is None:
                cached = list(self._jobs.find({**query, "dueSlot": slot}, CLAIM_FIELDS))
                queries += 1
                if closed:
                    backlog.keep(slot, cached)
            found.extend(cached)
        return found, queries

    def _batch_of(self, job: Job) -> Document:
        """The start batch: the server decodes that batch's jobs, not all of the worker's running ones."""
        if not self._accommodating or job.startToken is None:
            return super()._batch_of(job)
        return {"startToken": job.startToken}

    def expired_attempts(self, now: datetime, limit: int) -> list[Job]:
        if not self._accommodating:
            return super().expired_attempts(now, limit)
        found: list[Job] = []
        with translate_errors():
            for status in ATTEMPT_ACTIVE:  # one equality each: `$in` would be applied only after decoding
                docs = self._jobs.find({"status": status, "leaseExpiresAt": {"$lt": now}}).limit(limit)
                found.extend(job_from_document(d) for d in docs)
        return found[:limit]


def _claim_order(doc: Document) -> tuple[int, datetime, Any]:
    return (-int(doc.get("priority", 0)), doc["scheduledAt"], doc["_id"])
