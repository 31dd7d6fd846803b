"""JobStore on MongoDB (pymongo), written for MongoDB itself.

Collections: `jobs`; `executions`, one record per attempt, inserted when the attempt starts (its insert decides
which executor runs it, and the records are the job's history); `attempt_outcomes`, one per decided attempt
(its insert decides the attempt's one outcome: the executor's result or the reaper's "lost"). Ownership is only
ever decided by such inserts into unique ids; conditional updates then move the job. Every query is served by
an index (ensure_schema).

A change of two documents (record + job, outcome + job) is no transaction, so each is ordered such that a crash
between its writes leaves a state the next visitor completes: the reaper closes attempts whose lease ran out,
every closer re-applies the decided outcome, and a start that finds its attempt's record taken repairs the job
from the records (_repair).

An executor makes its store calls from one thread per delivery; concurrent starts and finishes become bulk
writes (group commit), which saves round trips under load. A success does not rewrite its record: the history
reads the attempt's end from its outcome.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, TypeVar

from bson import ObjectId
from bson.errors import InvalidDocument
from pymongo import ASCENDING, DESCENDING, MongoClient, ReturnDocument, UpdateOne
from pymongo.collection import Collection as MongoCollection
from pymongo.errors import BulkWriteError, ConnectionFailure, DuplicateKeyError, OperationFailure, WriteError

from jobsched.backoff import DEFAULT_BACKOFF, Backoff
from jobsched.limits import Rate
from shared.config import without_password
from shared.jsonsafe import shorten
from shared.model import (
    EXECUTION_FIELDS,
    JOB_FIELDS,
    TERMINAL,
    Execution,
    Job,
    Outcome,
    Status,
    job_from_fields,
    utc_now,
)
from shared.store import transitions
from shared.store.base import (
    ActiveRuns,
    AttemptFinish,
    AttemptResult,
    AttemptStart,
    AttemptTaken,
    Closing,
    Deleted,
    DuplicateJob,
    JobNotFound,
    JobRefused,
    NewJob,
    ProgressReport,
    RateLimited,
    RunSpec,
    StartHint,
    StoreError,
    StoreUnavailable,
    TransitionRefused,
    one_run_added,
    only_answer,
)
from shared.store.claim_limits import (
    Admission,
    ClaimLimits,
    InFlight,
    KeyOwner,
    KeyReservations,
    RatePlan,
    latest,
    rated_types,
    start_allowed,
)
from shared.store.deadlocks import retry_deadlocks
from shared.store.fair_claims import Claim, Lane, Turns, fair_selection, head_of
from shared.store.transitions import ATTEMPT_ACTIVE, ATTEMPT_CLOSABLE, CANCELLABLE_VALUES, KIND_BUFFERED
from shared.store.transitions import KIND_RUN as KIND_RUN  # re-exported: loaders and tests query by kind
from shared.store.transitions import KIND_TEMPLATE as KIND_TEMPLATE
from shared.store.transitions import attempt_record_id as attempt_record_id

Document = dict[str, Any]
T = TypeVar("T")
DELETE_CHUNK = 1000  # ids per $in of a template's deletion
log = logging.getLogger("jobsched.store")
CLAIM_ORDER = [("priority", DESCENDING), ("scheduledAt", ASCENDING)]
RATE_CAS_TRIES = 20  # compare-and-sets of a type's start rate before its starts are answered StoreUnavailable
DUE_LANE_KEYS = [("status", ASCENDING), ("kind", ASCENDING), ("jobType", ASCENDING), ("tenantId", ASCENDING)]
DUPLICATE_KEY = 11000
INDEX_NOT_FOUND = 27
# What the operator's pages and counts use (browse_mongo.py). tenant_status_listing and type_counts change with
# every status change; the partial ones hold only templates, runs, completed or dead-lettered jobs.
OPERATOR_INDEXES: list[tuple[str, list[tuple[str, int]], dict[str, Any]]] = [
    ("jobs", [("tenantId", 1), ("status", 1), ("createdAt", -1), ("_id", -1)], {"name": "tenant_status_listing"}),
    ("jobs", [("tenantId", 1), ("jobType", 1), ("createdAt", -1), ("_id", -1)], {"name": "tenant_type_listing"}),
    ("jobs", [("jobType", 1), ("status", 1), ("tenantId", 1)], {"name": "type_counts"}),
    (
        "jobs",
        [("tenantId", 1), ("createdAt", -1), ("_id", -1)],
        {"name": "tenant_templates", "partialFilterExpression": {"kind": KIND_TEMPLATE}},
    ),
    (
        "jobs",
        [("templateId", 1), ("createdAt", -1), ("_id", -1)],
        {"name": "template_runs", "partialFilterExpression": {"templateId": {"$exists": True}}},
    ),
    (
        "jobs",
        [("updatedAt", 1), ("jobType", 1), ("tenantId", 1)],
        {"name": "recent_completions", "partialFilterExpression": {"status": Status.COMPLETED.value}},
    ),
    (
        "jobs",
        [("lastError", 1), ("updatedAt", -1), ("tenantId", 1)],
        {"name": "dead_letters", "partialFilterExpression": {"status": Status.DLQ.value}},
    ),
    (
        "jobs",
        [("tenantId", 1), ("lastError", 1), ("updatedAt", -1)],
        {"name": "tenant_dead_letters", "partialFilterExpression": {"status": Status.DLQ.value}},
    ),
    ("attempt_outcomes", [("outcome", 1), ("at", 1)], {"name": "recent_outcomes"}),
]
CANCEL_TRIES = 5


@contextmanager
def translate_errors() -> Iterator[None]:
    """Driver failures that mean "the database is not there" become StoreUnavailable (HTTP 503)."""
    try:
        yield
    except ConnectionFailure as exc:  # includes ServerSelectionTimeoutError and network timeouts
        raise StoreUnavailable(f"MongoDB unavailable: {exc}") from exc


class MongoJobStore:
    def __init__(self, client: MongoClient[Document], database: str, *, described: str = "") -> None:
        """`described`: where the store is, for messages (its URL without a password, and the database)."""
        self.described = described or f"MongoDB database {database}"
        self._client = client
        self._db = client[database]
        self._jobs: MongoCollection[Document] = self._db["jobs"]
        self._executions: MongoCollection[Document] = self._db["executions"]
        self._outcomes: MongoCollection[Document] = self._db["attempt_outcomes"]
        self._cancel_requests: MongoCollection[Document] = self._db["cancel_requests"]
        # A rate-limited type's starts (claim_limits.py): {_id: jobType, claimTat, startTat} in unix seconds.
        self._rates: MongoCollection[Document] = self._db["rate_limits"]
        # The same per concurrency key under a rate per key: {_id: key_rate_id(...), claimTat, startTat}.
        self._key_rates: MongoCollection[Document] = self._db["key_rate_limits"]
        # Which lanes had their turns last (fair_claims.py): the claimer's own, as only the elected scheduler claims.
        self._turns = Turns()

    @classmethod
    def connect(cls, uri: str, database: str, *, timeout_ms: int = 5000) -> MongoJobStore:
        """A store on `database`; nothing is asked of the server before the first call (so that a process
        starts while the database is down)."""
        client: MongoClient[Document] = MongoClient(
            uri,
            tz_aware=True,
            # Text that is not UTF-8 (written by other clients or older versions) reads as U+FFFD instead of
            # failing every read of its job.
            unicode_decode_error_handler="replace",
            serverSelectionTimeoutMS=timeout_ms,
            connectTimeoutMS=timeout_ms,
            socketTimeoutMS=max(timeout_ms * 6, 30_000),
        )
        return cls(client, database, described=f"{without_password(uri)} (database {database})")

    @property
    def client(self) -> MongoClient[Document]:
        """The connections, for the parts kept beside the jobs in the same database (shared/backends.py)."""
        return self._client

    @property
    def database(self) -> str:
        return self._db.name

    def close(self) -> None:
        self._client.close()

    def ensure_schema(self) -> None:
        """The unique index (it decides ownership) and every query's index; existing ones are left alone."""
        with translate_errors():
            retry_deadlocks(self._create_indexes)

    def _create_indexes(self) -> None:
        self._jobs.create_index(
            [("tenantId", ASCENDING), ("idempotencyKey", ASCENDING)], unique=True, name="tenant_idempotency_unique"
        )
        self._drop_global_idempotency_index()
        self._create_query_indexes()

    def _drop_global_idempotency_index(self) -> None:
        """A database written before idempotency keys were unique per tenant has a unique index on the key
        alone, which would refuse a key that another tenant uses. It goes once the per-tenant index exists, so
        one unique index guards every moment of the upgrade; replicas starting together may race to drop it."""
        for name, spec in self._jobs.index_information().items():
            if spec.get("unique") and [field for field, _ in spec["key"]] == ["idempotencyKey"]:
                try:
                    self._jobs.drop_index(name)
                except OperationFailure as exc:
                    if exc.code != INDEX_NOT_FOUND:
                        raise

    def _create_query_indexes(self) -> None:
        self._jobs.create_index([("status", ASCENDING), *CLAIM_ORDER], name="claim_order")
        self._jobs.create_index(
            [*DUE_LANE_KEYS, *CLAIM_ORDER, ("_id", ASCENDING)],
            name="due_lanes",
        )
        self._jobs.create_index(
            [("kind", ASCENDING), ("status", ASCENDING), ("scheduledAt", ASCENDING)], name="due_templates"
        )
        self._jobs.create_index(
            [("tenantId", ASCENDING), ("createdAt", DESCENDING), ("status", ASCENDING)],
            name="tenant_listing",
        )
        self._jobs.create_index([("templateId", ASCENDING), ("plannedAt", DESCENDING)], name="template_runs_planned")
        self._jobs.create_index([("status", ASCENDING), ("leaseExpiresAt", ASCENDING)], name="expired_attempts")
        self._jobs.create_index([("status", ASCENDING), ("updatedAt", ASCENDING)], name="finished_age")
        self._executions.create_index([("jobId", ASCENDING), ("attempt", ASCENDING)], name="job_attempts")
        self._outcomes.create_index("jobId", name="job_outcomes")
        for collection, keys, options in OPERATOR_INDEXES:
            self._db[collection].create_index(keys, **options)

    def ping(self) -> None:
        with translate_errors():
            self._db.command("ping")

    def _update(self, fields: transitions.Fields) -> Document:
        """A transition's fields as an update document: UNSET fields are removed, the rest set."""
        update: Document = {"$set": {k: v for k, v in fields.items() if v is not transitions.UNSET}}
        removed = {k: "" for k, v in fields.items() if v is transitions.UNSET}
        if removed:
            update["$unset"] = removed
        return update

    def create(self, new: NewJob) -> Job:
        doc = transitions.new_job(new, new.createdAt or utc_now())
        with translate_errors():
            try:
                result = retry_deadlocks(partial(self._jobs.insert_one, doc))
            except DuplicateKeyError as exc:
                holder = self._jobs.find_one(
                    {"tenantId": new.tenantId, "idempotencyKey": new.idempotencyKey}, {"_id": 1}
                )
                raise DuplicateJob(new.idempotencyKey, str(holder["_id"]) if holder else None) from exc
            except (WriteError, InvalidDocument, OverflowError) as exc:
                raise JobRefused(_refusal(exc)) from exc
        doc["_id"] = result.inserted_id
        return job_from_document(doc)

    def create_many(self, news: Sequence[NewJob]) -> list[Job | StoreError]:
        """One unordered insert_many: the server inserts every document it can and names the ones it refused.
        When the driver cannot encode one of them (nothing is sent then), the jobs go one create at a time."""
        now = utc_now()
        docs = [transitions.new_job(new, new.createdAt or now) for new in news]
        if not docs:
            return []
        refused: dict[int, Document] = {}
        with translate_errors():
            try:
                self._jobs.insert_many(docs, ordered=False)
            except BulkWriteError as exc:
                refused = {int(e["index"]): e for e in exc.details.get("writeErrors", [])}
            except (InvalidDocument, OverflowError):
                return [_caught(self.create, new) for new in news]
            holders = self._holders([news[i] for i, e in refused.items() if e.get("code") == DUPLICATE_KEY])
        answers: list[Job | StoreError] = []
        for i, (new, doc) in enumerate(zip(news, docs, strict=True)):
            error = refused.get(i)
            if error is None:
                answers.append(job_from_document(doc))
            elif error.get("code") == DUPLICATE_KEY:
                answers.append(DuplicateJob(new.idempotencyKey, holders.get((new.tenantId, new.idempotencyKey))))
            else:
                answers.append(JobRefused(shorten(str(error.get("errmsg", "refused by the server")), 200)))
        return answers

    def _holders(self, news: Sequence[NewJob]) -> dict[tuple[str, str], str]:
        """The ids of the jobs that hold these jobs' keys, by (tenant, key)."""
        keys_by_tenant: dict[str, list[str]] = defaultdict(list)
        for new in news:
            keys_by_tenant[new.tenantId].append(new.idempotencyKey)
        return {
            (tenant, key): job_id
            for tenant, keys in keys_by_tenant.items()
            for key, job_id in self._ids_by_key(tenant, keys).items()
        }

    def get(self, job_id: str) -> Job | None:
        if not ObjectId.is_valid(job_id):
            return None
        with translate_errors():
            doc = self._jobs.find_one({"_id": ObjectId(job_id)})
        return job_from_document(doc) if doc else None

    def cancel(self, job_id: str) -> Job:
        for _ in range(CANCEL_TRIES):  # a job that starts or stops between the read and the write is read again
            job = self.get(job_id)
            if job is None:
                raise JobNotFound(job_id)
            transitions.check_cancellable(job)
            done = self._request_cancel(job) if job.status.value in ATTEMPT_ACTIVE else self._cancel_now(job)
            if done is not None:
                return done
        current = self.get(job_id)
        if current is None:
            raise JobNotFound(job_id)
        raise TransitionRefused(current, "cancel")

    def _cancel_now(self, job: Job) -> Job | None:
        """pending|queued → cancelled; None when the job moved on meanwhile (started, or finished)."""
        now = utc_now()
        with translate_errors():
            if not job.is_template:
                # Take the next attempt before any executor can: a duplicate means one already started it.
                try:
                    self._executions.insert_one(
                        {"_id": attempt_record_id(job.id, job.next_attempt), **transitions.attempt_cancelled(job, now)}
                    )
                except DuplicateKeyError:
                    return None
            updated = self._jobs.find_one_and_update(
                {"_id": ObjectId(job.id), "status": {"$in": list(CANCELLABLE_VALUES)}},
                self._update(transitions.cancelled(now)),
                return_document=ReturnDocument.AFTER,
            )
        if updated is None:
            current = self.get(job.id) or job
            return current if current.status is Status.CANCELLED else None
        return job_from_document(updated)

    def _request_cancel(self, job: Job) -> Job | None:
        """claimed|running → cancelRequested, with the request its executor's heartbeat reads (a collection
        that holds only open requests, so the check costs the same whatever the number of jobs); None when
        the attempt ended meanwhile."""
        now = utc_now()
        with translate_errors():
            self._cancel_requests.update_one({"_id": job.id}, {"$set": {"requestedAt": now}}, upsert=True)
            doc = self._jobs.find_one_and_update(
                {"_id": ObjectId(job.id), "status": {"$in": list(ATTEMPT_ACTIVE)}},
                self._update(transitions.cancel_requested(now)),
                return_document=ReturnDocument.AFTER,
            )
            if doc is None:
                self._cancel_requests.delete_one({"_id": job.id})
                return None
        return job_from_document(doc)

    def cancel_requested(self, jobs: Sequence[Job]) -> set[str]:
        if not jobs:
            return set()
        with translate_errors():
            return {str(d["_id"]) for d in self._cancel_requests.find({"_id": {"$in": [j.id for j in jobs]}})}

    def claim_due_jobs(
        self,
        now: datetime,
        limit: int,
        job_types: Collection[str],
        due_by: datetime | None = None,
        limits: Mapping[str, ClaimLimits] | None = None,
    ) -> Claim:
        """Lanes read from the due_lanes index (fair_claims.py chooses, claim_limits.py bounds), one guarded
        update_many moving the chosen runs to queued under this claim's token, and a re-read of which ones carry the
        token only when fewer moved than were chosen (a concurrent claimer or a cancellation took some). The counts
        that bound a type are read just before: only the elected scheduler claims, so no other claim can grow them
        meanwhile."""
        if limit <= 0 or not job_types:
            return Claim()
        limits = limits or {}
        due = due_by or now
        fields = {**transitions.queued(now), "claimToken": uuid.uuid4().hex}
        with translate_errors():
            in_flight = self._counted_in_flight(sorted(t for t in job_types if t in limits))
            self._turns.in_flight(in_flight.by_tenant)
            rooms = in_flight.rooms(job_types, limits)
            rated = rated_types(job_types, limits)
            reserved = {str(d["_id"]): float(d["claimTat"]) for d in self._rates.find({"_id": {"$in": sorted(rated)}})}
            rates = RatePlan.of(rated, reserved, now.timestamp(), due.timestamp(), limit)
            rates.bound(rooms)
            full = {t for t in job_types if rooms.get(t) == 0}
            held = {t for t in full if self._jobs.find_one(due_runs_filter(due, [t]), {"_id": 1}) is not None}
            key_rates = KeyReservations(self._reserved_key_starts, now.timestamp(), due.timestamp())
            admission = Admission(limits, in_flight, key_rates)
            lanes = [
                lane
                for t in sorted(set(job_types) - full)
                for lane in self._lanes(t, due, partial(admission.full_keys, t))
            ]
            selection = fair_selection(lanes, limit, rooms, admission.admit_run, self._turns)
            found = selection.runs
            won: set[str] | None = None  # None: every run found
            if found:
                ids = [ObjectId(j.id) for j in found]
                # Still due and pending: a run rescheduled or cancelled since the find stays where it was put.
                guard = {**due_runs_filter(due, job_types), "_id": {"$in": ids}}
                if self._jobs.update_many(guard, self._update(fields)).modified_count < len(found):
                    mine = self._jobs.find({"_id": {"$in": ids}, "claimToken": fields["claimToken"]}, {"_id": 1})
                    won = {str(d["_id"]) for d in mine}
                    found = [j for j in found if j.id in won]
            self._turns.took(selection, won)
            jobs = [transitions.applied(j, fields) for j in found]
            tats, not_before = rates.reserve(jobs, now.timestamp())
            for job_type, tat in tats.items():  # only the elected scheduler writes the reservations
                self._rates.update_one({"_id": job_type}, {"$set": {"claimTat": tat}}, upsert=True)
            if key_rates.tats:
                self._key_rates.bulk_write(
                    [
                        UpdateOne({"_id": key_rate_id(owner)}, {"$set": {"claimTat": tat}}, upsert=True)
                        for owner, tat in key_rates.tats.items()
                    ],
                    ordered=False,
                )
        held |= selection.held | admission.filled
        not_before = latest(not_before, key_rates.not_before)
        return Claim(jobs, held, not_before=not_before, in_use=in_flight.active, waited=key_rates.waited)

    def _reserved_key_starts(self, owner: KeyOwner) -> float:
        doc = self._key_rates.find_one({"_id": key_rate_id(owner)}, {"claimTat": 1})
        return float(doc["claimTat"]) if doc is not None and "claimTat" in doc else 0.0

    def _rate_refusals(self, starts: Sequence[AttemptStart], now: datetime) -> list[StoreError | None]:
        """Per start, RateLimited when its type's rate, or its key's under a rate per key, leaves no start now,
        else None (its start is counted, in the order of the batch, whether or not it is then made: a start refused
        later only leaves a start unused)."""
        refusals: list[StoreError | None] = [None] * len(starts)
        by_type: dict[str, list[int]] = defaultdict(list)
        for i, start in enumerate(starts):
            if start.rate is not None:
                by_type[start.job_type].append(i)
        for job_type, members in by_type.items():
            rate = starts[members[0]].rate
            assert rate is not None
            verdicts = _counted_starts(self._rates, job_type, job_type, len(members), rate, now)
            for i, verdict in zip(members, verdicts, strict=True):
                refusals[i] = verdict
        for owner, members in self._keyed_starts(starts, refusals).items():
            rate = starts[members[0]].key_rate
            assert rate is not None
            verdicts = _counted_starts(self._key_rates, key_rate_id(owner), owner[0], len(members), rate, now)
            for i, verdict in zip(members, verdicts, strict=True):
                refusals[i] = verdict
        return refusals

    def _keyed_starts(
        self, starts: Sequence[AttemptStart], refusals: Sequence[StoreError | None]
    ) -> dict[KeyOwner, list[int]]:
        """The starts (not yet refused) under a rate per key whose job has a key, by its (type, tenant, key)."""
        keyed = {
            i: start.job_id
            for i, start in enumerate(starts)
            if start.key_rate is not None and refusals[i] is None and ObjectId.is_valid(start.job_id)
        }
        if not keyed:
            return {}
        ids = [ObjectId(job_id) for job_id in keyed.values()]
        keyed_jobs = {"_id": {"$in": ids}, "concurrencyKey": {"$ne": None}}
        owners = {
            str(d["_id"]): (str(d["tenantId"]), d["concurrencyKey"])
            for d in self._jobs.find(keyed_jobs, {"tenantId": 1, "concurrencyKey": 1})
        }
        grouped: dict[KeyOwner, list[int]] = defaultdict(list)
        for i, job_id in keyed.items():
            if job_id in owners:
                tenant, key = owners[job_id]
                grouped[(starts[i].job_type, tenant, str(key))].append(i)
        return grouped

    def in_flight_beside(self, job: Job) -> InFlight:
        with translate_errors():
            return self._counted_in_flight([job.jobType])

    def _counted_in_flight(self, job_types: Sequence[str]) -> InFlight:
        """The runs of these types claimed and not finished (few: what is queued or running now), counted."""
        if not job_types:
            return InFlight(())
        match = {"status": {"$in": [Status.QUEUED.value, *ATTEMPT_ACTIVE]}, "jobType": {"$in": list(job_types)}}
        key = {"type": "$jobType", "tenant": "$tenantId", "key": "$concurrencyKey", "status": "$status"}
        groups = self._jobs.aggregate([{"$match": match}, {"$group": {"_id": key, "n": {"$sum": 1}}}])
        return InFlight(
            (
                g["_id"]["type"],
                g["_id"]["tenant"],
                g["_id"].get("key"),
                g["_id"]["status"] == Status.QUEUED.value,
                int(g["n"]),
            )
            for g in groups
        )

    def _lanes(self, job_type: str, due: datetime, full_keys: Callable[[str], set[str]]) -> list[Lane[Job]]:
        """One lane per tenant with a pending run of the type (distinct over the due_lanes index). A lane the turns
        know takes its turn from them and is read only when the claim gets to it (a claim reads about as many
        lanes as it takes runs, not every lane); any other is read at once, for its first due run, which gives its
        turn among them, and a tenant without a due run has no lane. A lane's reads leave out the runs of its
        tenant's `full_keys` (concurrency keys at their limit)."""
        pending = {"status": Status.PENDING.value, "kind": KIND_RUN, "jobType": job_type}
        lanes: list[Lane[Job]] = []
        for tenant in self._jobs.distinct("tenantId", pending):
            due_runs = {**pending, "tenantId": tenant, "scheduledAt": {"$lte": due}}
            read = partial(self._lane_runs, due_runs, full_keys(tenant))
            if self._turns.knows((job_type, tenant)):
                lanes.append(Lane(job_type, tenant, None, read))
                continue
            first = read(None, 1)
            if first:  # read once: the lane starts with it
                head = head_of(first[0].priority, first[0].scheduledAt)
                lanes.append(Lane(job_type, tenant, head, read, buffered=first))
        return lanes

    def _lane_runs(self, lane: Document, full_keys: set[str], after: Job | None, n: int) -> list[Job]:
        """The lane's runs in claim order after `after`, at most n, none of `full_keys`."""
        parts = [lane]
        if after is not None:
            parts.append(_after_in_claim_order(after))
        if full_keys:
            parts.append({"concurrencyKey": {"$nin": sorted(full_keys)}})
        query = parts[0] if len(parts) == 1 else {"$and": parts}
        cursor = self._jobs.find(query).sort([*CLAIM_ORDER, ("_id", ASCENDING)]).limit(n)
        return [job_from_document(d) for d in cursor]

    def due_job_types(self, now: datetime) -> set[str]:
        query = {"status": Status.PENDING.value, "kind": KIND_RUN, "scheduledAt": {"$lte": now}}
        with translate_errors():
            return {str(t) for t in self._jobs.distinct("jobType", query)}

    def release_claims(self, jobs: Sequence[Job]) -> None:
        if not jobs:
            return
        with translate_errors():
            self._jobs.update_many(
                {"_id": {"$in": [ObjectId(j.id) for j in jobs]}, "status": Status.QUEUED.value},
                self._update(transitions.requeued(utc_now())),
            )

    def due_templates(self, now: datetime, limit: int) -> list[Job]:
        query = {
            "status": Status.PENDING.value,
            "kind": KIND_TEMPLATE,
            "scheduledAt": {"$lte": now},
            "paused": {"$ne": True},
        }
        with translate_errors():
            return [job_from_document(d) for d in self._jobs.find(query).sort("scheduledAt", ASCENDING).limit(limit)]

    def dead_letter_template(self, template: Job, reason: str) -> bool:
        with translate_errors():
            result = self._jobs.update_one(
                {"_id": ObjectId(template.id), "status": Status.PENDING.value},
                self._update(transitions.template_dead_lettered(reason, utc_now())),
            )
        return result.modified_count == 1

    # --- schedules --------------------------------------------------------------------------------------

    def add_run(self, template: Job, run: RunSpec) -> tuple[Job, bool]:
        return one_run_added(self, template, run)

    def add_runs(self, template: Job, runs: Sequence[RunSpec]) -> list[tuple[str, bool]]:
        now = utc_now()
        # The runs share their template's payload object: the driver encodes them in batches as it sends them.
        docs = [dict(transitions.template_run(template, run, now)) for run in runs]
        if not docs:
            return []
        taken: set[int] = set()
        with translate_errors():
            try:
                self._jobs.insert_many(docs, ordered=False)
            except BulkWriteError as exc:
                errors = exc.details.get("writeErrors", [])
                other = [e for e in errors if e.get("code") != DUPLICATE_KEY]
                if other:  # a payload the server cannot store: the same for every run of this template
                    raise JobRefused(shorten(str(other[0].get("errmsg", exc)), 200)) from exc
                # These keys' runs exist (a retry after a crash, another leader's spawn, a repeated trigger).
                taken = {e["index"] for e in errors}
            except (InvalidDocument, OverflowError) as exc:
                raise JobRefused(_refusal(exc)) from exc
            existing = self._ids_by_key(template.tenantId, [docs[i]["idempotencyKey"] for i in sorted(taken)])
        added: list[tuple[str, bool]] = []
        for i, doc in enumerate(docs):
            if i not in taken:
                added.append((str(doc["_id"]), True))
                continue
            found = existing.get(doc["idempotencyKey"])
            if found is None:  # removed since: nothing of ours to return
                raise StoreUnavailable("a run's key was taken and then vanished; retry")
            added.append((found, False))
        return added

    def _ids_by_key(self, tenant_id: str, keys: list[str]) -> dict[str, str]:
        if not keys:
            return {}
        found = self._jobs.find({"tenantId": tenant_id, "idempotencyKey": {"$in": keys}}, {"idempotencyKey": 1})
        return {d["idempotencyKey"]: str(d["_id"]) for d in found}

    def job_by_key(self, tenant_id: str, idempotency_key: str) -> Job | None:
        with translate_errors():
            doc = self._jobs.find_one({"tenantId": tenant_id, "idempotencyKey": idempotency_key})
        return job_from_document(doc) if doc else None

    def template_runs(
        self, template_id: str, statuses: Collection[Status] | None, limit: int, after_run: Job | None = None
    ) -> list[Job]:
        query: Document = {"templateId": template_id}
        if statuses is not None:
            query["status"] = {"$in": sorted(s.value for s in statuses)}
        if after_run is not None:
            query.update(_runs_after(after_run))
        order = [("plannedAt", DESCENDING), ("scheduledAt", DESCENDING), ("_id", DESCENDING)]
        with translate_errors():
            return [job_from_document(d) for d in self._jobs.find(query).sort(order).limit(max(limit, 0))]

    def buffered_runs(self, limit: int) -> list[Job]:
        query = {"kind": KIND_BUFFERED, "status": Status.BUFFERED.value}
        order = [("plannedAt", ASCENDING), ("_id", ASCENDING)]
        with translate_errors():
            return [job_from_document(d) for d in self._jobs.find(query).sort(order).limit(max(limit, 0))]

    def promote_buffered(self, run: Job, now: datetime) -> bool:
        with translate_errors():
            result = self._jobs.update_one(
                {"_id": ObjectId(run.id), "status": Status.BUFFERED.value}, self._update(transitions.promoted(now))
            )
        return result.modified_count == 1

    def update_if_unmoved(self, job: Job, fields: transitions.Fields) -> Job | None:
        with translate_errors():
            doc = self._jobs.find_one_and_update(
                {"_id": ObjectId(job.id), "status": Status.PENDING.value, "scheduledAt": job.scheduledAt},
                self._update(fields),
                return_document=ReturnDocument.AFTER,
            )
        return job_from_document(doc) if doc is not None else None

    # --- executor ---------------------------------------------------------------------------------------

    def start_attempt(
        self, job_id: str, job_type: str, worker: str, lease_until: datetime, hint: StartHint | None = None
    ) -> Job:
        if hint is None or not ObjectId.is_valid(job_id):
            return self._start_one(job_id, job_type, worker, lease_until)
        return only_answer(self.start_attempts([AttemptStart(job_id, job_type, worker, lease_until, hint)]))

    def _start_one(self, job_id: str, job_type: str, worker: str, lease_until: datetime) -> Job:
        """start_attempt without batching: read the job, insert its next attempt's record, move it to running."""
        job = self.get(job_id)
        if job is None:
            raise JobNotFound(job_id)
        transitions.check_startable(job, job_type)
        attempt = job.next_attempt
        record = _record(job.id, attempt, worker, utc_now(), lease_until)
        with translate_errors():
            try:
                self._executions.insert_one(record)
            except DuplicateKeyError as exc:
                self._repair(job, attempt)
                raise AttemptTaken(f"attempt {attempt} of job {job.id} is already taken") from exc
            try:
                doc = self._jobs.find_one_and_update(
                    {"_id": ObjectId(job.id), "attempts": job.attempts, "status": Status.QUEUED.value},
                    self._update(
                        {
                            **transitions.started(worker, record["startedAt"], lease_until),
                            "startToken": transitions.UNSET,
                        }
                    ),
                    return_document=ReturnDocument.AFTER,
                )
            except ConnectionFailure:
                started = self._settle_interrupted_start(job.id, attempt, worker)
                if started is None:
                    raise
                return started
            if doc is None:
                # The job moved on (cancelled, re-pended, finished) before the start: the attempt never ran,
                # so give it back for a delivery that matches the job's real state.
                self._give_back(record["_id"])
        if doc is None:
            raise AttemptTaken(f"job {job.id} is no longer queued for attempt {attempt}")
        return job_from_document(doc)

    def start_attempts(self, starts: Sequence[AttemptStart]) -> list[Job | StoreError]:
        """The hinted starts at once: one insert of their attempt records (ownership, as in _start_one), one
        guarded update per (claim, attempt, job type, worker) moving the won jobs queued → running under this
        batch's token, and one read of the jobs that carry it (a group of one job is moved and read by one
        findAndModify). A job that is not where its hint says (released, claimed again, cancelled, of another
        type), and a start without a hint, take the one-by-one path, which names the exact reason."""
        now = utc_now()
        token = uuid.uuid4().hex
        results: list[Job | StoreError | None] = [None] * len(starts)
        with translate_errors():
            results[:] = self._rate_refusals(starts, now)
        hinted = {
            i: s.hint
            for i, s in enumerate(starts)
            if s.hint is not None and ObjectId.is_valid(s.job_id) and results[i] is None
        }
        records = {
            i: _record(starts[i].job_id, h.attempt, starts[i].worker, now, starts[i].lease_until)
            for i, h in hinted.items()
        }
        with translate_errors():
            order = list(records)
            taken = {order[k] for k in _insert_new(self._executions, list(records.values()))}
            won = [i for i in order if i not in taken]
            try:
                groups: dict[tuple[str, int, str, str], list[int]] = defaultdict(list)
                started: dict[str, Job] = {}
                moved: list[str] = []  # moved by update_many: read back by the batch's token
                for i in won:
                    r, h = starts[i], hinted[i]
                    groups[(h.claim, h.attempt, r.job_type, r.worker)].append(i)
                for (claim, attempt, job_type, worker), members in groups.items():
                    ids = [starts[i].job_id for i in members]
                    guard = {
                        "_id": {"$in": [ObjectId(job_id) for job_id in ids]},
                        "claimToken": claim,
                        "status": Status.QUEUED.value,
                        "attempts": attempt - 1,
                        "jobType": job_type,
                    }
                    lease_until = max(starts[i].lease_until for i in members)
                    update = self._update({**transitions.started(worker, now, lease_until), "startToken": token})
                    if len(members) > 1:
                        self._jobs.update_many(guard, update)
                        moved.extend(ids)
                        continue
                    # A group of one (a lone delivery): one command moves the job and returns it.
                    doc = self._jobs.find_one_and_update(guard, update, return_document=ReturnDocument.AFTER)
                    if doc is not None:
                        started[ids[0]] = job_from_document(doc)
                started.update(self._read_started(token, moved))
                for i in won:
                    job = started.get(starts[i].job_id)
                    if job is not None:
                        results[i] = job
                        continue
                    self._give_back(records[i]["_id"])
            except ConnectionFailure as exc:  # see _settle_interrupted_start
                unavailable = StoreUnavailable(f"MongoDB unavailable: {exc}")
                for i in won:
                    r = starts[i]
                    results[i] = self._settle_interrupted_start(r.job_id, hinted[i].attempt, r.worker) or unavailable
                return [r if r is not None else unavailable for r in results]
            for i, r in enumerate(starts):  # taken, unhinted or not started above: the one-by-one path
                if results[i] is None:
                    results[i] = _caught(self._start_one, r.job_id, r.job_type, r.worker, r.lease_until)
        return [r for r in results if r is not None]

    def _read_started(self, token: str, ids: Sequence[str]) -> dict[str, Job]:
        """The jobs of `ids` that this start batch moved: those that carry its token."""
        if not ids:
            return {}
        docs = self._jobs.find({"_id": {"$in": [ObjectId(job_id) for job_id in ids]}, "startToken": token})
        return {str(d["_id"]): job_from_document(d) for d in docs}

    def _settle_interrupted_start(self, job_id: str, attempt: int, worker: str) -> Job | None:
        """A start that lost the connection after its attempt's record was inserted: the started job when its
        move to running landed after all; otherwise, with the job still queued for this attempt, the attempt
        is given back, so that the executor's retry starts it again instead of finding it taken (and leaving it
        to the reaper, which would spend the attempt as lost). Best effort: while the database stays away the
        record keeps its first lease, after which the reaper closes it."""
        try:
            doc = self._jobs.find_one({"_id": ObjectId(job_id)})
            job = job_from_document(doc) if doc else None
            if job is None or job.attempts != attempt - 1:
                return None
            if job.status is Status.RUNNING and job.claimedBy == worker:
                return job
            if job.status is Status.QUEUED:
                self._give_back(attempt_record_id(job_id, attempt))
        except ConnectionFailure:
            pass
        return None

    def _give_back(self, record_id: str) -> None:
        """Undo the start of an attempt that never ran."""
        self._executions.delete_one({"_id": record_id, "outcome": Outcome.RUNNING.value})

    def _repair(self, job: Job, attempt: int) -> None:
        """The attempt's record exists, yet the job was read as queued for it: finish what the record's writer
        did not (it stopped between two writes). A cancelled attempt makes the job cancelled again, a decided
        one has its outcome re-applied, and one whose start never reached the job is closed as lost once the
        record's lease has run out (before that, its executor may still be writing)."""
        record_id = attempt_record_id(job.id, attempt)
        record = self._executions.find_one({"_id": record_id})
        if record is None:
            return
        now = utc_now()
        if record.get("outcome") == Outcome.CANCELLED.value:
            self._jobs.update_one(
                {"_id": ObjectId(job.id), "status": {"$in": list(CANCELLABLE_VALUES)}},
                self._update(transitions.cancelled(now)),
            )
        elif self._outcomes.find_one({"_id": record_id}) is not None:
            self._close_attempt(job, Closing.lost(None, now))  # re-applies the decided outcome
        elif record.get("leaseExpiresAt", now) < now:
            reason = f"attempt {attempt} lost: its executor stopped before the job was started"
            self._close_attempt(job, Closing.lost(reason, now))

    def extend_leases(self, jobs: Sequence[Job], lease_until: datetime) -> None:
        with translate_errors():
            for job in jobs:
                self._jobs.update_one(
                    {"_id": ObjectId(job.id), "attempts": job.attempts, "status": {"$in": list(ATTEMPT_ACTIVE)}},
                    {"$set": {"leaseExpiresAt": lease_until}},
                )

    def record_progress(self, reports: Sequence[ProgressReport]) -> None:
        if not reports:
            return
        active = list(ATTEMPT_ACTIVE)
        with translate_errors():
            self._jobs.bulk_write(
                [
                    UpdateOne(
                        {"_id": ObjectId(r.job.id), "attempts": r.job.attempts, "status": {"$in": active}},
                        {"$set": {"progress": r.stored()}},
                    )
                    for r in reports
                ],
                ordered=False,
            )

    def finish_attempt(self, job: Job, result: AttemptResult) -> Job | None:
        return only_answer(self.finish_attempts([AttemptFinish(job, result)]))

    def finish_attempts(self, finishes: Sequence[AttemptFinish]) -> list[Job | StoreError | None]:
        """Successes of running attempts are closed together: one insert of their outcomes, one update of their
        jobs per worker and attempt (their records are left as inserted: the history completes them from the
        outcomes). Failures, timeouts and anything unusual are closed one by one, as they need per-job backoff."""
        results: list[Job | StoreError | None] = [None] * len(finishes)
        if not finishes:
            return results
        bulk: list[int] = []
        for i, r in enumerate(finishes):
            res = r.result
            plain_success = res.outcome is Outcome.SUCCEEDED and res.result is None and res.error is None
            if plain_success and r.job.claimedBy and r.job.status.value in ATTEMPT_ACTIVE:
                bulk.append(i)
            else:
                results[i] = _caught(self._close_attempt, r.job, Closing.of(res))
        done = {i: finishes[i].result for i in bulk}
        decisions = {
            i: _decision(finishes[i].job, Closing(r.outcome, r.finishedAt, started=r.startedAt))
            for i, r in done.items()
        }
        with translate_errors():
            taken = {bulk[k] for k in _insert_new(self._outcomes, [decisions[i] for i in bulk])}
            # The same for all: a plain success.
            fields = transitions.attempt_closed(finishes[0].job, Closing(Outcome.SUCCEEDED, utc_now()))
            groups: dict[tuple[str, str | None, int], list[int]] = defaultdict(list)
            for i in bulk:
                if i in taken:  # decided before (the reaper closed it as lost): re-apply that outcome
                    self._close_attempt(finishes[i].job, Closing(Outcome.SUCCEEDED, decisions[i]["at"]))
                    continue
                job = finishes[i].job
                groups[(job.status.value, job.claimedBy, job.attempts)].append(i)
            for (status, worker, attempts), members in groups.items():
                jobs = [finishes[i].job for i in members]
                guard: Document = {"_id": {"$in": [ObjectId(j.id) for j in jobs]}, "status": status}
                guard.update(claimedBy=worker, attempts=attempts)
                moved = self._jobs.update_many(guard, self._update(fields)).modified_count == len(members)
                for i, job in zip(members, jobs, strict=True):
                    if moved:
                        results[i] = transitions.applied(job, fields)
                    else:  # some did not move (their job changed meanwhile): apply one by one, idempotently
                        doc = self._apply_decision(job, decisions[i])
                        results[i] = job_from_document(doc) if doc else self.get(job.id)
        return results

    def _close_attempt(self, job: Job, closing: Closing) -> Job | None:
        """Decide the attempt's one outcome (first insert wins: the executor's result or the reaper's "lost"),
        then complete its record and move the job. Those two writes are repeated by every later closer with
        the decided outcome, so a failure between the writes is healed by the next sweep instead of stranding
        the job. Returns the moved job only to the closer that decided."""
        decided = _decision(job, closing)
        with translate_errors():
            try:
                self._outcomes.insert_one(decided)
                won = True
            except DuplicateKeyError:
                won = False
                decided = self._outcomes.find_one({"_id": decided["_id"]}) or decided
            doc = self._apply_decision(job, decided, closing.backoff)
        if not won:
            return None
        # A racing closer may have applied this outcome first (it re-applies the decided one): the job moved
        # all the same, and this closer, which decided it, gets the job as it is now.
        return job_from_document(doc) if doc else self.get(job.id)

    def _apply_decision(self, job: Job, decided: Document, backoff: Backoff = DEFAULT_BACKOFF) -> Document | None:
        """Complete the attempt's record and move the job as the decided outcome says; idempotent."""
        closing = _decided_closing(decided, backoff)
        outcome = closing.outcome
        record = transitions.attempt_result(closing)
        self._executions.update_one({"_id": decided["_id"]}, self._update(record))
        guard: Document = {"_id": ObjectId(job.id), "attempts": job.attempts, "status": {"$in": list(ATTEMPT_CLOSABLE)}}
        if outcome is not Outcome.SUCCEEDED and not job.cancelRequested:
            # A cancellation asked for after `job` was read wins over a retry: the retry's update excludes it.
            doc = self._jobs.find_one_and_update(
                {**guard, "cancelRequested": {"$ne": True}},
                self._update(transitions.attempt_closed(job, closing)),
                return_document=ReturnDocument.AFTER,
            )
            if doc is None:
                job = job.evolve(cancelRequested=True)
                guard["cancelRequested"] = True
        if outcome is Outcome.SUCCEEDED or job.cancelRequested:
            doc = self._jobs.find_one_and_update(
                guard,
                self._update(transitions.attempt_closed(job, closing)),
                return_document=ReturnDocument.AFTER,
            )
        if job.cancelRequested or (doc is not None and doc.get("cancelRequested")):  # also a success that won
            self._cancel_requests.delete_one({"_id": job.id})
        return doc

    def list_executions(self, job_id: str) -> list[Execution]:
        """The records, completed from their decided outcomes (a batched success leaves its record as it was
        inserted; its end, duration and error live in the outcome document)."""
        with translate_errors():
            docs = list(self._executions.find({"jobId": job_id}).sort("attempt", ASCENDING))
            decided = {d["_id"]: d for d in self._outcomes.find({"jobId": job_id})}
        executions = []
        for doc in docs:
            outcome = decided.get(doc["_id"])
            if outcome is not None and doc.get("finishedAt") is None:
                doc = {**doc, **transitions.attempt_result(_decided_closing(outcome))}
            executions.append(_to_execution(doc))
        return executions

    def redrive(self, job_id: str) -> Job:
        job = self.get(job_id)
        if job is None:
            raise JobNotFound(job_id)
        transitions.check_redrivable(job)
        now = utc_now()
        with translate_errors():
            doc = self._jobs.find_one_and_update(
                {"_id": ObjectId(job.id), "status": Status.DLQ.value, "attempts": job.attempts},
                self._update(transitions.redriven(job, now)),
                return_document=ReturnDocument.AFTER,
            )
        if doc is None:
            raise TransitionRefused(self.get(job_id) or job, "retry")
        return job_from_document(doc)

    def delete(self, job_id: str) -> Deleted:
        job = self.get(job_id)
        if job is None:
            raise JobNotFound(job_id)
        transitions.check_deletable(job)
        finished = {"$in": [s.value for s in TERMINAL]}
        runs: list[ObjectId] = []
        with translate_errors():
            if job.is_template:
                # A finished template spawns no more runs, and its status never changes again: its runs first,
                # so that a crash in between leaves the template to delete again, never runs without it.
                found = list(self._jobs.find({"templateId": job.id}, {"status": 1}))
                active = sum(Status(d["status"]) not in TERMINAL for d in found)
                if active:
                    raise ActiveRuns(job, active)
                runs = [d["_id"] for d in found]
                for start in range(0, len(runs), DELETE_CHUNK):
                    self._jobs.delete_many({"_id": {"$in": runs[start : start + DELETE_CHUNK]}, "status": finished})
                # A run re-driven meanwhile is not finished and stays, with its records.
                kept = {d["_id"] for d in self._jobs.find({"_id": {"$in": runs}}, {"_id": 1})}
                runs = [r for r in runs if r not in kept]
            if self._jobs.delete_one({"_id": ObjectId(job.id), "status": finished}).deleted_count == 0:
                raise TransitionRefused(self.get(job_id) or job, "delete")
            # Records last: a crash before this leaves records no job points to, never a job without them.
            ids = [job.id, *(str(r) for r in runs)]
            for start in range(0, len(ids), DELETE_CHUNK):
                chunk = ids[start : start + DELETE_CHUNK]
                self._executions.delete_many({"jobId": {"$in": chunk}})
                self._outcomes.delete_many({"jobId": {"$in": chunk}})
                self._cancel_requests.delete_many({"_id": {"$in": chunk}})
        return Deleted(job, len(runs))

    # --- reaper -----------------------------------------------------------------------------------------

    def release_stale_claims(self, queued_before: datetime) -> int:
        with translate_errors():
            result = self._jobs.update_many(
                {"status": Status.QUEUED.value, "queuedAt": {"$lt": queued_before}},
                self._update(transitions.requeued(utc_now())),
            )
        return int(result.modified_count)

    def prune_key_rates(self, now: datetime, limit: int) -> int:
        behind = {"claimTat": {"$lte": now.timestamp()}, "startTat": {"$lte": now.timestamp()}}
        with translate_errors():
            found = [d["_id"] for d in self._key_rates.find(behind, {"_id": 1}).limit(max(limit, 0))]
            if not found:
                return 0
            # Still behind: a key whose start or claim came meanwhile keeps its times.
            return int(self._key_rates.delete_many({"_id": {"$in": found}, **behind}).deleted_count)

    def delete_finished(self, status: Status, finished_before: datetime, limit: int) -> int:
        """The jobs first, each still as found (a job re-driven meanwhile stays), then the records of those that
        went: a crash in between leaves records no job points to, never a job without its history."""
        if status not in TERMINAL:
            raise ValueError(f"only finished jobs are deleted by age, not {status.value} ones")
        if limit <= 0:
            return 0
        aged = {"status": status.value, "updatedAt": {"$lt": finished_before}, "kind": {"$ne": KIND_TEMPLATE}}
        with translate_errors():
            found = [d["_id"] for d in self._jobs.find(aged, {"_id": 1}).sort("updatedAt", ASCENDING).limit(limit)]
            if not found:
                return 0
            self._jobs.delete_many({"_id": {"$in": found}, **aged})
            kept = {d["_id"] for d in self._jobs.find({"_id": {"$in": found}}, {"_id": 1})}
            gone = [str(i) for i in found if i not in kept]
            self._executions.delete_many({"jobId": {"$in": gone}})
            self._outcomes.delete_many({"jobId": {"$in": gone}})
            self._cancel_requests.delete_many({"_id": {"$in": gone}})
        return len(gone)

    def expired_attempts(self, now: datetime, limit: int) -> list[Job]:
        query = {"status": {"$in": list(ATTEMPT_ACTIVE)}, "leaseExpiresAt": {"$lt": now}}
        with translate_errors():
            return [job_from_document(d) for d in self._jobs.find(query).sort("leaseExpiresAt", ASCENDING).limit(limit)]

    def recover_attempt(self, job: Job, reason: str, backoff: Backoff = DEFAULT_BACKOFF) -> Job | None:
        return self._close_attempt(job, Closing.lost(reason, utc_now(), backoff))


