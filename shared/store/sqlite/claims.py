"""The claim's reads and writes on the SQLite file (claiming.py plans the claim over SqliteClaimPort): what is in
flight, the lanes of due runs (fair_claims.py chooses among them), how far the rate-limited starts are reserved
(claim_limits.py), the move of the chosen runs to queued and the claim's writes to the rate tables. Each runs on
the connection of a read, or of the write transaction whose lock makes the claim's reads and writes one
compare-and-set: two claimers never win the same job, and the counts that bound a type are the counts at the move."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from functools import partial
from typing import Any, Final, NamedTuple

from jobsched.limits import Rate
from shared.model import Job, Status
from shared.store import transitions
from shared.store.claim_limits import InFlight, KeyOwner
from shared.store.fair_claims import Claimed, Lane, head_of
from shared.store.sqlite.codecs import (
    QueuedJobs,
    assignments,
    chunks,
    folded_rows,
    from_ms,
    jobs_in_order,
    marks,
    to_ms,
)
from shared.store.sqlite.database import SqliteDatabase
from shared.store.sqlite.schema import IN_FLIGHT_SQL, JOB_COLUMNS, PENDING_RUNS_SQL
from shared.store.transitions import KIND_RUN

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


class DueRun(NamedTuple):
    """A due run as the claim chooses it (the rest of the row is read by the update that claims it)."""

    id: str
    priority: int
    scheduledAt: int
    concurrencyKey: str | None


# What a claimed run's wake-up carries (fair_claims.Claimed), as mark_queued reads it.
_WAKEUP: Final = ("id", "jobType", "priority", "tenantId", "scheduledAt", "attempts", "traceparent")


def _claimed(
    job_id: str, job_type: str, priority: int, tenant: str, scheduled_ms: int, attempts: int, traceparent: str | None
) -> Claimed:
    return Claimed(job_id, job_type, priority, tenant, from_ms(scheduled_ms), attempts + 1, None, traceparent)


class SqliteClaimPort:
    """A claim's reads and writes (claiming.ClaimPort): `writing` is one BEGIN IMMEDIATE transaction, so the claim
    reads everything again inside it, and a claim without room is answered from `reading` without a write turn."""

    rereads_to_write = True

    def __init__(self, database: SqliteDatabase) -> None:
        self._database = database

    @contextmanager
    def reading(self) -> Iterator[SqliteClaims]:
        with self._database.read() as conn:
            yield SqliteClaims(conn, self._database)

    @contextmanager
    def writing(self) -> Iterator[SqliteClaims]:
        # Not synced: nothing acts on a claim before the start of one of its jobs, a synced commit that makes the
        # claim durable with it. Power loss before that undoes the claim whole, and its jobs are pending again.
        with self._database.write(synced=False) as conn:
            yield SqliteClaims(conn, self._database)


class SqliteClaims:
    """The claim's statements on one connection (claiming.ClaimWrites; the writes only inside `writing`)."""

    def __init__(self, conn: sqlite3.Connection, database: SqliteDatabase) -> None:
        self._conn = conn
        self._database = database  # where a claim's jobs are read, after its transaction

    def in_flight(self, job_types: Collection[str], now: datetime) -> InFlight:
        return in_flight(self._conn, job_types, now)

    def reserved_starts(self, rated: Mapping[str, Rate]) -> dict[str, float]:
        return reserved_starts(self._conn, rated)

    def reserved_key_starts(self, owner: KeyOwner) -> float:
        return reserved_key_starts(self._conn, owner)

    def has_due_run(self, job_type: str, due: datetime) -> bool:
        return bool(lanes(self._conn, job_type, to_ms(due), no_full_keys))  # the lane heads alone: no run is read

    def lanes(self, job_type: str, due: datetime, full_keys: Callable[[str], set[str]]) -> list[Lane[DueRun]]:
        return lanes(self._conn, job_type, to_ms(due), full_keys)

    def mark_queued(self, runs: Sequence[DueRun], now: datetime, due: datetime) -> tuple[QueuedJobs, None]:
        """One UPDATE of the chosen runs, which returns no rows, and their wake-ups' fields read in one step: the
        write lock was held since they were read, so every one moves. The jobs are read only if asked for, after
        the transaction."""
        set_sql, set_params = assignments(transitions.queued(now), JOB_COLUMNS)
        chosen = [run.id for run in runs]
        fields: dict[str, list[Any]] = {}
        for chunk in chunks(chosen):
            moved = self._conn.execute(f"UPDATE jobs SET {set_sql} WHERE id IN ({marks(chunk)})", [*set_params, *chunk])
            assert moved.rowcount == len(chunk), "the write lock was held since the runs were read"
            read = folded_rows(self._conn, _WAKEUP, f"FROM jobs WHERE id IN ({marks(chunk)})", chunk)
            fields.update((wakeup[0], wakeup) for wakeup in read)
        claimed = [_claimed(*fields[job_id]) for job_id in chosen]
        return QueuedJobs(claimed, self._read_jobs), None

    def _read_jobs(self, job_ids: list[str]) -> list[Job]:
        with self._database.read() as conn:
            return jobs_in_order(conn, job_ids)

    def reserve_starts(self, by_type: Mapping[str, float], by_key: Mapping[KeyOwner, float]) -> None:
        reserve_starts(self._conn, by_type)
        reserve_key_starts(self._conn, by_key)


