"""The last hour's endings in the SQLite file, counted by minute as they happen: the overview's "last hour"
figures (jobs completed, jobs dead-lettered, attempts failed, by tenant and job type).

Counting those from the jobs themselves reads one index entry per ending: at a few hundred endings a second that
is a million entries an hour, read on every overview. Instead, triggers add each ending, in the transaction that
writes it, to its minute's counter in a ring of RING_MINUTES slots per tenant and job type: a slot holds one minute
and is taken over by a later one (an ending older than the minute its slot holds is over an hour old and is not
counted). A read sums the counters of the whole minutes since `since` (a few rows per tenant and type) and counts
the part of a minute before the first of them from the indexes, so the figures are the same as counting every
ending since `since`, except that a job that ended and then moved on (a dead letter sent back) stays counted: the
figures count what happened in the hour.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Final

from shared.model import Outcome, Status

RING_MINUTES: Final = 64  # an hour's window and its first, partial minute, with room for a clock's step
MINUTE_MS: Final = 60_000
_COUNTED: Final = ("completed", "dlq", "failed")
_FAILED: Final = (Outcome.FAILED.value, Outcome.TIMEOUT.value, Outcome.LOST.value)

_TABLE: Final = f"""CREATE TABLE IF NOT EXISTS recent_endings_by_minute (
        tenantId    TEXT NOT NULL,
        jobType     TEXT NOT NULL,
        slot        INTEGER NOT NULL,           -- minute % {RING_MINUTES}
        minute      INTEGER NOT NULL,           -- unix minutes, UTC: the minute the slot counts
        completed   INTEGER NOT NULL DEFAULT 0, -- jobs
        dlq         INTEGER NOT NULL DEFAULT 0, -- jobs
        failed      INTEGER NOT NULL DEFAULT 0, -- attempts (failed, timed out or lost)
        PRIMARY KEY (tenantId, jobType, slot)
    ) WITHOUT ROWID"""
# Every tenant's last hour (the operator's overview) reads the rows of the last hour alone, not the whole ring.
_MINUTE_INDEX: Final = "CREATE INDEX IF NOT EXISTS recent_minutes ON recent_endings_by_minute (minute)"


def _added(column: str, source: str) -> str:
    """The upsert that adds 1 to `column` of the minute of `source`'s (tenantId, jobType, at) row."""
    kept = ", ".join(
        f"{c} = CASE WHEN excluded.minute > minute THEN excluded.{c} "
        f"WHEN excluded.minute = minute THEN {c} + excluded.{c} ELSE {c} END"
        for c in _COUNTED
    )
    return (
        "INSERT INTO recent_endings_by_minute (tenantId, jobType, slot, minute, "
        f"{column}) SELECT tenantId, jobType, (at / {MINUTE_MS}) % {RING_MINUTES}, at / {MINUTE_MS}, 1 "
        f"FROM ({source}) WHERE true "  # WHERE: how SQLite tells an upsert's SELECT from a join
        f"ON CONFLICT (tenantId, jobType, slot) DO UPDATE SET {kept}, minute = max(minute, excluded.minute);"
    )


def _job_ended(status: Status) -> str:
    source = "SELECT new.tenantId AS tenantId, new.jobType AS jobType, new.updatedAt AS at"
    return (
        f"CREATE TRIGGER IF NOT EXISTS recent_{status.value} AFTER UPDATE OF status ON jobs "
        f"WHEN new.status = '{status.value}' AND old.status IS NOT new.status "
        f"BEGIN {_added(status.value, source)} END"
    )


_ATTEMPT_FAILED: Final = " OR ".join(f"new.outcome = '{o}'" for o in _FAILED)
_ATTEMPT_WAS_FAILED: Final = " OR ".join(f"old.outcome = '{o}'" for o in _FAILED)
_ATTEMPT_SOURCE: Final = (
    "SELECT jobs.tenantId AS tenantId, jobs.jobType AS jobType, new.finishedAt AS at "
    "FROM jobs WHERE jobs.id = new.jobId"
)
TRIGGERS: Final = (
    _job_ended(Status.COMPLETED),
    _job_ended(Status.DLQ),
    "CREATE TRIGGER IF NOT EXISTS recent_failed_attempt AFTER INSERT ON executions "
    f"WHEN ({_ATTEMPT_FAILED}) AND new.finishedAt IS NOT NULL BEGIN {_added('failed', _ATTEMPT_SOURCE)} END",
    "CREATE TRIGGER IF NOT EXISTS recent_attempt_failed AFTER UPDATE OF outcome ON executions "
    f"WHEN ({_ATTEMPT_FAILED}) AND NOT ({_ATTEMPT_WAS_FAILED}) AND new.finishedAt IS NOT NULL "
    f"BEGIN {_added('failed', _ATTEMPT_SOURCE)} END",
)


