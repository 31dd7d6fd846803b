"""The SQLite store's job_counts: kept by triggers through every write that inserts, moves or deletes a job, so
that it always equals a count of the jobs themselves; a file made before it gets it at ensure_schema."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

from shared.model import Outcome, Status, utc_now
from shared.store.base import RunSpec
from shared.store.sqlite import SqliteJobStore
from tests.contract.store_kit import LEASE, new, queued, result, running, start

RECOUNT = """SELECT tenantId, jobType, status, kind = 'template', count(*) FROM jobs
    WHERE status IN ('pending', 'buffered', 'completed', 'dlq', 'cancelled') GROUP BY 1, 2, 3, 4"""
KEPT = "SELECT tenantId, jobType, status, template, n FROM job_counts WHERE n != 0"


def counts(path: Path, sql: str) -> set[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        rows = set(conn.execute(sql).fetchall())
    conn.close()
    return rows


def test_the_counts_follow_every_kind_of_write(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    store = SqliteJobStore(path)
    store.ensure_schema()
    later = utc_now() + timedelta(hours=1)
    store.create_many([new("a"), new("a"), new("b", tenantId="t2", jobType="mail"), new(scheduledAt=later)])
    template = store.create(new("nightly", cron="0 2 * * *"))
    planned = [utc_now() - timedelta(hours=h) for h in (3, 2, 1)]
    store.add_runs(template, [RunSpec(planned[0]), RunSpec(planned[1], status=Status.BUFFERED)])
    [buffered] = store.buffered_runs(10)
    store.promote_buffered(buffered, utc_now())
    done = running(store)
    store.finish_attempt(done, result(Outcome.SUCCEEDED))
    dead = running(store, maxAttempts=1)
    store.finish_attempt(dead, result(Outcome.FAILED, "boom"))
    store.redrive(dead.id)
    lost = running(store, lease_until=utc_now() - timedelta(seconds=1))
    [expired] = [j for j in store.expired_attempts(utc_now(), 10) if j.id == lost.id]
    store.recover_attempt(expired, "lost")
    store.cancel(store.create(new(scheduledAt=later)).id)
    store.cancel(running(store).id)
    waiting = queued(store)
    store.release_claims([waiting])
    queued(store, jobType="stale")
    store.release_stale_claims(utc_now() + timedelta(seconds=1))
    start(store, queued(store, jobType="started"), lease_until=utc_now() + LEASE)
    gone = running(store)
    store.finish_attempt(gone, result(Outcome.SUCCEEDED))
    store.delete(gone.id)
    store.dead_letter_template(store.create(new("broken", interval="1h")), "unparsable")
    store.delete_finished(Status.COMPLETED, utc_now() + timedelta(seconds=1), 1)
    store.close()
    recounted = counts(path, RECOUNT)
    assert counts(path, KEPT) == recounted
    assert {status for _, _, status, _, _ in recounted} >= {"pending", "cancelled", "dlq"}


def test_a_file_made_before_the_counts_gets_them_from_its_jobs(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    store = SqliteJobStore(path)
    store.ensure_schema()
    store.create_many([new(), new(), new(tenantId="t2"), new("nightly", cron="0 2 * * *")])
    store.finish_attempt(running(store), result(Outcome.SUCCEEDED))
    store.close()
    with sqlite3.connect(path) as conn:
        for trigger in ("counted_insert", "counted_delete", "counted_leave", "counted_enter"):
            conn.execute(f"DROP TRIGGER {trigger}")
        conn.execute("DROP TABLE job_counts")
        conn.execute("UPDATE jobs SET status = 'dlq' WHERE tenantId = 't2'")  # a write of the older version
        conn.execute("PRAGMA user_version = 0")  # that version had no numbered migrations
    conn.close()
    reopened = SqliteJobStore(path)
    reopened.ensure_schema()
    reopened.ensure_schema()  # once only
    reopened.create(new())
    reopened.close()
    assert counts(path, KEPT) == counts(path, RECOUNT)
    assert ("t2", "noop", "dlq", 0, 1) in counts(path, KEPT)
