"""The SQLite file's schema as its queries see it, and ensure_schema, which brings a file to this version.

The queries repeat the conditions of the partial indexes as literals (FINAL_SQL, PENDING_RUNS_SQL ...; by index:
PARTIAL_INDEXES), and write rows with the column sets below. The tables, indexes and triggers themselves are made
by the numbered migrations (migrations.py), which write out their own SQL so that none changes once released;
tests/contract/test_store_sqlite_migrations.py checks that a migrated file is what these constants say.

The file's version is its header's user_version: the number of the last migration applied. Every process that
applies schema (SqliteJobStore.ensure_schema, and SqliteKeyStore's: one version for the whole file) reads it and
applies the migrations after it, setting it in the same transaction. A file without it, empty or written before
numbered migrations, is at version 0 and gets them all. A version above the latest this code knows was written by
a later jobsched: SchemaTooNew, and the file is left as it is.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Final

from shared.model import JOB_FIELDS, TERMINAL, Outcome, Status
from shared.store.base import SchemaTooNew
from shared.store.sqlite.migrations import LATEST, MIGRATIONS
from shared.store.transitions import ATTEMPT_ACTIVE, KIND_RUN, KIND_TEMPLATE

log = logging.getLogger("jobsched.store")


def _one_of(column: str, values: Iterable[str]) -> str:
    """A partial index's condition "`column` is one of `values`" as ORed comparisons, as the migrations write it
    (migrations.indexes_attempts_and_rates says why). In a fixed order: SQLite matches a partial index's
    condition as written."""
    return "(" + " OR ".join(f"{column} = '{value}'" for value in values) + ")"


# The conditions of the partial indexes that the operator's queries (browse.py) range over, written into
# their SQL as literals: SQLite uses a partial index only when a query's WHERE visibly implies the index's own.
ENDED_SQL: Final = f"status IN ('{Status.COMPLETED.value}', '{Status.DLQ.value}')"
FINAL_SQL: Final = _one_of("status", (s.value for s in Status if s in TERMINAL))
# Jobs that ended as the overview's last hour counts them, in the terms of the recent_endings index.
RECENTLY_ENDED_SQL: Final = f"{FINAL_SQL} AND {ENDED_SQL}"
DEAD_SQL: Final = f"status = '{Status.DLQ.value}'"
PENDING_SQL: Final = f"status = '{Status.PENDING.value}'"
WAITING_SQL: Final = f"status = '{Status.WAITING.value}'"
TEMPLATES_SQL: Final = f"kind = '{KIND_TEMPLATE}'"
PENDING_RUNS_SQL: Final = f"status = '{Status.PENDING.value}' AND kind = '{KIND_RUN}'"
IN_FLIGHT_SQL: Final = _one_of("status", (Status.QUEUED.value, *ATTEMPT_ACTIVE))
FAILED_SQL: Final = _one_of("outcome", (Outcome.FAILED.value, Outcome.TIMEOUT.value, Outcome.LOST.value))

# The statuses job_counts counts (its triggers are migrations.job_counts'): where jobs wait or stay. A job passes
# through the others (queued to running) in moments, so few are ever in them, and the reads count those from
# due_order (browse.py).
RESTING: Final = (Status.PENDING, Status.BUFFERED, *sorted(TERMINAL))
# Every partial index of the file with its condition as the queries repeat it: a query's WHERE must visibly imply
# the condition for SQLite to use the index, and one that names the index (INDEXED BY) fails without that. The
# migrations write out their own copies; tests/contract/test_store_sqlite_migrations.py checks that a migrated file's
# are these.
PARTIAL_INDEXES: Final = {
    "due_lanes": PENDING_RUNS_SQL,
    "final_listing": FINAL_SQL,
    "pending_listing": PENDING_SQL,
    "tenant_templates": TEMPLATES_SQL,
    "template_runs": "templateId IS NOT NULL",
    "jobs_of_workflow": "workflowId IS NOT NULL",  # a query's `workflowId = ?` implies it
    "jobs_of_batch": "batchId IS NOT NULL",
    "recent_endings": FINAL_SQL,
    "dead_letters": DEAD_SQL,
    "tenant_dead_letters": DEAD_SQL,
    "failed_attempts": FAILED_SQL,
    "waiting_on": WAITING_SQL,
}

# Tokens and the marks of parents (dependencies): MongoDB only. `kind` and `waitingOn` (the parent whose end
# settles a waiting job next: dependencies.py) are the file's own, not fields of a job.
STORE_COLUMNS: Final = frozenset({"kind", "waitingOn"})
MONGO_ONLY: Final = frozenset({"claimToken", "startToken", "hasDependents", "dependentsAt"})
JOB_COLUMNS: Final = frozenset((JOB_FIELDS - MONGO_ONLY) | STORE_COLUMNS)
EXECUTION_COLUMNS: Final = frozenset(
    {"id", "jobId", "attempt", "outcome", "worker", "startedAt", "finishedAt", "durationMs", "error", "traceback"}
    | {"result"}
)
# Any JSON value (None: none), as its text; the payload has its own encoding, and so has `backoff` (a job's
# Backoff as the JSON of backoff_document, NULL for the default: codecs.to_sql).
JSON_COLUMNS: Final = frozenset({"result", "progress", "dependsOn"})
TIME_COLUMNS: Final = frozenset(
    {"scheduledAt", "createdAt", "updatedAt", "claimedAt", "queuedAt", "leaseExpiresAt", "startedAt", "finishedAt"}
    | {"startAt", "endAt", "pausedAt", "resumedAt", "lastFiredAt", "plannedAt"}
)
BOOL_COLUMNS: Final = frozenset({"pauseOnFailure", "paused", "cancelRequested"})


def ensure_schema(write: Callable[[], AbstractContextManager[sqlite3.Connection]]) -> None:
    """Bring the file to the latest version: its pending migrations and the new version in one write transaction,
    which `write` opens (BEGIN IMMEDIATE), so that all of them are applied or none. A process doing the same
    meanwhile waits for the write lock, then finds the file at the latest. SchemaTooNew for a file a later
    jobsched migrated: the transaction ends with nothing changed."""
    with write() as conn:
        applied = migrate(conn)
    for version in applied:
        log.info(
            "schema migrated",
            extra={"action": "schema_migrated", "version": version, "migration": MIGRATIONS[version - 1].__name__},
        )


def migrate(conn: sqlite3.Connection) -> range:
    """The pending migrations and the version that records them, in the caller's write transaction: the versions
    applied."""
    found = schema_version(conn)
    if found > LATEST:
        raise SchemaTooNew(found, LATEST)
    pending = range(found + 1, LATEST + 1)
    for version in pending:
        MIGRATIONS[version - 1](conn)
    if pending:
        conn.execute(f"PRAGMA user_version = {LATEST:d}")  # in the transaction: a rollback takes it back too
    return pending


def schema_version(conn: sqlite3.Connection) -> int:
    """The number of the last migration applied to the file (its header's user_version); 0 when none was."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])
