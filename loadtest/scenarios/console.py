"""`console`: what the console's reads cost on a large SQLite store, and what their indexes cost the writes.

Seeds N jobs (default 100,000) into one tenant of a fresh SQLite store: most completed, some pending, a
share dead-lettered under a few errors, one failed attempt per dead letter. Then, each repeated and reported
as the median in ms: the first page of GET /jobs's query (50, newest first), a page at depth N/2 reached by
cursor against the same page by OFFSET (the baseline), the status=dlq page, the overview's counts against the
same queries with no index (NOT INDEXED), and the DLQ groups. Last, jobs/s through create → claim → start →
finish on a store with the console's indexes and count triggers against one without them (their write cost,
same run).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

from loadtest.benchkit import Scenario, envelope, ratio
from shared.backends import open_backend, sqlite_url
from shared.model import Outcome, Status, utc_now
from shared.store.base import AttemptResult, AttemptStart, NewJob, only_answer
from shared.store.browse import JobQuery, PageCursor
from shared.store.sqlite.codecs import from_ms, to_job, to_ms
from shared.store.sqlite.schema import ENDED_SQL, FAILED_SQL, TEMPLATES_SQL

TENANT = "console-bench"
PAGE = 50
ERRORS = ["timeout talking to the mailer", "card declined", "template missing", "HandlerError: boom"]
# The indexes the console's queries add to the SQLite schema (their write cost is the lifecycle figure).
CONSOLE_INDEXES = (
    "final_listing",
    "pending_listing",
    "tenant_type_listing",
    "tenant_templates",
    "template_runs",
    "recent_endings",
    "dead_letters",
    "failed_attempts",
)

# The triggers that keep the overview's counts (job_counts).
COUNT_TRIGGERS = ("counted_insert", "counted_delete", "counted_leave", "counted_enter")
# The overview's counts as the store would answer them without the console's indexes (same results).
UNINDEXED_COUNTS = (
    "SELECT jobType, status, count(*) FROM jobs NOT INDEXED GROUP BY jobType, status",
    f"SELECT jobType, status, count(*) FROM jobs NOT INDEXED WHERE {ENDED_SQL} AND updatedAt >= ? "
    "GROUP BY jobType, status",
    f"SELECT jobs.jobType, count(*) FROM executions NOT INDEXED JOIN jobs ON jobs.id = executions.jobId "
    f"WHERE {FAILED_SQL} AND executions.finishedAt >= ? GROUP BY jobs.jobType",
    f"SELECT jobType, status, count(*) FROM jobs NOT INDEXED WHERE {TEMPLATES_SQL} GROUP BY jobType, status",
)


def median_ms(call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 3)


def seed(path: Path, count: int, dlq_share: float) -> None:
    """`count` jobs through the store, then moved to their statuses in bulk (the reads do not care how)."""
    store = open_backend(sqlite_url(os.path.abspath(path)), durable=False).jobs
    start = utc_now() - timedelta(seconds=count)
    try:
        store.ensure_schema()
        for n in range(count):
            store.create(
                NewJob(
                    idempotencyKey=f"console-{n}",
                    tenantId=TENANT,
                    jobType=("noop", "log-message", "flaky", "slow")[n % 4],
                    scheduledAt=start,
                    createdAt=start + timedelta(seconds=n),
                )
            )
    finally:
        store.close()
    dead_every = max(int(1 / dlq_share), 1)
    now = to_ms(utc_now())
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE jobs SET status = ?, updatedAt = ? WHERE rowid % 10 != 0", (Status.COMPLETED.value, now))
        for k, error in enumerate(ERRORS):
            conn.execute(
                "UPDATE jobs SET status = ?, lastError = ?, attempts = 1, updatedAt = ? "
                "WHERE rowid % ? = 0 AND (rowid / ?) % ? = ?",
                (Status.DLQ.value, error, now, dead_every, dead_every, len(ERRORS), k),
            )
        conn.execute(
            "INSERT INTO executions (id, jobId, attempt, outcome, worker, startedAt, finishedAt, durationMs, error) "
            "SELECT id || ':1', id, 1, ?, 'bench', updatedAt, updatedAt, 1, lastError FROM jobs WHERE status = ?",
            (Outcome.FAILED.value, Status.DLQ.value),
        )


def reads(path: Path, count: int, repeat: int) -> tuple[dict[str, float], dict[str, float]]:
    backend = open_backend(sqlite_url(os.path.abspath(path)))
    store, browser = backend.jobs, backend.browser
    since = utc_now() - timedelta(hours=1)
    depth = count // 2
    offset_sql = "SELECT * FROM jobs WHERE tenantId = ? ORDER BY createdAt DESC, id DESC LIMIT ? OFFSET ?"
    try:
        with closing(sqlite3.connect(path)) as conn:
            conn.row_factory = sqlite3.Row  # the store's row shape, so the baseline decodes jobs as the store does
            created, job_id = conn.execute(
                "SELECT createdAt, id FROM jobs WHERE tenantId = ? ORDER BY createdAt DESC, id DESC LIMIT 1 OFFSET ?",
                (TENANT, depth - 1),
            ).fetchone()
            at_depth = PageCursor(from_ms(created), job_id)
            deep = browser.page(TENANT, JobQuery(limit=PAGE, before=at_depth))
            by_offset = conn.execute(offset_sql, (TENANT, PAGE, depth)).fetchall()
            assert [r[0] for r in by_offset] == [j.id for j in deep], "the cursor's page is not the offset's"
            ours = {
                "first_page_ms": median_ms(lambda: browser.page(TENANT, JobQuery(limit=PAGE)), repeat),
                "deep_page_cursor_ms": median_ms(
                    lambda: browser.page(TENANT, JobQuery(limit=PAGE, before=at_depth)), repeat
                ),
                "dlq_page_ms": median_ms(lambda: browser.page(TENANT, JobQuery(Status.DLQ, limit=PAGE)), repeat),
                "counts_ms": median_ms(lambda: browser.counts(None, since), repeat),
                "dlq_groups_ms": median_ms(lambda: browser.dlq_groups(None, 100), repeat),
            }
            recent = [to_ms(since)]
            baseline = {
                "deep_page_offset_ms": median_ms(
                    lambda: [to_job(r) for r in conn.execute(offset_sql, (TENANT, PAGE, depth))], repeat
                ),
                "counts_unindexed_ms": median_ms(
                    lambda: [conn.execute(sql, recent if "?" in sql else []).fetchall() for sql in UNINDEXED_COUNTS],
                    repeat,
                ),
            }
    finally:
        store.close()
    return ours, baseline


def lifecycle_rate(path: Path, jobs: int, with_console_indexes: bool) -> float:
    """Jobs/s through create → claim → start → finish, one at a time, on a fresh store."""
    store = open_backend(sqlite_url(os.path.abspath(path))).jobs
    try:
        store.ensure_schema()
        if not with_console_indexes:
            with closing(sqlite3.connect(path)) as conn, conn:
                for name in CONSOLE_INDEXES:
                    conn.execute(f"DROP INDEX {name}")
                for trigger in COUNT_TRIGGERS:
                    conn.execute(f"DROP TRIGGER {trigger}")
        started = time.perf_counter()
        for n in range(jobs):
            store.create(NewJob(f"life-{n}", TENANT, "noop", utc_now() - timedelta(seconds=1)))
            [job] = store.claim_due_jobs(utc_now(), 1, {"noop"})
            start = AttemptStart(job.id, job.jobType, "bench", utc_now() + timedelta(minutes=5))
            running = only_answer(store.start_attempts([start]))
            now = utc_now()
            outcome = Outcome.FAILED if n % 10 == 0 else Outcome.SUCCEEDED
            store.finish_attempt(running, AttemptResult(outcome, now, now, "bench failure"))
        return round(jobs / (time.perf_counter() - started), 1)
    finally:
        store.close()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=100_000, help="jobs in the store (default 100000)")
    parser.add_argument("--dlq-share", type=float, default=0.01, help="share of them dead-lettered (default 0.01)")
    parser.add_argument("--repeat", type=int, default=20, help="runs of each read (default 20; the median counts)")
    parser.add_argument("--lifecycle-jobs", type=int, default=3000, help="jobs through the write path (default 3000)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="jobsched-console-") as folder:
        path = Path(folder) / "jobsched.db"
        seed(path, args.jobs, args.dlq_share)
        ours, baseline = reads(path, args.jobs, args.repeat)
        ours["lifecycle_jobs_per_s"] = lifecycle_rate(Path(folder) / "with.db", args.lifecycle_jobs, True)
        baseline["lifecycle_jobs_per_s"] = lifecycle_rate(Path(folder) / "without.db", args.lifecycle_jobs, False)
    for name, value in {**ours, **{f"baseline {k}": v for k, v in baseline.items()}}.items():
        print(f"{name:<40} {value:>10}")
    value = ratio(False, ours["deep_page_cursor_ms"], baseline["deep_page_offset_ms"])
    print(f"ratio (offset / cursor at depth {args.jobs // 2}): {value:.1f}x")
    return envelope("console", ours, baseline, value, "sqlite", jobs=args.jobs)


SCENARIO = Scenario(
    "console", "the console's reads on a large SQLite store (ms), and their indexes' write cost", add_arguments, run
)