def _caught(step: Callable[..., T], *args: Any) -> T | StoreError:
    """A batch member's result, or the store error it ended with (the batch's other members go on)."""
    try:
        return step(*args)
    except StoreError as exc:
        return exc
    except Exception as exc:  # a bug or an untranslated driver error: this member's, not the whole batch's
        log.exception("batch member failed", extra={"action": "store_batch_member_error"})
        return StoreError(f"{type(exc).__name__}: {exc}")


def _runs_after(run: Job) -> Document:
    """The filter for the runs listed after `run` in template_runs' order (MongoDB sorts a missing plannedAt
    lowest, so runs without one come last)."""
    same_planned: list[Document] = [
        {"scheduledAt": {"$lt": run.scheduledAt}},
        {"scheduledAt": run.scheduledAt, "_id": {"$lt": ObjectId(run.id)}},
    ]
    if run.plannedAt is None:
        return {"plannedAt": None, "$or": same_planned}
    return {
        "$or": [
            {"plannedAt": None},
            {"plannedAt": {"$lt": run.plannedAt}},
            {"plannedAt": run.plannedAt, "$or": same_planned},
        ]
    }


def _decision(job: Job, closing: Closing) -> Document:
    """The attempt-outcome document whose insert decides how attempt `job.next_attempt` ended."""
    decided: Document = {
        "_id": attempt_record_id(job.id, job.next_attempt),
        "jobId": job.id,
        "outcome": closing.outcome.value,
        "error": closing.error,
        "at": closing.at,
        "startedAt": closing.started,
    }
    if closing.traceback is not None:
        decided["traceback"] = closing.traceback
    if closing.result is not None:
        decided["result"] = closing.result
    if closing.snooze is not None:
        decided["snoozeSeconds"] = closing.snooze.total_seconds()
    if closing.final:
        decided["final"] = True
    if closing.retry_after is not None:
        decided["retryAfterSeconds"] = closing.retry_after.total_seconds()
    return decided


