"""What the SQLite store guarantees beyond the protocol: its file, WAL, lock waits, closing."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
from bson import ObjectId

from shared.model import Outcome
from shared.store.base import (
    StoreUnavailable,
    TransitionRefused,
)
from shared.store.sqlite import SqliteDatabase, SqliteJobStore
from tests.contract.store_kit import (
    new,
    queued,
    reload,
    start,
)


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    return tmp_path / "jobs.db"


def test_sqlite_default_file_is_jobsched_db_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = SqliteJobStore()
    try:
        store.ensure_schema()
        job = store.create(new())
    finally:
        store.close()
    assert (tmp_path / "jobsched.db").is_file()
    reopened = SqliteJobStore(tmp_path / "jobsched.db")
    try:
        assert reopened.get(job.id) == job
    finally:
        reopened.close()


def test_sqlite_creates_its_file_readable_by_its_owner_only(sqlite_path: Path) -> None:
    """The file holds every tenant's payloads (and the API keys' digests); SQLite's own files follow its mode."""
    store = SqliteJobStore(sqlite_path)
    try:
        store.ensure_schema()
        store.create(new())
        written = [sqlite_path, sqlite_path.with_name("jobs.db-wal"), sqlite_path.with_name("jobs.db-shm")]
        assert {oct(p.stat().st_mode & 0o777) for p in written} == {"0o600"}
    finally:
        store.close()


def test_sqlite_opening_another_connection_keeps_the_locks_this_process_holds(sqlite_path: Path) -> None:
    """Closing any descriptor of the database file drops every POSIX lock the process holds on it: if the store
    opened the existing file itself, another process could take the file from under this one's readers (here:
    switch it out of WAL mode, which needs every other connection gone)."""
    store = SqliteJobStore(sqlite_path)
    store.ensure_schema()
    try:
        with store.database.read() as reading:
            reading.execute("BEGIN")
            reading.execute("SELECT count(*) FROM jobs").fetchone()  # a reader's lock on the file
            try:
                with store.database.read(), store.database.read():  # new pooled connections open meanwhile
                    pass
                other = subprocess.run(
                    [sys.executable, "-c", _LEAVE_WAL, str(sqlite_path)], capture_output=True, text=True, timeout=60
                )
            finally:
                reading.execute("COMMIT")
    finally:
        store.close()
    assert other.stdout.strip() == "database is locked", other.stderr


_LEAVE_WAL = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)
try:
    print(conn.execute("PRAGMA journal_mode = DELETE").fetchone()[0])
except sqlite3.OperationalError as exc:
    print(exc)
