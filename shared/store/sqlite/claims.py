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
from typing import Final, NamedTuple

from jobsched.limits import Rate
from shared.model import Status
from shared.store import transitions
from shared.store.claim_limits import InFlight, KeyOwner
from shared.store.fair_claims import Lane, head_of
from shared.store.sqlite.codecs import JobRows, assignments, chunks, marks, to_ms
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


class SqliteClaimPort:
    """A claim's reads and writes (claiming.ClaimPort): `writing` is one BEGIN IMMEDIATE transaction, so the claim
    reads everything again inside it, and a claim without room is answered from `reading` without a write turn."""

    rereads_to_write = True

    def __init__(self, database: SqliteDatabase) -> None:
        self._database = database

    @contextmanager
    def reading(self) -> Iterator[SqliteClaims]:
        with self._database.read() as conn:
            yield SqliteClaims(conn)

    @contextmanager
    def writing(self) -> Iterator[SqliteClaims]:
        # Not synced: nothing acts on a claim before the start of one of its jobs, a synced commit that makes the
        # claim durable with it. Power loss before that undoes the claim whole, and its jobs are pending again.
        with self._database.write(synced=False) as conn:
            yield SqliteClaims(conn)


class SqliteClaims:
    """The claim's statements on one connection (claiming.ClaimWrites; the writes only inside `writing`)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

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

    def mark_queued(self, runs: Sequence[DueRun], now: datetime, due: datetime) -> tuple[JobRows, None]:
        """One UPDATE of the chosen runs: the write lock was held since they were read, so every one moves. Their
        rows become jobs when the claim reads them, after the write lock is released."""
        set_sql, set_params = assignments(transitions.queued(now), JOB_COLUMNS)
        chosen = [run.id for run in runs]
        moved: dict[str, sqlite3.Row] = {}
        for chunk in chunks(chosen):
            rows = self._conn.execute(
                f"UPDATE jobs SET {set_sql} WHERE id IN ({marks(chunk)}) RETURNING *", [*set_params, *chunk]
            )
            moved.update((str(r["id"]), r) for r in rows)
        return JobRows([moved[job_id] for job_id in chosen]), None

    def reserve_starts(self, by_type: Mapping[str, float], by_key: Mapping[KeyOwner, float]) -> None:
        reserve_starts(self._conn, by_type)
        reserve_key_starts(self._conn, by_key)


def in_flight(conn: sqlite3.Connection, job_types: Collection[str], now: datetime) -> InFlight:
    """The runs of these types claimed and not finished (few: what is queued or running now), counted; queued
    ones in the line once due by `now` (ClaimLimits.queued)."""
    types = sorted(job_types)
    if not types:
        return InFlight(())
    rows = conn.execute(
        f"""SELECT jobType, tenantId, concurrencyKey, status = '{Status.QUEUED.value}' AND scheduledAt <= ?, count(*)
            FROM jobs INDEXED BY due_order
            WHERE {IN_FLIGHT_SQL} AND kind = '{KIND_RUN}' AND jobType IN ({marks(types)})
            GROUP BY 1, 2, 3, 4""",
        [to_ms(now), *types],
    )
    return InFlight((str(r[0]), str(r[1]), r[2], bool(r[3]), int(r[4])) for r in rows)


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
    for row in conn.execute(_LANE_HEADS_SQL, {"type": job_type}):
        if row[2] <= due_ms:  # the lane's earliest pending run is due, so the lane has due runs
            heads.setdefault(str(row[0]), []).append((int(row[1]), int(row[2])))
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
        found += (
            DueRun(str(r[0]), int(r[1]), int(r[2]), r[3])
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
