"""The console's history in the SQLite file (shared/store/history.py): a row per tenant, job type and minute of the
last day in history_by_minute (migrations.history_by_minute), kept KEPT_MINUTES minutes.

Triggers count the endings (jobs completed and dead-lettered, attempts failed) in the transaction that writes
them; a start's transaction adds its attempts and their lateness (count_starts), one upsert per tenant, type and
minute of the batch, where a trigger would cost every start one. What is waiting and running is a state, not an
event: the reaper samples it once a minute (backlog, record_backlog) into the minute's rows, adds up every
tenant's sums of the minutes before (history_every_tenant: the last RESUMMED_MINUTES again, for a write that
landed after its minute's sums), and deletes the rows older than KEPT_MINUTES. A read sums the rows of the
minutes asked for in SQL (a day of one tenant and type is 1,440 rows; every tenant's reads the sums, and the rows
of the minutes not summed yet) and never reads a job.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Final

from shared.model import Status
from shared.store.history import (
    EVENT_COUNTERS,
    GAUGES,
    LATENESS_BUCKETS,
    LATENESS_COUNTERS,
    MINUTE_MS,
    History,
    MinuteCounts,
    backlog_of,
    history_of,
    lateness_bucket,
)
from shared.store.sqlite.codecs import to_ms

# The minutes history_by_minute keeps: a day and its first, partial minute, with room for a clock's step.
KEPT_MINUTES: Final = 1464
# Every tenant's sums are made anew for this many minutes back at each sample: a row written later than that
# after its minute (a finish retried for minutes) shows in its tenant's history, not in every tenant's.
RESUMMED_MINUTES: Final = 10

COLUMNS: Final = (*EVENT_COUNTERS, *LATENESS_COUNTERS, *GAUGES)
_SUMS: Final = ", ".join(f"sum({c})" for c in COLUMNS)
PASSING: Final = (Status.QUEUED.value, Status.CLAIMED.value, Status.RUNNING.value)
_STARTED_COLUMNS: Final = ("started", *LATENESS_COUNTERS)
# What a start batch adds to a minute: its attempts, and each in its lateness bucket.
_STARTED: Final = (
    f"INSERT INTO history_by_minute (tenantId, jobType, minute, {', '.join(_STARTED_COLUMNS)}) "
    f"VALUES ({', '.join('?' * (3 + len(_STARTED_COLUMNS)))}) ON CONFLICT (tenantId, jobType, minute) DO UPDATE SET "
    + ", ".join(f"{c} = {c} + excluded.{c}" for c in _STARTED_COLUMNS)
)


def count_starts(conn: sqlite3.Connection, started_ms: int, starts: Iterable[tuple[str, str, int]]) -> None:
    """Attempts just started at `started_ms`, each given by its job's tenant, type and scheduled time, added to
    the minute they started in, each in the bucket of its lateness (the start - scheduledAt)."""
    minutes: dict[tuple[str, str, int], list[int]] = {}
    minute = started_ms // MINUTE_MS
    for tenant, job_type, scheduled_ms in starts:
        key = (tenant, job_type, minute)
        counts = minutes.get(key)
        if counts is None:
            counts = minutes[key] = [0] * (1 + LATENESS_BUCKETS)
        counts[0] += 1
        counts[1 + lateness_bucket(started_ms - scheduled_ms)] += 1
    conn.executemany(_STARTED, [(*key, *counts) for key, counts in minutes.items()])


def backlog(conn: sqlite3.Connection, now: datetime) -> dict[tuple[str, str], tuple[int, int]]:
    """Per (tenant, type) with any: the runs due by `now` and not started (pending or queued) and the jobs claimed
    or running. Read outside the write lock: a large backlog takes a while to count."""
    due = conn.execute(
        """SELECT tenantId, jobType, count(*) FROM jobs INDEXED BY due_order
            WHERE status = 'pending' AND kind = 'run' AND scheduledAt <= ? GROUP BY 1, 2""",
        [to_ms(now)],
    ).fetchall()
    passing = conn.execute(
        f"""SELECT tenantId, jobType, status, count(*) FROM jobs INDEXED BY due_order
            WHERE status IN ({", ".join("?" * len(PASSING))}) GROUP BY 1, 2, 3""",
        PASSING,
    ).fetchall()
    return backlog_of(due, passing)


def record_backlog(conn: sqlite3.Connection, minute: int, gauges: dict[tuple[str, str], tuple[int, int]]) -> None:
    """Set `minute`'s waiting and running to `gauges` (zero for every tenant and type not in it), make every
    tenant's sums of the minutes before, and delete the rows older than KEPT_MINUTES."""
    conn.execute("UPDATE history_by_minute SET waiting = 0, running = 0 WHERE minute = ?", [minute])
    conn.executemany(
        """INSERT INTO history_by_minute (tenantId, jobType, minute, waiting, running) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (tenantId, jobType, minute)
            DO UPDATE SET waiting = excluded.waiting, running = excluded.running""",
        [(t, j, minute, w, r) for (t, j), (w, r) in gauges.items()],
    )
    _sum_every_tenant(conn, minute)
    for table in ("history_by_minute", "history_every_tenant"):
        conn.execute(f"DELETE FROM {table} WHERE minute <= ?", [minute - KEPT_MINUTES])


