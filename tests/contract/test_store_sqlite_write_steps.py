"""What the SQLite store's claims, starts and outcomes return inside the write lock: one row per statement at most.
Every row a statement returns is a step of sqlite3 that gives up the GIL, and a writer that loses the GIL there holds
up every other writer until it gets it back (codecs.folded_rows)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from shared.model import Job, Outcome, Status, utc_now
from shared.store.base import AttemptFinish, AttemptResult, AttemptStart, NewJob
from shared.store.sqlite import SqliteDatabase, SqliteJobStore
from shared.store.sqlite.codecs import folded_rows, jobs_in_order


class _CountedCursor:
    """A cursor that records how many rows its statement returned."""

    def __init__(self, cursor: sqlite3.Cursor, sql: str, counts: list[tuple[str, int]]) -> None:
        self._cursor = cursor
        self._sql = sql
        self._counts = counts
        self._returned = 0
        counts.append((sql, 0))
        self._index = len(counts) - 1

    def _counted(self, rows: list[Any]) -> list[Any]:
        self._returned += len(rows)
        self._counts[self._index] = (self._sql, self._returned)
        return rows

    def fetchone(self) -> Any:
        row = self._cursor.fetchone()
        self._counted([] if row is None else [row])
        return row

    def fetchall(self) -> list[Any]:
        return self._counted(self._cursor.fetchall())

    def __iter__(self) -> Iterator[Any]:
        for row in self._cursor:
            self._counted([row])
            yield row

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


class _CountedConnection:
    """The write connection, each statement's returned rows recorded."""

    def __init__(self, conn: sqlite3.Connection, counts: list[tuple[str, int]]) -> None:
        self._conn = conn
        self._counts = counts

    def execute(self, sql: str, params: Any = ()) -> _CountedCursor:
        return _CountedCursor(self._conn.execute(sql, params), sql, self._counts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteJobStore]:
    store = SqliteJobStore(tmp_path / "jobs.db")
    store.ensure_schema()
    yield store
    store.close()


def test_a_claim_a_start_and_an_outcome_return_at_most_one_row_per_statement_inside_the_write_lock(
    store: SqliteJobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    due = utc_now() - timedelta(seconds=1)
    store.create_many(
        [NewJob(idempotencyKey=f"k{n}", tenantId=f"t{n % 3}", jobType="noop", scheduledAt=due) for n in range(64)]
    )
    counts: list[tuple[str, int]] = []
    write = SqliteDatabase.write

    @contextmanager
    def counted_write(database: SqliteDatabase, **options: bool) -> Iterator[Any]:
        with write(database, **options) as conn:
            yield _CountedConnection(conn, counts)

    monkeypatch.setattr(SqliteDatabase, "write", counted_write)
    claimed = store.claim_due_jobs(utc_now(), 64, ["noop"])
    lease = utc_now() + timedelta(minutes=5)
    started = store.start_attempts([AttemptStart(c.id, c.jobType, "w1", lease) for c in claimed.claimed()])
    jobs = [job for job in started if isinstance(job, Job)]
    now = utc_now()
    finished = store.finish_attempts([AttemptFinish(job, AttemptResult(Outcome.SUCCEEDED, now, now)) for job in jobs])

    assert len(claimed) == 64
    assert [(job.id, job.status) for job in jobs] == [(c.id, Status.RUNNING) for c in claimed.claimed()]
    assert [job.status for job in finished if isinstance(job, Job)] == [Status.COMPLETED] * 64
    assert counts, "the claim, the start and the outcome wrote through the write connection"
    many = [(sql.split()[0:4], n) for sql, n in counts if n > 1]
    assert many == []


def test_a_claims_jobs_are_read_once_when_asked_for_and_are_the_jobs_it_queued(
    store: SqliteJobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    due = utc_now() - timedelta(seconds=1)
    made = store.create_many(
        [NewJob(idempotencyKey=f"k{n}", tenantId="t", jobType="noop", scheduledAt=due) for n in range(5)]
    )
    reads: list[None] = []
    read = SqliteDatabase.read

    @contextmanager
    def counted_read(database: SqliteDatabase) -> Iterator[sqlite3.Connection]:
        reads.append(None)
        with read(database) as conn:
            yield conn

    monkeypatch.setattr(SqliteDatabase, "read", counted_read)
    claimed = store.claim_due_jobs(utc_now(), 5, ["noop"])
    wakeups = claimed.claimed()
    assert reads == []  # the wake-ups came with the claim: no job was read
    assert [c.id for c in wakeups] == [job.id for job in made if not isinstance(job, Exception)]
    assert [c.next_attempt for c in wakeups] == [1] * 5
    assert [(job.id, job.status) for job in claimed] == [(c.id, Status.QUEUED) for c in wakeups]
    assert [job.id for job in claimed] == [c.id for c in wakeups]
    assert len(reads) == 1  # the jobs were read once, when first asked for


def test_folded_rows_are_the_rows_of_the_select_they_fold(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "values.db")
    conn.execute("CREATE TABLE t (a TEXT, b INTEGER, c REAL, d TEXT)")
    rows = [('é\u2603 "q" \\', 2**62, 1.5, None), ("", -1, 0.0, "x"), ("id", 0, -2.25, "ü")]
    conn.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", rows)
    folded = folded_rows(conn, ("a", "b", "c", "d"), "FROM t WHERE b <= ?", [2**62])
    assert sorted(map(tuple, folded)) == sorted(rows)
    assert folded_rows(conn, ("a",), "FROM t WHERE b > ?", [2**62]) == []


def test_jobs_in_order_reads_every_job_in_the_order_asked(store: SqliteJobStore) -> None:
    later = utc_now() + timedelta(hours=1)
    made = store.create_many(
        [NewJob(idempotencyKey=f"k{n}", tenantId="t", jobType="noop", scheduledAt=later) for n in range(3)]
    )
    ids = [job.id for job in reversed(made) if not isinstance(job, Exception)]
    with store.database.read() as conn:
        assert [job.id for job in jobs_in_order(conn, ids)] == ids
        assert jobs_in_order(conn, []) == []
        with pytest.raises(KeyError):
            jobs_in_order(conn, [*ids, "0" * 24])
