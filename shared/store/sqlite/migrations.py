"""The SQLite file's schema changes, numbered from 1 in the order they were made: migration k (MIGRATIONS[k-1])
takes a file of schema version k-1 to version k. schema.py applies the pending ones and records the version.

Every migration is a function of a connection, run inside the write transaction that applies it, named for what it
does, its docstring saying why, and
- finds what earlier versions made: a file written before numbered migrations (version 0, whatever its layout)
  gets every migration, though it already holds what the first ones make. So a migration creates only what is
  not there (IF NOT EXISTS), adds a column only when it is missing, rebuilds a table only when the old
  constraint is there, counts only into a table it has just made;
- is frozen once released: its SQL is written out in it rather than built from constants that later code may
  change (the queries keep their own copies in schema.py), so that it does to a file what it did when it was
  released. A change to the schema is a new migration at the end of MIGRATIONS, never an edit of one
  (tests/contract/test_store_sqlite_migrations.py holds each one's digest, and checks a migrated file against what
  the queries expect).

Migrations 1 to 6 are the steps of ensure_schema before versions, in their order. The tables of the parts kept
beside the jobs (7 to 10), which each part used to create the first time it was used, came with the versions,
so that one number says what the whole file holds.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from typing import Final

Migration = Callable[[sqlite3.Connection], None]


def jobs_table(conn: sqlite3.Connection) -> None:
    """The jobs, with the columns added since the first release (a file's older rows read them as NULL). A file
    written before idempotency keys were unique per tenant declares `idempotencyKey ... UNIQUE`, a constraint
    SQLite cannot drop: that table is rebuilt without it (its indexes go with it; migration 2 makes them)."""
    table = """CREATE TABLE IF NOT EXISTS jobs (
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
    unique = [str(r[1]) for r in conn.execute("PRAGMA index_list(jobs)") if r[3] == "u"]
    if any([str(c[2]) for c in conn.execute(f'PRAGMA index_info("{name}")')] == ["idempotencyKey"] for name in unique):
        columns = ", ".join(str(r[1]) for r in conn.execute("PRAGMA table_info(jobs)"))
        conn.execute("ALTER TABLE jobs RENAME TO jobs_with_global_keys")
        conn.execute(table)
        conn.execute(f"INSERT INTO jobs ({columns}) SELECT {columns} FROM jobs_with_global_keys")
        conn.execute("DROP TABLE jobs_with_global_keys")
    conn.execute(table)
    add_missing_columns(
        conn,
        "jobs",
        "overlap TEXT, catchup TEXT, catchupWindow TEXT, jitter TEXT, pauseNote TEXT, startAt INTEGER, endAt INTEGER, "
        "remainingRuns INTEGER, pauseOnFailure INTEGER, paused INTEGER, pausedAt INTEGER, resumedAt INTEGER, "
        "lastFiredAt INTEGER, plannedAt INTEGER, cancelRequested INTEGER, declaredBy TEXT, declaration TEXT, "
        "concurrencyKey TEXT, result TEXT, progress TEXT, snoozes INTEGER",
    )


def indexes_attempts_and_rates(conn: sqlite3.Connection) -> None:
    """The jobs' indexes, the attempts (executions) and their indexes, and the rate tables. The partial indexes'
    conditions are ORed comparisons: every update of a column a partial index's condition reads evaluates it for
    the row's old and new values, and SQLite evaluates an IN of more than two constants through a temporary table
    it builds each time. An index of a file written before its definition changed is dropped and made anew here:
    the queries name the partial indexes (INDEXED BY) and repeat their conditions, which must be these."""
    statements = (
        # invariant 4: one job per idempotency key within its tenant, decided by this index
        "CREATE UNIQUE INDEX IF NOT EXISTS tenant_idempotency ON jobs (tenantId, idempotencyKey)",
        # Claims, due templates, due job types, the reaper's sweeps. A claim range-scans the due runs and keeps
        # the top `limit` in claim order. An index in claim order (priority first) would skip that sort but walk
        # every not-yet-due job of higher priority on each claim, which behind a large backlog of future jobs
        # makes single claims an order of magnitude slower.
        "CREATE INDEX IF NOT EXISTS due_order ON jobs (status, kind, scheduledAt)",
        # Claims (fair_claims.py): the lanes of due runs, one per tenant and type, each in claim order by
        # priority. concurrencyKey last: a read that leaves out the keys at their limit filters on the index
        # entries, without reading those rows (it still steps over their entries).
        "CREATE INDEX IF NOT EXISTS due_lanes ON jobs (jobType, tenantId, priority, scheduledAt, id, concurrencyKey) "
        "WHERE status = 'pending' AND kind = 'run'",
        "CREATE INDEX IF NOT EXISTS tenant_listing ON jobs (tenantId, createdAt DESC, id DESC)",
        # The operator's pages (browse.py; the counts are job_counts'). All but tenant_type_listing are partial,
        # so a job on its way to an end writes to them only where it waits (pending) and where it gets: jobs that
        # have ended (the bulk of a store, by status), templates, runs, dead letters, failed attempts. Jobs
        # between pending and their end (few: what runs now) are found through due_order.
        "CREATE INDEX IF NOT EXISTS final_listing ON jobs (tenantId, status, createdAt DESC, id DESC) "
        "WHERE (status = 'completed' OR status = 'dlq' OR status = 'cancelled')",
        # A tenant's pending jobs, newest first: a job enters it when created or retried and leaves it when claimed.
        "CREATE INDEX IF NOT EXISTS pending_listing ON jobs (tenantId, createdAt DESC, id DESC) "
        "WHERE status = 'pending'",
        "CREATE INDEX IF NOT EXISTS tenant_type_listing ON jobs (tenantId, jobType, createdAt DESC, id DESC)",
        "CREATE INDEX IF NOT EXISTS tenant_templates ON jobs (tenantId, createdAt DESC, id DESC) "
        "WHERE kind = 'template'",
        "CREATE INDEX IF NOT EXISTS template_runs ON jobs (templateId, createdAt DESC, id DESC) "
        "WHERE templateId IS NOT NULL",
        "CREATE INDEX IF NOT EXISTS recent_endings ON jobs (updatedAt, jobType, status, tenantId) "
        "WHERE (status = 'completed' OR status = 'dlq' OR status = 'cancelled')",
        "CREATE INDEX IF NOT EXISTS dead_letters ON jobs (lastError, updatedAt, jobType, tenantId) "
        "WHERE status = 'dlq'",
        # One tenant's dead letters by error (its DLQ page), without walking every tenant's.
        "CREATE INDEX IF NOT EXISTS tenant_dead_letters ON jobs (tenantId, lastError, jobType, updatedAt) "
        "WHERE status = 'dlq'",
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
        # A rate-limited type's starts (claim_limits.py): how far claims reserved them, how far they went (unix s).
        """CREATE TABLE IF NOT EXISTS rate_limits (
        jobType     TEXT PRIMARY KEY,
        claimTat    REAL NOT NULL,
        startTat    REAL NOT NULL
    ) WITHOUT ROWID""",
        # The same per (type, tenant, concurrency key) under a rate per key, for the keys that started lately.
        """CREATE TABLE IF NOT EXISTS key_rate_limits (
        jobType         TEXT NOT NULL,
        tenantId        TEXT NOT NULL,
        concurrencyKey  TEXT NOT NULL,
        claimTat        REAL NOT NULL,
        startTat        REAL NOT NULL,
        PRIMARY KEY (jobType, tenantId, concurrencyKey)
    ) WITHOUT ROWID""",
        "CREATE INDEX IF NOT EXISTS failed_attempts ON executions (finishedAt) "
        "WHERE (outcome = 'failed' OR outcome = 'timeout' OR outcome = 'lost')",
    )
    stored = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index'").fetchall())
    for statement in statements:
        declared = statement.removeprefix("CREATE UNIQUE INDEX ").removeprefix("CREATE INDEX ")
        if declared == statement:
            continue  # a table
        name = declared.split()[3]  # after IF NOT EXISTS
        if name in stored and stored[name] != statement.replace(" IF NOT EXISTS", "", 1):
            conn.execute(f"DROP INDEX {name}")
    for statement in statements:
        conn.execute(statement)


def attempt_columns(conn: sqlite3.Connection) -> None:
    """The attempts' columns added since the first release."""
    add_missing_columns(conn, "executions", "traceback TEXT, result TEXT")


def job_counts(conn: sqlite3.Connection) -> None:
    """Jobs by tenant, type, status and whether they are templates, kept by triggers in the transaction of every
    write that inserts, deletes or moves a job: the overview's counts and the tenants read these few rows, not
    millions of index entries. Only the statuses where jobs wait or stay are counted (pending, buffered and the
    final ones); a job passes through the others (queued to running) in moments, and the reads count those from
    due_order. A job's way from pending to its end thus costs two small upserts (leaving pending, reaching its
    end). A file written before the counts gets them from its jobs, in this transaction (the write lock held), so
    no write is counted twice or missed."""
    counted = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'job_counts'").fetchone()
    conn.execute(
        """CREATE TABLE IF NOT EXISTS job_counts (
        tenantId    TEXT NOT NULL,
        jobType     TEXT NOT NULL,
        status      TEXT NOT NULL,              -- one of RESTING
        template    INTEGER NOT NULL,           -- 1: templates (counted as schedules, not as jobs)
        n           INTEGER NOT NULL,
        PRIMARY KEY (tenantId, jobType, status, template)
    ) WITHOUT ROWID"""
    )

    def resting(row: str) -> str:
        statuses = ("pending", "buffered", "cancelled", "completed", "dlq")
        return "(" + " OR ".join(f"{row}.status = '{status}'" for status in statuses) + ")"

    def count(row: str, change: str) -> str:
        key = f"{row}.tenantId, {row}.jobType, {row}.status, {row}.kind = 'template'"
        return (
            f"BEGIN INSERT INTO job_counts (tenantId, jobType, status, template, n) VALUES ({key}, {change}) "
            f"ON CONFLICT (tenantId, jobType, status, template) DO UPDATE SET n = n + {change}; END"
        )

    moved = "AFTER UPDATE OF status ON jobs WHEN old.status IS NOT new.status AND"
    for trigger in (
        f"counted_insert AFTER INSERT ON jobs WHEN {resting('new')} {count('new', '1')}",
        f"counted_delete AFTER DELETE ON jobs WHEN {resting('old')} {count('old', '-1')}",
        f"counted_leave {moved} {resting('old')} {count('old', '-1')}",
        f"counted_enter {moved} {resting('new')} {count('new', '1')}",
    ):
        conn.execute(f"CREATE TRIGGER IF NOT EXISTS {trigger}")
    if counted is None:
        conn.execute(
            f"""INSERT INTO job_counts (tenantId, jobType, status, template, n)
                SELECT tenantId, jobType, status, kind = 'template', count(*) FROM jobs
                WHERE {resting("jobs")} GROUP BY 1, 2, 3, 4"""
        )


def recent_endings_by_minute(conn: sqlite3.Connection) -> None:
    """The last hour's endings (jobs completed, jobs dead-lettered, attempts failed), counted by minute as they
    happen (recent.py reads them): triggers add each ending, in the transaction that writes it, to its minute's
    counter in a ring of 64 slots per tenant and job type (an hour and its first, partial minute, with room for a
    clock's step). A slot holds one minute and is taken over by a later one; an ending older than the minute its
    slot holds is over an hour old and is not counted. A file written before the ring gets its minutes counted
    from its jobs and attempts, in this transaction (the write lock held), so no ending is counted twice or
    missed."""
    present = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'recent_endings_by_minute'"
    ).fetchone()
    conn.execute(
        """CREATE TABLE IF NOT EXISTS recent_endings_by_minute (
        tenantId    TEXT NOT NULL,
        jobType     TEXT NOT NULL,
        slot        INTEGER NOT NULL,           -- minute % 64
        minute      INTEGER NOT NULL,           -- unix minutes, UTC: the minute the slot counts
        completed   INTEGER NOT NULL DEFAULT 0, -- jobs
        dlq         INTEGER NOT NULL DEFAULT 0, -- jobs
        failed      INTEGER NOT NULL DEFAULT 0, -- attempts (failed, timed out or lost)
        PRIMARY KEY (tenantId, jobType, slot)
    ) WITHOUT ROWID"""
    )
    # Every tenant's last hour (the operator's overview) reads the rows of the last hour alone, not the whole ring.
    conn.execute("CREATE INDEX IF NOT EXISTS recent_minutes ON recent_endings_by_minute (minute)")
    kept = ", ".join(
        f"{c} = CASE WHEN excluded.minute > minute THEN excluded.{c} "
        f"WHEN excluded.minute = minute THEN {c} + excluded.{c} ELSE {c} END"
        for c in ("completed", "dlq", "failed")
    )

    def add(column: str, source: str) -> str:
        """The upsert that adds 1 to `column` of the minute of `source`'s (tenantId, jobType, at) row."""
        return (
            "BEGIN INSERT INTO recent_endings_by_minute (tenantId, jobType, slot, minute, "
            f"{column}) SELECT tenantId, jobType, (at / 60000) % 64, at / 60000, 1 "
            f"FROM ({source}) WHERE true "  # WHERE: how SQLite tells an upsert's SELECT from a join
            f"ON CONFLICT (tenantId, jobType, slot) DO UPDATE SET {kept}, minute = max(minute, excluded.minute); END"
        )

    job = "SELECT new.tenantId AS tenantId, new.jobType AS jobType, new.updatedAt AS at"
    attempt = (
        "SELECT jobs.tenantId AS tenantId, jobs.jobType AS jobType, new.finishedAt AS at "
        "FROM jobs WHERE jobs.id = new.jobId"
    )
    failed = "new.outcome = 'failed' OR new.outcome = 'timeout' OR new.outcome = 'lost'"
    was_failed = "old.outcome = 'failed' OR old.outcome = 'timeout' OR old.outcome = 'lost'"
    for trigger in (
        "recent_completed AFTER UPDATE OF status ON jobs "
        f"WHEN new.status = 'completed' AND old.status IS NOT new.status {add('completed', job)}",
        "recent_dlq AFTER UPDATE OF status ON jobs "
        f"WHEN new.status = 'dlq' AND old.status IS NOT new.status {add('dlq', job)}",
        "recent_failed_attempt AFTER INSERT ON executions "
        f"WHEN ({failed}) AND new.finishedAt IS NOT NULL {add('failed', attempt)}",
        "recent_attempt_failed AFTER UPDATE OF outcome ON executions "
        f"WHEN ({failed}) AND NOT ({was_failed}) AND new.finishedAt IS NOT NULL {add('failed', attempt)}",
    ):
        conn.execute(f"CREATE TRIGGER IF NOT EXISTS {trigger}")
    if present is not None:
        return
    now_minute = int(time.time() * 1000) // 60000
    ring = [(now_minute - 64 + 1) * 60000, (now_minute + 1) * 60000]  # none later: a clock ahead must not fill a slot
    rows = conn.execute(
        """SELECT tenantId, jobType, updatedAt / 60000, status, count(*) FROM jobs INDEXED BY recent_endings
            WHERE (status = 'completed' OR status = 'dlq' OR status = 'cancelled') AND status IN ('completed', 'dlq')
            AND updatedAt >= ? AND updatedAt < ? GROUP BY 1, 2, 3, 4""",
        ring,
    ).fetchall()
    rows += conn.execute(
        """SELECT jobs.tenantId, jobs.jobType, executions.finishedAt / 60000, 'failed', count(*)
            FROM executions INDEXED BY failed_attempts CROSS JOIN jobs ON jobs.id = executions.jobId
            WHERE (outcome = 'failed' OR outcome = 'timeout' OR outcome = 'lost')
            AND executions.finishedAt >= ? AND executions.finishedAt < ? GROUP BY 1, 2, 3""",
        ring,
    ).fetchall()
    for tenant, job_type, minute, column, ended in rows:
        conn.execute(
            f"""INSERT INTO recent_endings_by_minute (tenantId, jobType, slot, minute, {column}) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (tenantId, jobType, slot) DO UPDATE SET {column} = {column} + excluded.{column}""",
            [tenant, job_type, minute % 64, minute, ended],
        )


def drop_final_counts(conn: sqlite3.Connection) -> None:
    """An index of earlier versions that nothing reads since job_counts: it would only cost writes."""
    conn.execute("DROP INDEX IF EXISTS final_counts")


def job_type_tables(conn: sqlite3.Connection) -> None:
    """What executors announce of the job types they serve (job_types.py), and the operator's limits per type."""
    conn.execute(
        """CREATE TABLE IF NOT EXISTS job_type_announcements (
    jobType     TEXT NOT NULL,
    executor    TEXT NOT NULL,
    seenAt      INTEGER NOT NULL,              -- unix milliseconds, UTC, as every time in this file
    liveUntil   INTEGER NOT NULL,
    defaults    TEXT NOT NULL,                 -- JSON: TypeDefaults.to_document()
    PRIMARY KEY (jobType, executor)
)"""
    )
    conn.execute(
        """CREATE TABLE IF NOT EXISTS job_type_limits (
    jobType     TEXT PRIMARY KEY,
    limits      TEXT NOT NULL,                 -- JSON: Limits.to_document(), an operator's (set_limits)
    updatedAt   INTEGER NOT NULL
)"""
    )


def signing_secrets_table(conn: sqlite3.Connection) -> None:
    """The tenants' secrets that sign http jobs (signing_secrets.py), and the columns of their sealed values,
    added to a table made before the secrets key (its values kept in the clear are sealed by the first process
    with the key that uses them: a migration has no key)."""
    conn.execute(
        """CREATE TABLE IF NOT EXISTS signing_secrets (
        id          TEXT PRIMARY KEY,
        tenantId    TEXT NOT NULL,
        secret      TEXT NOT NULL,              -- '' once sealed; the value itself only without a key
        createdAt   INTEGER NOT NULL,           -- unix milliseconds, UTC
        keyId       TEXT,                       -- the key that sealed it (shared/sealing.py)
        sealed      BLOB
    )"""
    )
    conn.execute("CREATE INDEX IF NOT EXISTS tenant_signing_secrets ON signing_secrets (tenantId, createdAt)")
    add_missing_columns(conn, "signing_secrets", "keyId TEXT, sealed BLOB")


def credentials_table(conn: sqlite3.Connection) -> None:
    """The tenants' sealed credentials of http jobs (credentials.py)."""
    conn.execute(
        """CREATE TABLE IF NOT EXISTS credentials (
        tenantId    TEXT NOT NULL,
        name        TEXT NOT NULL,
        keyId       TEXT NOT NULL,              -- the key that sealed the value (shared/sealing.py)
        sealed      BLOB NOT NULL,              -- nonce, ciphertext and tag: never the value itself
        createdAt   INTEGER NOT NULL,           -- unix milliseconds, UTC
        updatedAt   INTEGER NOT NULL,
        PRIMARY KEY (tenantId, name)
    )"""
    )


def api_keys_table(conn: sqlite3.Connection) -> None:
    """The API keys (keys.py): their digests, never the keys."""
    conn.execute(
        """CREATE TABLE IF NOT EXISTS api_keys (
    prefix      TEXT PRIMARY KEY,               -- inserting it decides who owns the prefix
    tenantId    TEXT NOT NULL,
    role        TEXT NOT NULL,
    keyHash     TEXT NOT NULL,                  -- SHA-256 of the key; the key itself is never stored
    name        TEXT,
    createdAt   INTEGER NOT NULL,               -- times: unix milliseconds, UTC
    lastUsedAt  INTEGER,
    revokedAt   INTEGER
)"""
    )


def backoff_on_jobs(conn: sqlite3.Connection) -> None:
    """A job keeps its type's retry backoff from its creation (column `backoff`: JSON, NULL for the default 1 s base,
    300 s cap, no jitter), read by whoever closes one of its attempts; before, each closer looked the type's backoff
    up. The jobs not final yet (templates included) of a type whose latest announcement (by seenAt, then executor)
    carries another backoff get that one, so that they go on being retried as before; a job that has one already
    keeps it, and a backoff that cannot be read counts as the default, as the announcement's readers take it."""
    add_missing_columns(conn, "jobs", "backoff TEXT")
    latest = conn.execute(
        """SELECT jobType, defaults FROM job_type_announcements AS announced WHERE NOT EXISTS (
            SELECT 1 FROM job_type_announcements AS later WHERE later.jobType = announced.jobType AND (
                later.seenAt > announced.seenAt
                OR (later.seenAt = announced.seenAt AND later.executor > announced.executor)
            )
        )"""
    ).fetchall()
    for job_type, defaults in latest:
        try:
            announced = json.loads(defaults)["backoff"]
            backoff = {
                "baseSeconds": float(announced.get("baseSeconds", 1.0)),
                "capSeconds": float(announced.get("capSeconds", 300.0)),
                "jitter": bool(announced.get("jitter", False)),
            }
        except (TypeError, ValueError, KeyError, AttributeError):
            continue
        readable = backoff["baseSeconds"] > 0 and backoff["capSeconds"] >= backoff["baseSeconds"]
        if not readable or backoff == {"baseSeconds": 1.0, "capSeconds": 300.0, "jitter": False}:
            continue
        conn.execute(
            """UPDATE jobs SET backoff = ? WHERE jobType = ? AND backoff IS NULL
                AND status IN ('pending', 'buffered', 'queued', 'claimed', 'running')""",
            (json.dumps(backoff, separators=(",", ":")), job_type),
        )


def add_missing_columns(conn: sqlite3.Connection, table: str, columns: str) -> None:
    """Those of `columns` ("name TYPE, ...") that `table` does not have yet, added in their order (the rows already
    there read them as NULL). Released migrations call it: it is frozen with them (its digest is beside theirs)."""
    present = {str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")}
    for column in columns.split(", "):
        if column.split()[0] not in present:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column}")


def job_dependencies(conn: sqlite3.Connection) -> None:
    """Jobs that wait for other jobs (dependsOn, issue 50): the parents a job names and what a failed one does to
    it, and one row per (parent, waiting dependent) while the parent has not ended, which the parent's end reads
    by its key and deletes."""
    add_missing_columns(conn, "jobs", "dependsOn TEXT, onParentFailure TEXT")
    conn.execute(
        """CREATE TABLE IF NOT EXISTS job_dependencies (
            parentId TEXT NOT NULL,
            childId  TEXT NOT NULL,
            PRIMARY KEY (parentId, childId)
        ) WITHOUT ROWID"""
    )


def workflows_table(conn: sqlite3.Connection) -> None:
    """Workflows (issue 50): a workflow's record (its steps by name, with their jobs' ids), one per tenant and
    idempotency key, listed newest first; a step's job names its workflow and step, and a workflow's jobs are found
    by an index that holds only jobs of a workflow."""
    add_missing_columns(conn, "jobs", "workflowId TEXT, step TEXT")
    conn.execute("CREATE INDEX IF NOT EXISTS jobs_of_workflow ON jobs (workflowId) WHERE workflowId IS NOT NULL")
    conn.execute(
        """CREATE TABLE IF NOT EXISTS workflows (
            id             TEXT PRIMARY KEY,
            tenantId       TEXT NOT NULL,
            idempotencyKey TEXT NOT NULL,
            name           TEXT,
            createdAt      INTEGER NOT NULL,
            state          TEXT NOT NULL,
            steps          TEXT NOT NULL,
            UNIQUE (tenantId, idempotencyKey)
        ) WITHOUT ROWID"""
    )
    conn.execute("CREATE INDEX IF NOT EXISTS workflows_of_tenant ON workflows (tenantId, id)")


def batches_table(conn: sqlite3.Connection) -> None:
    """Batches (issue 50): a batch's record, one per tenant and idempotency key, listed newest first; a member or a
    callback names its batch, and a batch's jobs are found by status in an index that holds only batches' jobs
    (a member's end probes it for one that has not ended)."""
    add_missing_columns(conn, "jobs", "batchId TEXT, callbackOf TEXT")
    conn.execute("CREATE INDEX IF NOT EXISTS jobs_of_batch ON jobs (batchId, status, id) WHERE batchId IS NOT NULL")
    conn.execute(
        """CREATE TABLE IF NOT EXISTS batches (
            id             TEXT PRIMARY KEY,
            tenantId       TEXT NOT NULL,
            idempotencyKey TEXT NOT NULL,
            name           TEXT,
            createdAt      INTEGER NOT NULL,
            sealed         INTEGER NOT NULL DEFAULT 0,
            onComplete     TEXT,
            onSuccess      TEXT,
            firedAt        INTEGER,
            failures       INTEGER NOT NULL DEFAULT 0,
            UNIQUE (tenantId, idempotencyKey)
        ) WITHOUT ROWID"""
    )
    conn.execute("CREATE INDEX IF NOT EXISTS batches_of_tenant ON batches (tenantId, id)")


def waiting_on_one_parent(conn: sqlite3.Connection) -> None:
    """A job that waits for one parent names it in its own row (`waitingOn`, in an index that holds only waiting
    jobs) instead of a row in `job_dependencies`: a parent's end finds it in that index, and a chain's link or a
    fan-out's member costs no row besides its own (issue 50: one write more than an independent job, its
    release). The waiting jobs whose one row left is for their only parent move to it."""
    add_missing_columns(conn, "jobs", "waitingOn TEXT")
    conn.execute("CREATE INDEX IF NOT EXISTS waiting_on ON jobs (waitingOn) WHERE status = 'waiting'")
    single = """SELECT childId, parentId FROM job_dependencies AS row JOIN jobs ON jobs.id = row.childId
        WHERE jobs.status = 'waiting' AND json_array_length(jobs.dependsOn) = 1"""
    moved = conn.execute(single).fetchall()
    conn.executemany("UPDATE jobs SET waitingOn = ? WHERE id = ?", [(parent, child) for child, parent in moved])
    conn.executemany("DELETE FROM job_dependencies WHERE childId = ?", [(child,) for child, _ in moved])


def trace_context(conn: sqlite3.Connection) -> None:
    """The W3C trace context a job was created in (`traceparent`, issue 51), which its attempts' spans follow."""
    add_missing_columns(conn, "jobs", "traceparent TEXT")


def history_by_minute(conn: sqlite3.Connection) -> None:
    """The console's history (issue 51): a row per tenant, job type and minute of the last day (the reaper's
    sample deletes older ones), for what recent_endings_by_minute counted (the endings, moved here by
    endings_into_history), the attempts started and how late (started - due, in the 18 buckets l0 to l17 of
    shared/store/history.py), which the starts add (minutes.py: once per batch, where a trigger would cost each
    start an upsert), and the jobs due and waiting and running that the reaper samples once a minute. Beside it,
    every tenant's sums per type and minute (history_every_tenant), which the reaper adds up once a minute, so
    that an admin's day reads a day's rows per type, not a day's per tenant and type."""
    counters = ["completed", "dlq", "failed", "started", *(f"l{i}" for i in range(18))]
    columns = ", ".join(f"{c} INTEGER NOT NULL DEFAULT 0" for c in (*counters, "waiting", "running"))
    conn.execute(
        f"""CREATE TABLE IF NOT EXISTS history_by_minute (
        tenantId TEXT NOT NULL, jobType TEXT NOT NULL, minute INTEGER NOT NULL, -- unix minutes, UTC
        {columns}, -- waiting (runs due, not started) and running (claimed or running): sampled
        PRIMARY KEY (tenantId, jobType, minute)
    ) WITHOUT ROWID"""
    )
    # Every tenant's minutes (the sums, the overview's last hour) and the deletion of old ones.
    conn.execute("CREATE INDEX IF NOT EXISTS history_minutes ON history_by_minute (minute)")
    conn.execute(
        f"""CREATE TABLE IF NOT EXISTS history_every_tenant (
        jobType TEXT NOT NULL, minute INTEGER NOT NULL, {columns}, PRIMARY KEY (jobType, minute)
    ) WITHOUT ROWID"""
    )
    conn.execute("CREATE INDEX IF NOT EXISTS summed_minutes ON history_every_tenant (minute)")


def endings_into_history(conn: sqlite3.Connection) -> None:
    """The endings are counted in history_by_minute from now on: triggers add each, in the transaction that
    writes it, as they added it to recent_endings_by_minute (whose last hour is copied over before it and its
    triggers are dropped), but only a job's or a run's: a schedule's own end is not a job's outcome, and the
    MongoDB store, which counts the attempts' closes, does not see it."""
    now_minute = int(time.time() * 1000) // 60000
    conn.execute(
        """INSERT INTO history_by_minute (tenantId, jobType, minute, completed, dlq, failed)
            SELECT tenantId, jobType, minute, completed, dlq, failed FROM recent_endings_by_minute
            WHERE minute > ? AND minute <= ?
            ON CONFLICT (tenantId, jobType, minute) DO UPDATE SET completed = completed + excluded.completed,
            dlq = dlq + excluded.dlq, failed = failed + excluded.failed""",
        [now_minute - 64, now_minute],
    )
    for old in ("recent_completed", "recent_dlq", "recent_failed_attempt", "recent_attempt_failed"):
        conn.execute(f"DROP TRIGGER IF EXISTS {old}")
    conn.execute("DROP TABLE IF EXISTS recent_endings_by_minute")

    def add(column: str, source: str) -> str:
        """The upsert that adds 1 to `column` of the minute of `source`'s (tenantId, jobType, at) row."""
        return (
            f"BEGIN INSERT INTO history_by_minute (tenantId, jobType, minute, {column}) "
            f"SELECT tenantId, jobType, at / 60000, 1 FROM ({source}) WHERE true "  # WHERE: an upsert's SELECT
            f"ON CONFLICT (tenantId, jobType, minute) DO UPDATE SET {column} = {column} + 1; END"
        )

    job = "SELECT new.tenantId AS tenantId, new.jobType AS jobType, new.updatedAt AS at"
    attempt = (
        "SELECT jobs.tenantId AS tenantId, jobs.jobType AS jobType, new.finishedAt AS at "
        "FROM jobs WHERE jobs.id = new.jobId"
    )
    failed = "new.outcome = 'failed' OR new.outcome = 'timeout' OR new.outcome = 'lost'"
    was_failed = "old.outcome = 'failed' OR old.outcome = 'timeout' OR old.outcome = 'lost'"
    for trigger in (
        "history_completed AFTER UPDATE OF status ON jobs "
        f"WHEN new.status = 'completed' AND old.status IS NOT new.status AND new.kind <> 'template' "
        f"{add('completed', job)}",
        "history_dlq AFTER UPDATE OF status ON jobs "
        f"WHEN new.status = 'dlq' AND old.status IS NOT new.status AND new.kind <> 'template' {add('dlq', job)}",
        "history_failed_attempt AFTER INSERT ON executions "
        f"WHEN ({failed}) AND new.finishedAt IS NOT NULL {add('failed', attempt)}",
        "history_attempt_failed AFTER UPDATE OF outcome ON executions "
        f"WHEN ({failed}) AND NOT ({was_failed}) AND new.finishedAt IS NOT NULL {add('failed', attempt)}",
    ):
        conn.execute(f"CREATE TRIGGER IF NOT EXISTS {trigger}")


# In the order they were released; only ever appended to.
MIGRATIONS: Final[tuple[Migration, ...]] = (
    jobs_table,
    indexes_attempts_and_rates,
    attempt_columns,
    job_counts,
    recent_endings_by_minute,
    drop_final_counts,
    job_type_tables,
    signing_secrets_table,
    credentials_table,
    api_keys_table,
    backoff_on_jobs,
    job_dependencies,
    workflows_table,
    batches_table,
    waiting_on_one_parent,
    trace_context,
    history_by_minute,
    endings_into_history,
)
LATEST: Final = len(MIGRATIONS)
