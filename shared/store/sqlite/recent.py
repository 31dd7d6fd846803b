"""The last hour's endings in the SQLite file, counted by minute as they happen: the overview's "last hour"
figures (jobs completed, jobs dead-lettered, attempts failed, by tenant and job type).

Counting those from the jobs themselves reads one index entry per ending: at a few hundred endings a second that
is a million entries an hour, read on every overview. Instead, triggers (migrations.endings_into_history) add
each ending, in the transaction that writes it, to its minute's counters in history_by_minute, a row per tenant,
job type and minute kept KEPT_MINUTES minutes (the console's history, minutes.py, reads the same rows). A read sums
the counters of the whole minutes since `since` (a few rows per tenant and type) and counts the part of a minute
before the first of them from the indexes, so the figures are the same as counting every ending since `since`,
except that a job that ended and then moved on (a dead letter sent back) stays counted: the figures count what
happened in the hour.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from shared.model import Status
from shared.store.history import MINUTE_MS
from shared.store.sqlite.minutes import KEPT_MINUTES


def last_hour(
    conn: sqlite3.Connection, tenant_id: str | None, since: datetime, ended_sql: str, failed_sql: str
) -> tuple[list[tuple[str, str, int]], list[tuple[str, int]]]:
    """Since `since`: (jobType, completed|dlq, jobs) and (jobType, failed attempts), of one tenant or every one.
    Whole minutes are read from history_by_minute; what is before them, and all of it if it does not keep
    `since`'s minute, from the indexes. `ended_sql` selects the jobs that ended through recent_endings (a
    template's own end is not counted, as the triggers do not count it), `failed_sql` the failed attempts. The
    attempts are read by their time first (CROSS JOIN keeps that order): with a tenant named, SQLite's planner
    would otherwise walk every job of the tenant and look up each one's attempts."""
    since_ms = math.floor(since.timestamp() * 1000)
    first_minute = -(-since_ms // MINUTE_MS)  # the first minute that starts at or after since
    kept = first_minute > int(time.time() * 1000) // MINUTE_MS - KEPT_MINUTES
    bounds: list[Any] = [since_ms, first_minute * MINUTE_MS if kept else 2**62]
    tenant: list[Any] = [tenant_id] if tenant_id is not None else []
    ended: list[tuple[str, str, int]] = conn.execute(
        f"""SELECT jobType, status, count(*) FROM jobs INDEXED BY recent_endings
            WHERE {ended_sql} AND kind <> 'template' AND updatedAt >= ? AND updatedAt < ?
            {"AND tenantId = ?" if tenant else ""}
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
    if not kept:
        return ended, failed
    rows = conn.execute(
        f"""SELECT jobType, sum(completed), sum(dlq), sum(failed) FROM history_by_minute
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
