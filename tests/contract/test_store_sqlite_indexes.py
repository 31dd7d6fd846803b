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
    "failed_attempts": "CREATE INDEX failed_attempts ON executions (finishedAt) "
    "WHERE outcome IN ('failed', 'timeout', 'lost')",
}
# An index of an earlier version that nothing reads any more.
OBSOLETE = (
    "CREATE INDEX final_counts ON jobs (jobType, status, tenantId) WHERE status IN ('completed', 'dlq', 'cancelled')"
)


def explain(path: Path, sql: str, params: tuple[object, ...]) -> list[str]:
    with sqlite3.connect(path) as conn:
        ops = [str(row[1]) for row in conn.execute(f"EXPLAIN {sql}", params)]
    conn.close()
    return ops


def test_a_jobs_status_change_builds_no_temporary_table(tmp_path: Path) -> None:
    # SQLite checks every partial index's condition on the old and the new row of such an update (and on the row
    # an outcome's record upsert writes); an IN of more than two constants there is a temporary table built per
    # row (OpenEphemeral), which was most of its cost.
    path = tmp_path / "jobs.db"
    store = SqliteJobStore(path)
    store.ensure_schema()
    store.close()
    job_update = "UPDATE jobs SET status = ?, updatedAt = ? WHERE id = ? AND status = ?"
    record_insert = (
        "INSERT INTO executions (id, jobId, attempt, outcome, finishedAt) VALUES (?, ?, 1, ?, ?) ON CONFLICT (id) "
        "DO UPDATE SET outcome = excluded.outcome, finishedAt = excluded.finishedAt WHERE outcome = 'running'"
    )
    assert "OpenEphemeral" not in explain(path, job_update, ("completed", 1, "x", "running"))
    assert "OpenEphemeral" not in explain(path, record_insert, ("x:1", "x", "failed", 1))


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
        conn.execute(OBSOLETE)
        conn.execute("PRAGMA user_version = 0")  # those versions had no numbered migrations
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
        assert "final_counts" not in stored  # nothing reads it any more: it would only cost writes
        # The operator's queries name these indexes (INDEXED BY): with the old conditions they could not run.
        browser = backend_beside(reopened).browser
        counts = browser.counts(None, utc_now() - timedelta(hours=1))
        assert counts.byType["noop"]["completed"] == 1
        assert [j.id for j in browser.page(done.tenantId, JobQuery(status=Status.COMPLETED))] == [done.id]
    finally:
        reopened.close()


def test_a_tenants_pending_jobs_are_read_from_their_own_index(tmp_path: Path) -> None:
    # Listing one tenant's pending jobs must not walk every tenant's (the due index has no tenant).
    path = tmp_path / "jobs.db"
    store = SqliteJobStore(path)
    store.ensure_schema()
    browser = backend_beside(store).browser
    later = utc_now() + timedelta(hours=1)
    for tenant, count in (("crowded", 30), ("quiet", 3)):
        store.create_many([new(tenantId=tenant, jobType=f"t{n % 2}", scheduledAt=later) for n in range(count)])
    page = browser.page("quiet", JobQuery(status=Status.PENDING, limit=10))
    assert [j.tenantId for j in page] == ["quiet"] * 3
    assert page == sorted(page, key=lambda j: (j.createdAt, j.id), reverse=True)
    assert [j.jobType for j in browser.page("quiet", JobQuery(status=Status.PENDING, jobType="t1"))] == ["t1"]
    statements: list[str] = []
    with store.database.read() as traced:  # given back, it is the connection the next read takes (newest first)
        traced.set_trace_callback(statements.append)
    browser.page("quiet", JobQuery(status=Status.PENDING, limit=10))
    traced.set_trace_callback(None)
    [listing] = [s for s in statements if s.startswith("SELECT")]
    with sqlite3.connect(path) as conn:
        plan = " ".join(str(r[3]) for r in conn.execute(f"EXPLAIN QUERY PLAN {listing}"))
    conn.close()
    store.close()
    assert "USING INDEX pending_listing (tenantId=?)" in plan
