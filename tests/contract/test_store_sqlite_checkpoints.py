"""The SQLite file's WAL, checkpointed on a thread of its own (shared/store/sqlite/checkpoints.py)."""

from __future__ import annotations

import threading
import weakref
from pathlib import Path

import pytest

from shared.store.sqlite import SqliteDatabase
from shared.store.sqlite.checkpoints import CHECKPOINT_EVERY_COMMITS

WAL_BOUND = 2 * 1024 * 1024  # without the thread: 4.2 MB; with it 0.14-0.24 MB (a tight loop of commits)


def commit_rows(database: SqliteDatabase, count: int) -> None:
    with database.write() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS t (n INTEGER)")
    for n in range(count):
        with database.write() as conn:
            conn.execute("INSERT INTO t (n) VALUES (?)", (n,))


def checkpoint_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "sqlite-checkpoints"]


def test_the_wal_stays_small_without_a_writer_checkpointing_it(tmp_path: Path) -> None:
    """Writers leave checkpoints to the thread, their own threshold being 10,000 pages (40 MB): while a thousand
    commits go by, the thread's checkpoints let the WAL start over, so its file stays a few commits long."""
    database = SqliteDatabase(tmp_path / "jobs.db")
    try:
        commit_rows(database, 1024)
        wal_bytes = (tmp_path / "jobs.db-wal").stat().st_size
        with database.read() as conn:
            assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 1024
    finally:
        database.close()
    # Without the thread the file holds every commit's pages; with it, those since its last checkpoint.
    assert wal_bytes < WAL_BOUND


def test_a_commit_stands_when_no_checkpoint_thread_can_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The thread is started by a commit: if it cannot be, the commit has still been made and says so (a write
    reported failed after it committed would make an executor give up an attempt it has started)."""

    def refused(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    database = SqliteDatabase(tmp_path / "jobs.db")
    try:
        with monkeypatch.context() as patch:
            patch.setattr(threading.Thread, "start", refused)
            commit_rows(database, 2 * CHECKPOINT_EVERY_COMMITS)
        with database.read() as conn:
            assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 2 * CHECKPOINT_EVERY_COMMITS
        commit_rows(database, CHECKPOINT_EVERY_COMMITS)  # a thread can start again: it is started now
    finally:
        database.close()


def test_a_database_dropped_without_close_is_collected_and_its_thread_ends(tmp_path: Path) -> None:
    before = set(checkpoint_threads())
    database = SqliteDatabase(tmp_path / "jobs.db")
    commit_rows(database, CHECKPOINT_EVERY_COMMITS)
    [thread] = set(checkpoint_threads()) - before
    gone = weakref.ref(database)
    del database
    # Collected once nothing holds it: at once, or when the checkpoint the last commit asked for is over (the
    # thread holds it only while one runs); its finalizer then ends the thread.
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert gone() is None
