"""The SQLite database file as an object: its connections, its transactions and what its failures mean.

Storage: one durable file in WAL mode (readers never block the writer). Times are INTEGER unix milliseconds
(UTC) — the precision MongoDB keeps, exact to compare and to index — and come back as timezone-aware UTC
datetimes (codecs.py). Columns carry the job document's camelCase names. `payload` is JSON text.

Threads: a sqlite3 connection must not be used by two threads at once, so each read borrows one from a small
bounded pool (not one per thread: a pool bounds the number of open files, survives short-lived threads and lets
close() reach every connection); reads run in parallel. Writers of one process take turns on a lock before
BEGIN IMMEDIATE, and all write on one connection of their own, whose page cache stays valid from one write to
the next; between processes SQLite's busy_timeout makes a writer wait for the file lock. A wait longer than
`timeout` (either one) becomes StoreUnavailable.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

from shared.store.base import WAIT_DEADLINE, StoreUnavailable
from shared.store.sqlite.checkpoints import WRITER_CHECKPOINT_PAGES, Checkpointer

DEFAULT_PATH: Final = "jobsched.db"
_WAL_RETRY_S: Final = 0.005  # between tries to switch a new file to WAL while another connection switches it

# Primary result codes meaning "the database cannot be used right now" (locked beyond busy_timeout, I/O
# failure, full disk, missing directory, not a database...), as opposed to a bug in a statement.
_UNAVAILABLE_CODES: Final = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_NOMEM,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_CORRUPT,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_PROTOCOL,
        sqlite3.SQLITE_NOTADB,
    }
)


@contextmanager
def translate_errors() -> Iterator[None]:
    """SQLite failures that mean "the database is not usable now" become StoreUnavailable (HTTP 503)."""
    try:
        yield
    except sqlite3.Error as exc:
        code = getattr(exc, "sqlite_errorcode", None)
        if code is not None and code & 0xFF in _UNAVAILABLE_CODES:
            raise StoreUnavailable(f"SQLite unavailable: {exc}") from exc
        raise


def create_private(path: str) -> None:
    """Create the database file, if there is none yet, readable by its owner only: it holds every tenant's
    payloads. (SQLite gives its -wal and -shm files the database file's permissions.) An existing file keeps
    the permissions its operator gave it. A file that cannot be created is left to SQLite to report.

    O_EXCL: an existing file is never opened here. Closing any descriptor of a file drops every POSIX lock this
    process holds on it, and SQLite's connections of this process hold theirs on the database file."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except OSError:  # FileExistsError: the usual case
        return


def use_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Write-ahead logging, kept in the file: a no-op once set. The first connections of processes that open a
    new file together all set it, and switching needs the file to oneself: SQLite answers a connection that would
    wait for that in a deadlock "locked" at once, not after busy_timeout. It tries again until `timeout`, and is
    done as soon as one of them has set it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            busy = (getattr(exc, "sqlite_errorcode", 0) & 0xFF) == sqlite3.SQLITE_BUSY
            if not busy or time.monotonic() > deadline:
                raise
        time.sleep(_WAL_RETRY_S)


class SqliteDatabase:
    """The database file at `path` (created on first use), shared by every part kept in it: the job store, the
    console's reads, the job types, the signing secrets and the credentials."""

    def __init__(
        self,
        path: str | os.PathLike[str] = DEFAULT_PATH,
        *,
        timeout: float = 5.0,
        pool_size: int = 8,
        durable: bool = True,
    ) -> None:
        """timeout: how long a write waits for the lock (busy_timeout) or a free connection before
        StoreUnavailable. durable: synchronous=FULL (a committed job survives power loss) rather than NORMAL
        (survives a process crash only; faster); even durable, a write(synced=False) commits as NORMAL would."""
        path = os.fspath(path)
        if path in ("", ":memory:") or path.startswith("file:"):
            # Every pooled connection would see its own private, empty database.
            raise ValueError(f"SqliteDatabase needs a database file path, not {path!r}")
        if sqlite3.sqlite_version_info < (3, 35, 5):
            # RETURNING came in 3.35.0; the patch releases up to 3.35.5 fixed bugs of it.
            raise RuntimeError(f"SQLite >= 3.35.5 is required (RETURNING); this Python has {sqlite3.sqlite_version}")
        self.path = path
        self._timeout = timeout
        # Writers of this process queue here rather than in SQLite's busy handler, which polls with sleeps of
        # up to 100 ms and so lets one writer wait far longer than the writes ahead of it take. busy_timeout
        # still arbitrates between processes.
        self._writer = threading.Lock()
        self._pool = _ConnectionPool(path, size=pool_size, timeout=timeout, synchronous="FULL" if durable else "NORMAL")
        # The thread holds the database weakly: a store dropped without close() is still collected (its
        # connections closed), and the thread then ends.
        self._checkpoints = Checkpointer(weakref.WeakMethod(self._checkpoint))
        weakref.finalize(self, self._checkpoints.close)

    def close(self) -> None:
        self._checkpoints.close()
        self._pool.close()

    def _checkpoint(self) -> None:
        """Copy the WAL into the file without holding writers up (the checkpoint thread)."""
        with self.read() as conn:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()

    def ping(self) -> None:
        with self.read() as conn:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # reads the file, not just a handle

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """Autocommit reads: each statement sees one consistent snapshot and never blocks the writer (WAL)."""
        with translate_errors(), self._pool.connection() as conn:
            yield conn

    @contextmanager
    def write(self, *, patient: bool = False, synced: bool = True, bulk: bool = False) -> Iterator[sqlite3.Connection]:
        """One BEGIN IMMEDIATE transaction: the write lock is taken before the first read (waiting up to
        busy_timeout, or less within the caller's WAIT_DEADLINE unless `patient`), so nothing read inside can
        change before COMMIT. Any exception rolls it back.

        `synced=False` commits without waiting for the disk, for a transaction that power loss may undo whole
        without harm because nothing acts on it before a later synced commit: the WAL is one file written in
        order, so that commit's sync makes this one durable too.

        `bulk`: a statement of it may change much of the file (a migration). Each statement of a transaction that
        writes many rows keeps the pages it changes in a statement journal until it ends (triggers maintain the
        counts, so any of them may abort alone), kept in memory for a write of the usual size (its rows come in
        chunks): SQLite spills one past 64 KiB to a temporary file, which cost a drain 19 KiB written per job and
        half its kernel time. A bulk write's journals go to a file."""
        deadline = None if patient else WAIT_DEADLINE.get()
        wait = self._timeout if deadline is None else max(0.0, min(self._timeout, deadline - time.monotonic()))
        if not self._writer.acquire(timeout=wait):
            raise StoreUnavailable(f"SQLite unavailable: no write turn within {wait:.3g}s")
        try:
            with translate_errors(), self._pool.writer() as conn:
                self._pool.sync_commits(conn, synced)
                self._pool.journal_statements(conn, on_disk=bulk)
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:  # some errors (e.g. SQLITE_FULL) already rolled back
                        conn.execute("ROLLBACK")
                    raise
                self._checkpoints.committed(conn)  # still under the write lock, which keeps its count; never raises
        finally:
            self._writer.release()


class _ConnectionPool:
    """Connections lent to one read at a time, at most `size` open, idle ones reused (newest first); and the one
    connection writes use (`writer`)."""

    def __init__(self, path: str, *, size: int, timeout: float, synchronous: str) -> None:
        self._path = path
        self._timeout = timeout
        self._synchronous = synchronous
        self._slots = threading.BoundedSemaphore(size)
        self._idle: list[sqlite3.Connection] = []
        self._idle_writer: list[sqlite3.Connection] = []  # the write connection while no write runs (at most one)
        # The writer's settings that some writes change for their transaction (both used under the write lock).
        self._commits = _WriterSetting("synchronous", usual=synchronous, other="NORMAL")  # other: not synced
        self._statement_journals = _WriterSetting("temp_store", usual="MEMORY", other="FILE")  # other: a bulk write
        self._lock = threading.Lock()
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        if not self._slots.acquire(timeout=self._timeout):
            raise StoreUnavailable(f"SQLite unavailable: no free connection within {self._timeout}s")
        try:
            conn = self._take(self._idle, self._open)
            try:
                yield conn
            finally:
                self._give_back(conn, self._idle)
        finally:
            self._slots.release()

    @contextmanager
    def writer(self) -> Iterator[sqlite3.Connection]:
        """The connection every write uses (its caller holds the database's write lock, so one at a time). A
        connection's page cache is dropped whenever another connection has changed the file; with one writer
        the pages a write reads were mostly left in its cache by the writes before it."""
        conn = self._take(self._idle_writer, self._open_writer)
        try:
            yield conn
        finally:
            self._give_back(conn, self._idle_writer)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle = self._idle + self._idle_writer
            self._idle.clear()
            self._idle_writer.clear()
        for conn in idle:
            conn.close()

    def _take(self, idle: list[sqlite3.Connection], open_one: Callable[[], sqlite3.Connection]) -> sqlite3.Connection:
        with self._lock:
            if self._closed:
                raise StoreUnavailable("SQLite store is closed")
            if idle:
                return idle.pop()
        return open_one()

    def _give_back(self, conn: sqlite3.Connection, idle: list[sqlite3.Connection]) -> None:
        with self._lock:
            # A connection still inside a transaction (its ROLLBACK failed) would hold the write lock.
            if not self._closed and not conn.in_transaction:
                idle.append(conn)
                return
        conn.close()

    def sync_commits(self, conn: sqlite3.Connection, synced: bool) -> None:
        """Make the writer's next commit synced or not, before its BEGIN (SQLite takes a change of level only
        outside a transaction)."""
        self._commits.apply(conn, other=not synced)

    def journal_statements(self, conn: sqlite3.Connection, *, on_disk: bool) -> None:
        """Keep the writer's statement journals (and other temporary storage) in memory, or in a file for a bulk
        write (SqliteDatabase.write), before its BEGIN. Reads keep SQLite's default, a file: a read may
        materialise much of the file."""
        self._statement_journals.apply(conn, other=on_disk)

    def _open_writer(self) -> sqlite3.Connection:
        conn = self._open()
        try:
            self._statement_journals.set_usual(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _open(self) -> sqlite3.Connection:
        # isolation_level=None: no implicit BEGINs; every transaction here is explicit (BEGIN IMMEDIATE).
        # check_same_thread=False: the pool hands a connection to one thread at a time, never to two.
        create_private(self._path)
        conn = sqlite3.connect(self._path, timeout=self._timeout, isolation_level=None, check_same_thread=False)
        try:
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
            use_wal(conn, self._timeout)
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            conn.execute(f"PRAGMA wal_autocheckpoint = {WRITER_CHECKPOINT_PAGES}")  # a backstop (checkpoints.py)
        except BaseException:
            conn.close()
            raise
        return conn


class _WriterSetting:
    """A PRAGMA of the write connection that is `usual` but `other` for some writes: set only when it changes,
    and the connection that has `other` recorded before the PRAGMA runs and forgotten only after the PRAGMA back
    ran, so that one which failed leaves the connection named, and the next write sets the setting again."""

    def __init__(self, name: str, *, usual: str, other: str) -> None:
        self._name = name
        self._usual = usual
        self._other = other
        self._changed: sqlite3.Connection | None = None  # the connection set to `other`, if any

    def set_usual(self, conn: sqlite3.Connection) -> None:
        """The setting on a connection just opened."""
        conn.execute(f"PRAGMA {self._name} = {self._usual}")

    def apply(self, conn: sqlite3.Connection, *, other: bool) -> None:
        if self._usual == self._other:  # nothing to switch (commits at NORMAL are never synced anyway)
            return
        if other and conn is not self._changed:
            self._changed = conn
            conn.execute(f"PRAGMA {self._name} = {self._other}")
        elif not other and conn is self._changed:
            conn.execute(f"PRAGMA {self._name} = {self._usual}")
            self._changed = None