def _decided_closing(decided: Document, backoff: Backoff = DEFAULT_BACKOFF) -> Closing:
    """The closing an attempt-outcome document decided (its inverse of _decision), with the type's backoff."""
    snooze, retry_after = decided.get("snoozeSeconds"), decided.get("retryAfterSeconds")
    return Closing(
        Outcome(decided["outcome"]),
        decided["at"],
        decided.get("error"),
        decided.get("startedAt"),
        decided.get("traceback"),
        backoff,
        decided.get("result"),
        timedelta(seconds=snooze) if snooze is not None else None,
        bool(decided.get("final")),
        timedelta(seconds=retry_after) if retry_after is not None else None,
    )


def _insert_new(collection: MongoCollection[Document], docs: Sequence[Document]) -> set[int]:
    """Insert documents keyed by unique ids in one call; return the positions that already existed."""
    if not docs:
        return set()
    try:
        collection.insert_many(docs, ordered=False)
    except BulkWriteError as exc:
        errors = exc.details.get("writeErrors", [])
        if any(e.get("code") != DUPLICATE_KEY for e in errors) or not errors:
            raise
        return {int(e["index"]) for e in errors}
    return set()


def _record(job_id: str, attempt: int, worker: str, now: datetime, lease_until: datetime) -> Document:
    """An attempt's execution record, with the attempt's first lease, which only _repair reads (the job's lease is
    the one the reaper reads and extend_leases extends)."""
    return {
        "_id": attempt_record_id(job_id, attempt),
        **transitions.attempt_started(job_id, attempt, worker, now),
        "leaseExpiresAt": lease_until,
    }