"""


def test_sqlite_keeps_the_mode_an_operator_gave_an_existing_file(sqlite_path: Path) -> None:
    sqlite_path.touch(mode=0o640)
    sqlite_path.chmod(0o640)
    store = SqliteJobStore(sqlite_path)
    try:
        store.ensure_schema()
    finally:
        store.close()
    assert sqlite_path.stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize("path", [":memory:", "", "file::memory:?cache=shared"])
def test_sqlite_refuses_an_in_memory_database(path: str) -> None:
    with pytest.raises(ValueError, match="file path"):
        SqliteJobStore(path)


def test_sqlite_uses_wal_and_waits_then_gives_up_on_a_locked_database(sqlite_path: Path) -> None:
    store = SqliteJobStore(sqlite_path, timeout=0.2)
    try:
        store.ensure_schema()
        blocker = sqlite3.connect(sqlite_path, isolation_level=None)
        try:
            assert blocker.execute("PRAGMA journal_mode").fetchone() == ("wal",)
            blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
            with pytest.raises(StoreUnavailable, match="locked"):
                store.create(new("blocked"))
            assert store.get(str(ObjectId())) is None  # WAL: readers are not blocked by the writer
            blocker.execute("ROLLBACK")
        finally:
            blocker.close()
        assert store.create(new("blocked")).idempotencyKey == "blocked"
    finally:
        store.close()


def test_sqlite_after_close_is_store_unavailable(sqlite_path: Path) -> None:
    store = SqliteJobStore(sqlite_path)
    store.ensure_schema()
    store.close()
    with pytest.raises(StoreUnavailable):
        store.ping()


def test_sqlite_writes_of_every_thread_share_one_connection(sqlite_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A connection's page cache is dropped whenever another connection changed the file: the writes of all
    # threads go through one, so each finds the pages the writes before it left in its cache, while the reads
    # borrow the pool's.
    # Every connection the database opens is lent to a read or a write before anything else uses it.
    opened: dict[int, sqlite3.Connection] = {}
    writers: set[int] = set()
    read, write = SqliteDatabase.read, SqliteDatabase.write

    @contextmanager
    def traced_read(database: SqliteDatabase) -> Iterator[sqlite3.Connection]:
        with read(database) as conn:
            opened[id(conn)] = conn
            yield conn

    @contextmanager
    def traced_write(database: SqliteDatabase, **options: bool) -> Iterator[sqlite3.Connection]:
        with write(database, **options) as conn:
            opened[id(conn)] = conn
            writers.add(id(conn))
            yield conn

    monkeypatch.setattr(SqliteDatabase, "read", traced_read)
    monkeypatch.setattr(SqliteDatabase, "write", traced_write)
    store = SqliteJobStore(sqlite_path)
    try:
        store.ensure_schema()

        def create_and_read(n: int) -> str:
            job = store.create(new(f"key-{n}"))
            for _ in range(5):
                assert store.get(job.id) == job
            store.cancel(job.id)
            return job.id

        with ThreadPoolExecutor(8) as pool:
            ids = list(pool.map(create_and_read, range(64)))
        assert len(set(ids)) == 64
        assert len(writers) == 1
    finally:
        store.close()
    assert all(_is_closed(conn) for conn in opened.values())


def test_sqlite_writes_keep_their_statement_journals_in_memory_and_migrations_on_disk(
    sqlite_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A statement of a write that changes many rows keeps the pages it changed (its statement journal) until it
    ends: in memory for a write of the usual size, which SQLite would otherwise spill to a temporary file past
    64 KiB; in a file for a bulk write, a migration's, which may change every page of the file. Reads keep SQLite's
    default."""

    def temp_store(conn: sqlite3.Connection) -> int:
        return int(conn.execute("PRAGMA temp_store").fetchone()[0])

    database = SqliteDatabase(sqlite_path)
    try:
        with database.write() as conn:
            assert temp_store(conn) == 2  # MEMORY
        with database.write(bulk=True) as conn:
            assert temp_store(conn) == 1  # FILE
        with database.write() as conn:
            assert temp_store(conn) == 2
        with database.read() as conn:
            assert temp_store(conn) == 0  # the default, a file
    finally:
        database.close()
    bulk: list[bool] = []
    write = SqliteDatabase.write

    @contextmanager
    def recorded(database: SqliteDatabase, **options: bool) -> Iterator[sqlite3.Connection]:
        bulk.append(options.get("bulk", False))
        with write(database, **options) as conn:
            yield conn

    monkeypatch.setattr(SqliteDatabase, "write", recorded)
    store = SqliteJobStore(sqlite_path)
    try:
        store.ensure_schema()
    finally:
        store.close()
    assert bulk == [True]


def _is_closed(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("SELECT 1")
    except sqlite3.ProgrammingError:
        return True
    return False


def test_sqlite_start_of_a_job_another_writer_started_is_refused_and_writes_nothing(sqlite_path: Path) -> None:
    # The job alone decides who owns an attempt: a start read by another writer first leaves this one nothing.
    store = SqliteJobStore(sqlite_path)
    try:
        store.ensure_schema()
        job = queued(store)
        with closing(sqlite3.connect(sqlite_path, isolation_level=None)) as other:
            other.execute(
                "UPDATE jobs SET status = 'running', claimedBy = 'w0', claimedAt = 1 "
                "WHERE id = ? AND status = 'queued'",
                (job.id,),
            )
        taken = reload(store, job)
        with pytest.raises(TransitionRefused, match=r"cannot start .* it is running"):
            start(store, job, "w1")
        assert reload(store, job) == taken
        assert [(e.attempt, e.worker, e.outcome) for e in store.list_executions(job.id)] == [(1, "w0", Outcome.RUNNING)]
    finally:
        store.close()
