"""The SQLite store's partial indexes: what keeping them up to date costs a job's writes, and files made
before an index's definition changed."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

from shared.model import Status, utc_now
from shared.store.browse import JobQuery
from shared.store.sqlite import SqliteJobStore
from tests.contract.store_kit import new
from tests.support import backend_beside

# What files written before the partial indexes' conditions became ORed comparisons hold.
OLD_DEFINITIONS = {
    "final_listing": "CREATE INDEX final_listing ON jobs (tenantId, status, createdAt DESC, id DESC) "
    "WHERE status IN ('completed', 'dlq', 'cancelled')",
    "final_counts": "CREATE INDEX final_counts ON jobs (jobType, status, tenantId) "
    "WHERE status IN ('completed', 'dlq', 'cancelled')",
    "failed_attempts": "CREATE INDEX failed_attempts ON executions (finishedAt) "
    "WHERE outcome IN ('failed', 'timeout', 'lost')",
}


def explain(path: Path, sql: str, params: tuple[object, ...]) -> list[str]:
    with sqlite3.connect(path) as conn:
        ops = [str(row[1]) for row in conn.execute(f"EXPLAIN {sql}", params)]
    conn.close()
    return ops


def test_a_jobs_status_change_builds_no_temporary_table(tmp_path: Path) -> None:
    # SQLite checks every partial index's condition on the old and the new row of such an update; an IN of more
    # than two constants there is a temporary table built per row (OpenEphemeral), which was most of its cost.
    path = tmp_path / "jobs.db"
    store = SqliteJobStore(path)
    store.ensure_schema()
    store.close()
    job_update = "UPDATE jobs SET status = ?, updatedAt = ? WHERE id = ? AND status = ?"
    record_update = "UPDATE executions SET outcome = ?, finishedAt = ? WHERE id = ? AND outcome = ?"
    assert "OpenEphemeral" not in explain(path, job_update, ("completed", 1, "x", "running"))
    assert "OpenEphemeral" not in explain(path, record_update, ("succeeded", 1, "x:1", "running"))


def test_a_file_with_older_index_definitions_gets_the_current_ones(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    store = SqliteJobStore(path)
    store.ensure_schema()
    done = store.create(new("done"))
    store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE jobs SET status = 'completed' WHERE id = ?", (done.id,))
        for name, definition in OLD_DEFINITIONS.items():
            conn.execute(f"DROP INDEX {name}")
            conn.execute(definition)
    conn.close()

    reopened = SqliteJobStore(path)
    try:
        reopened.ensure_schema()
        with sqlite3.connect(path) as conn:
            stored = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index'").fetchall())
        conn.close()
        for name, definition in OLD_DEFINITIONS.items():
            assert name in stored
            assert stored[name] != definition
        # The operator's queries name these indexes (INDEXED BY): with the old conditions they could not run.
        browser = backend_beside(reopened).browser
        counts = browser.counts(None, utc_now() - timedelta(hours=1))
        assert counts.byType["noop"]["completed"] == 1
        assert [j.id for j in browser.page(done.tenantId, JobQuery(status=Status.COMPLETED))] == [done.id]
    finally:
        reopened.close()
