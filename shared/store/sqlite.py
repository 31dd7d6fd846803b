"""JobStore on SQLite (stdlib sqlite3): the embedded store of `jobsched dev` and of server-free tests.

Same contract and same answers as MongoJobStore (what a transition writes comes from transitions.py), but
stronger where SQLite can be: writers are serialized, so every write runs in one BEGIN IMMEDIATE transaction
that takes the write lock before its first read. What the transaction read therefore stays true until it
commits — a real compare-and-set, across threads and processes — and multi-step changes (attempt record +
job status, outcome + job move) are all-or-nothing, so a crash between them cannot leave a half-claimed job.
Ownership is still decided by unique keys (idempotency keys, attempt records `<jobId>:<n>`) as on MongoDB,
so both stores refuse the same things for the same reasons.

Storage: one durable file in WAL mode (readers never block the writer). Times are INTEGER unix milliseconds
(UTC) — the precision MongoDB keeps, exact to compare and to index — and come back as timezone-aware UTC
datetimes. Columns carry the job document's camelCase names. `payload` is JSON text.

Threads: a sqlite3 connection must not be used by two threads at once, so each read borrows one from a small
bounded pool (not one per thread: a pool bounds the number of open files, survives short-lived threads and lets
close() reach every connection); reads run in parallel. Writers of one process take turns on a lock before
BEGIN IMMEDIATE, and all write on one connection of their own, whose page cache stays valid from one write to
the next; between processes SQLite's busy_timeout makes a writer wait for the file lock. A wait longer than
`timeout` (either one) becomes StoreUnavailable.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, Final, NamedTuple, TypeVar

from bson import ObjectId

from jobsched.backoff import DEFAULT_BACKOFF, Backoff
from jobsched.limits import Rate
from shared.model import JOB_FIELDS, TERMINAL, Execution, Job, Outcome, Status, job_from_fields, utc_now
from shared.store import sqlite_recent, transitions
from shared.store.base import (
    WAIT_DEADLINE,
    ActiveRuns,
    AttemptFinish,
    AttemptResult,
    AttemptStart,
    AttemptTaken,
    Closing,
    Deleted,
    DuplicateJob,
    JobNotFound,
    NewJob,
    ProgressReport,
    RateLimited,
    RunSpec,
    StartHint,
    StoreError,
    StoreUnavailable,
    TransitionRefused,
    one_run_added,
    only_answer,
)
from shared.store.claim_limits import (
    Admission,
    ClaimLimits,
    InFlight,
    KeyOwner,
    KeyReservations,
    RatePlan,
    latest,
    rated_types,
    start_allowed,
)
from shared.store.fair_claims import Claim, Lane, Turns, fair_selection, head_of
from shared.store.group_commit import GroupCommit
from shared.store.transitions import (
    ATTEMPT_ACTIVE,
    CANCELLABLE_VALUES,
    KIND_BUFFERED,
    KIND_RUN,
    KIND_TEMPLATE,
    attempt_record_id,
)

DEFAULT_PATH: Final = "jobsched.db"
RUNS_PER_TRANSACTION: Final = 500
TRANSACTION_BYTES: Final = 4 * 1024 * 1024
T = TypeVar("T")


def _one_of(column: str, values: Iterable[str]) -> str:
    """A partial index's condition "`column` is one of `values`" as ORed comparisons. Every update that changes
    `column` evaluates the condition of each such index for the row's old and new values, and SQLite evaluates
    an IN of more than two constants through a temporary table it builds each time: that was most of the cost
    of a job's status change. In a fixed order: SQLite matches a partial index's condition as written."""
    return "(" + " OR ".join(f"{column} = '{value}'" for value in values) + ")"


# The conditions of the partial indexes that the operator's queries (browse_sqlite.py) range over, written into
# their SQL as literals: SQLite uses a partial index only when a query's WHERE visibly implies the index's own.
ENDED_SQL: Final = f"status IN ('{Status.COMPLETED.value}', '{Status.DLQ.value}')"
FINAL_SQL: Final = _one_of("status", (s.value for s in Status if s in TERMINAL))
# Jobs that ended as the overview's last hour counts them, in the terms of the recent_endings index.
RECENTLY_ENDED_SQL: Final = f"{FINAL_SQL} AND {ENDED_SQL}"
DEAD_SQL: Final = f"status = '{Status.DLQ.value}'"
PENDING_SQL: Final = f"status = '{Status.PENDING.value}'"
TEMPLATES_SQL: Final = f"kind = '{KIND_TEMPLATE}'"
PENDING_RUNS_SQL: Final = f"status = '{Status.PENDING.value}' AND kind = '{KIND_RUN}'"
IN_FLIGHT_SQL: Final = _one_of("status", (Status.QUEUED.value, *ATTEMPT_ACTIVE))
FAILED_SQL: Final = _one_of("outcome", (Outcome.FAILED.value, Outcome.TIMEOUT.value, Outcome.LOST.value))

_JOBS_TABLE: Final = """CREATE TABLE IF NOT EXISTS jobs (
        id              TEXT PRIMARY KEY,           -- 24-hex ObjectId, as on MongoDB
        idempotencyKey  TEXT NOT NULL,              -- unique per tenant (index tenant_idempotency)
        tenantId        TEXT NOT NULL,
        jobType         TEXT NOT NULL,
        kind            TEXT NOT NULL,              -- 'run', 'template' or 'buffered': only runs are claimed
        status          TEXT NOT NULL,
        scheduledAt     INTEGER NOT NULL,           -- times: unix milliseconds, UTC
        createdAt       INTEGER NOT NULL,
        updatedAt       INTEGER NOT NULL,
        payload         TEXT NOT NULL DEFAULT '{}', -- JSON object
        priority        INTEGER NOT NULL DEFAULT 0,
        attempts        INTEGER NOT NULL DEFAULT 0,
        maxAttempts     INTEGER NOT NULL DEFAULT 3,
        attemptBase     INTEGER NOT NULL DEFAULT 0,
        timeoutSeconds  REAL,
        cron            TEXT,
        interval        TEXT,
        timezone        TEXT,
        templateId      TEXT,
        lastError       TEXT,
        claimedBy       TEXT,
        claimedAt       INTEGER,
        queuedAt        INTEGER,
        leaseExpiresAt  INTEGER,
        overlap         TEXT,                       -- template schedule policy (shared/schedules)
        catchup         TEXT,
        catchupWindow   TEXT,
        startAt         INTEGER,
        endAt           INTEGER,
        remainingRuns   INTEGER,
        jitter          TEXT,
        pauseOnFailure  INTEGER,                    -- booleans: 0/1
        paused          INTEGER,
        pauseNote       TEXT,
        pausedAt        INTEGER,
        resumedAt       INTEGER,
        lastFiredAt     INTEGER,
        plannedAt       INTEGER,                    -- a template run's fire time
        cancelRequested INTEGER,                    -- 1: a claimed or running job asked to stop
        declaredBy      TEXT,                       -- a template declared with the code
        declaration     TEXT,
        concurrencyKey  TEXT,                       -- what concurrency_per_key counts by, within the tenant
        result          TEXT,                       -- JSON: what the last attempt that kept one returned
        snoozes         INTEGER,                    -- attempts that snoozed (not spent)
        progress        TEXT                        -- JSON: what the running attempt's handler last reported
    )"""
# A rate-limited type's starts (claim_limits.py): how far claims reserved them, how far they went (unix s).
RATE_LIMITS_TABLE: Final = """CREATE TABLE IF NOT EXISTS rate_limits (
        jobType     TEXT PRIMARY KEY,
        claimTat    REAL NOT NULL,
        startTat    REAL NOT NULL
    ) WITHOUT ROWID"""
# The same per (type, tenant, concurrency key) under a rate per key, for the keys that started lately (pruned).
KEY_RATE_LIMITS_TABLE: Final = """CREATE TABLE IF NOT EXISTS key_rate_limits (
        jobType         TEXT NOT NULL,
        tenantId        TEXT NOT NULL,
        concurrencyKey  TEXT NOT NULL,
        claimTat        REAL NOT NULL,
        startTat        REAL NOT NULL,
        PRIMARY KEY (jobType, tenantId, concurrencyKey)
    ) WITHOUT ROWID"""
RATE_TABLES: Final = (RATE_LIMITS_TABLE, KEY_RATE_LIMITS_TABLE)
_SCHEMA: Final = (
    _JOBS_TABLE,
    # invariant 4: one job per idempotency key within its tenant, decided by this index
    "CREATE UNIQUE INDEX IF NOT EXISTS tenant_idempotency ON jobs (tenantId, idempotencyKey)",
    # Claims, due templates, due job types, the reaper's sweeps. A claim range-scans the due runs and keeps the
    # top `limit` in claim order. An index in claim order (priority first) would skip that sort but walk every
    # not-yet-due job of higher priority on each claim, which behind a large backlog of future jobs makes
    # single claims an order of magnitude slower.
    "CREATE INDEX IF NOT EXISTS due_order ON jobs (status, kind, scheduledAt)",
    # Claims (fair_claims.py): the lanes of due runs, one per tenant and type, each in claim order by priority.
    # concurrencyKey last: a read that leaves out the keys at their limit filters on the index entries, without
    # reading those rows (it still steps over their entries).
    "CREATE INDEX IF NOT EXISTS due_lanes ON jobs (jobType, tenantId, priority, scheduledAt, id, concurrencyKey) "
    f"WHERE {PENDING_RUNS_SQL}",
    "CREATE INDEX IF NOT EXISTS tenant_listing ON jobs (tenantId, createdAt DESC, id DESC)",
    # The operator's pages (browse_sqlite.py; the counts are job_counts'). All but tenant_type_listing are
    # partial, so a job on its way to an end writes to them only where it waits (pending) and where it gets: jobs
    # that have ended (the bulk of a store, by status), templates, runs, dead letters, failed attempts. Jobs
    # between pending and their end (few: what runs now) are found through due_order.
    f"CREATE INDEX IF NOT EXISTS final_listing ON jobs (tenantId, status, createdAt DESC, id DESC) WHERE {FINAL_SQL}",
    # A tenant's pending jobs, newest first: a job enters it when created or retried and leaves it when claimed.
    f"CREATE INDEX IF NOT EXISTS pending_listing ON jobs (tenantId, createdAt DESC, id DESC) WHERE {PENDING_SQL}",
    "CREATE INDEX IF NOT EXISTS tenant_type_listing ON jobs (tenantId, jobType, createdAt DESC, id DESC)",
    f"CREATE INDEX IF NOT EXISTS tenant_templates ON jobs (tenantId, createdAt DESC, id DESC) WHERE {TEMPLATES_SQL}",
    "CREATE INDEX IF NOT EXISTS template_runs ON jobs (templateId, createdAt DESC, id DESC) "
    "WHERE templateId IS NOT NULL",
    f"CREATE INDEX IF NOT EXISTS recent_endings ON jobs (updatedAt, jobType, status, tenantId) WHERE {FINAL_SQL}",
    f"CREATE INDEX IF NOT EXISTS dead_letters ON jobs (lastError, updatedAt, jobType, tenantId) WHERE {DEAD_SQL}",
    # One tenant's dead letters by error (its DLQ page), without walking every tenant's.
    "CREATE INDEX IF NOT EXISTS tenant_dead_letters ON jobs (tenantId, lastError, jobType, updatedAt) "
    f"WHERE {DEAD_SQL}",
    "CREATE INDEX IF NOT EXISTS template_runs_planned ON jobs (templateId, plannedAt DESC)",
    """CREATE TABLE IF NOT EXISTS executions (
        id          TEXT PRIMARY KEY,               -- '<jobId>:<attempt>': inserting it claims the attempt
        jobId       TEXT NOT NULL,
        attempt     INTEGER NOT NULL,
        outcome     TEXT NOT NULL,                  -- 'running' until the attempt's one outcome is decided
        worker      TEXT,
        startedAt   INTEGER,
        finishedAt  INTEGER,
        durationMs  REAL,
        error       TEXT,
        traceback   TEXT,                           -- a handler that raised: where (bounded)
        result      TEXT                            -- JSON: what the handler returned (bounded)
    )""",
    "CREATE INDEX IF NOT EXISTS job_attempts ON executions (jobId, attempt)",
    *RATE_TABLES,
    f"CREATE INDEX IF NOT EXISTS failed_attempts ON executions (finishedAt) WHERE {FAILED_SQL}",
)

# Jobs by tenant, type, status and whether they are templates, kept by triggers in the transaction of every write
# that inserts, deletes or moves a job: the overview's counts and the tenants read these few rows, not millions
# of index entries. Only the statuses where jobs wait or stay are counted (RESTING); a job passes through the
# others (queued to running) in moments, so few are ever in them, and the reads count those from due_order.
# A job's way from pending to its end thus costs two small upserts (leaving pending, reaching its end).
RESTING: Final = (Status.PENDING, Status.BUFFERED, *sorted(TERMINAL))
RESTING_VALUES: Final = tuple(s.value for s in RESTING)
_COUNTS_TABLE: Final = """CREATE TABLE IF NOT EXISTS job_counts (
        tenantId    TEXT NOT NULL,
        jobType     TEXT NOT NULL,
        status      TEXT NOT NULL,              -- one of RESTING
        template    INTEGER NOT NULL,           -- 1: templates (counted as schedules, not as jobs)
        n           INTEGER NOT NULL,
        PRIMARY KEY (tenantId, jobType, status, template)
    ) WITHOUT ROWID"""


def _counted(row: str, change: str) -> str:
    """The trigger statement that adds `change` (+1 or -1) to the count of `row` (new or old)."""
    key = f"{row}.tenantId, {row}.jobType, {row}.status, {row}.kind = '{KIND_TEMPLATE}'"
    return (
        f"INSERT INTO job_counts (tenantId, jobType, status, template, n) VALUES ({key}, {change}) "
        f"ON CONFLICT (tenantId, jobType, status, template) DO UPDATE SET n = n + {change};"
    )


def _resting(row: str) -> str:
    return _one_of(f"{row}.status", RESTING_VALUES)


_COUNT_TRIGGERS: Final = (
    f"CREATE TRIGGER IF NOT EXISTS counted_insert AFTER INSERT ON jobs WHEN {_resting('new')} "
    f"BEGIN {_counted('new', '1')} END",
    f"CREATE TRIGGER IF NOT EXISTS counted_delete AFTER DELETE ON jobs WHEN {_resting('old')} "
    f"BEGIN {_counted('old', '-1')} END",
    "CREATE TRIGGER IF NOT EXISTS counted_leave AFTER UPDATE OF status ON jobs "
    f"WHEN old.status IS NOT new.status AND {_resting('old')} BEGIN {_counted('old', '-1')} END",
    "CREATE TRIGGER IF NOT EXISTS counted_enter AFTER UPDATE OF status ON jobs "
    f"WHEN old.status IS NOT new.status AND {_resting('new')} BEGIN {_counted('new', '1')} END",
)
# Indexes of earlier versions that nothing reads any more (they would only cost writes).
_OBSOLETE_INDEXES: Final = ("final_counts",)

_JOB_COLUMNS: Final = frozenset((JOB_FIELDS - {"claimToken", "startToken"}) | {"kind"})  # tokens: MongoDB only
_EXECUTION_COLUMNS: Final = frozenset(
    {"id", "jobId", "attempt", "outcome", "worker", "startedAt", "finishedAt", "durationMs", "error", "traceback"}
    | {"result"}
)
# Any JSON value (None: none), as its text; the payload has its own encoding.
_JSON_COLUMNS: Final = frozenset({"result", "progress"})
_TIME_COLUMNS: Final = frozenset(
    {"scheduledAt", "createdAt", "updatedAt", "claimedAt", "queuedAt", "leaseExpiresAt", "startedAt", "finishedAt"}
    | {"startAt", "endAt", "pausedAt", "resumedAt", "lastFiredAt", "plannedAt"}
)
_BOOL_COLUMNS: Final = frozenset({"pauseOnFailure", "paused", "cancelRequested"})
# Columns added after the first release: a database file made before them gets them at ensure_schema.
_ADDED_COLUMNS: Final = {
    **dict.fromkeys(("overlap", "catchup", "catchupWindow", "jitter", "pauseNote"), "TEXT"),
    **dict.fromkeys(
        ("startAt", "endAt", "remainingRuns", "pauseOnFailure", "paused", "pausedAt", "resumedAt"), "INTEGER"
    ),
    **dict.fromkeys(("lastFiredAt", "plannedAt", "cancelRequested"), "INTEGER"),
    **dict.fromkeys(("declaredBy", "declaration", "concurrencyKey", "result", "progress"), "TEXT"),
    "snoozes": "INTEGER",
}
_ADDED_EXECUTION_COLUMNS: Final = {"traceback": "TEXT", "result": "TEXT"}
# The first entry of each (tenant, priority) of a type in due_lanes, one seek each: from an entry, the next
# priority of the same tenant, else the next tenant. Rows: tenantId, priority, earliest scheduledAt.
_LANE_HEAD_FROM: Final = f"FROM jobs INDEXED BY due_lanes WHERE {PENDING_RUNS_SQL} AND jobType = :type"
_LANE_HEADS_SQL: Final = f"""WITH RECURSIVE head(r) AS (
        SELECT (SELECT rowid {_LANE_HEAD_FROM} ORDER BY tenantId, priority LIMIT 1)
        UNION ALL
        SELECT coalesce(
            (SELECT rowid {_LANE_HEAD_FROM} AND tenantId = j.tenantId AND priority > j.priority
             ORDER BY priority LIMIT 1),
            (SELECT rowid {_LANE_HEAD_FROM} AND tenantId > j.tenantId ORDER BY tenantId, priority LIMIT 1))
        FROM head JOIN jobs j ON j.rowid = head.r)
    SELECT j.tenantId, j.priority, j.scheduledAt FROM head JOIN jobs j ON j.rowid = head.r"""
_IS_CANCELLABLE: Final = f"status IN ({', '.join('?' * len(CANCELLABLE_VALUES))})"  # + CANCELLABLE_VALUES
_IS_ACTIVE: Final = f"status IN ({', '.join('?' * len(ATTEMPT_ACTIVE))})"  # + ATTEMPT_ACTIVE
# A job an executor may start (+ QUEUED, the executor's type): transitions.check_startable, and no record yet for
# its next attempt (a cancellation inserts one so that no executor can start it), looked up by the id the
# record insert would take (transitions.attempt_record_id), the key that decides ownership.
_STARTABLE: Final = (
    "status = ? AND jobType = ? AND NOT EXISTS "
    "(SELECT 1 FROM executions WHERE executions.id = jobs.id || ':' || (jobs.attempts + 1))"
)
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)

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
_DUPLICATE_CODES: Final = frozenset({sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY})


@contextmanager
def _translate_errors() -> Iterator[None]:
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
        self._lock = threading.Lock()
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        if not self._slots.acquire(timeout=self._timeout):
            raise StoreUnavailable(f"SQLite unavailable: no free connection within {self._timeout}s")
        try:
            conn = self._take(self._idle)
            try:
                yield conn
            finally:
                self._give_back(conn, self._idle)
        finally:
            self._slots.release()

    @contextmanager
    def writer(self) -> Iterator[sqlite3.Connection]:
        """The connection every write uses (its caller holds the store's write lock, so one at a time). A
        connection's page cache is dropped whenever another connection has changed the file; with one writer
        the pages a write reads were mostly left in its cache by the writes before it."""
        conn = self._take(self._idle_writer)
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

    def _take(self, idle: list[sqlite3.Connection]) -> sqlite3.Connection:
        with self._lock:
            if self._closed:
                raise StoreUnavailable("SQLite store is closed")
            if idle:
                return idle.pop()
        return self._open()

    def _give_back(self, conn: sqlite3.Connection, idle: list[sqlite3.Connection]) -> None:
        with self._lock:
            # A connection still inside a transaction (its ROLLBACK failed) would hold the write lock.
            if not self._closed and not conn.in_transaction:
                idle.append(conn)
                return
        conn.close()

    def _open(self) -> sqlite3.Connection:
        # isolation_level=None: no implicit BEGINs; every transaction here is explicit (BEGIN IMMEDIATE).
        # check_same_thread=False: the pool hands a connection to one thread at a time, never to two.
        create_private(self._path)
        conn = sqlite3.connect(self._path, timeout=self._timeout, isolation_level=None, check_same_thread=False)
        try:
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")  # persistent in the file; a no-op once set
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        except BaseException:
            conn.close()
            raise
        return conn


class SqliteJobStore:
    def __init__(
        self,
        path: str | os.PathLike[str] = DEFAULT_PATH,
        *,
        timeout: float = 5.0,
        pool_size: int = 8,
        durable: bool = True,
    ) -> None:
        """A store on the database file at `path` (created on first use).

        timeout: how long a write waits for the lock (busy_timeout) or a free connection before
        StoreUnavailable. durable: synchronous=FULL (a committed job survives power loss) rather than NORMAL
        (survives a process crash only; faster)."""
        path = os.fspath(path)
        if path in ("", ":memory:") or path.startswith("file:"):
            # Every pooled connection would see its own private, empty database.
            raise ValueError(f"SqliteJobStore needs a database file path, not {path!r}")
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
        # The API creates each job on a thread of its own. Each write transaction costs a WAL sync and a
        # hand-over of the write lock whatever it holds, so the creates that threads ask for while one
        # transaction runs are all written by the next one (group commit); each still succeeds or fails alone (a
        # taken key skips its own row only). An executor batches its starts and outcomes itself (start_attempts,
        # finish_attempts).
        self._creates: GroupCommit[NewJob, Job] = GroupCommit(self._create_batch)
        # Which lanes had their turns last (fair_claims.py): the claimer's own, as only the leader claims.
        self._turns = Turns()

    def close(self) -> None:
        self._pool.close()

    def ensure_schema(self) -> None:
        with self._write() as conn:
            _drop_global_idempotency_key(conn)
            conn.execute(_SCHEMA[0])
            _add_missing_columns(conn, "jobs", _ADDED_COLUMNS)
            _drop_changed_indexes(conn)
            for statement in _SCHEMA[1:]:
                conn.execute(statement)
            _add_missing_columns(conn, "executions", _ADDED_EXECUTION_COLUMNS)
            _ensure_counts(conn)
            sqlite_recent.ensure(conn, RECENTLY_ENDED_SQL, FAILED_SQL, int(time.time() * 1000))
            for name in _OBSOLETE_INDEXES:
                conn.execute(f"DROP INDEX IF EXISTS {name}")

    def ping(self) -> None:
        with self._read() as conn:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # reads the file, not just a handle

    def create(self, new: NewJob) -> Job:
        return self._creates.submit(new)

    def _create_batch(self, requests: Sequence[NewJob]) -> list[Job | StoreError]:
        """The creates of concurrent API requests, one write transaction for all (group commit)."""
        with self._write() as conn:
            return _created(conn, requests)

    def create_many(self, news: Sequence[NewJob]) -> list[Job | StoreError]:
        """RUNS_PER_TRANSACTION jobs a transaction, so that the executors' writes get their turns between them.
        The first waits for its turn within the caller's deadline (a busy store refuses the whole call, which is
        then simply sent again); once one is written the rest wait as long as the store allows, as add_runs'
        do, and a transaction the store still could not make answers StoreUnavailable for its jobs."""
        answers: list[Job | StoreError] = []
        for start in range(0, len(news), RUNS_PER_TRANSACTION):
            chunk = news[start : start + RUNS_PER_TRANSACTION]
            try:
                with self._write(patient=start > 0) as conn:
                    created = _created(conn, chunk)
            except StoreUnavailable as exc:
                if start == 0:
                    raise
                created = [exc] * len(chunk)
            answers += created
        return answers

    def get(self, job_id: str) -> Job | None:
        if not ObjectId.is_valid(job_id):
            return None
        with self._read() as conn:
            return _load_job(conn, job_id)

    def cancel(self, job_id: str) -> Job:
        with self._write() as conn:
            job = _load_job(conn, job_id) if ObjectId.is_valid(job_id) else None
            if job is None:
                raise JobNotFound(job_id)
            transitions.check_cancellable(job)
            now = utc_now()
            if job.status.value in ATTEMPT_ACTIVE:  # running: ask its executor (the write lock keeps it running)
                requested = _update_job(conn, job.id, transitions.cancel_requested(now), _IS_ACTIVE, ATTEMPT_ACTIVE)
                assert requested is not None, "the write lock was held since the job was read"
                return _to_job(requested)
            # Take the next attempt before any executor can (the rule on every store). Within this transaction
            # a taken record would mean an executor already owns the attempt: then the job is not cancellable.
            record = {"id": attempt_record_id(job.id, job.next_attempt), **transitions.attempt_cancelled(job, now)}
            if not job.is_template and _insert_unique(conn, "executions", record) is None:
                raise TransitionRefused(job, "cancel")
            row = _update_job(conn, job.id, transitions.cancelled(now), _IS_CANCELLABLE, CANCELLABLE_VALUES)
        assert row is not None, "the write lock was held since the job was read"
        return _to_job(row)

    def cancel_requested(self, jobs: Sequence[Job]) -> set[str]:
        found: set[str] = set()
        with self._read() as conn:
            for chunk in _chunks([j.id for j in jobs]):
                rows = conn.execute(
                    f"SELECT id FROM jobs WHERE cancelRequested = 1 AND id IN ({_marks(chunk)})", chunk
                ).fetchall()
                found.update(str(r[0]) for r in rows)
        return found

    def claim_due_jobs(
        self,
        now: datetime,
        limit: int,
        job_types: Collection[str],
        due_by: datetime | None = None,
        limits: Mapping[str, ClaimLimits] | None = None,
    ) -> Claim:
        """Lanes from the due_lanes index (fair_claims.py chooses, claim_limits.py bounds), then one UPDATE of the
        chosen runs: the write lock makes the reads and the update one compare-and-set, so two claimers never win
        the same job, and the counts that bound a type are the counts at the update."""
        if limit <= 0 or not job_types:
            return Claim()
        limits = limits or {}
        due_ms = _to_ms(due_by or now)
        if limits and all(t in limits for t in job_types):
            with self._read() as conn:  # no room for any type (the usual case of a retry soon): no write turn
                in_flight = _in_flight(conn, job_types)
                self._turns.in_flight(in_flight.by_tenant)
                rooms = in_flight.rooms(job_types, limits)
                rated = rated_types(job_types, limits)
                RatePlan.of(rated, _reserved_starts(conn, rated), now.timestamp(), due_ms / 1000, limit).bound(rooms)
                if all(rooms.get(t) == 0 for t in job_types):
                    held = {t for t in job_types if _lanes(conn, t, due_ms, _no_full_keys)[:1]}
                    return Claim((), held, in_use=in_flight.active)
        set_sql, set_params = _assignments(transitions.queued(now), _JOB_COLUMNS)
        with self._write() as conn:
            in_flight = _in_flight(conn, sorted(t for t in job_types if t in limits))
            self._turns.in_flight(in_flight.by_tenant)
            rooms = in_flight.rooms(job_types, limits)
            rated = rated_types(job_types, limits)
            rates = RatePlan.of(rated, _reserved_starts(conn, rated), now.timestamp(), due_ms / 1000, limit)
            rates.bound(rooms)
            key_rates = KeyReservations(partial(_reserved_key_starts, conn), now.timestamp(), due_ms / 1000)
            admission = Admission(limits, in_flight, key_rates)
            lanes = [
                lane
                for job_type in sorted(job_types)
                for lane in _lanes(conn, job_type, due_ms, partial(admission.full_keys, job_type))
            ]
            selection = fair_selection(lanes, limit, rooms, admission.admit_run, self._turns)
            chosen = [due.id for due in selection.runs]
            won: dict[str, Job] = {}
            for chunk in _chunks(chosen):
                rows = conn.execute(
                    f"UPDATE jobs SET {set_sql} WHERE id IN ({_marks(chunk)}) RETURNING *", [*set_params, *chunk]
                ).fetchall()
                won.update((str(r["id"]), _to_job(r)) for r in rows)
            jobs = [won[job_id] for job_id in chosen]
            tats, not_before = rates.reserve(jobs, now.timestamp())
            conn.executemany(
                "INSERT INTO rate_limits (jobType, claimTat, startTat) VALUES (?, ?, 0) "
                "ON CONFLICT (jobType) DO UPDATE SET claimTat = excluded.claimTat",
                tats.items(),
            )
            conn.executemany(
                "INSERT INTO key_rate_limits (jobType, tenantId, concurrencyKey, claimTat, startTat) "
                "VALUES (?, ?, ?, ?, 0) ON CONFLICT DO UPDATE SET claimTat = excluded.claimTat",
                [(*owner, tat) for owner, tat in key_rates.tats.items()],
            )
        self._turns.took(selection)  # committed: every chosen run was moved (the write lock was held)
        not_before = latest(not_before, key_rates.not_before)
        held = selection.held | admission.filled
        return Claim(jobs, held, not_before=not_before, in_use=in_flight.active, waited=key_rates.waited)

    def due_job_types(self, now: datetime) -> set[str]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT DISTINCT jobType FROM jobs WHERE status = ? AND kind = ? AND scheduledAt <= ?",
                (Status.PENDING.value, KIND_RUN, _to_ms(now)),
            ).fetchall()
        return {str(r[0]) for r in rows}

    def release_claims(self, jobs: Sequence[Job]) -> None:
        if not jobs:
            return
        ids = [j.id for j in jobs]
        set_sql, set_params = _assignments(transitions.requeued(utc_now()), _JOB_COLUMNS)
        with self._write() as conn:
            for chunk in _chunks(ids):
                conn.execute(
                    f"UPDATE jobs SET {set_sql} WHERE status = ? AND id IN ({_marks(chunk)})",
                    [*set_params, Status.QUEUED.value, *chunk],
                )

    def due_templates(self, now: datetime, limit: int) -> list[Job]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT * FROM jobs WHERE status = ? AND kind = ? AND scheduledAt <= ? AND NOT coalesce(paused, 0) "
                "ORDER BY scheduledAt ASC, id ASC LIMIT ?",
                (Status.PENDING.value, KIND_TEMPLATE, _to_ms(now), max(limit, 0)),
            ).fetchall()
        return [_to_job(r) for r in rows]

    def dead_letter_template(self, template: Job, reason: str) -> bool:
        fields = transitions.template_dead_lettered(reason, utc_now())
        with self._write() as conn:
            row = _update_job(conn, template.id, fields, "status = ?", (Status.PENDING.value,))
        return row is not None

    # --- schedules --------------------------------------------------------------------------------------

    def add_run(self, template: Job, run: RunSpec) -> tuple[Job, bool]:
        return one_run_added(self, template, run)

    def add_runs(self, template: Job, runs: Sequence[RunSpec]) -> list[tuple[str, bool]]:
        now = utc_now()
        added: list[tuple[str, bool]] = []
        for batch in _transactions_of(template, runs, now):
            # Each waits its turn as long as the store allows, not within the caller's deadline for a first
            # turn (the fire times took part of it): once a backfill has begun, all of it is written, rather
            # than an answer that the store is busy after half of it.
            with self._write(patient=True) as conn:
                for fields in batch:
                    row = _insert_unique(conn, "jobs", fields, returning="id")
                    if row is None:  # this key's run exists (a retry after a crash, a leader's spawn, a trigger)
                        row = conn.execute(
                            "SELECT id FROM jobs WHERE tenantId = ? AND idempotencyKey = ?",
                            (fields["tenantId"], fields["idempotencyKey"]),
                        ).fetchone()
                        added.append((str(row["id"]), False))
                    else:
                        added.append((str(row["id"]), True))
        return added

    def job_by_key(self, tenant_id: str, idempotency_key: str) -> Job | None:
        with self._read() as conn:
            row = conn.execute(
                "SELECT * FROM jobs WHERE tenantId = ? AND idempotencyKey = ?", (tenant_id, idempotency_key)
            ).fetchone()
        return _to_job(row) if row else None

    def template_runs(
        self, template_id: str, statuses: Collection[Status] | None, limit: int, after_run: Job | None = None
    ) -> list[Job]:
        values: list[Any] = sorted(s.value for s in statuses) if statuses is not None else []
        status_clause = f"AND status IN ({_marks(values)})" if statuses is not None else ""
        after_clause, after_values = _runs_after(after_run)
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT * FROM jobs WHERE templateId = ? {status_clause} {after_clause} "
                "ORDER BY plannedAt DESC, scheduledAt DESC, id DESC LIMIT ?",
                [template_id, *values, *after_values, max(limit, 0)],
            ).fetchall()
        return [_to_job(r) for r in rows]

    def buffered_runs(self, limit: int) -> list[Job]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT * FROM jobs WHERE status = ? AND kind = ? ORDER BY plannedAt ASC, id ASC LIMIT ?",
                (Status.BUFFERED.value, KIND_BUFFERED, max(limit, 0)),
            ).fetchall()
        return [_to_job(r) for r in rows]

    def promote_buffered(self, run: Job, now: datetime) -> bool:
        with self._write() as conn:
            row = _update_job(conn, run.id, transitions.promoted(now), "status = ?", (Status.BUFFERED.value,))
        return row is not None

    def update_if_unmoved(self, job: Job, fields: transitions.Fields) -> Job | None:
        with self._write() as conn:
            guard = (Status.PENDING.value, _to_ms(job.scheduledAt))
            row = _update_job(conn, job.id, fields, "status = ? AND scheduledAt = ?", guard)
        return _to_job(row) if row is not None else None

    # --- executor ---------------------------------------------------------------------------------------

    def start_attempt(
        self, job_id: str, job_type: str, worker: str, lease_until: datetime, hint: StartHint | None = None
    ) -> Job:
        """Read the job, insert the attempt's record, move the job queued → running, in one transaction. The
        write lock makes the read a compare-and-set; the hint is not needed."""
        return only_answer(self.start_attempts([AttemptStart(job_id, job_type, worker, lease_until)]))

    def start_attempts(self, starts: Sequence[AttemptStart]) -> list[Job | StoreError]:
        """Every start of the batch in one write transaction, each refused or made on its own."""
        now = utc_now()
        with self._write() as conn:
            return [_refused_before_writing(partial(_start_one, conn, now, start)) for start in starts]

    def extend_leases(self, jobs: Sequence[Job], lease_until: datetime) -> None:
        if not jobs:
            return
        with self._write() as conn:
            conn.executemany(
                f"UPDATE jobs SET leaseExpiresAt = ? WHERE id = ? AND attempts = ? AND {_IS_ACTIVE}",
                [(_to_ms(lease_until), j.id, j.attempts, *ATTEMPT_ACTIVE) for j in jobs],
            )

    def record_progress(self, reports: Sequence[ProgressReport]) -> None:
        if not reports:
            return
        with self._write() as conn:
            conn.executemany(
                f"UPDATE jobs SET progress = ? WHERE id = ? AND attempts = ? AND {_IS_ACTIVE}",
                [(_to_sql("progress", r.stored()), r.job.id, r.job.attempts, *ATTEMPT_ACTIVE) for r in reports],
            )

    def finish_attempt(self, job: Job, result: AttemptResult) -> Job | None:
        return only_answer(self.finish_attempts([AttemptFinish(job, result)]))

    def finish_attempts(self, finishes: Sequence[AttemptFinish]) -> list[Job | StoreError | None]:
        with self._write() as conn:
            return [
                _refused_before_writing(partial(_close_attempt, conn, r.job, Closing.of(r.result))) for r in finishes
            ]

    def in_flight_beside(self, job: Job) -> InFlight:
        with self._read() as conn:
            return _in_flight(conn, [job.jobType])

    def list_executions(self, job_id: str) -> list[Execution]:
        with self._read() as conn:
            rows = conn.execute("SELECT * FROM executions WHERE jobId = ? ORDER BY attempt ASC", (job_id,)).fetchall()
        return [_to_execution(r) for r in rows]

    def redrive(self, job_id: str) -> Job:
        with self._write() as conn:
            job = _load_job(conn, job_id) if ObjectId.is_valid(job_id) else None
            if job is None:
                raise JobNotFound(job_id)
            transitions.check_redrivable(job)
            guard = (Status.DLQ.value, job.attempts)
            row = _update_job(conn, job.id, transitions.redriven(job, utc_now()), "status = ? AND attempts = ?", guard)
        assert row is not None, "the write lock was held since the job was read"
        return _to_job(row)

    def delete(self, job_id: str) -> Deleted:
        with self._write() as conn:  # the write lock: nothing changes between the checks and the removal
            job = _load_job(conn, job_id) if ObjectId.is_valid(job_id) else None
            if job is None:
                raise JobNotFound(job_id)
            transitions.check_deletable(job)
            runs: list[str] = []
            if job.is_template:
                rows = conn.execute("SELECT id, status FROM jobs WHERE templateId = ?", (job.id,)).fetchall()
                active = sum(Status(r[1]) not in TERMINAL for r in rows)
                if active:
                    raise ActiveRuns(job, active)
                runs = [str(r[0]) for r in rows]
            for chunk in _chunks([job.id, *runs]):
                conn.execute(f"DELETE FROM executions WHERE jobId IN ({_marks(chunk)})", chunk)
                conn.execute(f"DELETE FROM jobs WHERE id IN ({_marks(chunk)})", chunk)
        return Deleted(job, len(runs))

    # --- reaper -----------------------------------------------------------------------------------------

    def release_stale_claims(self, queued_before: datetime) -> int:
        set_sql, set_params = _assignments(transitions.requeued(utc_now()), _JOB_COLUMNS)
        with self._write() as conn:
            cursor = conn.execute(
                f"UPDATE jobs SET {set_sql} WHERE status = ? AND queuedAt < ?",
                [*set_params, Status.QUEUED.value, _to_ms(queued_before)],
            )
        return cursor.rowcount

    def delete_finished(self, status: Status, finished_before: datetime, limit: int) -> int:
        if status not in TERMINAL:
            raise ValueError(f"only finished jobs are deleted by age, not {status.value} ones")
        with self._write() as conn:  # the write lock: what the SELECT found is what the DELETEs remove
            ids = [
                str(r[0])
                for r in conn.execute(
                    f"""SELECT id FROM jobs INDEXED BY recent_endings
                        WHERE {FINAL_SQL} AND status = ? AND updatedAt < ? AND kind != ?
                        ORDER BY updatedAt LIMIT ?""",
                    (status.value, _to_ms(finished_before), KIND_TEMPLATE, max(limit, 0)),
                )
            ]
            for chunk in _chunks(ids):
                conn.execute(f"DELETE FROM executions WHERE jobId IN ({_marks(chunk)})", chunk)
                conn.execute(f"DELETE FROM jobs WHERE id IN ({_marks(chunk)})", chunk)
        return len(ids)

    def prune_key_rates(self, now: datetime, limit: int) -> int:
        with self._write() as conn:
            cursor = conn.execute(
                """DELETE FROM key_rate_limits WHERE (jobType, tenantId, concurrencyKey) IN (
                       SELECT jobType, tenantId, concurrencyKey FROM key_rate_limits
                       WHERE claimTat <= ? AND startTat <= ? LIMIT ?)""",
                (now.timestamp(), now.timestamp(), max(limit, 0)),
            )
        return cursor.rowcount

    def expired_attempts(self, now: datetime, limit: int) -> list[Job]:
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT * FROM jobs WHERE {_IS_ACTIVE} AND leaseExpiresAt < ? ORDER BY leaseExpiresAt LIMIT ?",
                (*ATTEMPT_ACTIVE, _to_ms(now), max(limit, 0)),
            ).fetchall()
        return [_to_job(r) for r in rows]

    def recover_attempt(self, job: Job, reason: str, backoff: Backoff = DEFAULT_BACKOFF) -> Job | None:
        with self._write() as conn:
            return _close_attempt(conn, job, Closing.lost(reason, utc_now(), backoff))

    # --- transactions -----------------------------------------------------------------------------------

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """Autocommit reads: each statement sees one consistent snapshot and never blocks the writer (WAL)."""
        with _translate_errors(), self._pool.connection() as conn:
            yield conn

    @contextmanager
    def _write(self, *, patient: bool = False) -> Iterator[sqlite3.Connection]:
        """One BEGIN IMMEDIATE transaction: the write lock is taken before the first read (waiting up to
        busy_timeout, or less within the caller's WAIT_DEADLINE unless `patient`), so nothing read inside can
        change before COMMIT. Any exception rolls it back."""
        deadline = None if patient else WAIT_DEADLINE.get()
        wait = self._timeout if deadline is None else max(0.0, min(self._timeout, deadline - time.monotonic()))
        if not self._writer.acquire(timeout=wait):
            raise StoreUnavailable(f"SQLite unavailable: no write turn within {wait:.3g}s")
        try:
            with _translate_errors(), self._pool.writer() as conn:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:  # some errors (e.g. SQLITE_FULL) already rolled back
                        conn.execute("ROLLBACK")
                    raise
        finally:
            self._writer.release()


class _DueRun(NamedTuple):
    """A due run as the claim chooses it (the rest of the row is read by the update that claims it)."""

    id: str
    priority: int
    scheduledAt: int
    concurrencyKey: str | None


def _in_flight(conn: sqlite3.Connection, job_types: Collection[str]) -> InFlight:
    """The runs of these types claimed and not finished (few: what is queued or running now), counted."""
    types = sorted(job_types)
    if not types:
        return InFlight(())
    rows = conn.execute(
        f"""SELECT jobType, tenantId, concurrencyKey, status = '{Status.QUEUED.value}', count(*)
            FROM jobs INDEXED BY due_order
            WHERE {IN_FLIGHT_SQL} AND kind = '{KIND_RUN}' AND jobType IN ({_marks(types)})
            GROUP BY 1, 2, 3, 4""",
        types,
    )
    return InFlight((str(r[0]), str(r[1]), r[2], bool(r[3]), int(r[4])) for r in rows)


def _no_full_keys(tenant: str) -> set[str]:
    return set()


def _lanes(
    conn: sqlite3.Connection, job_type: str, due_ms: int, full_keys: Callable[[str], set[str]]
) -> list[Lane[_DueRun]]:
    """The type's lanes with a run due by `due_ms`, one per tenant. The index due_lanes holds pending runs by
    (type, tenant, priority, time): a skip scan finds the first entry of each (tenant, priority) (its earliest
    run) without reading the entries between, so this costs one seek per tenant and priority, not per due run.
    A lane's reads leave out the runs of its tenant's `full_keys` (concurrency keys at their limit)."""
    heads: dict[str, list[tuple[int, int]]] = {}
    for row in conn.execute(_LANE_HEADS_SQL, {"type": job_type}):
        if row[2] <= due_ms:  # the lane's earliest pending run is due, so the lane has due runs
            heads.setdefault(str(row[0]), []).append((int(row[1]), int(row[2])))
    lanes: list[Lane[_DueRun]] = []
    for tenant, priorities in heads.items():
        priorities.sort(reverse=True)
        read = partial(_lane_runs, conn, job_type, tenant, [p for p, _ in priorities], due_ms, full_keys(tenant))
        lanes.append(Lane(job_type, tenant, head_of(*priorities[0]), read))
    return lanes


def _lane_runs(
    conn: sqlite3.Connection,
    job_type: str,
    tenant: str,
    priorities: list[int],
    due_ms: int,
    full_keys: set[str],
    after: _DueRun | None,
    n: int,
) -> list[_DueRun]:
    """The tenant's due runs of the type in claim order after `after`, at most n, none of `full_keys`: each
    priority's runs by time (an exact index range), higher priorities first."""
    found: list[_DueRun] = []
    keys = sorted(full_keys)
    not_full = f"AND (concurrencyKey IS NULL OR concurrencyKey NOT IN ({_marks(keys)}))" if keys else ""
    for priority in priorities:
        if after is not None and priority > after.priority:
            continue
        since, since_params = ("", [])
        if after is not None and priority == after.priority:
            since, since_params = "AND (scheduledAt, id) > (?, ?)", [after.scheduledAt, after.id]
        found += (
            _DueRun(str(r[0]), int(r[1]), int(r[2]), r[3])
            for r in conn.execute(
                f"""SELECT id, priority, scheduledAt, concurrencyKey FROM jobs INDEXED BY due_lanes
                    WHERE {PENDING_RUNS_SQL} AND jobType = ? AND tenantId = ? AND priority = ? AND scheduledAt <= ?
                    {since} {not_full} ORDER BY scheduledAt, id LIMIT ?""",
                [job_type, tenant, priority, due_ms, *since_params, *keys, n - len(found)],
            )
        )
        if len(found) >= n:
            break
    return found


def _reserved_starts(conn: sqlite3.Connection, rated: Mapping[str, Rate]) -> dict[str, float]:
    """How far the claims of each rate-limited type have reserved its starts (unix seconds)."""
    if not rated:
        return {}
    types = sorted(rated)
    rows = conn.execute(f"SELECT jobType, claimTat FROM rate_limits WHERE jobType IN ({_marks(types)})", types)
    return {str(r[0]): float(r[1]) for r in rows}


class TablesOnFirstUse:
    """The tables of a part kept beside the job store in its file (job types, signing secrets), created the first
    time the part is used: a process that never uses it writes nothing for it."""

    def __init__(self, store: SqliteJobStore, statements: Sequence[str]) -> None:
        self._store = store
        self._statements = tuple(statements)
        self._ready = False
        self._lock = threading.Lock()

    def ensure(self) -> None:
        with self._lock:
            if not self._ready:
                with self._store._write() as conn:
                    for statement in self._statements:
                        conn.execute(statement)
                self._ready = True


def _reserved_key_starts(conn: sqlite3.Connection, owner: KeyOwner) -> float:
    """How far the claims have reserved the starts of one (type, tenant, concurrency key) (unix seconds)."""
    row = conn.execute(
        "SELECT claimTat FROM key_rate_limits WHERE jobType = ? AND tenantId = ? AND concurrencyKey = ?", owner
    ).fetchone()
    return float(row[0]) if row else 0.0


def _add_missing_columns(conn: sqlite3.Connection, table: str, columns: dict[str, str]) -> None:
    """The columns added since a file was written (its rows read them as NULL)."""
    present = {str(r["name"]) for r in conn.execute(f"PRAGMA table_info({table})")}
    for column, kind in columns.items():
        if column not in present:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")


def _ensure_counts(conn: sqlite3.Connection) -> None:
    """The counts table and its triggers; a file written before them gets its counts from its jobs, in the same
    transaction (the write lock held), so no write is counted twice or missed."""
    counted = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'job_counts'").fetchone()
    conn.execute(_COUNTS_TABLE)
    for trigger in _COUNT_TRIGGERS:
        conn.execute(trigger)
    if counted is None:
        conn.execute(
            f"""INSERT INTO job_counts (tenantId, jobType, status, template, n)
                SELECT tenantId, jobType, status, kind = '{KIND_TEMPLATE}', count(*) FROM jobs
                WHERE {_one_of("status", RESTING_VALUES)} GROUP BY 1, 2, 3, 4"""
        )


def _drop_changed_indexes(conn: sqlite3.Connection) -> None:
    """An index of a file written before its definition changed is dropped, so that ensure_schema builds it anew:
    the queries name the partial indexes (INDEXED BY) with their current conditions."""
    stored = {
        str(r["name"]): r["sql"] for r in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index'")
    }
    for statement in _SCHEMA[1:]:
        declared = re.match(r"CREATE (?:UNIQUE )?INDEX IF NOT EXISTS (\w+) ", statement)
        if declared is None:
            continue
        name = declared[1]
        if name in stored and stored[name] != statement.replace(" IF NOT EXISTS", "", 1):
            conn.execute(f"DROP INDEX {name}")


def _drop_global_idempotency_key(conn: sqlite3.Connection) -> None:
    """A file written before idempotency keys were unique per tenant declares `idempotencyKey ... UNIQUE`, a
    constraint SQLite cannot drop: the table is rebuilt without it, inside ensure_schema's transaction."""
    constraints = [r["name"] for r in conn.execute("PRAGMA index_list(jobs)") if r["origin"] == "u"]
    columns_of = [[c["name"] for c in conn.execute(f'PRAGMA index_info("{name}")')] for name in constraints]
    if ["idempotencyKey"] not in columns_of:
        return
    columns = ", ".join(r["name"] for r in conn.execute("PRAGMA table_info(jobs)"))
    conn.execute("ALTER TABLE jobs RENAME TO jobs_with_global_keys")
    conn.execute(_JOBS_TABLE)
    conn.execute(f"INSERT INTO jobs ({columns}) SELECT {columns} FROM jobs_with_global_keys")
    conn.execute("DROP TABLE jobs_with_global_keys")  # and its indexes: _SCHEMA creates them on the new table


# --- transitions of one job inside a write transaction -----------------------------------------------------


def _refused_before_writing(step: Callable[[], T]) -> T | StoreError:
    """Run one request's statements of a shared transaction whose refusals (a StoreError: not found, not
    startable, attempt taken) are all decided before its first write: a refusal is its own result rather than the
    batch's and leaves nothing to undo, so it needs no savepoint (two statements more per request). Anything
    else rolls back the whole transaction."""
    try:
        return step()
    except StoreError as exc:
        return exc


def _created(conn: sqlite3.Connection, news: Sequence[NewJob]) -> list[Job | StoreError]:
    """The jobs inserted by multi-row INSERTs that skip a row whose unique key is taken (ON CONFLICT DO NOTHING:
    the first of two rows with one key wins, as the first of two creates would); each skipped job is answered
    DuplicateJob naming the key's holder. The created jobs are made from the values written, not read back."""
    now = utc_now()
    rows = [{"id": str(ObjectId()), **transitions.new_job(new, new.createdAt or now)} for new in news]
    columns = sorted(set().union(*rows))
    _check_columns(dict.fromkeys(columns), _JOB_COLUMNS)
    per_statement = max(1, conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // len(columns))
    values = [[_to_sql(c, row.get(c)) for c in columns] for row in rows]
    inserted: set[str] = set()
    for start in range(0, len(rows), per_statement):
        chunk = values[start : start + per_statement]
        marks = ", ".join([f"({_marks(columns)})"] * len(chunk))
        sql = f"INSERT INTO jobs ({', '.join(columns)}) VALUES {marks} ON CONFLICT DO NOTHING RETURNING id"
        inserted.update(str(r[0]) for r in conn.execute(sql, [v for row in chunk for v in row]))
    holders = _holders(conn, [new for new, row in zip(news, rows, strict=True) if row["id"] not in inserted])
    answers: list[Job | StoreError] = []
    id_column = columns.index("id")
    for new, row_values in zip(news, values, strict=True):
        if row_values[id_column] in inserted:
            answers.append(_job_from_values(dict(zip(columns, row_values, strict=True))))
        else:
            answers.append(DuplicateJob(new.idempotencyKey, holders.get((new.tenantId, new.idempotencyKey))))
    return answers


def _holders(conn: sqlite3.Connection, news: Sequence[NewJob]) -> dict[tuple[str, str], str]:
    """The ids of the jobs that hold these jobs' keys, by (tenant, key)."""
    found: dict[tuple[str, str], str] = {}
    for new in news:
        row = conn.execute(
            "SELECT id FROM jobs WHERE tenantId = ? AND idempotencyKey = ?", (new.tenantId, new.idempotencyKey)
        ).fetchone()
        if row is not None:
            found[(new.tenantId, new.idempotencyKey)] = str(row[0])
    return found


def _start_one(conn: sqlite3.Connection, now: datetime, start: AttemptStart) -> Job:
    """start_attempt's checks and writes: the job moves queued → running in one update, made only when it is
    startable (check_startable's condition) and its next attempt has no record yet, and the attempt's record is
    inserted. A refusal writes nothing; its reason is read only then."""
    job_id = str(ObjectId(start.job_id)) if ObjectId.is_valid(start.job_id) else None
    fields = transitions.started(start.worker, now, start.lease_until)
    started_until = _rate_allows(conn, start, now) if start.rate is not None else None
    key_started = _key_rate_allows(conn, start, job_id, now) if start.key_rate is not None and job_id else None
    row = None
    if job_id is not None:
        row = _update_job(conn, job_id, fields, _STARTABLE, (Status.QUEUED.value, start.job_type))
    if row is None:
        raise _start_refused(conn, job_id, start)
    if started_until is not None:
        conn.execute(
            "INSERT INTO rate_limits (jobType, claimTat, startTat) VALUES (?, 0, ?) "
            "ON CONFLICT (jobType) DO UPDATE SET startTat = excluded.startTat",
            (start.job_type, started_until),
        )
    if key_started is not None:
        owner, tat = key_started
        conn.execute(
            "INSERT INTO key_rate_limits (jobType, tenantId, concurrencyKey, claimTat, startTat) "
            "VALUES (?, ?, ?, 0, ?) ON CONFLICT DO UPDATE SET startTat = excluded.startTat",
            (*owner, tat),
        )
    job = _to_job(row)
    record = {"id": attempt_record_id(job.id, job.next_attempt)}
    record.update(transitions.attempt_started(job.id, job.next_attempt, start.worker, now))
    if _insert_unique(conn, "executions", record, returning="id") is None:  # a bug: the whole batch rolls back
        raise RuntimeError(f"attempt record {record['id']} appeared while the write lock was held")
    return job


def _rate_allows(conn: sqlite3.Connection, start: AttemptStart, now: datetime) -> float:
    """The type's starts after this one (claim_limits.start_allowed) when its rate allows it now; RateLimited
    otherwise. Only reads: the caller writes it once the start is made."""
    assert start.rate is not None
    row = conn.execute("SELECT startTat FROM rate_limits WHERE jobType = ?", (start.job_type,)).fetchone()
    allowed, value = start_allowed(float(row[0]) if row else 0.0, now.timestamp(), start.rate)
    if not allowed:
        raise RateLimited(start.job_type, datetime.fromtimestamp(value, UTC))
    return value


def _key_rate_allows(
    conn: sqlite3.Connection, start: AttemptStart, job_id: str, now: datetime
) -> tuple[KeyOwner, float] | None:
    """As _rate_allows, for the job's concurrency key under the type's rate per key (None: the job has no key, or
    is not there: the start's own checks name why)."""
    assert start.key_rate is not None
    job = conn.execute("SELECT tenantId, concurrencyKey FROM jobs WHERE id = ?", (job_id,)).fetchone()
    if job is None or job[1] is None:
        return None
    owner: KeyOwner = (start.job_type, str(job[0]), str(job[1]))
    row = conn.execute(
        "SELECT startTat FROM key_rate_limits WHERE jobType = ? AND tenantId = ? AND concurrencyKey = ?", owner
    ).fetchone()
    allowed, value = start_allowed(float(row[0]) if row else 0.0, now.timestamp(), start.key_rate)
    if not allowed:
        raise RateLimited(start.job_type, datetime.fromtimestamp(value, UTC))
    return owner, value


def _start_refused(conn: sqlite3.Connection, job_id: str | None, start: AttemptStart) -> StoreError:
    job = _load_job(conn, job_id) if job_id is not None else None
    if job is None:
        return JobNotFound(start.job_id)
    try:
        transitions.check_startable(job, start.job_type)
    except TransitionRefused as refused:
        return refused
    return AttemptTaken(f"attempt {job.next_attempt} of job {job.id} is already taken")


def _close_attempt(conn: sqlite3.Connection, job: Job, closing: Closing) -> Job | None:
    """Decide the attempt's one outcome and move the job: the first closer (the executor's result or the
    reaper's "lost") finds the record still `running`; every later one finds it decided and changes nothing."""
    record_id = attempt_record_id(job.id, job.next_attempt)
    record_set, record_params = _assignments(transitions.attempt_result(closing), _EXECUTION_COLUMNS)
    # One statement decides and closes the record, the write lock keeping its condition true until COMMIT: the
    # record still open, and the job still in this attempt (else record and job stay as they are). It returns
    # whether a cancel was asked after `job` was read (then no retry).
    state = conn.execute(
        f"""UPDATE executions SET {record_set} WHERE id = ? AND outcome = ?
                AND EXISTS (SELECT 1 FROM jobs WHERE id = ? AND attempts = ? AND {_IS_ACTIVE})
            RETURNING (SELECT cancelRequested FROM jobs WHERE id = ?)""",
        [*record_params, record_id, Outcome.RUNNING.value, job.id, job.attempts, *ATTEMPT_ACTIVE, job.id],
    ).fetchone()
    if state is None:
        return None
    if state[0] and not job.cancelRequested:
        job = job.evolve(cancelRequested=True)
    fields = transitions.attempt_closed(job, closing)
    guard = (job.attempts, *ATTEMPT_ACTIVE)
    row = _update_job(conn, job.id, fields, f"attempts = ? AND {_IS_ACTIVE}", guard, returning="id")
    assert row is not None, "the write lock was held since the job was read"
    return transitions.applied(job, fields)


# --- row helpers ------------------------------------------------------------------------------------------


def _load_job(conn: sqlite3.Connection, job_id: str) -> Job | None:
    # str(ObjectId(...)) lowercases the hex, as MongoDB's ObjectId lookup does.
    row = conn.execute("SELECT * FROM jobs WHERE id = ?", (str(ObjectId(job_id)),)).fetchone()
    return _to_job(row) if row else None


def _runs_after(run: Job | None) -> tuple[str, list[Any]]:
    """The condition for the runs listed after `run` in template_runs' order (SQLite sorts NULL lowest, so runs
    without plannedAt come last, as in MongoDB)."""
    if run is None:
        return "", []
    scheduled = _to_ms(run.scheduledAt)
    same_planned = "(scheduledAt < ? OR (scheduledAt = ? AND id < ?))"
    if run.plannedAt is None:
        return f"AND plannedAt IS NULL AND {same_planned}", [scheduled, scheduled, run.id]
    planned = _to_ms(run.plannedAt)
    return (
        f"AND (plannedAt IS NULL OR plannedAt < ? OR (plannedAt = ? AND {same_planned}))",
        [planned, planned, scheduled, scheduled, run.id],
    )


def _transactions_of(template: Job, runs: Sequence[RunSpec], now: datetime) -> Iterator[list[transitions.Fields]]:
    """The runs' rows a transaction's worth at a time (RUNS_PER_TRANSACTION, or TRANSACTION_BYTES of payload),
    so that a backfill's thousands of runs let the executor's writes through between them and never sit in
    memory all at once. Runs share their template's payload: it is written to JSON once."""
    texts: dict[int, str] = {}
    batch: list[transitions.Fields] = []
    size = 0
    for run in runs:
        fields = {"id": str(ObjectId()), **transitions.template_run(template, run, now)}
        payload = fields["payload"]
        if id(payload) not in texts:
            texts[id(payload)] = _payload_text(payload)
        fields["payload"] = texts[id(payload)]
        batch.append(fields)
        size += len(fields["payload"])
        if len(batch) == RUNS_PER_TRANSACTION or size >= TRANSACTION_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _insert_unique(
    conn: sqlite3.Connection, table: str, fields: transitions.Fields, returning: str = "*"
) -> sqlite3.Row | None:
    """Insert a row and return it (its `returning` columns), or None when its unique key (id; tenantId +
    idempotencyKey) is taken: the atomic "who owns this" decision of every store."""
    columns = _JOB_COLUMNS if table == "jobs" else _EXECUTION_COLUMNS
    _check_columns(fields, columns)
    values = [_to_sql(k, v) for k, v in fields.items()]
    try:
        row: sqlite3.Row = conn.execute(
            f"INSERT INTO {table} ({', '.join(fields)}) VALUES ({_marks(values)}) RETURNING {returning}", values
        ).fetchone()
    except sqlite3.IntegrityError as exc:
        if getattr(exc, "sqlite_errorcode", None) in _DUPLICATE_CODES:
            return None
        raise
    return row


def _update_job(
    conn: sqlite3.Connection,
    job_id: str,
    fields: transitions.Fields,
    guard: str,
    guard_params: Sequence[Any],
    returning: str = "*",
) -> sqlite3.Row | None:
    """Apply a transition's fields to one job if `guard` (the compare of compare-and-set) still holds;
    the updated row (its `returning` columns), or None when it does not."""
    set_sql, set_params = _assignments(fields, _JOB_COLUMNS)
    row: sqlite3.Row | None = conn.execute(
        f"UPDATE jobs SET {set_sql} WHERE id = ? AND {guard} RETURNING {returning}",
        [*set_params, job_id, *guard_params],
    ).fetchone()
    return row


def _assignments(fields: transitions.Fields, columns: frozenset[str]) -> tuple[str, list[Any]]:
    _check_columns(fields, columns)
    return ", ".join(f"{k} = ?" for k in fields), [_to_sql(k, v) for k, v in fields.items()]


def _check_columns(fields: transitions.Fields, columns: frozenset[str]) -> None:
    # Column names are interpolated into SQL: only our own, known names may get there.
    unknown = set(fields) - columns
    if unknown:
        raise ValueError(f"unknown columns {sorted(unknown)}")


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" * len(values))


def _chunks(ids: list[str], size: int = 500) -> Iterator[list[str]]:
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def _to_sql(key: str, value: Any) -> Any:
    if value is transitions.UNSET:
        return None
    if isinstance(value, datetime):
        return _to_ms(value)
    if key == "payload":
        return value if isinstance(value, str) else _payload_text(value)  # a str: written already
    if key in _JSON_COLUMNS and value is not None:
        return _payload_text(value)
    return value


def _payload_text(payload: Any) -> str:
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate that an older version stored, copied into a new row (a run of its template): SQLite
        # takes only UTF-8 text, so it is kept as its \u escape, which reads back as the same value.
        text = json.dumps(payload, separators=(",", ":"))
    return text


def _to_ms(moment: datetime) -> int:
    """Unix milliseconds, truncated like BSON dates; a naive datetime is taken as UTC (as pymongo does)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _from_ms(ms: int) -> datetime:
    return _EPOCH + timedelta(0, 0, ms * 1000)  # positional microseconds: twice as fast as milliseconds=


def _from_row(row: sqlite3.Row) -> dict[str, Any]:
    values = dict(zip(row.keys(), tuple(row), strict=True))
    for key in _TIME_COLUMNS.intersection(values):
        if values[key] is not None:
            values[key] = _from_ms(values[key])
    return values


def _to_job(row: sqlite3.Row) -> Job:
    return _job_from_values(dict(zip(row.keys(), row, strict=True)))


def _job_from_values(values: dict[str, Any]) -> Job:
    """The job a row's column values hold (taken over, not copied)."""
    values.pop("kind", None)  # the store's own column, not a job field
    for key in _TIME_COLUMNS.intersection(values):
        if values[key] is not None:
            values[key] = _from_ms(values[key])
    values["status"] = Status(values["status"])
    values["payload"] = json.loads(values["payload"])
    for key in _JSON_COLUMNS.intersection(values):
        if values[key] is not None:
            values[key] = json.loads(values[key])
    for key in _BOOL_COLUMNS.intersection(values):
        if values[key] is not None:
            values[key] = bool(values[key])
    return job_from_fields(values)


def _to_execution(row: sqlite3.Row) -> Execution:
    values = _from_row(row)
    values["outcome"] = Outcome(values["outcome"])
    if values.get("result") is not None:
        values["result"] = json.loads(values["result"])
    return Execution(**values)
