"""JobStore on MongoDB (pymongo), written for MongoDB itself.

Ownership is decided by conditional updates of the job document, which the server applies atomically (an
attempt's start and outcome: attempts.py); the one insert that decides is a create's, into the unique idempotency
key. Every query is served by an index (migrations.py). The claim's queries are in claims.py, the starts and
finishes of attempts in attempts.py; the rest of the protocol is here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from functools import partial

from bson import ObjectId
from bson.errors import InvalidDocument
from pymongo import ASCENDING, DESCENDING, ReturnDocument, UpdateOne
from pymongo.errors import BulkWriteError, DuplicateKeyError, WriteError

from jobsched.handlers import ParentResult
from shared.batches import BatchView, MemberResult, MembersPage
from shared.jsonsafe import shorten
from shared.model import TERMINAL, Execution, Job, Status, utc_now
from shared.store import transitions
from shared.store.base import (
    AttemptFinish,
    AttemptResult,
    AttemptStart,
    Deleted,
    DuplicateJob,
    JobNotFound,
    JobRefused,
    NewBatch,
    NewJob,
    NewWorkflow,
    ProgressReport,
    RunSpec,
    StoreError,
    StoreUnavailable,
    TransitionRefused,
    one_run_added,
    only_answer,
)
from shared.store.claim_limits import ClaimLimits, InFlight
from shared.store.claiming import claim_due_runs
from shared.store.deadlocks import is_deadlock, is_deadlock_answer, key_lock, retry_deadlocks
from shared.store.emptied_records import EmptiedRecords, Group
from shared.store.fair_claims import Claim, Turns
from shared.store.history import unix_minute
from shared.store.mongo import attempts, batches, claims, dependencies, groups, minutes, schema
from shared.store.mongo import workflows as stored_workflows
from shared.store.mongo.claims import MongoClaimPort
from shared.store.mongo.codecs import (
    WITHOUT_HISTORY,
    closing_update,
    executions_of,
    job_document,
    job_from_document,
    read_job,
    update_document,
)
from shared.store.mongo.database import DUPLICATE_KEY, Document, MongoDatabase, caught, translate_errors
from shared.store.transitions import (
    ATTEMPT_ACTIVE,
    CANCELLABLE_VALUES,
    KIND_BUFFERED,
    KIND_RUN,
    KIND_TEMPLATE,
)
from shared.workflows import WorkflowView

DELETE_CHUNK = 1000  # ids per $in of a template's deletion
CANCEL_TRIES = 5


class MongoJobStore:
    def __init__(self, database: MongoDatabase) -> None:
        self.database = database  # its client and collections, shared by the parts kept beside the jobs
        # Which lanes had their turns last (fair_claims.py): the claimer's own, as only the elected scheduler claims.
        self._turns = Turns()
        self._claims = MongoClaimPort(database, self._turns)
        self._batches_after: str | None = None  # where the reaper's next check of firing batches starts
        self._emptied = EmptiedRecords()  # where retention's next look at workflows' and batches' records starts
        self._sampled_minute = -1  # the history's last minute whose backlog this store sampled (sample_backlog)

    @classmethod
    def connect(cls, uri: str, database: str, *, timeout_ms: int = 5000) -> MongoJobStore:
        """A store on `database` (MongoDatabase.connect): nothing is asked of the server before the first call."""
        return cls(MongoDatabase.connect(uri, database, timeout_ms=timeout_ms))

    def close(self) -> None:
        self.database.close()

    def ensure_schema(self) -> None:
        """The database's pending migrations (schema.py): the unique index that decides ownership, every query's
        index; SchemaTooNew for a database a later jobsched migrated."""
        schema.ensure_schema(self.database)

    def ping(self) -> None:
        self.database.ping()

    def create(self, new: NewJob) -> Job:
        if new.dependsOn:
            return dependencies.create_waiting(self.database, new, partial(self._insert, new))
        return self._insert(new)

    def _insert(self, new: NewJob) -> Job:
        doc = job_document(transitions.new_job(new, new.createdAt or utc_now()))
        with translate_errors(), key_lock(new.tenantId, new.idempotencyKey):
            try:
                result = retry_deadlocks(
                    partial(self.database.jobs.insert_one, doc), before_retry=partial(self._refuse_if_held, new)
                )
            except DuplicateKeyError as exc:
                raise DuplicateJob(new.idempotencyKey, self._holder(new)) from exc
            except WriteError as exc:
                if is_deadlock(exc):
                    raise StoreUnavailable(f"the job store stayed deadlocked: {exc}") from exc
                raise JobRefused(_refusal(exc)) from exc
            except (InvalidDocument, OverflowError) as exc:
                raise JobRefused(_refusal(exc)) from exc
        doc["_id"] = result.inserted_id
        return job_from_document(doc)

    def _holder(self, new: NewJob) -> str | None:
        """The id of the job that holds this job's (tenant, key)."""
        return self._ids_by_key(new.tenantId, [new.idempotencyKey]).get(new.idempotencyKey)

    def _refuse_if_held(self, new: NewJob) -> None:
        """DuplicateJob when another create took this job's key while this one was a deadlock's victim."""
        holder = self._holder(new)
        if holder is not None:
            raise DuplicateJob(new.idempotencyKey, holder)

    def create_many(self, news: Sequence[NewJob]) -> list[Job | StoreError]:
        """One unordered insert_many: the server inserts every document it can and names the ones it refused.
        When the driver cannot encode one of them (nothing is sent then), the jobs go one create at a time."""
        if any(new.dependsOn for new in news):  # each checks and marks its parents: one create at a time
            return [caught(self.create, new) for new in news]
        now = utc_now()
        docs = [job_document(transitions.new_job(new, new.createdAt or now)) for new in news]
        if not docs:
            return []
        refused: dict[int, Document] = {}
        with translate_errors():
            try:
                self.database.jobs.insert_many(docs, ordered=False)
            except BulkWriteError as exc:
                refused = {int(e["index"]): e for e in exc.details.get("writeErrors", [])}
            except (InvalidDocument, OverflowError):
                return [caught(self.create, new) for new in news]
            holders = self._holders([news[i] for i, e in refused.items() if e.get("code") == DUPLICATE_KEY])
        answers: list[Job | StoreError] = []
        for i, (new, doc) in enumerate(zip(news, docs, strict=True)):
            error = refused.get(i)
            if error is None:
                answers.append(job_from_document(doc))
            elif error.get("code") == DUPLICATE_KEY:
                answers.append(DuplicateJob(new.idempotencyKey, holders.get((new.tenantId, new.idempotencyKey))))
            elif is_deadlock_answer(error.get("code"), error.get("errmsg")):
                answers.append(caught(self.create, new))  # one create at a time, retried (store/deadlocks.py)
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

    def create_workflow(self, new: NewWorkflow) -> WorkflowView:
        return stored_workflows.create(self.database, new)

    def workflow(self, workflow_id: str) -> WorkflowView | None:
        return stored_workflows.read(self.database, workflow_id)

    def workflow_by_key(self, tenant_id: str, idempotency_key: str) -> WorkflowView | None:
        return stored_workflows.by_key(self.database, tenant_id, idempotency_key)

    def workflows(self, tenant_id: str, limit: int, before: str | None = None) -> list[WorkflowView]:
        return stored_workflows.listing(self.database, tenant_id, limit, before)

    def settle_workflows(self, created_before: datetime, limit: int) -> int:
        return stored_workflows.settle_creating(self.database, created_before, limit)

    def create_batch(self, new: NewBatch) -> BatchView:
        return batches.create(self.database, new)

    def add_to_batch(self, batch_id: str, news: Sequence[NewJob]) -> list[Job | StoreError]:
        return batches.add(self.database, batch_id, news, self.create_many)

    def seal_batch(self, batch_id: str) -> BatchView:
        return batches.seal(self.database, batch_id)

    def batch(self, batch_id: str) -> BatchView | None:
        return batches.read(self.database, batch_id)

    def batches(self, tenant_id: str, limit: int, before: str | None = None) -> list[BatchView]:
        return batches.listing(self.database, tenant_id, limit, before)

    def batch_members(
        self, batch_id: str, after: MemberResult | None, limit: int, *, status: str | None = None, results: bool = True
    ) -> list[MemberResult]:
        return batches.members(self.database, batch_id, MembersPage(after, limit, status, results))

    def settle_batches(self, limit: int) -> int:
        looked, self._batches_after = batches.settle(self.database, limit, self._batches_after)
        return looked

    def delete_emptied_groups(self, created_before: datetime, limit: int) -> tuple[int, bool]:
        def delete_some(group: Group, after: str | None) -> tuple[int, str | None]:
            return groups.delete_emptied(self.database, group, created_before, limit, after)

        with translate_errors():
            return self._emptied.sweep(delete_some)

    def get(self, job_id: str) -> Job | None:
        return read_job(self.database, job_id)

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
            # The attempt that will not run is in the history (a template has no attempts of its own).
            fields = transitions.cancelled(now)
            cancelled = {"attempt": job.next_attempt, **transitions.attempt_cancelled(now)}
            update = update_document(fields) if job.is_template else closing_update(fields, cancelled)
            updated = self.database.jobs.find_one_and_update(
                {"_id": ObjectId(job.id), "status": {"$in": list(CANCELLABLE_VALUES)}},
                update,
                projection=WITHOUT_HISTORY,
                return_document=ReturnDocument.AFTER,
            )
        if updated is None:
            current = self.get(job.id) or job
            return current if current.status is Status.CANCELLED else None
        cancelled_job = job_from_document(updated)
        dependencies.settle_dependents(self.database, [cancelled_job])
        batches.ended(self.database, [cancelled_job])
        return cancelled_job

    def _request_cancel(self, job: Job) -> Job | None:
        """claimed|running → cancelRequested, with the request its executor's heartbeat reads (a collection
        that holds only open requests, so the check costs the same whatever the number of jobs); None when
        the attempt ended meanwhile."""
        now = utc_now()
        with translate_errors():
            self.database.cancel_requests.update_one({"_id": job.id}, {"$set": {"requestedAt": now}}, upsert=True)
            doc = self.database.jobs.find_one_and_update(
                {"_id": ObjectId(job.id), "status": {"$in": list(ATTEMPT_ACTIVE)}},
                update_document(transitions.cancel_requested(now)),
                projection=WITHOUT_HISTORY,
                return_document=ReturnDocument.AFTER,
            )
            if doc is None:
                self.database.cancel_requests.delete_one({"_id": job.id})
                return None
        return job_from_document(doc)

    def cancel_requested(self, jobs: Sequence[Job]) -> set[str]:
        if not jobs:
            return set()
        with translate_errors():
            return {str(d["_id"]) for d in self.database.cancel_requests.find({"_id": {"$in": [j.id for j in jobs]}})}

    def claim_due_jobs(
        self,
        now: datetime,
        limit: int,
        job_types: Collection[str],
        due_by: datetime | None = None,
        limits: Mapping[str, ClaimLimits] | None = None,
    ) -> Claim:
        return claim_due_runs(self._claims, self._turns, now, limit, job_types, due_by, limits)

    def in_flight_beside(self, job: Job) -> InFlight:
        with translate_errors():
            return claims.counted_in_flight(self.database, [job.jobType], utc_now())

    def due_job_types(self, now: datetime) -> set[str]:
        query = {"status": Status.PENDING.value, "kind": KIND_RUN, "scheduledAt": {"$lte": now}}
        with translate_errors():
            return {str(t) for t in self.database.jobs.distinct("jobType", query)}

    def release_claims(self, jobs: Sequence[Job]) -> None:
        if not jobs:
            return
        with translate_errors():
            self.database.jobs.update_many(
                {"_id": {"$in": [ObjectId(j.id) for j in jobs]}, "status": Status.QUEUED.value},
                update_document(transitions.requeued(utc_now())),
            )

    def due_templates(self, now: datetime, limit: int) -> list[Job]:
        query = {
            "status": Status.PENDING.value,
            "kind": KIND_TEMPLATE,
            "scheduledAt": {"$lte": now},
            "paused": {"$ne": True},
        }
        with translate_errors():
            return [
                job_from_document(d)
                for d in self.database.jobs.find(query, WITHOUT_HISTORY).sort("scheduledAt", ASCENDING).limit(limit)
            ]

    def dead_letter_template(self, template: Job, reason: str) -> bool:
        with translate_errors():
            result = self.database.jobs.update_one(
                {"_id": ObjectId(template.id), "status": Status.PENDING.value},
                update_document(transitions.template_dead_lettered(reason, utc_now())),
            )
        return result.modified_count == 1

    # --- schedules --------------------------------------------------------------------------------------

    def add_run(self, template: Job, run: RunSpec) -> tuple[Job, bool]:
        return one_run_added(self, template, run)

    def add_runs(self, template: Job, runs: Sequence[RunSpec]) -> list[tuple[str, bool]]:
        now = utc_now()
        # The runs share their template's payload object: the driver encodes them in batches as it sends them.
        docs = [job_document(transitions.template_run(template, run, now)) for run in runs]
        if not docs:
            return []
        taken: set[int] = set()
        with translate_errors():
            try:
                self.database.jobs.insert_many(docs, ordered=False)
            except BulkWriteError as exc:
                errors = exc.details.get("writeErrors", [])
                aborted = {e["index"] for e in errors if is_deadlock_answer(e.get("code"), e.get("errmsg"))}
                other = [e for e in errors if e.get("code") != DUPLICATE_KEY and e["index"] not in aborted]
                if other:  # a payload the server cannot store: the same for every run of this template
                    raise JobRefused(shorten(str(other[0].get("errmsg", exc)), 200)) from exc
                # These keys' runs exist (a retry after a crash, another leader's spawn, a repeated trigger).
                taken = {e["index"] for e in errors if e["index"] not in aborted}
                taken |= {i for i in sorted(aborted) if not self._inserted_alone(docs[i])}
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

    def _inserted_alone(self, doc: Document) -> bool:
        """A run whose insert a deadlock aborted (FerretDB 2: store/deadlocks.py), inserted again on its own, as a
        create is; False when its key is taken meanwhile."""
        with key_lock(str(doc["tenantId"]), str(doc["idempotencyKey"])):
            try:
                retry_deadlocks(partial(self.database.jobs.insert_one, doc))
            except DuplicateKeyError:
                return False
        return True

    def _ids_by_key(self, tenant_id: str, keys: list[str]) -> dict[str, str]:
        if not keys:
            return {}
        found = self.database.jobs.find({"tenantId": tenant_id, "idempotencyKey": {"$in": keys}}, {"idempotencyKey": 1})
        return {d["idempotencyKey"]: str(d["_id"]) for d in found}

    def job_by_key(self, tenant_id: str, idempotency_key: str) -> Job | None:
        with translate_errors():
            doc = self.database.jobs.find_one(
                {"tenantId": tenant_id, "idempotencyKey": idempotency_key}, WITHOUT_HISTORY
            )
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
            return [
                job_from_document(d)
                for d in self.database.jobs.find(query, WITHOUT_HISTORY).sort(order).limit(max(limit, 0))
            ]

    def buffered_runs(self, limit: int) -> list[Job]:
        query = {"kind": KIND_BUFFERED, "status": Status.BUFFERED.value}
        order = [("plannedAt", ASCENDING), ("_id", ASCENDING)]
        with translate_errors():
            return [
                job_from_document(d)
                for d in self.database.jobs.find(query, WITHOUT_HISTORY).sort(order).limit(max(limit, 0))
            ]

    def promote_buffered(self, run: Job, now: datetime) -> bool:
        with translate_errors():
            result = self.database.jobs.update_one(
                {"_id": ObjectId(run.id), "status": Status.BUFFERED.value}, update_document(transitions.promoted(now))
            )
        return result.modified_count == 1

    def update_if_unmoved(self, job: Job, fields: transitions.Fields) -> Job | None:
        with translate_errors():
            doc = self.database.jobs.find_one_and_update(
                {"_id": ObjectId(job.id), "status": Status.PENDING.value, "scheduledAt": job.scheduledAt},
                update_document(fields),
                projection=WITHOUT_HISTORY,
                return_document=ReturnDocument.AFTER,
            )
        return job_from_document(doc) if doc is not None else None

    # --- executor ---------------------------------------------------------------------------------------

    def start_attempts(self, starts: Sequence[AttemptStart]) -> list[Job | StoreError]:
        """attempts.start_attempts: the hinted starts at once, the rest one by one."""
        return attempts.start_attempts(self.database, starts)

    def extend_leases(self, jobs: Sequence[Job], lease_until: datetime) -> None:
        with translate_errors():
            for job in jobs:
                self.database.jobs.update_one(
                    {"_id": ObjectId(job.id), "attempts": job.attempts, "status": {"$in": list(ATTEMPT_ACTIVE)}},
                    {"$set": {"leaseExpiresAt": lease_until}},
                )

    def results_of(self, job_ids: Sequence[str]) -> dict[str, ParentResult]:
        by_id = {ObjectId(job_id): job_id for job_id in job_ids if ObjectId.is_valid(job_id)}
        with translate_errors():
            docs = self.database.jobs.find({"_id": {"$in": list(by_id)}}, {"step": 1, "result": 1})
            return {by_id[doc["_id"]]: ParentResult(doc.get("step"), doc.get("result")) for doc in docs}

    def record_progress(self, reports: Sequence[ProgressReport]) -> None:
        if not reports:
            return
        active = list(ATTEMPT_ACTIVE)
        with translate_errors():
            self.database.jobs.bulk_write(
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
        """attempts.finish_attempts: plain successes closed together, anything else one by one."""
        return attempts.finish_attempts(self.database, finishes)

    def list_executions(self, job_id: str) -> list[Execution]:
        """The job's last HISTORY_KEPT attempts, from its history and (while one is open) its own fields."""
        if not ObjectId.is_valid(job_id):
            return []
        fields = {"status": 1, "attempts": 1, "claimedBy": 1, "claimedAt": 1, "history": 1}
        with translate_errors():
            doc = self.database.jobs.find_one({"_id": ObjectId(job_id)}, fields)
        return executions_of(doc) if doc else []

    def redrive(self, job_id: str) -> Job:
        job = self.get(job_id)
        if job is None:
            raise JobNotFound(job_id)
        transitions.check_redrivable(job)
        now = utc_now()
        with translate_errors():
            fields = transitions.redriven(job, now) | dependencies.mark_again(self.database, job.id, now)
            doc = self.database.jobs.find_one_and_update(
                {"_id": ObjectId(job.id), "status": Status.DLQ.value, "attempts": job.attempts},
                update_document(fields),
                projection=WITHOUT_HISTORY,
                return_document=ReturnDocument.AFTER,
            )
        if doc is None:
            raise TransitionRefused(self.get(job_id) or job, "retry")
        redriven = job_from_document(doc)
        batches.redriven(self.database, redriven)
        return redriven

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
                found = list(self.database.jobs.find({"templateId": job.id}, {"status": 1}))
                transitions.check_runs_ended(job, (d["status"] for d in found))
                runs = [d["_id"] for d in found]
                deleted = 0
                for start in range(0, len(runs), DELETE_CHUNK):
                    deleted += self.database.jobs.delete_many(
                        {"_id": {"$in": runs[start : start + DELETE_CHUNK]}, "status": finished}
                    ).deleted_count
                # A run re-driven meanwhile is not finished and stays.
                kept = self._kept(runs, deleted)
                runs = [r for r in runs if r not in kept]
            if self.database.jobs.delete_one({"_id": ObjectId(job.id), "status": finished}).deleted_count == 0:
                raise TransitionRefused(self.get(job_id) or job, "delete")
            # Open cancellation requests last: a crash before this leaves requests no job points to.
            ids = [job.id, *(str(r) for r in runs)]
            for start in range(0, len(ids), DELETE_CHUNK):
                self.database.cancel_requests.delete_many({"_id": {"$in": ids[start : start + DELETE_CHUNK]}})
        return Deleted(job, len(runs))

    def _kept(self, ids: Sequence[ObjectId], deleted: int) -> set[ObjectId]:
        """Which of the jobs a guarded delete_many was sent for are still there, after it deleted `deleted` of
        them: none when it deleted them all, so the common case needs no read (and a read of many ids that left
        one out, which FerretDB 2 was seen to do under load, cannot count a job that stayed as deleted)."""
        if deleted >= len(ids):
            return set()
        return {d["_id"] for d in self.database.jobs.find({"_id": {"$in": list(ids)}}, {"_id": 1})}

    # --- reaper -----------------------------------------------------------------------------------------

    def release_stale_claims(self, queued_before: datetime) -> int:
        # Served by status_counts: the queued jobs' entries, their queuedAt compared in the index.
        with translate_errors():
            result = self.database.jobs.update_many(
                {"status": Status.QUEUED.value, "queuedAt": {"$lt": queued_before}},
                update_document(transitions.requeued(utc_now())),
            )
        return int(result.modified_count)

    def sample_backlog(self, now: datetime) -> bool:
        minute = unix_minute(now)
        if minute == self._sampled_minute:
            return False
        with translate_errors():
            minutes.sample_backlog(self.database.minutes.collection, self.database.jobs, now, minute)
        self._sampled_minute = minute
        return True

    def prune_key_rates(self, now: datetime, limit: int) -> int:
        behind = {"claimTat": {"$lte": now.timestamp()}, "startTat": {"$lte": now.timestamp()}}
        with translate_errors():
            found = [d["_id"] for d in self.database.key_rates.find(behind, {"_id": 1}).limit(max(limit, 0))]
            if not found:
                return 0
            # Still behind: a key whose start or claim came meanwhile keeps its times.
            return int(self.database.key_rates.delete_many({"_id": {"$in": found}, **behind}).deleted_count)

    def delete_finished(self, status: Status, finished_before: datetime, limit: int) -> int:
        """The jobs, each still as found (a job re-driven meanwhile stays; its history goes with it), then any open
        cancellation request of those that went (a crash in between leaves requests no job points to)."""
        transitions.check_ages_out(status)
        if limit <= 0:
            return 0
        aged = {"status": status.value, "updatedAt": {"$lt": finished_before}, "kind": {"$ne": KIND_TEMPLATE}}
        with translate_errors():
            found = [
                d["_id"] for d in self.database.jobs.find(aged, {"_id": 1}).sort("updatedAt", ASCENDING).limit(limit)
            ]
            if not found:
                return 0
            deleted = self.database.jobs.delete_many({"_id": {"$in": found}, **aged}).deleted_count
            kept = self._kept(found, deleted)
            gone = [str(i) for i in found if i not in kept]
            self.database.cancel_requests.delete_many({"_id": {"$in": gone}})
        return len(gone)

    def expired_attempts(self, now: datetime, limit: int) -> list[Job]:
        """One read per attempt status, each served by that status's partial index of leases (claimed_leases,
        running_leases), merged in lease order."""
        expired: list[Job] = []
        with translate_errors():
            for status in sorted(ATTEMPT_ACTIVE):
                query = {"status": status, "leaseExpiresAt": {"$lt": now}}
                cursor = self.database.jobs.find(query, WITHOUT_HISTORY).sort("leaseExpiresAt", ASCENDING).limit(limit)
                expired.extend(job_from_document(d) for d in cursor)
        return sorted(expired, key=lambda job: (job.leaseExpiresAt or now, job.id))[: max(limit, 0)]

    def recover_attempt(self, job: Job, reason: str) -> Job | None:
        return attempts.close_attempt(self.database, job, AttemptResult.lost(reason, utc_now()))

    def settle_dependents(self, ended_before: datetime, limit: int) -> int:
        return dependencies.settle_stale(self.database, ended_before, limit)


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


def _refusal(exc: Exception) -> str:
    """The server's (or the driver's) reason for refusing a document, short: it may quote the document."""
    reason = exc.details.get("errmsg") if isinstance(exc, WriteError) and exc.details else None
    return shorten(str(reason or exc), 200)