def _sum_every_tenant(conn: sqlite3.Connection, minute: int) -> None:
    """Every tenant's sums per type of the minutes before `minute` not summed yet, and of the RESUMMED_MINUTES
    before them again (a write may land after its minute's sums were made); computed anew each time."""
    summed = _summed_until(conn, minute)
    since = minute - KEPT_MINUTES if summed is None else max(summed - RESUMMED_MINUTES + 1, minute - KEPT_MINUTES)
    conn.execute(
        f"""INSERT INTO history_every_tenant (jobType, minute, {", ".join(COLUMNS)})
            SELECT jobType, minute, {_SUMS} FROM history_by_minute WHERE minute >= ? AND minute < ?
            GROUP BY jobType, minute
            ON CONFLICT (jobType, minute) DO UPDATE SET {", ".join(f"{c} = excluded.{c}" for c in COLUMNS)}""",
        [since, minute],
    )


def _summed_until(conn: sqlite3.Connection, minute: int) -> int | None:
    """The last minute before `minute` whose every tenant's sums are made (None: none yet). Sums are only ever
    made of minutes before the sample's, so any of `minute` or later were made before a clock stepped back."""
    row = conn.execute("SELECT max(minute) FROM history_every_tenant WHERE minute < ?", [minute]).fetchone()
    return None if row[0] is None else int(row[0])


def history(conn: sqlite3.Connection, tenant_id: str | None, job_type: str | None, first: int, last: int) -> History:
    """Minutes first..last (unix minutes, within the ring) summed over the tenants and types asked for: of every
    tenant, the sums made so far and the rows of the minutes after them."""
    first = max(first, last - KEPT_MINUTES + 1)
    rows = []
    since = first
    if tenant_id is None:
        summed = _summed_until(conn, last)
        if summed is not None and summed >= first:
            rows += _minutes(conn, "history_every_tenant", {"jobType": job_type}, first, summed)
            since = summed + 1
    rows += _minutes(conn, "history_by_minute", {"tenantId": tenant_id, "jobType": job_type}, since, last)
    return history_of(((row[0], MinuteCounts.of(row[1:])) for row in rows), first, last)


def _minutes(
    conn: sqlite3.Connection, table: str, equal: dict[str, str | None], first: int, last: int
) -> list[sqlite3.Row]:
    """(minute, sums...) of `table`'s rows of minutes first..last whose columns are as `equal` says (None: any)."""
    where = ["minute >= ?", "minute <= ?"]
    params: list[Any] = [first, last]
    for column, value in equal.items():
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    sql = f"SELECT minute, {_SUMS} FROM {table} WHERE {' AND '.join(where)} GROUP BY minute"
    return conn.execute(sql, params).fetchall()
