"""JobStore on SQLite (stdlib sqlite3): the embedded store of `jobsched dev` and of server-free tests.

Same contract and same answers as MongoJobStore (what a transition writes comes from transitions.py), but
stronger where SQLite can be: writers are serialized, so every write runs in one BEGIN IMMEDIATE transaction
that takes the write lock before its first read (SqliteDatabase.write). What the transaction read therefore stays
true until it commits — a real compare-and-set, across threads and processes — and multi-step changes (an
outcome, its job's move and its attempt's record) are all-or-nothing, so a crash between them cannot leave a
half-closed attempt. Ownership is decided as on MongoDB (idempotency keys by a unique key, an attempt by guarded
updates of its job), so both stores refuse the same things for the same reasons.

The methods here open the transactions; what they run inside them is in writes.py (one job's transitions),
claims.py (the claim's queries) and codecs.py (rows and values).
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any

from bson import ObjectId

from jobsched.handlers import ParentResult
from shared.batches import BatchView, MemberResult, MembersPage
from shared.model import Execution, Job, Outcome, Status, utc_now
from shared.store import transitions
from shared.store.base import (
    AttemptFinish,
    AttemptResult,
    AttemptStart,
    Deleted,
    JobNotFound,
    NewBatch,
    NewJob,
    NewWorkflow,
    ProgressReport,
    RunSpec,
    StoreError,
    StoreUnavailable,
    one_run_added,
    only_answer,
)
from shared.store.claim_limits import (
    ClaimLimits,
    InFlight,
)
from shared.store.claiming import claim_due_runs
from shared.store.emptied_records import EmptiedRecords, Group
from shared.store.fair_claims import Claim, Turns
from shared.store.group_commit import GroupCommit
from shared.store.history import unix_minute
from shared.store.sqlite import batches, claims, dependencies, groups, minutes, schema, writes
from shared.store.sqlite import workflows as stored_workflows
from shared.store.sqlite.codecs import (
    assignments,
    chunks,
    from_ms,
    jobs_in_order,
    marks,
    stored_id,
    to_execution,
    to_job,
    to_jobs,
    to_ms,
    to_sql,
)
from shared.store.sqlite.database import DEFAULT_PATH, SqliteDatabase
from shared.store.sqlite.schema import FINAL_SQL, JOB_COLUMNS
from shared.store.sqlite.writes import IS_ACTIVE, IS_CANCELLABLE, RUNS_PER_TRANSACTION
from shared.store.transitions import (
    ATTEMPT_ACTIVE,
    CANCELLABLE_VALUES,
    HISTORY_KEPT,
    KIND_BUFFERED,
    KIND_RUN,
    KIND_TEMPLATE,
    attempt_record_id,
)
from shared.workflows import WorkflowView


class SqliteJobStore:
    def __init__(
        self,
        path: str | os.PathLike[str] = DEFAULT_PATH,
        *,
        timeout: float = 5.0,
        pool_size: int = 8,
        durable: bool = True,
    ) -> None:
        """A store on the database file at `path` (created on first use). `database` is that file, which the other
        parts kept in it share (shared/backends.py); timeout, pool_size and durable are its (SqliteDatabase)."""
        self.database = SqliteDatabase(path, timeout=timeout, pool_size=pool_size, durable=durable)
        self.path = self.database.path
        # The API creates each job on a thread of its own. Each write transaction costs a WAL sync and a
        # hand-over of the write lock whatever it holds, so the creates that threads ask for while one
        # transaction runs are all written by the next one (group commit); each still succeeds or fails alone (a
        # taken key skips its own row only). An executor batches its starts and outcomes itself (start_attempts,
        # finish_attempts).
        self._creates: GroupCommit[NewJob, Job] = GroupCommit(self._create_batch)
        # Which lanes had their turns last (fair_claims.py): the claimer's own, as only the leader claims.
        self._turns = Turns()
        self._claims = claims.SqliteClaimPort(self.database)
        self._emptied = EmptiedRecords()  # where retention's next look at workflows' and batches' records starts
        self._sampled_minute = -1  # the history's last minute whose backlog this store sampled (sample_backlog)

    def close(self) -> None:
        self.database.close()

    def ensure_schema(self) -> None:
        schema.ensure_schema(partial(self.database.write, bulk=True))  # a migration may rewrite every job

    def ping(self) -> None:
        self.database.ping()

    def create(self, new: NewJob) -> Job:
        return self._creates.submit(new)

    def _create_batch(self, requests: Sequence[NewJob]) -> list[Job | StoreError]:
        """The creates of concurrent API requests, one write transaction for all (group commit)."""
        with self.database.write() as conn:
            return dependencies.created(conn, requests)

    def create_many(self, news: Sequence[NewJob]) -> list[Job | StoreError]:
        """RUNS_PER_TRANSACTION jobs a transaction, so that the executors' writes get their turns between them.
        The first waits for its turn within the caller's deadline (a busy store refuses the whole call, which is
        then simply sent again); once one is written the rest wait as long as the store allows, as add_runs'
        do, and a transaction the store still could not make answers StoreUnavailable for its jobs."""
        answers: list[Job | StoreError] = []
        for start in range(0, len(news), RUNS_PER_TRANSACTION):
            chunk = news[start : start + RUNS_PER_TRANSACTION]
            try:
                with self.database.write(patient=start > 0) as conn:
                    created = dependencies.created(conn, chunk)
            except StoreUnavailable as exc:
                if start == 0:
                    raise
                created = [exc] * len(chunk)
            answers += created
        return answers

    def create_workflow(self, new: NewWorkflow) -> WorkflowView:
        return stored_workflows.create(self.database, new)

    def workflow(self, workflow_id: str) -> WorkflowView | None:
        return stored_workflows.read(self.database, workflow_id)

    def workflow_by_key(self, tenant_id: str, idempotency_key: str) -> WorkflowView | None:
        return stored_workflows.by_key(self.database, tenant_id, idempotency_key)

    def workflows(self, tenant_id: str, limit: int, before: str | None = None) -> list[WorkflowView]:
        return stored_workflows.listing(self.database, tenant_id, limit, before)

    def settle_workflows(self, created_before: datetime, limit: int) -> int:
        return 0  # written in one transaction: never half

    def create_batch(self, new: NewBatch) -> BatchView:
        return batches.create(self.database, new)

    def add_to_batch(self, batch_id: str, news: Sequence[NewJob]) -> list[Job | StoreError]:
        with self.database.write() as conn:
            return batches.add(conn, batch_id, news, dependencies.created)

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
        return 0  # fired in the transaction that ends the last member

    def delete_emptied_groups(self, created_before: datetime, limit: int) -> tuple[int, bool]:
        before = str(ObjectId.from_datetime(created_before))

        def delete_some(group: Group, after: str | None) -> tuple[int, str | None]:
            with self.database.write() as conn:
                return groups.delete_emptied(conn, group, before, limit, after)

        return self._emptied.sweep(delete_some)

    def get(self, job_id: str) -> Job | None:
        if not ObjectId.is_valid(job_id):
            return None
        with self.database.read() as conn:
            return writes.load_job(conn, job_id)

    def cancel(self, job_id: str) -> Job:
        with self.database.write() as conn:
            job = writes.load_job(conn, job_id)
            if job is None:
                raise JobNotFound(job_id)
            transitions.check_cancellable(job)
            now = utc_now()
            if job.status.value in ATTEMPT_ACTIVE:  # running: ask its executor (the write lock keeps it running)
                fields = transitions.cancel_requested(now)
                requested = writes.update_job(conn, job.id, fields, IS_ACTIVE, ATTEMPT_ACTIVE)
                assert requested is not None, "the write lock was held since the job was read"
                return to_job(requested)
            # Its next attempt, listed as cancelled: no executor starts it, as the job leaves `queued` with it.
            if not job.is_template:
                record: transitions.Fields = {"id": attempt_record_id(job.id, job.next_attempt), "jobId": job.id}
                record.update(attempt=job.next_attempt, **transitions.attempt_cancelled(now))
                inserted = writes.insert_unique(conn, "executions", record)
                assert inserted is not None, "a record is written when its attempt ends, and this one never began"
            row = writes.update_job(conn, job.id, transitions.cancelled(now), IS_CANCELLABLE, CANCELLABLE_VALUES)
            dependencies.settle_dependents(conn, [job.id])
            batches.ended(conn, [job.evolve(status=Status.CANCELLED)])
        assert row is not None, "the write lock was held since the job was read"
        return to_job(row)

    def cancel_requested(self, jobs: Sequence[Job]) -> set[str]:
        found: set[str] = set()
        with self.database.read() as conn:
            for chunk in chunks([j.id for j in jobs]):
                rows = conn.execute(
                    f"SELECT id FROM jobs WHERE cancelRequested = 1 AND id IN ({marks(chunk)})", chunk
                ).fetchall()
                found.update(str(r[0]) for r in rows)
        return found

    def claim_due_jobs(
        self,
        now: datetime,
        limit: int,
        job_types: Collection[str],
        due_by: datetime | None = None,
        limits: Mapping[str, ClaimLimits] | None = None,
    ) -> Claim:
        return claim_due_runs(self._claims, self._turns, now, limit, job_types, due_by, limits)

    def due_job_types(self, now: datetime) -> set[str]:
        with self.database.read() as conn:
            rows = conn.execute(
                "SELECT DISTINCT jobType FROM jobs WHERE status = ? AND kind = ? AND scheduledAt <= ?",
                (Status.PENDING.value, KIND_RUN, to_ms(now)),
            ).fetchall()
        return {str(r[0]) for r in rows}

    def release_claims(self, jobs: Sequence[Job]) -> None:
        if not jobs:
            return
        ids = [j.id for j in jobs]
        set_sql, set_params = assignments(transitions.requeued(utc_now()), JOB_COLUMNS)
        with self.database.write() as conn:
            for chunk in chunks(ids):
                conn.execute(
                    f"UPDATE jobs SET {set_sql} WHERE status = ? AND id IN ({marks(chunk)})",
                    [*set_params, Status.QUEUED.value, *chunk],
                )

    def due_templates(self, now: datetime, limit: int) -> list[Job]:
        with self.database.read() as conn:
            rows = conn.execute(
                "SELECT * FROM jobs WHERE status = ? AND kind = ? AND scheduledAt <= ? AND NOT coalesce(paused, 0) "
                "ORDER BY scheduledAt ASC, id ASC LIMIT ?",
                (Status.PENDING.value, KIND_TEMPLATE, to_ms(now), max(limit, 0)),
            ).fetchall()
        return to_jobs(rows)

    def dead_letter_template(self, template: Job, reason: str) -> bool:
        fields = transitions.template_dead_lettered(reason, utc_now())
        with self.database.write() as conn:
            row = writes.update_job(conn, template.id, fields, "status = ?", (Status.PENDING.value,))
        return row is not None

    # --- schedules --------------------------------------------------------------------------------------

    def add_run(self, template: Job, run: RunSpec) -> tuple[Job, bool]:
        return one_run_added(self, template, run)

    def add_runs(self, template: Job, runs: Sequence[RunSpec]) -> list[tuple[str, bool]]:
        now = utc_now()
        added: list[tuple[str, bool]] = []
        for batch in writes.transactions_of(template, runs, now):
            # Each waits its turn as long as the store allows, not within the caller's deadline for a first
            # turn (the fire times took part of it): once a backfill has begun, all of it is written, rather
            # than an answer that the store is busy after half of it.
            with self.database.write(patient=True) as conn:
                for fields in batch:
                    row = writes.insert_unique(conn, "jobs", fields, returning="id")
                    if row is None:  # this key's run exists (a retry after a crash, a leader's spawn, a trigger)
                        row = conn.execute(
                            "SELECT id FROM jobs WHERE tenantId = ? AND idempotencyKey = ?",
                            (fields["tenantId"], fields["idempotencyKey"]),
                        ).fetchone()
                        added.append((str(row["id"]), False))
                    else:
                        added.append((str(row["id"]), True))
        return added

    def job_by_key(self, tenant_id: str, idempotency_key: str) -> Job | None:
        with self.database.read() as conn:
            row = conn.execute(
                "SELECT * FROM jobs WHERE tenantId = ? AND idempotencyKey = ?", (tenant_id, idempotency_key)
            ).fetchone()
        return to_job(row) if row else None

    def template_runs(
        self, template_id: str, statuses: Collection[Status] | None, limit: int, after_run: Job | None = None
    ) -> list[Job]:
        values: list[Any] = sorted(s.value for s in statuses) if statuses is not None else []
        status_clause = f"AND status IN ({marks(values)})" if statuses is not None else ""
        after_clause, after_values = writes.runs_after(after_run)
        with self.database.read() as conn:
            rows = conn.execute(
                f"SELECT * FROM jobs WHERE templateId = ? {status_clause} {after_clause} "
                "ORDER BY plannedAt DESC, scheduledAt DESC, id DESC LIMIT ?",
                [template_id, *values, *after_values, max(limit, 0)],
            ).fetchall()
        return to_jobs(rows)

    def buffered_runs(self, limit: int) -> list[Job]:
        with self.database.read() as conn:
            rows = conn.execute(
                "SELECT * FROM jobs WHERE status = ? AND kind = ? ORDER BY plannedAt ASC, id ASC LIMIT ?",
                (Status.BUFFERED.value, KIND_BUFFERED, max(limit, 0)),
            ).fetchall()
        return to_jobs(rows)

    def promote_buffered(self, run: Job, now: datetime) -> bool:
        with self.database.write() as conn:
            row = writes.update_job(conn, run.id, transitions.promoted(now), "status = ?", (Status.BUFFERED.value,))
        return row is not None

    def update_if_unmoved(self, job: Job, fields: transitions.Fields) -> Job | None:
        with self.database.write() as conn:
            guard = (Status.PENDING.value, to_ms(job.scheduledAt))
            row = writes.update_job(conn, job.id, fields, "status = ? AND scheduledAt = ?", guard)
        return to_job(row) if row is not None else None

    # --- executor ---------------------------------------------------------------------------------------

    def start_attempts(self, starts: Sequence[AttemptStart]) -> list[Job | StoreError]:
        """Every start of the batch in one write transaction, each refused or made on its own."""
        now = utc_now()
        with self.database.write() as conn:
            answers = writes.start_batch(conn, now, starts)
        # The started jobs read once the write lock is released: the next writer need not wait for their rows (a
        # cancel asked meanwhile is in them, as if asked just after). (Rows this store wrote convert; one that
        # would not is a bug, and its attempt, started, is closed by the reaper as lost.)
        started = [answer for answer in answers if isinstance(answer, str)]
        jobs: dict[str, Job] = {}
        if started:
            with self.database.read() as conn:
                jobs = dict(zip(started, jobs_in_order(conn, started), strict=True))
        return [jobs[answer] if isinstance(answer, str) else answer for answer in answers]

    def extend_leases(self, jobs: Sequence[Job], lease_until: datetime) -> None:
        if not jobs:
            return
        with self.database.write() as conn:
            conn.executemany(
                f"UPDATE jobs SET leaseExpiresAt = ? WHERE id = ? AND attempts = ? AND {IS_ACTIVE}",
                [(to_ms(lease_until), j.id, j.attempts, *ATTEMPT_ACTIVE) for j in jobs],
            )

    def results_of(self, job_ids: Sequence[str]) -> dict[str, ParentResult]:
        by_stored = {stored: job_id for job_id in job_ids if (stored := stored_id(job_id))}
        found: dict[str, ParentResult] = {}
        with self.database.read() as conn:
            for chunk in chunks(list(by_stored)):
                for row in conn.execute(f"SELECT id, step, result FROM jobs WHERE id IN ({marks(chunk)})", chunk):
                    result = None if row[2] is None else json.loads(row[2])
                    found[by_stored[str(row[0])]] = ParentResult(row[1], result)
        return found

    def record_progress(self, reports: Sequence[ProgressReport]) -> None:
        if not reports:
            return
        with self.database.write() as conn:
            conn.executemany(
                f"UPDATE jobs SET progress = ? WHERE id = ? AND attempts = ? AND {IS_ACTIVE}",
                [(to_sql("progress", r.stored()), r.job.id, r.job.attempts, *ATTEMPT_ACTIVE) for r in reports],
            )

    def finish_attempt(self, job: Job, result: AttemptResult) -> Job | None:
        return only_answer(self.finish_attempts([AttemptFinish(job, result)]))

    def finish_attempts(self, finishes: Sequence[AttemptFinish]) -> list[Job | StoreError | None]:
        closings = [writes.closing_of(f.job, f.result) for f in finishes]  # made before the write lock is taken
        with self.database.write() as conn:
            written = dependencies.closed(conn, closings)
        return list(written.jobs())

    def in_flight_beside(self, job: Job) -> InFlight:
        with self.database.read() as conn:
            return claims.in_flight(conn, [job.jobType], utc_now())

    def list_executions(self, job_id: str) -> list[Execution]:
        """The job's last HISTORY_KEPT attempts, oldest first (as every store lists them): its records, then the
        attempt open now (claimed or running), which is the job's own fields until it ends (an earlier version's
        record of it, `running`, is left out)."""
        with self.database.read() as conn:
            rows = conn.execute(
                "SELECT * FROM executions WHERE jobId = ? AND outcome <> ? ORDER BY attempt DESC LIMIT ?",
                (job_id, Outcome.RUNNING.value, HISTORY_KEPT),
            ).fetchall()
            job = conn.execute(
                f"SELECT attempts, claimedBy, claimedAt FROM jobs WHERE id = ? AND {IS_ACTIVE}",
                (job_id, *ATTEMPT_ACTIVE),
            ).fetchone()
        listed = [to_execution(r) for r in reversed(rows)]
        if job is not None:
            attempts, worker, started_at = job
            started = None if started_at is None else from_ms(started_at)
            running = transitions.open_attempt(attempts + 1, worker, started)
            listed.append(Execution(id=attempt_record_id(job_id, attempts + 1), jobId=job_id, **running))
        return listed[-HISTORY_KEPT:]

    def redrive(self, job_id: str) -> Job:
        with self.database.write() as conn:
            job = writes.load_job(conn, job_id)
            if job is None:
                raise JobNotFound(job_id)
            transitions.check_redrivable(job)
            guard = (Status.DLQ.value, job.attempts)
            fields = transitions.redriven(job, utc_now())
            row = writes.update_job(conn, job.id, fields, "status = ? AND attempts = ?", guard)
            dependencies.link_again(conn, job.id)
            batches.redriven(conn, job)
        assert row is not None, "the write lock was held since the job was read"
        return to_job(row)

    def delete(self, job_id: str) -> Deleted:
        with self.database.write() as conn:  # the write lock: nothing changes between the checks and the removal
            job = writes.load_job(conn, job_id)
            if job is None:
                raise JobNotFound(job_id)
            transitions.check_deletable(job)
            runs: list[str] = []
            if job.is_template:
                rows = conn.execute("SELECT id, status FROM jobs WHERE templateId = ?", (job.id,)).fetchall()
                transitions.check_runs_ended(job, (r[1] for r in rows))
                runs = [str(r[0]) for r in rows]
            for chunk in chunks([job.id, *runs]):
                conn.execute(f"DELETE FROM executions WHERE jobId IN ({marks(chunk)})", chunk)
                conn.execute(f"DELETE FROM jobs WHERE id IN ({marks(chunk)})", chunk)
        return Deleted(job, len(runs))

    # --- reaper -----------------------------------------------------------------------------------------

    def release_stale_claims(self, queued_before: datetime) -> int:
        set_sql, set_params = assignments(transitions.requeued(utc_now()), JOB_COLUMNS)
        with self.database.write() as conn:
            cursor = conn.execute(
                f"UPDATE jobs SET {set_sql} WHERE status = ? AND queuedAt < ?",
                [*set_params, Status.QUEUED.value, to_ms(queued_before)],
            )
        return cursor.rowcount

    def settle_dependents(self, ended_before: datetime, limit: int) -> int:
        return 0  # every end settles its dependents in its own transaction (dependencies.py)

    def delete_finished(self, status: Status, finished_before: datetime, limit: int) -> int:
        transitions.check_ages_out(status)
        with self.database.write() as conn:  # the write lock: what the SELECT found is what the DELETEs remove
            ids = [
                str(r[0])
                for r in conn.execute(
                    f"""SELECT id FROM jobs INDEXED BY recent_endings
                        WHERE {FINAL_SQL} AND status = ? AND updatedAt < ? AND kind != ?
                        ORDER BY updatedAt LIMIT ?""",
                    (status.value, to_ms(finished_before), KIND_TEMPLATE, max(limit, 0)),
                )
            ]
            for chunk in chunks(ids):
                conn.execute(f"DELETE FROM executions WHERE jobId IN ({marks(chunk)})", chunk)
                conn.execute(f"DELETE FROM jobs WHERE id IN ({marks(chunk)})", chunk)
        return len(ids)

    def sample_backlog(self, now: datetime) -> bool:
        minute = unix_minute(now)
        if minute == self._sampled_minute:
            return False
        with self.database.read() as conn:
            gauges = minutes.backlog(conn, now)
        with self.database.write() as conn:
            minutes.record_backlog(conn, minute, gauges)
        self._sampled_minute = minute
        return True

    def prune_key_rates(self, now: datetime, limit: int) -> int:
        with self.database.write() as conn:
            cursor = conn.execute(
                """DELETE FROM key_rate_limits WHERE (jobType, tenantId, concurrencyKey) IN (
                       SELECT jobType, tenantId, concurrencyKey FROM key_rate_limits
                       WHERE claimTat <= ? AND startTat <= ? LIMIT ?)""",
                (now.timestamp(), now.timestamp(), max(limit, 0)),
            )
        return cursor.rowcount

    def expired_attempts(self, now: datetime, limit: int) -> list[Job]:
        with self.database.read() as conn:
            rows = conn.execute(
                f"SELECT * FROM jobs WHERE {IS_ACTIVE} AND leaseExpiresAt < ? ORDER BY leaseExpiresAt LIMIT ?",
                (*ATTEMPT_ACTIVE, to_ms(now), max(limit, 0)),
            ).fetchall()
        return to_jobs(rows)

    def recover_attempt(self, job: Job, reason: str) -> Job | None:
        with self.database.write() as conn:
            written = dependencies.closed(conn, [writes.closing_of(job, AttemptResult.lost(reason, utc_now()))])
        [recovered] = written.jobs()
        return recovered