def in_flight(conn: sqlite3.Connection, job_types: Collection[str], now: datetime) -> InFlight:
    """The runs of these types claimed and not finished (few: what is queued or running now), counted; queued
    ones in the line once due by `now` (ClaimLimits.queued)."""
    types = sorted(job_types)
    if not types:
        return InFlight(())
    rows = folded_rows(
        conn,
        ("jobType", "tenantId", "concurrencyKey", "due", "n"),
        f"""FROM (SELECT jobType, tenantId, concurrencyKey,
                status = '{Status.QUEUED.value}' AND scheduledAt <= ? AS due, count(*) AS n
            FROM jobs INDEXED BY due_order
            WHERE {IN_FLIGHT_SQL} AND kind = '{KIND_RUN}' AND jobType IN ({marks(types)})
            GROUP BY 1, 2, 3, 4)""",
        [to_ms(now), *types],
    )
    return InFlight((r[0], r[1], r[2], bool(r[3]), r[4]) for r in rows)


def no_full_keys(tenant: str) -> set[str]:
    return set()


def lanes(
    conn: sqlite3.Connection, job_type: str, due_ms: int, full_keys: Callable[[str], set[str]]
) -> list[Lane[DueRun]]:
    """The type's lanes with a run due by `due_ms`, one per tenant. The index due_lanes holds pending runs by
    (type, tenant, priority, time): a skip scan finds the first entry of each (tenant, priority) (its earliest
    run) without reading the entries between, so this costs one seek per tenant and priority, not per due run.
    A lane's reads leave out the runs of its tenant's `full_keys` (concurrency keys at their limit)."""
    heads: dict[str, list[tuple[int, int]]] = {}
    found = folded_rows(conn, ("tenantId", "priority", "scheduledAt"), f"FROM ({_LANE_HEADS_SQL})", {"type": job_type})
    for tenant, priority, earliest in sorted(found):  # the tenants in the index's order, as the scan found them
        if earliest <= due_ms:  # the lane's earliest pending run is due, so the lane has due runs
            heads.setdefault(tenant, []).append((priority, earliest))
    lanes: list[Lane[DueRun]] = []
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
    after: DueRun | None,
    n: int,
) -> list[DueRun]:
    """The tenant's due runs of the type in claim order after `after`, at most n, none of `full_keys`: each
    priority's runs by time (an exact index range), higher priorities first."""
    found: list[DueRun] = []
    keys = sorted(full_keys)
    not_full = f"AND (concurrencyKey IS NULL OR concurrencyKey NOT IN ({marks(keys)}))" if keys else ""
    for priority in priorities:
        if after is not None and priority > after.priority:
            continue
        since, since_params = ("", [])
        if after is not None and priority == after.priority:
            since, since_params = "AND (scheduledAt, id) > (?, ?)", [after.scheduledAt, after.id]
        runs = folded_rows(
            conn,
            ("id", "priority", "scheduledAt", "concurrencyKey"),
            f"""FROM (SELECT id, priority, scheduledAt, concurrencyKey FROM jobs INDEXED BY due_lanes
                WHERE {PENDING_RUNS_SQL} AND jobType = ? AND tenantId = ? AND priority = ? AND scheduledAt <= ?
                {since} {not_full} ORDER BY scheduledAt, id LIMIT ?)""",
            [job_type, tenant, priority, due_ms, *since_params, *keys, n - len(found)],
        )
        found += sorted((DueRun(*run) for run in runs), key=lambda run: (run.scheduledAt, run.id))
        if len(found) >= n:
            break
    return found


def reserved_starts(conn: sqlite3.Connection, rated: Mapping[str, Rate]) -> dict[str, float]:
    """How far the claims of each rate-limited type have reserved its starts (unix seconds)."""
    types = sorted(rated)
    rows = conn.execute(f"SELECT jobType, claimTat FROM rate_limits WHERE jobType IN ({marks(types)})", types)
    return {str(r[0]): float(r[1]) for r in rows}


def reserved_key_starts(conn: sqlite3.Connection, owner: KeyOwner) -> float:
    """How far the claims have reserved the starts of one (type, tenant, concurrency key) (unix seconds)."""
    row = conn.execute(
        "SELECT claimTat FROM key_rate_limits WHERE jobType = ? AND tenantId = ? AND concurrencyKey = ?", owner
    ).fetchone()
    return float(row[0]) if row else 0.0


def reserve_starts(conn: sqlite3.Connection, tats: Mapping[str, float]) -> None:
    """Record how far the claims reserved the starts of each rate-limited type (unix seconds)."""
    conn.executemany(
        "INSERT INTO rate_limits (jobType, claimTat, startTat) VALUES (?, ?, 0) "
        "ON CONFLICT (jobType) DO UPDATE SET claimTat = excluded.claimTat",
        tats.items(),
    )


def reserve_key_starts(conn: sqlite3.Connection, tats: Mapping[KeyOwner, float]) -> None:
    """The same for each (type, tenant, concurrency key) under a rate per key."""
    conn.executemany(
        "INSERT INTO key_rate_limits (jobType, tenantId, concurrencyKey, claimTat, startTat) "
        "VALUES (?, ?, ?, ?, 0) ON CONFLICT DO UPDATE SET claimTat = excluded.claimTat",
        [(*owner, tat) for owner, tat in tats.items()],
    )
