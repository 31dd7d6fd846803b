"""The claim's reads and writes on MongoDB (claiming.py plans the claim over MongoClaimPort), and the start-rate
documents' writes.

The counts that bound a type (its runs in flight), the lanes of due runs read from the due_lanes index
(fair_claims.py takes turns over them), the reservations of the rated types and keys, and the writes of those
reservations: a claim's (claimTat, only the elected scheduler claims) and the executors' starts' (startTat, a
compare-and-set, as many executors start at once)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from functools import partial
from typing import Any

from bson import ObjectId
from pymongo import ASCENDING, DESCENDING, UpdateOne
from pymongo.collection import Collection as MongoCollection
from pymongo.errors import DuplicateKeyError

from jobsched.limits import Rate
from shared.model import Job, Status
from shared.store import start_rates, transitions
from shared.store.base import StoreError, StoreUnavailable
from shared.store.claim_limits import InFlight, KeyOwner
from shared.store.fair_claims import Lane, LaneId, Turns, head_of
from shared.store.mongo.codecs import WITHOUT_HISTORY, job_from_document, update_document
from shared.store.mongo.database import Document, MongoDatabase, translate_errors
from shared.store.mongo.read_ahead import LaneReadAhead
from shared.store.transitions import ATTEMPT_ACTIVE, KIND_RUN

CLAIM_ORDER = [("priority", DESCENDING), ("scheduledAt", ASCENDING)]
LANE_ORDER = [*CLAIM_ORDER, ("_id", ASCENDING)]  # a lane's runs, in the order its turns take them
RATE_CAS_TRIES = 20  # compare-and-sets of a type's start rate before its starts are answered StoreUnavailable


class MongoClaimPort:
    """A claim's reads and writes (claiming.ClaimPort). No transaction: only the elected scheduler claims, so the
    counts that bound a type cannot grow between their read and the move; the move itself is guarded (only runs
    still pending and due move) and says which runs it won."""

    rereads_to_write = False

    def __init__(self, database: MongoDatabase, turns: Turns) -> None:
        self._database = database
        self._turns = turns
        self._read_ahead = LaneReadAhead(partial(read_lane, database), read_many=partial(read_lanes, database))

    @contextmanager
    def reading(self) -> Iterator[MongoClaimPort]:
        with translate_errors():
            yield self

    writing = reading

    def in_flight(self, job_types: Collection[str], now: datetime) -> InFlight:
        return counted_in_flight(self._database, sorted(job_types), now)

    def reserved_starts(self, rated: Mapping[str, Rate]) -> dict[str, float]:
        return reserved_claims(self._database, rated)

    def reserved_key_starts(self, owner: KeyOwner) -> float:
        return reserved_key_starts(self._database, owner)

    def has_due_run(self, job_type: str, due: datetime) -> bool:
        if self._read_ahead.holds(job_type, due):
            return True  # while a type's room is spent, the claim asks at every poll: read ahead, no round trip
        return self._database.jobs.find_one(due_runs_filter(due, [job_type]), {"_id": 1}) is not None

    def lanes(self, job_type: str, due: datetime, full_keys: Callable[[str], set[str]]) -> list[Lane[Job]]:
        return lanes(self._database, self._turns, self._read_ahead, job_type, due, full_keys)

    def mark_queued(self, runs: Sequence[Job], now: datetime, due: datetime) -> tuple[list[Job], set[str] | None]:
        """One guarded update_many moving the runs to queued under this claim's token, and a re-read of which ones
        carry the token only when fewer moved than were chosen (a concurrent claimer or a cancellation took some)."""
        fields = {**transitions.queued(now), "claimToken": uuid.uuid4().hex}
        ids = [ObjectId(j.id) for j in runs]
        # Still due and pending: a run rescheduled or cancelled since the find stays where it was put.
        guard = {**due_runs_filter(due, {j.jobType for j in runs}), "_id": {"$in": ids}}
        won: set[str] | None = None  # None: every run found
        try:
            moved = self._database.jobs.update_many(guard, update_document(fields)).modified_count
        except BaseException:
            self._read_ahead.forget(runs)
            raise
        self._read_ahead.taken(runs)  # moved, or lost to a change since they were read
        if moved < len(runs):
            mine = self._database.jobs.find({"_id": {"$in": ids}, "claimToken": fields["claimToken"]}, {"_id": 1})
            won = {str(d["_id"]) for d in mine}
            runs = [j for j in runs if j.id in won]
        return [transitions.applied(j, fields) for j in runs], won

    def reserve_starts(self, by_type: Mapping[str, float], by_key: Mapping[KeyOwner, float]) -> None:
        reserve_claims(self._database, by_type, by_key)


def due_runs_filter(now: datetime, job_types: Collection[str]) -> Document:
    """The due one-off runs of these job types (templates are never claimed)."""
    return {
        "status": Status.PENDING.value,
        "kind": KIND_RUN,
        "scheduledAt": {"$lte": now},
        "jobType": {"$in": sorted(job_types)},
    }


def counted_in_flight(database: MongoDatabase, job_types: Sequence[str], now: datetime) -> InFlight:
    """The runs of these types claimed and not finished (few: what is queued or running now), counted; queued
    ones in the line once due by `now` (ClaimLimits.queued)."""
    if not job_types:
        return InFlight(())
    match = {"status": {"$in": [Status.QUEUED.value, *ATTEMPT_ACTIVE]}, "jobType": {"$in": list(job_types)}}
    in_line = {"$and": [{"$eq": ["$status", Status.QUEUED.value]}, {"$lte": ["$scheduledAt", now]}]}
    key = {"type": "$jobType", "tenant": "$tenantId", "key": "$concurrencyKey", "line": in_line}
    groups = database.jobs.aggregate([{"$match": match}, {"$group": {"_id": key, "n": {"$sum": 1}}}])
    return InFlight(
        (
            g["_id"]["type"],
            g["_id"]["tenant"],
            g["_id"].get("key"),
            bool(g["_id"]["line"]),
            int(g["n"]),
        )
        for g in groups
    )


def lanes(
    database: MongoDatabase,
    turns: Turns,
    read_ahead: LaneReadAhead,
    job_type: str,
    due: datetime,
    full_keys: Callable[[str], set[str]],
) -> list[Lane[Job]]:
    """One lane per tenant with a due run of the type (distinct over the pending_runs index), each read through
    the read-ahead (read_ahead.py: a lane's next runs are read once for several of its turns, and a lane the
    listing no longer names is forgotten). A lane the turns know takes its turn from them and is read only when
    the claim gets to it (a claim reads about as many lanes as it takes runs, not every lane); any other is read
    at once, which gives its turn among them by its first due run. A lane's reads leave out the runs of its
    tenant's `full_keys` (concurrency keys at their limit). The distinct names the due time too: on MongoDB it
    skips from tenant to tenant either way, but DocumentDB reads every entry it matches, and runs scheduled ahead
    (12,000: 17 ms a claim) are not due. For the same reason a lane's read there walks every due run of the type,
    so the lanes read at once (those of tenants without a key at its limit) are read together, in one walk."""
    tenants = due_tenants(database, job_type, due)
    read_ahead.listed(job_type, tenants)
    if database.index_terms_by_path:
        met = [t for t in tenants if not turns.knows((job_type, t)) and not full_keys(t)]
        read_ahead.read_together(job_type, met, due)
    found: list[Lane[Job]] = []
    for tenant in tenants:
        read = read_ahead.reader((job_type, tenant), due, full_keys(tenant))
        if turns.knows((job_type, tenant)):
            found.append(Lane(job_type, tenant, None, read))
        elif first := read(None, 1):  # a claim meets every lane it does not know (a new leader: all of them)
            head = head_of(first[0].priority, first[0].scheduledAt)
            found.append(Lane(job_type, tenant, head, read, buffered=first))
    return found


def due_tenants(database: MongoDatabase, job_type: str, due: datetime) -> list[str]:
    """The tenants with a run of the type due by `due` (a distinct over the pending_runs index)."""
    return [str(t) for t in database.jobs.distinct("tenantId", due_lane(job_type, None, due))]


def due_lane(job_type: str, tenant: str | None, due: datetime) -> Document:
    """The filter of the runs of one type (and tenant, unless None) due by `due`."""
    lane: Document = {"status": Status.PENDING.value, "kind": KIND_RUN, "jobType": job_type}
    if tenant is not None:
        lane["tenantId"] = tenant
    return {**lane, "scheduledAt": {"$lte": due}}


def read_lane(
    database: MongoDatabase, lane: LaneId, due: datetime, full_keys: Collection[str], after: Job | None, n: int
) -> list[Job]:
    """The lane's (job type, tenant) runs due by `due` in claim order after `after`, at most n, none of
    `full_keys`."""
    job_type, tenant = lane
    return lane_runs(database, due_lane(job_type, tenant, due), full_keys, after, n)


def lane_runs(
    database: MongoDatabase, lane: Document, full_keys: Collection[str], after: Job | None, n: int
) -> list[Job]:
    """The lane's runs in claim order after `after`, at most n, none of `full_keys`."""
    parts = [lane]
    if after is not None:
        parts.append(_after_in_claim_order(after))
    if full_keys:
        parts.append({"concurrencyKey": {"$nin": sorted(full_keys)}})
    query = parts[0] if len(parts) == 1 else {"$and": parts}
    cursor = database.jobs.find(query, WITHOUT_HISTORY).sort(LANE_ORDER).limit(n)
    return [job_from_document(d) for d in cursor]


