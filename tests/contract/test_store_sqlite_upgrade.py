"""A database file written before a column existed keeps working: ensure_schema adds it (SQLite store)."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

from shared.model import Outcome, Status
from shared.store.sqlite import SqliteJobStore
from tests.contract.store_kit import new, result, running


def test_an_older_file_gets_the_cancel_request_column_and_keeps_its_jobs(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = SqliteJobStore(path)
    store.ensure_schema()
    kept = store.create(new("kept"))
    store.close()
    with sqlite3.connect(path) as conn:  # the file as the release before cancellation requests wrote it
        conn.execute("ALTER TABLE jobs DROP COLUMN cancelRequested")
        conn.execute("PRAGMA user_version = 0")  # that release had no numbered migrations
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


def test_an_older_file_gets_the_traceback_column_and_keeps_its_attempts(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = SqliteJobStore(path)
    store.ensure_schema()
    job = running(store)
    store.close()
    with sqlite3.connect(path) as conn:  # the file as the release before tracebacks wrote it
        conn.execute("ALTER TABLE executions DROP COLUMN traceback")
        conn.execute("PRAGMA user_version = 0")  # that release had no numbered migrations
    conn.close()

    upgraded = SqliteJobStore(path)
    try:
        upgraded.ensure_schema()
        upgraded.ensure_schema()  # idempotent
        [record] = upgraded.list_executions(job.id)
        assert (record.outcome, record.traceback) == (Outcome.RUNNING, None)
        failed = replace(result(Outcome.FAILED, "ValueError: x"), traceback="Traceback ...\nValueError: x\n")
        assert upgraded.finish_attempt(job, failed) is not None
        assert upgraded.list_executions(job.id)[0].traceback == "Traceback ...\nValueError: x\n"
    finally:
        upgraded.close()