def _to_execution(doc: Document) -> Execution:
    values: Document = {k: doc.get(k) for k in EXECUTION_FIELDS}
    return Execution(**{**values, "id": str(doc["_id"]), "outcome": Outcome(doc["outcome"])})


def _refusal(exc: Exception) -> str:
    """The server's (or the driver's) reason for refusing a document, short: it may quote the document."""
    reason = exc.details.get("errmsg") if isinstance(exc, WriteError) and exc.details else None
    return shorten(str(reason or exc), 200)


def due_runs_filter(now: datetime, job_types: Collection[str]) -> Document:
    """The due one-off runs of these job types (templates are never claimed)."""
    return {
        "status": Status.PENDING.value,
        "kind": KIND_RUN,
        "scheduledAt": {"$lte": now},
        "jobType": {"$in": sorted(job_types)},
    }


def key_rate_id(owner: KeyOwner) -> Document:
    """A concurrency key's start-rate document's _id (its fields always in this order: _id matches whole)."""
    job_type, tenant, key = owner
    return {"jobType": job_type, "tenantId": tenant, "key": key}


def _counted_starts(
    rates: MongoCollection[Document], doc_id: Any, job_type: str, starts: int, rate: Rate, now: datetime
) -> list[StoreError | None]:
    """`starts` starts of `job_type` at `now` counted against the rate whose times are the document `doc_id` of
    `rates`: per start, None or RateLimited. One compare-and-set of the document, repeated when another executor's
    came first."""
    for _ in range(RATE_CAS_TRIES):
        doc = rates.find_one({"_id": doc_id})
        seen = float(doc["startTat"]) if doc is not None and "startTat" in doc else None
        tat = seen or 0.0
        verdicts: list[StoreError | None] = []
        for _i in range(starts):
            allowed, value = start_allowed(tat, now.timestamp(), rate)
            verdicts.append(None if allowed else RateLimited(job_type, datetime.fromtimestamp(value, UTC)))
            tat = value if allowed else tat
        swapped = rates.update_one({"_id": doc_id, "startTat": seen}, {"$set": {"startTat": tat}})
        first = {"_id": doc_id, "claimTat": 0.0, "startTat": tat}
        if swapped.matched_count or (doc is None and _inserted(rates, first)):
            return verdicts
    return [StoreUnavailable(f"{job_type}: its start rate is contended; retry")] * starts


def _inserted(collection: MongoCollection[Document], doc: Document) -> bool:
    """Insert `doc`; False when its _id exists (another writer came first)."""
    try:
        collection.insert_one(doc)
    except DuplicateKeyError:
        return False
    return True


def _after_in_claim_order(run: Job) -> Document:
    """The runs after `run` in claim order (priority desc, scheduledAt asc, _id asc)."""
    return {
        "$or": [
            {"priority": {"$lt": run.priority}},
            {"priority": run.priority, "scheduledAt": {"$gt": run.scheduledAt}},
            {"priority": run.priority, "scheduledAt": run.scheduledAt, "_id": {"$gt": ObjectId(run.id)}},
        ]
    }


def job_from_document(doc: Document) -> Job:
    """The Job a stored job document holds."""
    values = {k: v for k, v in doc.items() if k in JOB_FIELDS}
    values["id"] = str(doc["_id"])
    values["status"] = Status(doc["status"])
    return job_from_fields(values)