def read_lanes(
    database: MongoDatabase, job_type: str, tenants: Sequence[str], due: datetime, n: int
) -> dict[str, list[Job]]:
    """The first n runs in claim order of each of these tenants' lanes of `job_type` due by `due`, in one read: their
    due runs grouped by tenant, each group's first n kept ($topN). It reads every due run of those lanes, so it is
    for a server whose lane read does that anyway (MongoDatabase.index_terms_by_path); MongoDB reads n per lane."""
    match = {**due_lane(job_type, None, due), "tenantId": {"$in": sorted(tenants)}}
    first = {"$topN": {"n": n, "sortBy": dict(LANE_ORDER), "output": "$$ROOT"}}
    groups = database.jobs.aggregate(
        [{"$match": match}, {"$project": WITHOUT_HISTORY}, {"$group": {"_id": "$tenantId", "runs": first}}]
    )
    return {str(g["_id"]): [job_from_document(d) for d in g["runs"]] for g in groups}


def _after_in_claim_order(run: Job) -> Document:
    """The runs after `run` in claim order (priority desc, scheduledAt asc, _id asc)."""
    return {
        "$or": [
            {"priority": {"$lt": run.priority}},
            {"priority": run.priority, "scheduledAt": {"$gt": run.scheduledAt}},
            {"priority": run.priority, "scheduledAt": run.scheduledAt, "_id": {"$gt": ObjectId(run.id)}},
        ]
    }