def ensure(conn: sqlite3.Connection, ended_sql: str, failed_sql: str, now_ms: int) -> None:
    """The ring and its triggers. A file written before them gets the ring's minutes counted from its jobs and
    attempts, in the same transaction (the write lock held), so no ending is counted twice or missed."""
    present = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'recent_endings_by_minute'"
    ).fetchone()
    conn.execute(_TABLE)
    conn.execute(_MINUTE_INDEX)
    for trigger in TRIGGERS:
        conn.execute(trigger)
    if present is not None:
        return
    first_ms = (now_ms // MINUTE_MS - RING_MINUTES + 1) * MINUTE_MS
    until_ms = (now_ms // MINUTE_MS + 1) * MINUTE_MS  # none later: a clock ahead must not fill an older slot
    rows = conn.execute(
        f"""SELECT tenantId, jobType, updatedAt / {MINUTE_MS}, status, count(*) FROM jobs INDEXED BY recent_endings
            WHERE {ended_sql} AND updatedAt >= ? AND updatedAt < ? GROUP BY 1, 2, 3, 4""",
        [first_ms, until_ms],
    ).fetchall()
    rows += conn.execute(
        f"""SELECT jobs.tenantId, jobs.jobType, executions.finishedAt / {MINUTE_MS}, 'failed', count(*)
            FROM executions INDEXED BY failed_attempts CROSS JOIN jobs ON jobs.id = executions.jobId
            WHERE {failed_sql} AND executions.finishedAt >= ? AND executions.finishedAt < ? GROUP BY 1, 2, 3""",
        [first_ms, until_ms],
    ).fetchall()
    for tenant, job_type, minute, column, count in rows:
        conn.execute(
            f"""INSERT INTO recent_endings_by_minute (tenantId, jobType, slot, minute, {column}) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (tenantId, jobType, slot) DO UPDATE SET {column} = {column} + excluded.{column}""",
            [tenant, job_type, minute % RING_MINUTES, minute, count],
        )


def last_hour(
    conn: sqlite3.Connection, tenant_id: str | None, since: datetime, ended_sql: str, failed_sql: str
) -> tuple[list[tuple[str, str, int]], list[tuple[str, int]]]:
    """Since `since`: (jobType, completed|dlq, jobs) and (jobType, failed attempts), of one tenant or every one.
    Whole minutes are read from the ring; what is before them, and all of it if the ring does not reach back to
    `since`, from the indexes. `ended_sql` selects the jobs that ended through recent_endings, `failed_sql` the
    failed attempts. The attempts are read by their time first (CROSS JOIN keeps that order): with a tenant named,
    SQLite's planner would otherwise walk every job of the tenant and look up each one's attempts."""
    since_ms = math.floor(since.timestamp() * 1000)
    first_minute = -(-since_ms // MINUTE_MS)  # the first minute that starts at or after since
    in_ring = first_minute > int(time.time() * 1000) // MINUTE_MS - RING_MINUTES
    bounds: list[Any] = [since_ms, first_minute * MINUTE_MS if in_ring else 2**62]
    tenant: list[Any] = [tenant_id] if tenant_id is not None else []
    ended: list[tuple[str, str, int]] = conn.execute(
        f"""SELECT jobType, status, count(*) FROM jobs INDEXED BY recent_endings
            WHERE {ended_sql} AND updatedAt >= ? AND updatedAt < ? {"AND tenantId = ?" if tenant else ""}
            GROUP BY jobType, status""",
        [*bounds, *tenant],
    ).fetchall()
    failed: list[tuple[str, int]] = conn.execute(
        f"""SELECT jobs.jobType, count(*)
            FROM executions INDEXED BY failed_attempts CROSS JOIN jobs ON jobs.id = executions.jobId
            WHERE {failed_sql} AND executions.finishedAt >= ? AND executions.finishedAt < ?
            {"AND jobs.tenantId = ?" if tenant else ""} GROUP BY jobs.jobType""",
        [*bounds, *tenant],
    ).fetchall()
    if not in_ring:
        return ended, failed
    rows = conn.execute(
        f"""SELECT jobType, sum(completed), sum(dlq), sum(failed) FROM recent_endings_by_minute
            WHERE minute >= ? {"AND tenantId = ?" if tenant else ""} GROUP BY jobType""",
        [first_minute, *tenant],
    ).fetchall()
    return _merged(ended, failed, rows)


def _merged(
    ended: Iterable[tuple[str, str, int]], failed: Iterable[tuple[str, int]], rows: Iterable[tuple[str, int, int, int]]
) -> tuple[list[tuple[str, str, int]], list[tuple[str, int]]]:
    jobs: dict[tuple[str, str], int] = {(t, s): n for t, s, n in ended}
    attempts: dict[str, int] = dict(failed)
    for job_type, completed, dlq, failures in rows:
        for status, count in ((Status.COMPLETED.value, completed), (Status.DLQ.value, dlq)):
            if count:
                jobs[job_type, status] = jobs.get((job_type, status), 0) + count
        if failures:
            attempts[job_type] = attempts.get(job_type, 0) + failures
    return [(t, s, n) for (t, s), n in jobs.items()], list(attempts.items())
