"""The SQLite file's last hour, counted by minute as jobs end (sqlite/recent.py): the same figures as counting
every ending since a time, whatever order the endings are written in, and files written before the ring."""

from __future__ import annotations

import random
import sqlite3
import time
from collections import Counter
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from shared.model import Status
from shared.store.browse import RecentCounts
from shared.store.history import MINUTE_MS, unix_minute
from shared.store.sqlite import SqliteJobStore
from shared.store.sqlite.minutes import KEPT_MINUTES
from tests.contract.store_kit import new
from tests.support import backend_beside

TYPES = ("noop", "flaky")
TENANTS = ("tenant-a", "tenant-b")


def ended_at(path: Path, endings: list[tuple[str, str, int]]) -> None:
    """Each (job id, status, unix ms) ends the job with that status at that time, in the order given, the way the
    store writes an ending (one UPDATE of the status), and gives a dead letter its failed attempt."""
    with closing(sqlite3.connect(path)) as conn, conn:
        for job_id, status, at in endings:
            conn.execute("UPDATE jobs SET status = ?, updatedAt = ? WHERE id = ?", (status, at, job_id))
            if status == Status.DLQ.value:
                conn.execute(
                    "INSERT INTO executions (id, jobId, attempt, outcome, startedAt, finishedAt) "
                    "VALUES (? || ':1', ?, 1, 'failed', ?, ?)",
                    (job_id, job_id, at - 5, at),
                )


def counted_from_jobs(path: Path, tenant: str | None, since_ms: int) -> dict[str, RecentCounts]:
    """The last hour counted from every job and attempt: what the ring must agree with."""
    tenant_sql = "AND jobs.tenantId = ?" if tenant else ""
    params = [since_ms, *([tenant] if tenant else [])]
    with closing(sqlite3.connect(path)) as conn:
        ended = conn.execute(
            f"SELECT jobType, status, count(*) FROM jobs WHERE status IN ('completed', 'dlq') AND updatedAt >= ? "
            f"{tenant_sql} GROUP BY 1, 2",
            params,
        ).fetchall()
        failed = conn.execute(
            "SELECT jobs.jobType, count(*) FROM executions JOIN jobs ON jobs.id = executions.jobId "
            f"WHERE outcome = 'failed' AND finishedAt >= ? {tenant_sql} GROUP BY 1",
            params,
        ).fetchall()
    figures: dict[str, Counter[str]] = {}
    for job_type, status, count in ended:
        figures.setdefault(job_type, Counter())[status] = count
    for job_type, count in failed:
        figures.setdefault(job_type, Counter())["failed"] = count
    return {t: RecentCounts(completed=c["completed"], failed=c["failed"], dlq=c["dlq"]) for t, c in figures.items()}


def store_with_jobs(path: Path, count: int) -> tuple[SqliteJobStore, list[tuple[str, str]]]:
    store = SqliteJobStore(path)
    store.ensure_schema()
    made = store.create_many([new(tenantId=TENANTS[n % 2], jobType=TYPES[n // 2 % 2]) for n in range(count)])
    return store, [(job.id, job.tenantId) for job in made if not isinstance(job, Exception)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_ring_counts_what_the_jobs_say_whatever_order_endings_come_in(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "jobs.db"
    store, jobs = store_with_jobs(path, 400)
    now_ms = int(time.time() * 1000)
    # Endings over the last two hours (older than the ring too), written out of order, several to a minute.
    endings = [
        (job_id, rng.choice(["completed", "completed", "dlq"]), now_ms - rng.randrange(0, 2 * 3_600_000))
        for job_id, _ in jobs
    ]
    ended_at(path, endings)
    browser = backend_beside(store).browser
    try:
        for since_ms in (
            now_ms - 3_600_000,  # the overview's window
            (now_ms // MINUTE_MS - 30) * MINUTE_MS,  # on a minute's start: the ring alone
            now_ms - 5 * 3_600_000,  # beyond the ring's reach: the indexes alone
            now_ms + 1000,
        ):
            since = datetime.fromtimestamp(since_ms / 1000, UTC)
            for tenant in (None, *TENANTS):
                assert browser.counts(tenant, since).lastHour == counted_from_jobs(path, tenant, since_ms), (
                    since_ms,
                    tenant,
                )
    finally:
        store.close()


def test_an_ending_stays_counted_in_its_hour_once_the_job_moved_on(tmp_path: Path) -> None:
    # The figures count what happened: a job deleted (or a dead letter sent back) after it ended still ended.
    path = tmp_path / "jobs.db"
    store, jobs = store_with_jobs(path, 4)
    now_ms = int(time.time() * 1000)
    ended_at(path, [(job_id, "completed", now_ms) for job_id, _ in jobs])
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("DELETE FROM jobs")
    since = datetime.fromtimestamp((now_ms // MINUTE_MS - 10) * MINUTE_MS / 1000, UTC)
    try:
        last_hour = backend_beside(store).browser.counts(None, since).lastHour
        assert last_hour == {"noop": RecentCounts(completed=2), "flaky": RecentCounts(completed=2)}
    finally:
        store.close()


def test_a_file_written_before_the_ring_gets_its_last_hour_counted(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    store, jobs = store_with_jobs(path, 40)
    store.close()
    now_ms = int(time.time() * 1000)
    with closing(sqlite3.connect(path)) as conn, conn:  # as an earlier version left it: no ring, no triggers
        for name in ("completed", "dlq", "failed_attempt", "attempt_failed"):
            conn.execute(f"DROP TRIGGER history_{name}")
        conn.execute("DROP TABLE history_by_minute")
        conn.execute("PRAGMA user_version = 0")  # nor numbered migrations
    ended_at(path, [(job_id, ("completed", "dlq")[n % 2], now_ms - n * 90_000) for n, (job_id, _) in enumerate(jobs)])

    reopened = SqliteJobStore(path)
    reopened.ensure_schema()
    try:
        since_ms = (now_ms // MINUTE_MS - KEPT_MINUTES + 4) * MINUTE_MS
        since = datetime.fromtimestamp(since_ms / 1000, UTC)
        counted = counted_from_jobs(path, None, since_ms)
        assert sum(c.completed + c.dlq for c in counted.values()) > 0
        assert backend_beside(reopened).browser.counts(None, since).lastHour == counted
    finally:
        reopened.close()


def test_every_tenants_history_is_read_from_the_sums_once_made(tmp_path: Path) -> None:
    """After the reaper's sample, every tenant's minutes come from history_every_tenant: a row written into a
    minute already summed (and not summed again) shows in its tenant's history, not in every tenant's."""
    path = tmp_path / "jobs.db"
    store, _ = store_with_jobs(path, 0)
    browser = backend_beside(store).browser
    now = datetime.now(UTC)
    minute = unix_minute(now) - 10
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            "INSERT INTO history_by_minute (tenantId, jobType, minute, completed) VALUES ('tenant-a', 'noop', ?, 3)",
            [minute],
        )
    assert store.sample_backlog(now)
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE history_by_minute SET completed = 5 WHERE minute = ?", [minute])
    since = now - timedelta(minutes=30)
    try:
        assert sum(m.completed for m in browser.history("tenant-a", None, since, now).minutes) == 5
        assert sum(m.completed for m in browser.history(None, None, since, now).minutes) == 3
        assert sum(m.completed for m in browser.history(None, "noop", since, now).minutes) == 3
    finally:
        store.close()
