"""Batches in the SQLite file (shared/batches.py): every step runs inside the write transaction of the change that
calls for it, so a batch fires in the same commit as the end of its last member (or its seal)."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime

from bson import ObjectId

from shared.batches import (
    NOT_COMPLETED,
    UNFINISHED,
    Batch,
    BatchView,
    MemberResult,
    MembersPage,
    callback_key,
    failed_ends,
    not_completed_error,
)
from shared.model import Job, Status, utc_now
from shared.store import transitions
from shared.store.base import (
    BatchNotFound,
    BatchSealed,
    DuplicateBatch,
    NewBatch,
    NewJob,
    StoreError,
)
from shared.store.batch_members import member_refusals
from shared.store.dependencies import cancelled_wait
from shared.store.sqlite import groups
from shared.store.sqlite.codecs import from_ms, marks, stored_id, to_ms
from shared.store.sqlite.database import SqliteDatabase
from shared.store.sqlite.writes import insert_unique, update_job
from shared.store.transitions import attempt_record_id

_COLUMNS = "id, tenantId, idempotencyKey, name, createdAt, sealed, onComplete, onSuccess, firedAt, failures"
_WAITING = Status.WAITING.value


def create(database: SqliteDatabase, new: NewBatch) -> BatchView:
    batch_id, now = str(ObjectId()), utc_now()
    callbacks = {name: job for name, job in (("onComplete", new.onComplete), ("onSuccess", new.onSuccess)) if job}
    ids = {name: str(ObjectId()) for name in callbacks}
    with database.write() as conn:
        holder = conn.execute(
            "SELECT id FROM batches WHERE tenantId = ? AND idempotencyKey = ?", (new.tenantId, new.idempotencyKey)
        ).fetchone()
        if holder is not None:
            raise DuplicateBatch(new.idempotencyKey, str(holder[0]))
        conn.execute(
            f"INSERT INTO batches ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, 0, ?, ?, NULL, 0)",
            (batch_id, new.tenantId, new.idempotencyKey, new.name, to_ms(now), *_callbacks(ids)),
        )
        for name, job in callbacks.items():
            held = replace(job, tenantId=new.tenantId, idempotencyKey=callback_key(batch_id, name), callbackOf=batch_id)
            fields = {"id": ids[name], **transitions.new_job(held, now), "status": _WAITING}
            insert_unique(conn, "jobs", fields, returning="id")
    batch = Batch(
        batch_id, new.tenantId, new.idempotencyKey, new.name, transitions.stored_time(now), False, *_callbacks(ids)
    )
    return BatchView(batch, Counter())


def _callbacks(ids: dict[str, str]) -> tuple[str | None, str | None]:
    return ids.get("onComplete"), ids.get("onSuccess")


def add(
    conn: sqlite3.Connection,
    batch_id: str,
    news: Sequence[NewJob],
    created: Callable[[sqlite3.Connection, Sequence[NewJob]], list[Job | StoreError]],
) -> list[Job | StoreError]:
    """The members `news` made by `created` (dependencies.created) in the caller's transaction."""
    batch = _batch(conn, batch_id)
    if batch.sealed:
        raise BatchSealed(batch.id)
    refused = member_refusals(batch, news)
    kept = [replace(new, batchId=batch.id) for i, new in enumerate(news) if i not in refused]
    written = iter(created(conn, kept) if kept else [])
    return [refused[i] if i in refused else next(written) for i in range(len(news))]


def seal(database: SqliteDatabase, batch_id: str) -> BatchView:
    with database.write() as conn:
        batch = _batch(conn, batch_id)
        conn.execute("UPDATE batches SET sealed = 1 WHERE id = ?", (batch.id,))
        fire_if_done(conn, [batch.id])
    found = read(database, batch.id)
    assert found is not None, "a batch is never deleted"
    return found


def fire_if_done(conn: sqlite3.Connection, batch_ids: Iterable[str]) -> list[str]:
    """Each of these batches that is sealed, not fired, and has no member left that has not ended, fired: its
    callbacks released (onSuccess cancelled when a member did not complete). The batches fired."""
    fired: list[str] = []
    now = utc_now()
    for batch_id in dict.fromkeys(batch_ids):
        row = conn.execute(f"SELECT {_COLUMNS} FROM batches WHERE id = ?", (batch_id,)).fetchone()
        if row is None or not row[5] or row[8] is not None or _any(conn, batch_id, UNFINISHED):
            continue
        conn.execute("UPDATE batches SET firedAt = ? WHERE id = ?", (to_ms(now), batch_id))
        fired.append(batch_id)
        batch = _record(row)
        if batch.onComplete is not None:
            _release(conn, batch.onComplete, now)
        if batch.onSuccess is not None and not batch.failures and not _any(conn, batch_id, NOT_COMPLETED):
            _release(conn, batch.onSuccess, now)
        elif batch.onSuccess is not None:
            _cancel(
                conn,
                batch.onSuccess,
                not_completed_error(batch, groups.counts(conn, "batches", [batch_id])[batch_id]),
                now,
            )
    return fired


