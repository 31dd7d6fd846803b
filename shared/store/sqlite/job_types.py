"""The job-type registry in the SQLite file (tables of its own: migrations.job_type_tables)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from datetime import datetime

from jobsched.limits import Limits
from jobsched.type_defaults import TypeDefaults
from shared.job_types.announcements import Announcement, JobTypeInfo, readable_overrides, summarize
from shared.model import Status
from shared.store.sqlite.codecs import from_ms, to_ms
from shared.store.sqlite.database import SqliteDatabase
from shared.store.transitions import KIND_RUN


class SqliteJobTypes:
    def __init__(self, database: SqliteDatabase) -> None:
        self._database = database

    def announce(self, executor: str, types: Mapping[str, TypeDefaults], now: datetime, live_until: datetime) -> None:
        rows = [
            (name, executor, to_ms(now), to_ms(live_until), json.dumps(defaults.to_document()))
            for name, defaults in types.items()
        ]
        with self._database.write() as conn:
            conn.executemany(
                "INSERT INTO job_type_announcements (jobType, executor, seenAt, liveUntil, defaults) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (jobType, executor) DO UPDATE SET "
                "seenAt = excluded.seenAt, liveUntil = excluded.liveUntil, defaults = excluded.defaults",
                rows,
            )

    def withdraw(self, executor: str, now: datetime) -> None:
        with self._database.write() as conn:
            conn.execute(
                "UPDATE job_type_announcements SET liveUntil = ? WHERE executor = ? AND liveUntil > ?",
                (to_ms(now), executor, to_ms(now)),
            )

    def job_types(self, now: datetime, seen_since: datetime) -> list[JobTypeInfo]:
        with self._database.read() as conn:
            rows = conn.execute(
                "SELECT * FROM job_type_announcements WHERE jobType IN "
                "(SELECT jobType FROM job_type_announcements WHERE seenAt >= ?)",
                (to_ms(seen_since),),
            ).fetchall()
        return summarize((_to_announcement(r) for r in rows), now)

    def announcements(self, job_type: str) -> list[Announcement]:
        with self._database.read() as conn:
            rows = conn.execute("SELECT * FROM job_type_announcements WHERE jobType = ?", (job_type,)).fetchall()
        return [_to_announcement(r) for r in rows]

    def forget(self, seen_before: datetime) -> int:
        with self._database.write() as conn:
            cursor = conn.execute("DELETE FROM job_type_announcements WHERE seenAt < ?", (to_ms(seen_before),))
        return cursor.rowcount

    def waiting_runs(self, now: datetime, job_type: str) -> int:
        with self._database.read() as conn:
            row = conn.execute(
                "SELECT count(*) FROM jobs WHERE status = ? AND kind = ? AND scheduledAt <= ? AND jobType = ?",
                (Status.PENDING.value, KIND_RUN, to_ms(now), job_type),
            ).fetchone()
        return int(row[0])

    def set_limits(self, job_type: str, limits: Limits | None, now: datetime) -> None:
        with self._database.write() as conn:
            for table in ("rate_limits", "key_rate_limits"):  # see JobTypeRegistry.set_limits
                conn.execute(f"DELETE FROM {table} WHERE jobType = ?", (job_type,))
            if limits is None:
                conn.execute("DELETE FROM job_type_limits WHERE jobType = ?", (job_type,))
                return
            conn.execute(
                "INSERT INTO job_type_limits (jobType, limits, updatedAt) VALUES (?, ?, ?) ON CONFLICT (jobType) "
                "DO UPDATE SET limits = excluded.limits, updatedAt = excluded.updatedAt",
                (job_type, json.dumps(limits.to_document()), to_ms(now)),
            )

    def limit_overrides(self) -> dict[str, Limits]:
        with self._database.read() as conn:
            rows = conn.execute("SELECT jobType, limits FROM job_type_limits").fetchall()
        return readable_overrides((str(r[0]), json.loads(r[1])) for r in rows)


def _to_announcement(row: sqlite3.Row) -> Announcement:
    return Announcement(
        jobType=row["jobType"],
        executor=row["executor"],
        seenAt=from_ms(row["seenAt"]),
        liveUntil=from_ms(row["liveUntil"]),
        defaults=TypeDefaults.from_document(json.loads(row["defaults"])),
    )