def reserved_claims(database: MongoDatabase, rated: Collection[str]) -> dict[str, float]:
    """The claims' reservations of these rate-limited types so far: their claimTat (unix seconds), by type."""
    return {str(d["_id"]): float(d["claimTat"]) for d in database.rates.find({"_id": {"$in": sorted(rated)}})}


def reserved_key_starts(database: MongoDatabase, owner: KeyOwner) -> float:
    doc = database.key_rates.find_one({"_id": key_rate_id(owner)}, {"claimTat": 1})
    return float(doc["claimTat"]) if doc is not None and "claimTat" in doc else 0.0


def reserve_claims(database: MongoDatabase, tats: Mapping[str, float], key_tats: Mapping[KeyOwner, float]) -> None:
    """A claim's reservations, by type and by key under a rate per key."""
    for job_type, tat in tats.items():  # only the elected scheduler writes the reservations
        database.rates.update_one({"_id": job_type}, {"$set": {"claimTat": tat}}, upsert=True)
    if key_tats:
        database.key_rates.bulk_write(
            [
                UpdateOne({"_id": key_rate_id(owner)}, {"$set": {"claimTat": tat}}, upsert=True)
                for owner, tat in key_tats.items()
            ],
            ordered=False,
        )


def key_rate_id(owner: KeyOwner) -> Document:
    """A concurrency key's start-rate document's _id (its fields always in this order: _id matches whole)."""
    job_type, tenant, key = owner
    return {"jobType": job_type, "tenantId": tenant, "key": key}


def counted_starts(
    rates: MongoCollection[Document], doc_id: Any, job_type: str, starts: int, rate: Rate, now: datetime
) -> list[StoreError | None]:
    """`starts` starts of `job_type` at `now` counted against the rate whose times are the document `doc_id` of
    `rates`: per start, None or RateLimited. One compare-and-set of the document, repeated when another executor's
    came first."""
    for _ in range(RATE_CAS_TRIES):
        doc = rates.find_one({"_id": doc_id})
        seen = float(doc["startTat"]) if doc is not None and "startTat" in doc else None
        verdicts, tat = start_rates.counted_starts(seen or 0.0, now, rate, starts, job_type)
        swapped = rates.update_one({"_id": doc_id, "startTat": seen}, {"$set": {"startTat": tat}})
        first = {"_id": doc_id, "claimTat": 0.0, "startTat": tat}
        if swapped.matched_count or (doc is None and _inserted(rates, first)):
            return list(verdicts)
    return [StoreUnavailable(f"{job_type}: its start rate is contended; retry")] * starts


def _inserted(collection: MongoCollection[Document], doc: Document) -> bool:
    """Insert `doc`; False when its _id exists (another writer came first)."""
    try:
        collection.insert_one(doc)
    except DuplicateKeyError:
        return False
    return True