def ended(conn: sqlite3.Connection, jobs: Iterable[Job | None]) -> list[str]:
    """These jobs ended in the caller's transaction (as they are now): their batches' failures counted, and
    fire_if_done for those batches (most jobs are in no batch: nothing is read or written for them); the batches
    fired."""
    members = [job for job in jobs if job is not None and job.batchId is not None]
    if not members:
        return []
    for batch_id, failed in failed_ends(members).items():
        conn.execute("UPDATE batches SET failures = failures + ? WHERE id = ?", (failed, batch_id))
    return fire_if_done(conn, [job.batchId for job in members if job.batchId is not None])


def redriven(conn: sqlite3.Connection, job: Job) -> None:
    """A member re-driven from the DLQ before its batch fired: its failure no longer counts (it may complete)."""
    if job.batchId is not None:
        conn.execute(
            "UPDATE batches SET failures = failures - 1 WHERE id = ? AND firedAt IS NULL AND failures > 0",
            (job.batchId,),
        )


def _any(conn: sqlite3.Connection, batch_id: str, statuses: Sequence[str]) -> bool:
    """Whether a member is in one of these statuses: one probe of the index per status, whatever the size."""
    found = conn.execute(
        f"SELECT 1 FROM jobs INDEXED BY jobs_of_batch WHERE batchId = ? AND status IN ({marks(statuses)}) LIMIT 1",
        (batch_id, *statuses),
    ).fetchone()
    return found is not None


def _release(conn: sqlite3.Connection, job_id: str, now: datetime) -> None:
    """A held callback pending, due now (its lateness counts from its batch's firing)."""
    update_job(
        conn, job_id, {"status": Status.PENDING.value, "scheduledAt": now, "updatedAt": now}, "status = ?", (_WAITING,)
    )


def _cancel(conn: sqlite3.Connection, job_id: str, error: str, now: datetime) -> None:
    """A held callback cancelled, with its one `cancelled` attempt naming why (as a dependent's is)."""
    settled = cancelled_wait(1, error, now)
    if update_job(conn, job_id, settled.fields, "status = ?", (_WAITING,)):
        record = {"id": attempt_record_id(job_id, 1), "jobId": job_id, **(settled.cancelled_attempt or {})}
        insert_unique(conn, "executions", record)


def read(database: SqliteDatabase, batch_id: str) -> BatchView | None:
    if (stored := stored_id(batch_id)) is None:
        return None
    with database.read() as conn:
        row = conn.execute(f"SELECT {_COLUMNS} FROM batches WHERE id = ?", (stored,)).fetchone()
        if row is None:
            return None
        return BatchView(_record(row), groups.counts(conn, "batches", [stored])[stored])


def listing(database: SqliteDatabase, tenant_id: str, limit: int, before: str | None) -> list[BatchView]:
    with database.read() as conn:
        rows = groups.newest(conn, "batches", _COLUMNS, tenant_id, limit, before)
        counts = groups.counts(conn, "batches", [str(r[0]) for r in rows])
    return [BatchView(_record(row), counts[str(row[0])]) for row in rows]


def members(database: SqliteDatabase, batch_id: str, page: MembersPage) -> list[MemberResult]:
    """A range of the jobs_of_batch index (status, id); without results, read from the index alone."""
    after, status = page.after, page.status
    start = (status or "", "") if after is None else (after.status, after.jobId)
    only = "" if status is None else "AND status = ?"
    with database.read() as conn:
        rows = conn.execute(
            f"""SELECT id, status, {"result" if page.results else "NULL"} FROM jobs INDEXED BY jobs_of_batch
               WHERE batchId = ? AND (status, id) > (?, ?) {only} ORDER BY status, id LIMIT ?""",
            (batch_id.lower(), *start, *([status] if status is not None else []), page.limit),
        ).fetchall()
    return [MemberResult(str(r[0]), str(r[1]), None if r[2] is None else json.loads(r[2])) for r in rows]


def _batch(conn: sqlite3.Connection, batch_id: str) -> Batch:
    row = conn.execute(f"SELECT {_COLUMNS} FROM batches WHERE id = ?", (stored_id(batch_id) or "",)).fetchone()
    if row is None:
        raise BatchNotFound(batch_id)
    return _record(row)


def _record(row: sqlite3.Row) -> Batch:
    return Batch(
        id=str(row[0]),
        tenantId=str(row[1]),
        idempotencyKey=str(row[2]),
        name=row[3],
        createdAt=from_ms(int(row[4])),
        sealed=bool(row[5]),
        onComplete=row[6],
        onSuccess=row[7],
        firedAt=None if row[8] is None else from_ms(int(row[8])),
        failures=int(row[9]),
    )
