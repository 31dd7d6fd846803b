"""A database file written before a column existed keeps working: ensure_schema adds it (SQLite store)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from shared.model import Status
from shared.store.sqlite import SqliteJobStore
from tests.contract.store_kit import new, running


def test_an_older_file_gets_the_cancel_request_column_and_keeps_its_jobs(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = SqliteJobStore(path)
    store.ensure_schema()
    kept = store.create(new("kept"))
    store.close()
    with sqlite3.connect(path) as conn:  # the file as the release before cancellation requests wrote it
        conn.execute("ALTER TABLE jobs DROP COLUMN cancelRequested")
    conn.close()

    upgraded = SqliteJobStore(path)
    try:
        upgraded.ensure_schema()
        upgraded.ensure_schema()  # idempotent
        assert upgraded.get(kept.id) == kept
        job = running(upgraded)
        assert upgraded.cancel(job.id).cancelRequested is True
        assert upgraded.cancel(kept.id).status is Status.CANCELLED
    finally:
        upgraded.close()
